"""Parameter values in their declared types: papermill, TOML and command lines pass strings."""
from __future__ import annotations

import re
import typing
from pathlib import Path
from typing import Any, Literal


class ConfigError(ValueError):
    """A parameter has a value outside what the run accepts; the message names both."""


def coerce(name: str, value: Any, hint: Any) -> Any:
    """Return parameter `name`'s `value` in its declared type `hint` (papermill and TOML pass strings)."""
    args = typing.get_args(hint)
    optional = type(None) in args
    base = next((a for a in args if a is not type(None)), hint) if args else hint
    if isinstance(value, Path):
        value = str(value)
    if value is None or (optional and isinstance(value, str) and value.strip() in ("None", "none", "null", "")):
        if optional:
            return None
        raise ConfigError(f"{name}=None is not allowed: give a {getattr(base, '__name__', base)}")
    if typing.get_origin(hint) is Literal:
        choices = typing.get_args(hint)
        kind = type(choices[0])
        try:
            value = kind(value.strip()) if isinstance(value, str) and kind is not str else value
        except ValueError:
            pass
        if isinstance(value, bool) or value not in choices:
            raise ConfigError(f"{name}={value!r} is unknown: allowed {', '.join(map(str, choices))}")
        return value
    if base is bool:
        text = str(value).strip().lower()
        if isinstance(value, bool):
            return value
        if text in ("true", "1", "yes", "on") and not isinstance(value, float):
            return True
        if text in ("false", "0", "no", "off") and not isinstance(value, float):
            return False
        raise ConfigError(f"{name}={value!r} is not a boolean: use True or False")
    if base is int:
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, str) and re.fullmatch(r"\s*[+-]?\d+\s*", value):
            return int(value)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise ConfigError(f"{name}={value!r} is not an integer")
    if base is float:
        if isinstance(value, bool):
            raise ConfigError(f"{name}={value!r} is not a number")
        try:
            return float(value)
        except (TypeError, ValueError):
            raise ConfigError(f"{name}={value!r} is not a number") from None
    if base is str:
        if isinstance(value, (str, int, float)) and not isinstance(value, bool):
            return str(value)
        raise ConfigError(f"{name}={value!r} is not a string")
    return value
