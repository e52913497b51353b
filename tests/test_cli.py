"""helpers/cli.py: the scripts' exit status from the record they wrote."""

import pytest

from helpers.cli import exit_code


@pytest.mark.parametrize(
    "status, code", [("finished", 0), ("diverged", 0), ("failed", 1), ("oom", 1), ("timeout", 1), ("interrupted", 1)]
)
def test_a_script_exits_non_zero_only_when_its_run_did_not_end(status, code):
    """A diverged run ended (its record says so); a failed, out-of-memory, timed-out or interrupted one
    did not."""
    assert exit_code({"status": status}) == code


def test_no_record_is_no_failure():
    assert exit_code(None) == 0  # --help: nothing ran
