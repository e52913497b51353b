"""A run in a notebook: an exception or the kernel's interrupt in any later cell writes the run's record first."""

import pytest

from helpers import steps
from helpers.run import records
from helpers.run.args import build_args


@pytest.fixture()
def shell():
    """An IPython shell (the notebook kernel's), torn down after the test."""
    from IPython.core.interactiveshell import InteractiveShell

    yield InteractiveShell.instance()
    InteractiveShell.clear_instance()


@pytest.mark.parametrize("raised, status", [("KeyboardInterrupt()", "interrupted"), ("ValueError('x')", "failed")])
def test_a_later_cells_interrupt_or_error_is_recorded_and_frees_the_name(
    shell, tiny_model_dir, tiny_data_dir, tmp_path, raised, status
):
    shell.user_ns["args"] = build_args(
        dict(
            model_name=str(tiny_model_dir),
            data_dir=str(tiny_data_dir),
            max_length=16,
            results_path=str(tmp_path),
            run_name="nb",
            precision="fp32",
        )
    )
    assert shell.run_cell("from helpers import steps\nrun = steps.start(args)").success
    shell.run_cell(f"raise {raised}")
    (rec,), _ = records.read_records(tmp_path)
    assert rec["status"] == status and rec["error"].startswith(raised.split("(")[0])
    assert not list(tmp_path.rglob("*.claim"))
    steps.finish(steps.start(shell.user_ns["args"]), "failed", "the name is free again")
