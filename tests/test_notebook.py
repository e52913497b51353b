"""The Nvidia notebook end to end through papermill (CPU here), on a tiny model and generated data."""
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import records

REPO = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow


def run_notebook(tmp_path, notebook, **params):
    out = tmp_path / "out.ipynb"
    args = [sys.executable, "-m", "papermill", str(REPO / notebook), str(out), "--cwd", str(tmp_path)]
    for k, v in params.items():
        args += ["-p", k, str(v)]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out


@pytest.fixture(scope="module")
def nb_run(tmp_path_factory, tiny_model_dir, tiny_data_dir):
    tmp = tmp_path_factory.mktemp("nb")
    results = tmp / "runs.jsonl"
    run_notebook(tmp, "Nvidia/baseline.ipynb", model_name=tiny_model_dir, data_dir=tiny_data_dir,
                 batch=64, max_length=32, epochs=2, lr=5e-3, results_path=results,
                 run_name="nb-test", profile="True", profile_steps=2, profile_dir=tmp / "profiles")
    (rec,), broken = records.read_records(results)
    return rec, tmp


def test_record_is_appended_with_the_batch_given_on_the_command_line(nb_run):
    rec, _ = nb_run
    assert rec["status"] == "finished" and rec["run_name"] == "nb-test"
    assert rec["params"]["batch"] == 64  # `-p batch 64` reaches the record
    assert rec["timing"]["steps"] == 2 * (256 // 64)
    assert rec["device"]["type"] == "cpu" and rec["device"]["cpu_capability"]
    assert 0 <= rec["metrics"]["test_accuracy"] <= 1 and rec["metrics"]["final_loss"] > 0
    assert rec["libraries"]["torch"]


def test_record_carries_systems_memory_and_profile(nb_run):
    rec, _ = nb_run
    assert rec["systems"]["flops_per_step"] > 0 and rec["systems"]["arithmetic_intensity"] > 0
    assert rec["memory"]["host_peak_rss_gib"] > 0
    assert rec["utilization"]["backend"] == "psutil"
    prof = rec["profile"]
    assert prof["class_time_ms"]["matmul"] > 0 and Path(prof["trace_path"]).exists()


def test_bad_parameter_fails_before_training(tmp_path, tiny_model_dir, tiny_data_dir):
    out = tmp_path / "bad.ipynb"
    proc = subprocess.run([sys.executable, "-m", "papermill", str(REPO / "Nvidia/baseline.ipynb"), str(out),
                           "-p", "model_name", str(tiny_model_dir), "-p", "data_dir", str(tiny_data_dir),
                           "-p", "padding", "ragged", "-p", "results_path", str(tmp_path / "r.jsonl")],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0
    assert "padding='ragged' is unknown: allowed static, dynamic" in proc.stderr + out.read_text()
    assert not (tmp_path / "r.jsonl").exists()
