"""The parameter reference (docs/PARAMETERS.md), written from the argument dataclasses' own help.

    python -m helpers.run.reference --write docs/PARAMETERS.md     # after changing a field in args.py
    python -m helpers.run.reference                                # print it

A test checks the committed page equals what this writes, so the reference cannot drift from the code.
"""
from __future__ import annotations

import argparse
import typing
from dataclasses import MISSING, fields
from pathlib import Path

from helpers.run.args import MeasureArgs, NeuronArgs, TaskArgs, TrainArgs

GROUPS = (TaskArgs, TrainArgs, MeasureArgs, NeuronArgs)
HEADER = ("<!-- Written by `python -m helpers.run.reference --write docs/PARAMETERS.md` from helpers/run/args.py; "
          "do not edit by hand. -->\n# Parameters\n\n"
          "Every parameter of a run, one table per dataclass of `helpers/run/args.py`. The notebooks' `parameters` "
          "cells (`papermill ... -p NAME VALUE`), the scripts (`--NAME VALUE`, or the Hugging Face examples' "
          "name in brackets) and the suites' TOML files all take these names. A `preset` fills in only the "
          "parameters that were not given.\n")


def shown(value: object) -> str:
    """Return a default as Python writes it, strings quoted."""
    return f'"{value}"' if isinstance(value, str) else str(value)


def type_text(hint: object) -> str:
    """Return a field's type for a reader: the choices of a Literal, else the type's name."""
    if typing.get_origin(hint) is typing.Literal:
        return " / ".join(f"`{c}`" for c in typing.get_args(hint))
    text = str(hint).replace("typing.", "").replace("<class '", "").replace("'>", "")
    return text.replace(" | ", " or ")  # a pipe would split the markdown cell


def table(cls: type) -> str:
    """Return one dataclass's parameters as a markdown table."""
    hints = typing.get_type_hints(cls)
    rows = [f"## {cls.__name__}\n\n{(cls.__doc__ or '').strip()}\n",
            "| parameter | default | type or choices | meaning |", "|---|---|---|---|"]
    for f in fields(cls):
        aliases = ", ".join(f"`{a}`" for a in f.metadata.get("aliases", ()))
        name = f"`{f.name}`" + (f" [{aliases}]" if aliases else "")
        default = f.default if f.default is not MISSING else None
        text = f.metadata.get("help", "").replace("|", "\\|")
        rows.append(f"| {name} | `{shown(default)}` | {type_text(hints[f.name])} | {text} |")
    return "\n".join(rows) + "\n"


def reference() -> str:
    """Return the whole parameter reference page."""
    return HEADER + "".join("\n" + table(cls) for cls in GROUPS)


def main(argv: list[str] | None = None) -> None:
    """Command line: print the reference, or write it to a file."""
    parser = argparse.ArgumentParser(prog="python -m helpers.run.reference", description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", type=Path, help="write the page here instead of printing it")
    args = parser.parse_args(argv)
    if args.write is None:
        print(reference(), end="")
        return
    args.write.parent.mkdir(parents=True, exist_ok=True)
    args.write.write_text(reference())
    print(f"wrote {args.write}")


if __name__ == "__main__":
    main()
