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
TINY = dict(batch=16, max_length=32, max_steps=6, log_every=2, timing_warmup_steps=2, eval_every=3, progress=False)


def papermill(notebook: str, out: Path, kernel: str, **params) -> subprocess.CompletedProcess:
    """Run `notebook` under papermill, each of `params` given as `-p NAME VALUE`; return the finished process."""
    pairs = [item for name, value in params.items() for item in ("-p", name, str(value))]
    command = [sys.executable, "-m", "papermill", notebook, str(out), "-k", kernel, "--log-output", *pairs]
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
        model_name=tiny_model_dir,
        data_dir=tiny_data_dir,
        results_path=tmp_path,
        **TINY,
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
        learnin_rate="1e-4",
        results_path=tmp_path,
    )
    assert done.returncode != 0 and "did you mean 'lr'" in done.stderr
    assert not list(tmp_path.rglob("*@*.json"))


@pytest.mark.xla
def test_the_trainium_notebook_sets_its_flags_then_shows_what_xla_compiled(tmp_path, tiny_model_dir, tiny_data_dir):
    done = papermill(
        "Trainium/baseline.ipynb",
        tmp_path / "out.ipynb",
        "accelbench-xla",
        model_name=tiny_model_dir,
        data_dir=tiny_data_dir,
        results_path=tmp_path,
        xla_fast_compile=True,
        **TINY,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    text = outputs(tmp_path / "out.ipynb")
    assert (
        "NEURON_CC_FLAGS = --model-type=transformer" in text
        and "after the warm-up: 0" in text
        and "graphs compiled at steps" in text
    )
    assert "record: finished, written to" in text
