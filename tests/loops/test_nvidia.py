"""The CUDA / CPU loop (Nvidia/train.py) on the CPU: what it trains, measures and records, and how it fails."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

from helpers import arguments, record
from Nvidia import train

pytestmark = pytest.mark.usefixtures("quiet_meters")


@pytest.fixture
def quiet_meters(monkeypatch):
    """No CPU roof measured in tests (seconds of matmuls); everything else runs as it does for a user."""
    from helpers import peaks

    monkeypatch.setattr(peaks, "ensure_cpu_roof", lambda *a, **k: None)


def run(tmp_path, tiny_model_dir, tiny_data_dir, **values) -> dict:
    """Train the tiny model as `values` say; return its record."""
    base = dict(
        model_name=str(tiny_model_dir),
        data_dir=str(tiny_data_dir),
        batch=16,
        max_length=32,
        lr=1e-3,
        max_steps=8,
        log_every=2,
        timing_warmup_steps=2,
        progress=False,
        results_path=str(tmp_path),
    )
    return train.train(arguments.build({**base, **values}, arguments.NvidiaArgs))


def test_a_run_records_raw_steady_measurements_and_learns(tmp_path, tiny_model_dir, tiny_data_dir):
    rec = run(tmp_path, tiny_model_dir, tiny_data_dir, max_steps=16, eval_every=8)
    assert rec["status"] == "finished"
    assert rec["timing"]["steps"] == 16 and rec["timing"]["steady_steps"] == 14
    assert rec["shapes"]["steady"] == {"16x32": 14} and rec["shapes"]["counts"] == {"16x32": 16}
    assert rec["timing"]["steady_samples"] == 14 * 16 and rec["timing"]["steady_tokens"] == 14 * 16 * 32
    assert rec["model"]["config"]["hidden_size"] == 64  # what the report's FLOPs are computed from
    assert "systems" not in rec  # derived figures are the report's
    losses = [loss for _, loss in rec["metrics"]["loss_curve"]]
    assert losses[-1] < losses[0]
    assert [p["step"] for p in rec["curve"]] == [8, 16]
    assert rec["metrics"]["val_rows"] == 64 and rec["metrics"]["test_rows"] == 64
    assert set(rec["time_to_accuracy"]) == {"0.88", "0.90", "0.92"}
    assert os.path.exists(rec["_source"]) and json.load(open(rec["_source"]))["run_id"] == rec["run_id"]


def test_a_second_run_of_one_name_keeps_both_records(tmp_path, tiny_model_dir, tiny_data_dir):
    first = run(tmp_path, tiny_model_dir, tiny_data_dir, run_name="same", max_steps=3)
    second = run(tmp_path, tiny_model_dir, tiny_data_dir, run_name="same", max_steps=3)
    assert first["_source"] != second["_source"] and second["_source"].endswith(".run2.json")
    assert json.load(open(first["_source"]))["run_id"] == first["run_id"]


def test_gradient_accumulation_steps_on_whole_groups(tmp_path, tiny_model_dir, tiny_data_dir):
    rec = run(tmp_path, tiny_model_dir, tiny_data_dir, batch=8, gradient_accumulation_steps=4, max_steps=4)
    assert rec["timing"]["steps"] == 4 and sum(rec["shapes"]["counts"].values()) == 16


def test_dynamic_length_grouped_batches_and_lora(tmp_path, tiny_model_dir, tiny_data_dir):
    rec = run(tmp_path, tiny_model_dir, tiny_data_dir, padding="dynamic", group_by_length=True, lora_r=4)
    assert rec["shapes"]["distinct"] > 1
    assert rec["model"]["lora"]["r"] == 4 and rec["model"]["trainable_parameters"] < rec["model"]["parameters"]


def test_data_on_the_device_trains_as_the_host_loader(tmp_path, tiny_model_dir, tiny_data_dir):
    host = run(tmp_path, tiny_model_dir, tiny_data_dir, precision="fp32", padding="dynamic", run_name="host")
    device = run(tmp_path, tiny_model_dir, tiny_data_dir, precision="fp32", padding="dynamic", data_on_device=True)
    losses = [[loss for _, loss in r["metrics"]["loss_curve"]] for r in (host, device)]
    assert losses[1] == pytest.approx(losses[0], rel=1e-5)
    assert device["shapes"] == host["shapes"]


def test_a_compiled_step_trains_and_counts_its_graphs(tmp_path, tiny_model_dir, tiny_data_dir):
    rec = run(tmp_path, tiny_model_dir, tiny_data_dir, step_mode="compile", precision="fp32", max_steps=4)
    assert rec["status"] == "finished" and rec["shapes"]["compiled_graphs"] >= 2
    assert rec["shapes"]["cudagraph_skips"] == 0


def test_stop_at_accuracy_ends_at_the_first_evaluation_that_reaches_it(tmp_path, tiny_model_dir, tiny_data_dir):
    rec = run(tmp_path, tiny_model_dir, tiny_data_dir, eval_every=2, stop_at_accuracy=0.01)
    assert rec["timing"]["steps"] == 2 and "validation accuracy" in rec["stopped_early"]


def test_a_loss_that_explodes_ends_the_run_as_diverged(tmp_path, tiny_model_dir, tiny_data_dir):
    rec = run(tmp_path, tiny_model_dir, tiny_data_dir, lr=50.0, max_grad_norm=None, diverge_factor=1.01, max_steps=16)
    assert rec["status"] == "diverged" and rec["metrics"]["diverged_at_step"] < 16 and "loss" in rec["error"]


def test_a_failure_after_training_is_recorded_then_raised(tmp_path, tiny_model_dir, tiny_data_dir):
    blocker = tmp_path / "file"
    blocker.write_text("a file where the model folder would go")
    with pytest.raises(Exception):
        run(tmp_path, tiny_model_dir, tiny_data_dir, run_name="save", save_dir=str(blocker / "model"), max_steps=2)
    rec = json.loads(next((tmp_path / "adhoc").glob("save@*.json")).read_text())
    assert rec["status"] == "failed" and rec["timing"]["steps"] == 2 and rec["error"]


def test_refused_before_anything_is_built_or_recorded(tmp_path, tiny_model_dir, tiny_data_dir):
    with pytest.raises(arguments.ConfigError, match="cudagraphs.*needs CUDA"):
        run(tmp_path, tiny_model_dir, tiny_data_dir, step_mode="cudagraphs")
    with pytest.raises(arguments.ConfigError, match="batch=512 is above"):
        run(tmp_path, tiny_model_dir, tiny_data_dir, batch=512)
    assert not list(tmp_path.rglob("*.json"))[1:]  # at most the batch refusal's failed record


def test_the_command_line_trains_and_exits_by_status(tmp_path, tiny_model_dir, tiny_data_dir):
    flags = [
        f"--model_name_or_path={tiny_model_dir}",
        f"--data_dir={tiny_data_dir}",
        "--batch=16",
        "--max_length=32",
        "--max_steps=3",
        "--log_every=1",
        "--progress=False",
        f"--results_path={tmp_path}",
        "--precision=fp32",
    ]
    done = subprocess.run(
        [sys.executable, "Nvidia/train.py", *flags], capture_output=True, text=True, cwd=record.REPO_ROOT
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "record: finished, written to" in done.stdout
    wrong = subprocess.run([sys.executable, "Nvidia/train.py", "--learnin_rate=1"], capture_output=True, text=True)
    assert wrong.returncode == 2 and "did you mean 'lr'" in wrong.stderr


@pytest.mark.slow
def test_two_ranks_train_disjoint_shards_and_rank_0_records(tmp_path, tiny_model_dir, tiny_data_dir):
    flags = [
        f"--model_name={tiny_model_dir}",
        f"--data_dir={tiny_data_dir}",
        "--batch=8",
        "--max_length=32",
        "--max_steps=4",
        "--log_every=2",
        "--progress=False",
        f"--results_path={tmp_path}",
        "--num_devices=2",
        "--precision=fp32",
        "--run_name=ddp",
    ]
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2", "Nvidia/train.py"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run([*torchrun, *flags], capture_output=True, text=True, cwd=record.REPO_ROOT, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    (rec,) = [json.loads(p.read_text()) for p in (tmp_path / "adhoc").glob("ddp@*.json")]
    assert rec["world_size"] == 2 and rec["distributed"]["global_batch"] == 16
    assert rec["metrics"]["test_rows"] == 64  # each rank its shard, summed
    assert torch.distributed.is_available()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (a lent one: scripts/device_plan.sh gpu)")
def test_a_cuda_graphed_step_is_graphed_and_its_busy_share_measured(tmp_path, tiny_model_dir, tiny_data_dir):
    rec = run(tmp_path, tiny_model_dir, tiny_data_dir, step_mode="cudagraphs", data_on_device=True, max_steps=12)
    assert rec["status"] == "finished" and rec["shapes"]["cudagraph_skips"] == 0  # torch fell back from none
    assert 0 < rec["profile"]["device_busy_share"] <= 1 and rec["profile"]["busy_share_method"]
    assert rec["timing"]["step_time_source"] == "CUDA events per step"
