"""The run's arguments from a command line (transformers' HfArgumentParser) or a notebook's globals.

args = parse_cli(["--per_device_train_batch_size", "32", "--learning_rate", "1e-4"])
args = notebook_args(globals())
"""

from __future__ import annotations

import ast
from argparse import Namespace
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from helpers.run.args import FIELDS, GROUPS, RunArgs, build_args, unknown_message


def cli_parser(description: str = "") -> Any:
    """Return the scripts' parser of the argument dataclasses: numbers stay text for pydantic to read."""
    from transformers import HfArgumentParser  # imports transformers: only when a command line is read

    parser = HfArgumentParser(tuple(GROUPS.values()), description=description)
    for kind in (int, float):  # argparse's int("None") would refuse what an optional field allows
        parser.register("type", kind, str)
    return parser


def named_flags(parser: Any, argv: list[str] | None) -> dict[str, Any]:
    """Return the values of the flags `argv` names and of the parser's own; exit naming the closest to an unknown."""
    # argparse fills in a default only where the namespace has no value: a name still `absent` was not named,
    # and the parser keeps the fields' defaults for --help
    absent = object()
    parsed, unknown = parser.parse_known_args(argv, Namespace(**dict.fromkeys(FIELDS, absent)))
    if unknown:  # argparse would say only "unrecognized arguments": name the closest parameter instead
        flag = next((u for u in unknown if u.startswith("-")), None)
        parser.error(unknown_message(flag.lstrip("-").split("=")[0]) if flag else f"unexpected argument {unknown[0]!r}")
    return {name: value for name, value in vars(parsed).items() if value is not absent}


def parse_cli(
    argv: list[str] | None = None, defaults: Mapping[str, Any] | None = None, description: str = ""
) -> RunArgs:
    """Return the arguments of a command line; the flags it names (and `defaults`, under them) are given."""
    parser = cli_parser(description)
    parser.set_defaults(**(defaults or {}))  # what --help shows
    return build_args({**(defaults or {}), **named_flags(parser, argv)})


def to_argv(args: RunArgs) -> list[str]:
    """Return command-line flags that rebuild `args`: the given parameters (the preset fills the rest)."""
    flat = args.flat()
    return [f"--{name}={flat[name]}" for name in sorted(args.given)]


IPYTHON_NAMES = {"In", "Out", "exit", "quit", "get_ipython", "open"}


def papermill_given(history: Any) -> set[str] | None:
    """Return the names papermill's injected `# Parameters` cell assigned, None when there was none."""
    if not isinstance(history, list):
        return None
    for source in reversed(history):
        if isinstance(source, str) and source.startswith("# Parameters"):  # the kernel ran it: it parses
            return {
                t.id
                for node in ast.parse(source).body
                if isinstance(node, ast.Assign)
                for t in node.targets
                if isinstance(t, ast.Name)
            }
    return None


def notebook_args(namespace: Mapping[str, Any]) -> RunArgs:
    """Return the arguments of a notebook from its globals: the parameters cell, papermill's -p on top."""
    given = papermill_given(namespace.get("In"))
    # every plain value that is not IPython's is a parameter: a misspelled -p name is refused, not ignored
    params = {
        k: str(v) if isinstance(v, Path) else v
        for k, v in namespace.items()
        if not k.startswith("_")
        and k not in IPYTHON_NAMES
        # what papermill injected is a parameter whatever its type: `-y 'batch: [8, 16]'` is refused, not dropped
        and (isinstance(v, (type(None), bool, int, float, str, Path)) or k in (given or ()))
    }
    if given is None:  # run by hand, nothing injected: what the cell changed is given
        defaults = RunArgs().flat()
        given = {k for k, v in params.items() if k not in defaults or v != defaults[k]}
    return build_args(params, given=given)
