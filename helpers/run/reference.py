"""The parameter reference (docs/PARAMETERS.md), written from the argument dataclasses' own help.

python -m helpers.run.reference --write docs/PARAMETERS.md     # after changing a field in args.py
python -m helpers.run.reference                                # print it
python -m helpers.run.reference --notebooks                    # the notebooks' parameters cells too
"""

from __future__ import annotations

import argparse
import json
import typing
from dataclasses import fields
from pathlib import Path

from helpers.run.args import GROUPS
from helpers.run.paths import REPO_ROOT

# each notebook's parameters cell: its argument groups and the defaults it changes on purpose
NOTEBOOKS = {
    "Nvidia/baseline.ipynb": (("task", "train", "measure"), {}),
    "Trainium/baseline.ipynb": (("task", "train", "measure", "neuron"), {"device": "xla"}),
}
HEADER = (
    "<!-- Written by `python -m helpers.run.reference --write docs/PARAMETERS.md` from helpers/run/args.py; "
    "do not edit by hand. -->\n# Parameters\n\n"
    "Every parameter of a run, one table per dataclass of `helpers/run/args.py`. The notebooks' `parameters` "
    "cells (`papermill ... -p NAME VALUE`), the scripts (`--NAME VALUE`, or the Hugging Face examples' "
    "name in brackets) and the suites' TOML files all take these names. A `preset` fills in only the "
    "parameters that were not given.\n"
)


def shown(value: object) -> str:
    """Return a default as Python writes it, strings quoted."""
    return f'"{value}"' if isinstance(value, str) else str(value)


def type_text(hint: object) -> str:
    """Return a field's type for a reader: the choices of a Literal, else the type's name."""
    if typing.get_origin(hint) is typing.Literal:
        return " / ".join(f"`{c}`" for c in typing.get_args(hint))
    return " or ".join("None" if t is type(None) else t.__name__ for t in typing.get_args(hint) or (hint,))


def table(cls: type) -> str:
    """Return one dataclass's parameters as a markdown table."""
    hints = typing.get_type_hints(cls)
    rows = [
        f"## {cls.__name__}\n\n{(cls.__doc__ or '').strip()}\n",
        "| parameter | default | type or choices | meaning |",
        "|---|---|---|---|",
    ]
    for f in fields(cls):
        aliases = ", ".join(f"`{a}`" for a in f.metadata.get("aliases", ()))
        name = f"`{f.name}`" + (f" [{aliases}]" if aliases else "")
        text = f.metadata.get("help", "").replace("|", "\\|")
        rows.append(f"| {name} | `{shown(f.default)}` | {type_text(hints[f.name])} | {text} |")
    return "\n".join(rows) + "\n"


def cell_line(name: str, default: object, hint: object, text: str) -> str:
    """Return one line of a notebook's parameters cell: the assignment, then its help as a comment."""
    value = json.dumps(default) if isinstance(default, str) else repr(default)
    literal = typing.get_origin(hint) is typing.Literal
    choices = " | ".join(str(c) for c in typing.get_args(hint)) + ": " if literal else ""
    return f"{name} = {value}  # {choices}{text}"


def parameters_cell(groups: tuple[type, ...], overrides: dict | None = None) -> str:
    """Return a notebook's parameters cell: every parameter of `groups` at its default (or override)."""
    lines = []
    for cls in groups:
        lines.append("# " + (cls.__doc__ or cls.__name__).strip().splitlines()[0].rstrip("."))
        hints = typing.get_type_hints(cls)
        for f in fields(cls):
            default = (overrides or {}).get(f.name, f.default)
            lines.append(cell_line(f.name, default, hints[f.name], f.metadata.get("help", "")))
    return "\n".join(lines)


def notebook_cell(notebook: str) -> str:
    """Return the parameters cell the notebook (a key of NOTEBOOKS) should hold."""
    groups, overrides = NOTEBOOKS[notebook]
    return parameters_cell(tuple(GROUPS[g] for g in groups), overrides)


def write_notebook_cells() -> None:
    """Rewrite each notebook's parameters cell from the dataclasses (the rest of the notebook as it is)."""
    import nbformat

    for notebook in NOTEBOOKS:
        nb = nbformat.read(REPO_ROOT / notebook, as_version=4)
        (cell,) = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
        cell.source = notebook_cell(notebook)
        nbformat.write(nb, REPO_ROOT / notebook)
        print(f"wrote the parameters cell of {notebook}")


def reference() -> str:
    """Return the whole parameter reference page."""
    return HEADER + "".join("\n" + table(cls) for cls in GROUPS.values())


def main(argv: list[str] | None = None) -> None:
    """Command line: print the reference, or write it to a file."""
    parser = argparse.ArgumentParser(prog="python -m helpers.run.reference", description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", type=Path, help="write the page here instead of printing it")
    parser.add_argument("--notebooks", action="store_true", help="rewrite the notebooks' parameters cells")
    args = parser.parse_args(argv)
    if args.notebooks:
        write_notebook_cells()
    if args.write is None:
        if not args.notebooks:
            print(reference(), end="")
        return
    args.write.parent.mkdir(parents=True, exist_ok=True)
    args.write.write_text(reference())
    print(f"wrote {args.write}")


if __name__ == "__main__":
    main()
