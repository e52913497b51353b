"""The run's arguments from where users give them: a command line (the scripts, torchrun ranks) or a
notebook's globals (its parameters cell, papermill's `-p` on top). Both end in args.build_args.

    args = parse_cli(["--per_device_train_batch_size", "32", "--learning_rate", "1e-4"])
    args = notebook_args(globals())
"""
from __future__ import annotations

import argparse
import ast
import re
import typing
from pathlib import Path
from typing import Any, Mapping

from helpers.run.args import FIELDS, GROUPS, HINTS, RunArgs, build_args, unknown_message

_UNSET = object()


def _optional_type(kind):
    """Return an argparse type that reads None/none/null as None and anything else as `kind`."""
    def parse(text: str):
        return None if text.strip() in ("None", "none", "null") else kind(text)
    parse.__name__ = getattr(kind, "__name__", "value")
    return parse


def cli_parser(description: str = "") -> argparse.ArgumentParser:
    """Return the scripts' parser: every field as --name, plus the Hugging Face names (HfArgumentParser)."""
    from transformers import HfArgumentParser

    parser = HfArgumentParser(tuple(GROUPS.values()), description=description)
    for action in parser._actions:
        if action.dest in FIELDS and type(None) in typing.get_args(HINTS[action.dest]):
            action.type = _optional_type(action.type or str)
    return parser


def parse_cli(argv: list[str] | None = None, defaults: Mapping[str, Any] | None = None,
              description: str = "") -> RunArgs:
    """Return the arguments of a command line; the flags it names (and `defaults`) count as given."""
    parser = cli_parser(description)
    space = argparse.Namespace(**{name: _UNSET for name in FIELDS})
    parsed, unknown = parser.parse_known_args(argv, namespace=space)
    if unknown:  # argparse would say only "unrecognized arguments": name the closest parameter instead
        flag = next((u for u in unknown if u.startswith("-")), None)
        parser.error(unknown_message(flag.lstrip("-").split("=")[0]) if flag else f"unexpected argument {unknown[0]!r}")
    named = {k: v for k, v in vars(parsed).items() if v is not _UNSET}
    values = {**(defaults or {}), **named}
    return build_args(values)


def to_argv(args: RunArgs) -> list[str]:
    """Return command-line flags that rebuild `args`: the given parameters (the preset fills the rest)."""
    flat = args.flat()
    return [f"--{name}={flat[name]}" for name in sorted(args.given)]


IPYTHON_NAMES = {"In", "Out", "exit", "quit", "get_ipython", "open"}


def _papermill_given(history: Any) -> set[str] | None:
    """Return the names papermill's injected `# Parameters` cell assigned, None when there was none."""
    if not isinstance(history, list):
        return None
    for source in reversed(history):
        if isinstance(source, str) and source.startswith("# Parameters"):
            try:
                tree = ast.parse(source)
            except SyntaxError:  # not Python the kernel could have run: read the assigned names plainly
                return set(re.findall(r"^(\w+)\s*=", source, re.M))
            return {t.id for node in tree.body if isinstance(node, ast.Assign)
                    for t in node.targets if isinstance(t, ast.Name)}
    return None


def notebook_args(namespace: Mapping[str, Any]) -> RunArgs:
    """Return the arguments of a notebook from its globals: the parameters cell, papermill's -p on top.

    Every plain value (None, bool, number, string, path) that is not IPython's counts as a parameter,
    so a misspelled `-p` name is refused, not ignored. Given = the names papermill injected; in a
    hand-run notebook (no injected cell), the values that differ from the defaults.
    """
    params = {k: v for k, v in namespace.items() if not k.startswith("_") and k not in IPYTHON_NAMES
              and isinstance(v, (type(None), bool, int, float, str, Path))}
    given = _papermill_given(namespace.get("In"))
    if given is None:
        defaults = RunArgs().flat()
        given = {k for k, v in params.items() if k not in defaults or v != defaults[k]}
    return build_args(params, given=given)
