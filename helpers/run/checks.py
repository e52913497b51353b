"""What the argument dataclasses check in their __post_init__: the declared type of every field, and
the rules several fields share (a positive number, a name that becomes a file name); and what can only
be checked against the model (check_model_limit).

    def __post_init__(self) -> None:
        check_declared(self)
        positive(self, "batch", "lr")
"""
from __future__ import annotations

import functools
import math
import re
import typing
from typing import Any, Literal

from helpers.run.coerce import ConfigError, declared_kind

SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._=,+-]{0,199}")
KIND_NAMES = {int: "an integer", float: "a number", bool: "a boolean: use True or False", str: "a string"}


@functools.cache
def hints(cls: type) -> dict[str, Any]:
    """Return the declared type of each field of the dataclass `cls`."""
    return typing.get_type_hints(cls)


def choices(cls: type, name: str) -> tuple:
    """Return the allowed values of field `name` of `cls` (its Literal's arguments)."""
    return typing.get_args(hints(cls)[name])


def of_kind(value: Any, kind: type) -> bool:
    """Return whether `value` is of type `kind` (an int is a float too; a bool is not an int)."""
    if kind is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(value, kind) and (kind is bool or not isinstance(value, bool))


def check_declared(obj: Any) -> None:
    """Raise ConfigError for a field of `obj` outside its declared type: None where it is not Optional,
    a value outside its Literal's choices, a value of another type."""
    for name, hint in hints(type(obj)).items():
        value, kind = getattr(obj, name), declared_kind(hint)
        if value is None:
            if type(None) not in typing.get_args(hint):
                raise ConfigError(f"{name}=None is not allowed: give {KIND_NAMES.get(kind, kind.__name__)}")
        elif typing.get_origin(hint) is Literal:
            allowed = typing.get_args(hint)
            if not (of_kind(value, kind) and value in allowed):
                raise ConfigError(f"{name}={value!r} is unknown: allowed {', '.join(map(str, allowed))}")
        elif not of_kind(value, kind):
            raise ConfigError(f"{name}={value!r} is not {KIND_NAMES.get(kind, kind.__name__)}")


def positive(obj: Any, *names: str) -> None:
    """Raise ConfigError unless each field `names` of `obj` is None or a finite number > 0."""
    for name in names:
        value = getattr(obj, name)
        if value is not None and not (math.isfinite(value) and value > 0):
            raise ConfigError(f"{name}={value!r} is invalid: must be a finite number > 0")


def safe_name(obj: Any, *names: str) -> None:
    """Raise ConfigError unless each field `names` of `obj` is None or usable as a file name."""
    for name in names:
        value = getattr(obj, name)
        if value is not None and not SAFE_NAME.fullmatch(value):
            raise ConfigError(f"{name}={value!r} is invalid: use letters, digits and . _ = , + - only "
                              "(at most 200, not starting with '.'): it becomes a file name")


def check_model_limit(args: Any, max_positions: int) -> None:
    """Raise ConfigError when RunArgs `args` pad past the model's position embeddings (max_positions)."""
    if args.task.max_length > max_positions:
        raise ConfigError(f"max_length={args.task.max_length} is above {args.task.model_name}'s position "
                          f"limit ({max_positions}): allowed 3..{max_positions}")
    multiple = args.task.pad_to_multiple_of
    if multiple and math.ceil(args.task.max_length / multiple) * multiple > max_positions:
        raise ConfigError(f"pad_to_multiple_of={multiple} rounds max_length={args.task.max_length} up to "
                          f"{math.ceil(args.task.max_length / multiple) * multiple}, above {args.task.model_name}'s "
                          f"position limit ({max_positions}): give a multiple that divides {max_positions}")
