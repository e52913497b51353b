"""docs/PARAMETERS.md is what helpers.run.reference writes from the argument dataclasses, and says something."""

import logging
from dataclasses import fields
from pathlib import Path

import pytest

from helpers.run import reference

REPO = Path(__file__).resolve().parents[2]


def test_the_committed_reference_is_what_the_dataclasses_write():
    committed = (REPO / "docs" / "PARAMETERS.md").read_text()
    assert committed == reference.reference(), "run: python -m helpers.run.reference --write docs/PARAMETERS.md"


def test_every_parameter_has_a_row_with_its_help_and_choices():
    page = reference.reference()
    for cls in reference.GROUPS.values():
        for f in fields(cls):
            assert f.metadata.get("help"), f"{cls.__name__}.{f.name} has no help text for the reference"
            row = next(line for line in page.splitlines() if line.startswith(f"| `{f.name}`"))
            assert f.metadata["help"].replace("|", "\\|") in row
    assert '| `precision` | `"auto"` | `auto` / `bf16`' in page


@pytest.mark.parametrize("notebook", sorted(reference.NOTEBOOKS))
def test_each_notebooks_parameters_cell_is_the_dataclasses_and_papermill_parses_every_line(notebook, caplog):
    import nbformat
    from papermill.translators import PythonTranslator

    nb = nbformat.read(REPO / notebook, as_version=4)
    (cell,) = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert cell.source == reference.notebook_cell(notebook), "run: python -m helpers.run.reference --notebooks"
    assigned = [line.split(" = ")[0] for line in cell.source.splitlines() if not line.startswith("#")]
    with caplog.at_level(logging.WARNING, logger="papermill"):
        parsed = PythonTranslator.inspect({"source": cell.source})
    assert [p.name for p in parsed] == assigned  # no "Unable to parse line", so no "unknown parameter" either
    assert not [r for r in caplog.records if "Unable to parse" in r.getMessage()]
