"""The README describes the code as it is: every parameter with its default, every module of helpers/."""
import re
import typing
from dataclasses import MISSING
from pathlib import Path

from helpers.run.args import FIELDS, HINTS

REPO = Path(__file__).resolve().parent.parent
README = (REPO / "README.md").read_text()


def _section(title: str) -> str:
    start = README.index(f"## {title}")
    end = README.find("\n## ", start + 1)
    return README[start:end if end > 0 else None]


def test_the_parameter_table_lists_every_parameter_with_its_default():
    table = _section("Parameters")
    rows = {}
    for line in table.splitlines():
        if line.startswith("| ") and not line.startswith("| parameter"):
            first_cell = line.split("|")[1]
            rows.update({name: line for name in re.findall(r"`(\w+)`", first_cell)})
    for name, (_, field) in FIELDS.items():
        assert name in rows, f"parameter {name} is not in README's parameter table"
        default = field.default if field.default is not MISSING else None
        if isinstance(default, str):
            shown = f'"{default}"' if default else '""'
        else:
            shown = str(default)  # None, True, False, numbers as Python writes them
        assert f"`{shown}`" in rows[name] or str(shown) in rows[name], f"{name}: default {shown} not in {rows[name]}"
        if typing.get_origin(HINTS[name]) is typing.Literal:
            for choice in typing.get_args(HINTS[name]):
                assert str(choice) in rows[name], f"{name}: choice {choice} not in README"


def test_the_layout_names_every_module_of_helpers():
    layout = _section("Layout")
    for path in sorted((REPO / "helpers").rglob("*.py")):
        if path.name == "__init__.py":
            continue
        rel = path.relative_to(REPO / "helpers").with_suffix("")
        name = rel.name if rel.parent == Path(".") else f"{rel.parent}/{rel.name}"
        assert f"`{rel.name}`" in layout or f"`{name}`" in layout, f"helpers/{rel} is not in README's layout"
