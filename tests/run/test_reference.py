"""docs/PARAMETERS.md is what helpers.run.reference writes from the argument dataclasses, and says something."""
from dataclasses import fields
from pathlib import Path

from helpers.run import reference

REPO = Path(__file__).resolve().parents[2]


def test_the_committed_reference_is_what_the_dataclasses_write():
    committed = (REPO / "docs" / "PARAMETERS.md").read_text()
    assert committed == reference.reference(), "run: python -m helpers.run.reference --write docs/PARAMETERS.md"


def test_every_parameter_has_a_row_with_its_help_and_choices():
    page = reference.reference()
    for cls in reference.GROUPS:
        for f in fields(cls):
            assert f.metadata.get("help"), f"{cls.__name__}.{f.name} has no help text for the reference"
            row = next(line for line in page.splitlines() if line.startswith(f"| `{f.name}`"))
            assert f.metadata["help"].replace("|", "\\|") in row
    assert "| `precision` | `\"auto\"` | `auto` / `bf16`" in page
