"""transformers' HfArgumentParser over the argument dataclasses, whose Optional flags also read None.

HfArgumentParser gives an `X | None` field the type X, so `--llrd_decay None` would be refused as not a
float. ArgParser overrides argparse's public `add_argument`, which HfArgumentParser calls once per field,
to read None / none / null as None for those flags; everything else is the library's.

    parser = ArgParser((TaskArgs, TrainArgs))
    task, train = parser.parse_args_into_dataclasses(["--llrd_decay", "None"])
"""
from __future__ import annotations

import typing
from collections.abc import Callable, Iterable
from typing import Any

from transformers import HfArgumentParser

NONE_TEXT = ("None", "none", "null")


def none_or(kind: Callable[[str], Any]) -> Callable[[str], Any]:
    """Return an argparse type that reads None / none / null as None and any other text as `kind`."""
    def parse(text: str) -> Any:
        return None if text.strip() in NONE_TEXT else kind(text)
    parse.__name__ = getattr(kind, "__name__", "value")  # argparse names it in "invalid float value"
    return parse


class ArgParser(HfArgumentParser):
    """HfArgumentParser whose flags of Optional fields read None as None."""

    def __init__(self, dataclass_types: Iterable[type], **kwargs: Any) -> None:
        """Parse the fields of `dataclass_types` (argparse's keyword arguments in `kwargs`)."""
        dataclass_types = tuple(dataclass_types)
        self.optional = {name for cls in dataclass_types for name, hint in typing.get_type_hints(cls).items()
                         if type(None) in typing.get_args(hint)}  # read by add_argument, called by __init__
        super().__init__(list(dataclass_types), **kwargs)

    def add_argument(self, *names: str, **kwargs: Any) -> Any:
        """Add a flag as argparse does; an Optional field's flag reads None as None."""
        if names and names[0].lstrip("-") in self.optional and callable(kwargs.get("type")):
            kwargs["type"] = none_or(kwargs["type"])
        return super().add_argument(*names, **kwargs)
