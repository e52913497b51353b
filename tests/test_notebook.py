"""The Nvidia notebook end to end through papermill (CPU here), on a tiny model and generated data."""

import subprocess
import sys
from pathlib import Path

import pytest

from helpers.run import records

REPO = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow


def papermill(tmp_path, notebook, **params):
    """Run `notebook` with `-p` parameters; return the completed process and the output notebook path."""
    out = tmp_path / "out.ipynb"
    args = [sys.executable, "-m", "papermill", str(REPO / notebook), str(out), "--cwd", str(tmp_path)]
    for k, v in params.items():
        args += ["-p", k, str(v)]
    return subprocess.run(args, capture_output=True, text=True, timeout=600), out


@pytest.fixture(scope="module")
def nb_run(tmp_path_factory, tiny_model_dir, tiny_data_dir):
    tmp = tmp_path_factory.mktemp("nb")
    proc, _ = papermill(
        tmp,
        "Nvidia/baseline.ipynb",
        model_name=tiny_model_dir,
        data_dir=tiny_data_dir,
        preset="optimized",
        batch=8,
        max_length=32,
        epochs=1,
        max_steps=10,
        lr=5e-3,
        results_path=tmp / "results",
        run_name="nb-test",
        profile="True",
        profile_steps=2,
        profile_dir=tmp / "profiles",
        save_dir=tmp / "ckpt",
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (rec,), skipped = records.read_records(tmp / "results")
    return rec, tmp, proc


def test_the_record_keeps_the_batch_given_even_under_a_preset(nb_run):
    rec, _, _ = nb_run
    assert rec["status"] == "finished" and rec["run_name"] == "nb-test"
    assert rec["params"]["batch"] == 8  # `-p batch 8` equals the default, and still beats the preset's 64
    assert rec["params"]["llrd_decay"] == 0.95 and rec["params"]["log_every"] == 100  # not given: the preset's
    assert set(rec["params_given"]) >= {"batch", "preset", "max_length", "lr"}
    assert rec["timing"]["steps"] == 10
    assert rec["device"]["type"] == "cpu" and rec["device"]["cpu_capability"]
    assert 0 <= rec["metrics"]["test_accuracy"] <= 1 and rec["metrics"]["final_loss"] > 0


def test_the_record_carries_systems_memory_and_profile(nb_run):
    rec, _, _ = nb_run
    assert rec["systems"]["flops_per_step"] > 0 and rec["systems"]["arithmetic_intensity"] > 0
    assert rec["memory"]["host_peak_rss_gib"] > 0 and rec["utilization"]["backend"] == "psutil"
    prof = rec["profile"]
    assert prof["class_time_ms"]["matmul"] > 0 and Path(prof["trace_path"]).exists()


def test_save_dir_writes_a_checkpoint_the_eval_script_reads(nb_run, tiny_data_dir):
    rec, tmp, _ = nb_run
    assert (tmp / "ckpt" / "config.json").exists() and rec["saved_to"] == str(tmp / "ckpt")
    out = subprocess.run(
        [
            sys.executable,
            str(REPO / "Trainium" / "eval.py"),
            "--model_name_or_path",
            str(tmp / "ckpt"),
            "--data_dir",
            str(tiny_data_dir),
            "--device",
            "cpu",
            "--max_seq_length",
            "32",
            "--precision",
            "fp32",
        ],  # auto would probe bf16 on this CPU
        capture_output=True,
        text=True,
        timeout=300,
    )  # and keep it in the checkout's results
    assert out.returncode == 0, out.stderr[-2000:]
    assert '"rows": 64' in out.stdout
    # an evaluation writes no record, so it leaves no claim on a record's name behind
    assert not list((REPO / "Experiment" / "results" / "adhoc").glob(".ckpt-*.claim"))


def test_each_step_prints_a_short_summary(nb_run):
    _, tmp, _ = nb_run
    text = (tmp / "out.ipynb").read_text()
    for line in (
        "data: 256 train",
        "tokens: static padding to 32",
        "model: ",
        "training: finished, 10 steps",
        "evaluation: validation accuracy",
        "record: finished, written to",
    ):
        assert line in text, line


def test_a_misspelled_parameter_stops_before_anything_runs(tmp_path, tiny_model_dir, tiny_data_dir):
    proc, out = papermill(
        tmp_path,
        "Nvidia/baseline.ipynb",
        model_name=tiny_model_dir,
        data_dir=tiny_data_dir,
        learning_rate=0.5,
        results_path=tmp_path / "r",
    )
    assert proc.returncode != 0
    assert "unknown parameter 'learning_rate'" in proc.stderr + out.read_text()
    assert not (tmp_path / "r").exists()


def test_bad_parameter_fails_before_training(tmp_path, tiny_model_dir, tiny_data_dir):
    proc, out = papermill(
        tmp_path,
        "Nvidia/baseline.ipynb",
        model_name=tiny_model_dir,
        data_dir=tiny_data_dir,
        padding="ragged",
        results_path=tmp_path / "r",
    )
    assert proc.returncode != 0
    assert "padding='ragged' is invalid: Input should be 'static' or 'dynamic'" in proc.stderr + out.read_text()
    assert not (tmp_path / "r").exists()


def test_a_failing_later_cell_still_writes_the_failed_record(tmp_path, tiny_model_dir, tiny_data_dir):
    proc, _ = papermill(
        tmp_path,
        "Nvidia/baseline.ipynb",
        model_name=tiny_model_dir,
        data_dir=tiny_data_dir,
        train_subset=16,
        batch=16,
        gradient_accumulation_steps=4,
        results_path=tmp_path / "r",
        run_name="zero-steps",
    )
    assert proc.returncode != 0
    (rec,), _ = records.read_records(tmp_path / "r")
    assert rec["status"] == "failed" and "makes no optimizer step" in rec["error"]


@pytest.mark.parametrize(
    "notebook, groups",
    [
        ("Nvidia/baseline.ipynb", ("task", "train", "measure")),
        ("Trainium/baseline.ipynb", ("task", "train", "measure", "neuron")),
    ],
)
def test_the_parameters_cell_holds_every_parameter_at_its_default(notebook, groups):
    """A value not passed with -p comes from this cell: it must be the arguments' default (a drifted
    literal would silently change every run), and it must list every parameter, so papermill's
    'unknown parameter' warning fires only for names the run does not know."""
    import ast
    from dataclasses import fields

    import nbformat

    from helpers.run.args import GROUPS

    nb = nbformat.read(REPO / notebook, as_version=4)
    (cell,) = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    values = {node.targets[0].id: ast.literal_eval(node.value) for node in ast.parse(cell.source).body}
    expected = {f.name: f.default for g in groups for f in fields(GROUPS[g])}
    if notebook.startswith("Trainium"):
        expected["device"] = "xla"  # the one default this notebook changes, on purpose
    assert values == expected
