"""Both notebooks under papermill, as the sweep and `make baseline` run them: the loop's windows in their output, the
record where it says, and a wrong parameter refused before anything runs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import record

# two warm-up steps: XLA compiles the first step's graph and the steady one (its inputs differ by one)
TINY = [
    "-p",
    "batch",
    "16",
    "-p",
    "max_length",
    "32",
    "-p",
    "max_steps",
    "6",
    "-p",
    "log_every",
    "2",
    "-p",
    "timing_warmup_steps",
    "2",
    "-p",
    "eval_every",
    "3",
    "-p",
    "progress",
    "False",
]


def papermill(notebook: str, out: Path, kernel: str, *params: str) -> subprocess.CompletedProcess:
    """Run `notebook` under papermill with `params`; return the finished process."""
    command = [sys.executable, "-m", "papermill", notebook, str(out), "-k", kernel, "--log-output", *params]
    return subprocess.run(command, capture_output=True, text=True, cwd=record.REPO_ROOT, timeout=900)


def outputs(path: Path) -> str:
    """Return every text an executed notebook's cells printed."""
    cells = json.loads(path.read_text())["cells"]
    return "".join("".join(o.get("text", "")) for c in cells for o in c.get("outputs", []))


@pytest.mark.slow
def test_the_nvidia_notebook_trains_shows_its_windows_and_records(tmp_path, tiny_model_dir, tiny_data_dir):
    done = papermill(
        "Nvidia/baseline.ipynb",
        tmp_path / "out.ipynb",
        "accelbench",
        "-p",
        "model_name",
        str(tiny_model_dir),
        "-p",
        "data_dir",
        str(tiny_data_dir),
        "-p",
        "results_path",
        str(tmp_path),
        *TINY,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    text = outputs(tmp_path / "out.ipynb")
    assert "train: step 6/6, loss" in text and "record: finished, written to" in text and "device busy share" in text
    (found,) = (tmp_path / "adhoc").glob("*.json")
    assert json.loads(found.read_text())["status"] == "finished"


def test_a_misspelled_parameter_is_refused_before_anything_runs(tmp_path):
    done = papermill(
        "Nvidia/baseline.ipynb",
        tmp_path / "out.ipynb",
        "accelbench",
        "-p",
        "learnin_rate",
        "1e-4",
        "-p",
        "results_path",
        str(tmp_path),
    )
    assert done.returncode != 0 and "did you mean 'lr'" in done.stderr
    assert not list(tmp_path.rglob("*@*.json"))


@pytest.mark.xla
def test_the_trainium_notebook_sets_its_flags_then_shows_what_xla_compiled(tmp_path, tiny_model_dir, tiny_data_dir):
    done = papermill(
        "Trainium/baseline.ipynb",
        tmp_path / "out.ipynb",
        "accelbench-xla",
        "-p",
        "model_name",
        str(tiny_model_dir),
        "-p",
        "data_dir",
        str(tiny_data_dir),
        "-p",
        "results_path",
        str(tmp_path),
        "-p",
        "xla_fast_compile",
        "True",
        *TINY,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    text = outputs(tmp_path / "out.ipynb")
    assert (
        "NEURON_CC_FLAGS = --model-type=transformer" in text
        and "after the warm-up: 0" in text
        and "graphs compiled at steps" in text
    )
    assert "record: finished, written to" in text
