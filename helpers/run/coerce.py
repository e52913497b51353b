"""Parameter values in their declared types, for the values that do not arrive typed.

A command line needs none of this: HfArgumentParser converts each flag by its field's type. Papermill
and the suites' TOML do: papermill's `-p batch 64` and `-p llrd_decay None` are strings, TOML has no None
and may write 64.0 for 64, a notebook may hold a Path. `coerce` converts what it can and leaves the rest
as it is: the dataclasses' __post_init__ (helpers/run/checks.py) refuse a value still not of its type.
"""
from __future__ import annotations

import re
import typing
from pathlib import Path
from typing import Any, Literal

NONE_TEXT = ("None", "none", "null", "")
BOOL_TEXT = {"true": True, "1": True, "yes": True, "on": True, "false": False, "0": False, "no": False, "off": False}


class ConfigError(ValueError):
    """A parameter has a value outside what the run accepts; the message names both."""


def declared_kind(hint: Any) -> type:
    """Return the type of a value of `hint`: its choices' type for a Literal, X for `X | None`."""
    args = typing.get_args(hint)
    if typing.get_origin(hint) is Literal:
        return type(args[0])
    return next((a for a in args if a is not type(None)), hint)


def coerce(value: Any, hint: Any) -> Any:
    """Return `value` in its declared type `hint` when it is text, a whole float, 0/1 or a Path; else as is."""
    kind = declared_kind(hint)
    if isinstance(value, Path):
        value = str(value)
    if isinstance(value, str):
        return _from_text(value, hint, kind)
    if isinstance(value, bool):
        return value
    if kind is bool and type(value) is int and value in (0, 1):
        return bool(value)
    if kind is int and isinstance(value, float) and value.is_integer():
        return int(value)
    if kind is float and isinstance(value, int):
        return float(value)
    if kind is str and isinstance(value, (int, float)):
        return str(value)
    return value


def _from_text(value: str, hint: Any, kind: type) -> Any:
    """Return the text `value` read as `hint` (None, a boolean, an integer, a number); else as is."""
    text = value.strip()
    if type(None) in typing.get_args(hint) and text in NONE_TEXT:
        return None
    if kind is bool:
        return BOOL_TEXT.get(text.lower(), value)
    if kind is int and re.fullmatch(r"[+-]?\d+", text):
        return int(text)
    if kind is float:
        try:
            return float(text)
        except ValueError:
            return value
    return value
