"""The sweep's fixtures: suite files written on the fly, and a stand-in notebook that records as a loop does."""

from __future__ import annotations

import textwrap
from pathlib import Path

import nbformat
import pytest

CPU = {"type": "cpu", "name": "Test CPU", "key": "cpu-test", "bf16_fast": True, "neuron": False}

# the stand-in's parameters cell holds the names the sweep passes; papermill injects the point's values below it
PARAMETERS = "run_name = None\nsuite = None\nresults_path = None\nmax_steps = 1"
# sleeps max_steps seconds, then writes a finished record where the loop would (the point's tag names that file)
RECORDING = """
import os, time
from pathlib import Path
from helpers import record
time.sleep(max_steps)
rec = record.start(run_name, {"max_steps": max_steps, "pid": os.getpid(), "omp": os.environ.get("OMP_NUM_THREADS")},
                   [], {"key": "cpu-test"}, suite)
rec.status = "finished"
record.write(rec, Path(os.environ["ACCELBENCH_POINT"]))
"""


@pytest.fixture()
def suite_file(tmp_path):
    """Return a writer of suite files: (name, TOML text) -> its path."""

    def write(name: str, body: str) -> Path:
        path = tmp_path / f"{name}.toml"
        path.write_text(textwrap.dedent(body))
        return path

    return write


@pytest.fixture()
def stand_in(tmp_path):
    """Return a writer of stand-in notebooks: code -> the notebook's path."""

    def write(code: str = RECORDING) -> Path:
        nb = nbformat.v4.new_notebook()
        params = nbformat.v4.new_code_cell(PARAMETERS)
        params.metadata["tags"] = ["parameters"]
        nb.cells = [params, nbformat.v4.new_code_cell(textwrap.dedent(code))]
        nb.metadata["kernelspec"] = {"name": "python3", "language": "python", "display_name": "Python 3"}
        path = tmp_path / "stand_in.ipynb"
        nbformat.write(nb, path)
        return path

    return write


@pytest.fixture()
def on_cpu(monkeypatch):
    """The sweep asks no environment for its device: a CPU with fast bf16 (the section the record would carry)."""
    from study.sweep import points

    monkeypatch.setattr(points, "device_of", lambda env, requested="auto": dict(CPU))
    return CPU
