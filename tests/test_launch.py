"""Data parallel with real torchrun processes on the CPU (gloo): averaged gradients, disjoint shards,
one record, and a killed rank or a rank that raises ending the run with a clear error and a failed record."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch

from helpers import launch, steps
from helpers.measure.timing import StepTimer
from helpers.run import ddp, records, tokens, train
from helpers.run.args import build_args
from helpers.study import frame

REPO = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow

# dropout off (nodrop_model_dir) and fp32, so one process with batch 2B and two with B must agree
COMMON = dict(device="cpu", precision="fp32", max_length=32, lr=1e-3, max_steps=4, seed=3)


@pytest.fixture(scope="module")
def nodrop_model_dir(tmp_path_factory) -> Path:
    """The tiny BERT of conftest with dropout off, so a step is a deterministic function of its batch."""
    from conftest import tiny_bert_config
    from transformers import BertForSequenceClassification

    from helpers.run import models

    root = tmp_path_factory.mktemp("tiny-bert-nodrop")
    torch.manual_seed(0)
    config = tiny_bert_config(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    BertForSequenceClassification(config).save_pretrained(root)
    models.load_tokenizer("minilm").save_pretrained(root)
    return root


@pytest.fixture(scope="module")
def ddp_run(tmp_path_factory, nodrop_model_dir, tiny_data_dir):
    """The Nvidia notebook with num_devices=2: it hands the run to torchrun (2 ranks x batch 8)."""
    tmp = tmp_path_factory.mktemp("ddp")
    results = tmp / "results"
    params = dict(
        COMMON,
        model_name=nodrop_model_dir,
        data_dir=tiny_data_dir,
        batch=8,
        num_devices=2,
        results_path=results,
        run_name="ddp2",
        save_dir=tmp / "ckpt",
        profile="True",
        profile_steps=2,
        profile_dir=tmp / "profiles",
    )
    args = [
        sys.executable,
        "-m",
        "papermill",
        str(REPO / "Nvidia/baseline.ipynb"),
        str(tmp / "out.ipynb"),
        "--cwd",
        str(tmp),
    ]
    for k, v in params.items():
        args += ["-p", k, str(v)]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    recs, skipped = records.read_records(results)
    return recs, skipped, tmp


def train_single(model_dir, data_dir, batch: int, rank: int, world_size: int, tmp: Path):
    """Train in this process with batch `batch` on shard `rank` of `world_size`; return the model."""
    args = build_args(
        dict(
            COMMON,
            model_name=str(model_dir),
            data_dir=str(data_dir),
            batch=batch,
            results_path=str(tmp / "single"),
            progress=False,
        )
    )
    run = steps.start(args)
    splits = steps.tokenize(run, steps.load_data(run))
    model = steps.build_model(run)
    t = steps.prepare_training(run, model, splits)
    sampler = ddp.train_sampler(splits["train"], ddp.Rank(rank, world_size, 0), args.train.seed)
    loader = tokens.loader(
        splits["train"],
        batch,
        tokens.collator(run.tokenizer, "static"),
        shuffle=True,
        seed=args.train.seed,
        sampler=sampler,
    )
    train.fit(
        model,
        loader,
        t.optimizer,
        t.scheduler,
        run.dev,
        run.precision,
        1,
        timer=StepTimer(),
        max_steps=4,
        progress=False,
        sampler=sampler,
    )
    return model


def max_abs_diff(a: dict, b: dict) -> float:
    return max(float((a[k].float() - b[k].float()).abs().max()) for k in a)


def test_two_ranks_equal_one_process_with_the_doubled_batch(ddp_run, nodrop_model_dir, tiny_data_dir):
    from transformers import AutoModelForSequenceClassification

    _, _, tmp = ddp_run
    ddp = AutoModelForSequenceClassification.from_pretrained(tmp / "ckpt").state_dict()
    init = AutoModelForSequenceClassification.from_pretrained(nodrop_model_dir).state_dict()
    # Global batch k of the 2 ranks = rows [16k, 16k+16) of the permutation = batch k of one process
    # with batch 16 on the same sampler (world_size 1).
    doubled = train_single(nodrop_model_dir, tiny_data_dir, 16, 0, 1, tmp).state_dict()
    # What rank 0 would hold had the gradients not been all-reduced: its own shard only.
    alone = train_single(nodrop_model_dir, tiny_data_dir, 8, 0, 2, tmp).state_dict()
    moved, same, unreduced = max_abs_diff(ddp, init), max_abs_diff(ddp, doubled), max_abs_diff(ddp, alone)
    # measured: moved 2.5e-3, same 1.7e-6 (summation order, which Adam magnifies), unreduced 4.9e-3
    assert moved > 1e-3  # 4 steps at lr 1e-3 really changed the weights
    assert same < 5e-5, f"DDP vs doubled batch differ by {same}"
    assert unreduced > 50 * same  # the agreement comes from the averaged gradients


def test_ranks_see_disjoint_rows_and_one_record_is_written(ddp_run):
    recs, skipped, tmp = ddp_run
    assert not skipped and len(recs) == 1  # rank 1 wrote nothing
    rec = recs[0]
    assert rec["status"] == "finished" and rec["world_size"] == 2
    d = rec["distributed"]
    assert d["backend"] == "gloo" and d["per_device_batch"] == 8 and d["global_batch"] == 16
    assert d["shards"] == {"rows_per_rank": [128, 128], "overlap_rows": 0, "padded_rows": 0}
    assert d["launch_id"]
    # evaluation counted every validation/test row once across the two ranks
    assert rec["metrics"]["val_rows"] == 64 and rec["metrics"]["test_rows"] == 64
    assert 0 < d["allreduce"]["share_of_step"] < 1 and d["allreduce"]["comm_s"] > 0
    # the run's rate is both ranks' samples, and every table reads that one
    t = rec["timing"]
    assert t["samples_per_s"] == pytest.approx(2 * t["samples_per_s_per_device"])
    assert d["global_samples_per_s"] == t["samples_per_s"]
    # the windows' spread is in the same unit: the job's rate lies inside it, and the tables read it as is
    assert t["window_samples_per_s"]["min"] <= t["samples_per_s"] <= t["window_samples_per_s"]["max"]
    row = frame.frame([rec]).iloc[0]
    assert row["window_max"] == pytest.approx(t["window_samples_per_s"]["max"])
    assert row["window_min"] == pytest.approx(t["window_samples_per_s"]["min"])


def test_the_notebook_says_it_handed_over_and_shows_the_result(ddp_run):
    _, _, tmp = ddp_run
    text = (tmp / "out.ipynb").read_text()
    assert "num_devices=2: this run is handed over to torchrun" in text
    assert "train: done by the 2 torchrun ranks" in text and "evaluate: done by the 2 torchrun ranks" in text


def _descendant_with_rank(rank: int, timeout_s: float = 300):
    import psutil

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for p in psutil.Process().children(recursive=True):
            try:
                if p.environ().get("RANK") == str(rank) and "LOCAL_RANK" in p.environ():
                    return p
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue
        time.sleep(0.2)
    raise AssertionError(f"no rank {rank} process appeared")


def test_killed_rank_ends_the_run_with_a_clear_error_and_a_failed_record(
    tmp_path, capsys, nodrop_model_dir, tiny_data_dir
):
    results = tmp_path / "results"
    args = build_args(
        {
            **COMMON,
            "max_steps": None,
            "model_name": str(nodrop_model_dir),
            "data_dir": str(tiny_data_dir),
            "batch": 8,
            "epochs": 200,
            "num_devices": 2,
            "results_path": str(results),
            "run_name": "killed",
        }
    )
    outcome: dict = {}

    def target():
        try:
            outcome["record"] = launch.torchrun(args, "killed", results / "adhoc" / "killed@cpu.json", "cpu")
        except launch.DistributedRunError as err:
            outcome["error"] = err

    thread = threading.Thread(target=target)
    thread.start()
    victim = _descendant_with_rank(1)
    seen, deadline = "", time.monotonic() + 300
    while "train:" not in seen and time.monotonic() < deadline and thread.is_alive():
        seen += capsys.readouterr().out  # launch echoes the ranks' output; rank 0's bar says "train:"
        time.sleep(0.2)
    assert "train:" in seen, "training never started"
    victim.send_signal(signal.SIGKILL)
    thread.join(timeout=300)
    assert not thread.is_alive()
    assert "error" in outcome, "the launch did not fail"
    message = str(outcome["error"])
    assert "'killed' failed" in message and "rank 1" in message and "SIGKILL" in message
    rec = records.read_record(results / "adhoc" / "killed@cpu.json")  # the child's file, read by name
    assert rec["status"] == "failed" and rec["run_name"] == "killed" and "rank 1" in rec["error"]


SITECUSTOMIZE = '''
import os

if os.environ.get("RANK") == "1":  # torchrun's rank 1 only: its data loading raises
    from helpers.run import data

    class Rank1Fault(Exception):
        """A made-up failure; no 'Error' in its name, so only the error file can name it."""

    def load_emotion(*args, **kwargs):
        raise Rank1Fault("rank 1 cannot read its shard")

    data.load_emotion = load_emotion
'''


def test_a_rank_that_raises_is_named_with_its_exception_from_its_error_file(
    tmp_path, monkeypatch, nodrop_model_dir, tiny_data_dir
):
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE)  # imported by every process torchrun starts
    monkeypatch.setenv("PYTHONPATH", str(site))
    results = tmp_path / "results"
    args = build_args(
        {
            **COMMON,
            "model_name": str(nodrop_model_dir),
            "data_dir": str(tiny_data_dir),
            "batch": 8,
            "num_devices": 2,
            "results_path": str(results),
            "run_name": "raised",
            "progress": False,
        }
    )
    with pytest.raises(launch.DistributedRunError) as caught:
        launch.torchrun(args, "raised", results / "adhoc" / "raised@cpu.json", "cpu")
    message = str(caught.value)
    cause = message.split(". A failed record")[0]
    assert "rank 1 raised Rank1Fault: rank 1 cannot read its shard" in cause
    assert "sitecustomize.py" in cause and "in load_emotion" in cause  # where, from the error file's traceback
    assert cause.split(": ", 1)[1].startswith("rank 1 raised")  # the cause first, before rank 0's consequences
    rec = records.read_record(results / "adhoc" / "raised@cpu.json")
    assert rec["status"] == "failed" and "rank 1 raised Rank1Fault" in rec["error"]
    first = rec["distributed"]["rank_errors"][0]
    assert (first["rank"], first["exception"]) == (1, "Rank1Fault")


def test_the_error_files_are_read_earliest_first_and_a_killed_rank_comes_from_the_summary(tmp_path):
    import json
    import os

    attempt = tmp_path / "runid_abc" / "attempt_0"
    for rank, kind, written in ((0, "RuntimeError", 2_000), (2, "ValueError", 1_000)):
        (attempt / str(rank)).mkdir(parents=True)
        path = attempt / str(rank) / "error.json"
        path.write_text(
            json.dumps(
                {
                    "message": {
                        "message": f"{kind}: boom {rank}",
                        "extraInfo": {
                            "py_callstack": f'Traceback:\n  File "/x/train.py", line {rank + 10}, in step\n{kind}: boom',
                            "timestamp": "1",
                        },
                    }
                }
            )
        )
        os.utime(path, ns=(written, written))
    (attempt / "1").mkdir()  # rank 1 was killed: no error file
    errors = launch.rank_errors(tmp_path)
    assert [e.rank for e in errors] == [2, 0]
    assert errors[0].describe() == "rank 2 raised ValueError: boom 2 (at /x/train.py:12 in step)"
    summary = [
        "Root Cause (first observed failure):\n",
        "[0]:\n",
        "  rank      : 1 (local_rank: 1)\n",
        "  exitcode  : -9 (pid: 7)\n",
        "  error_file: <N/A>\n",
        "  traceback : Signal 9 (SIGKILL) received by PID 7\n",
    ]
    assert launch.failure_cause(errors, summary) == (
        "rank 1 exited with code -9 (Signal 9 (SIGKILL) received by PID 7); rank 2 raised ValueError: boom 2 "
        "(at /x/train.py:12 in step); rank 0 raised RuntimeError: boom 0 (at /x/train.py:10 in step)"
    )


def test_a_rank_killed_beside_rank_0s_failed_record_is_named_in_that_record(tmp_path):
    """Rank 1 killed in a two-rank run: rank 0 recorded its own "Connection reset by peer" only, and the
    launcher, finding rank 0's record, left it so."""
    args = build_args({"num_devices": 2, "run_name": "pair"})
    path = tmp_path / "adhoc" / "pair@cpu.json"
    reset = "RuntimeError: [gloo/transport/tcp/pair.cc:534] Connection reset by peer"
    rank0 = records.run_record(
        {**args.flat()}, [], status="failed", error=reset, distributed={"world_size": 2, "launch_id": "L1"}
    )
    records.write_record(path, rank0)
    summary = [
        "Root Cause (first observed failure):\n",
        "[0]:\n",
        "  rank      : 1 (local_rank: 1)\n",
        "  exitcode  : -9 (pid: 7)\n",
        "  traceback : Signal 9 (SIGKILL) received by PID 7\n",
    ]
    errors = [launch.RankError(0, "RuntimeError", reset.split(": ", 1)[1], None, 2)]
    with pytest.raises(launch.DistributedRunError, match=f"rank 1 exited with code -9.*A failed record is in {path}"):
        launch.launch_outcome(args, "pair", path, "L1", 1, errors, summary)
    rec = records.read_record(path)
    assert rec["run_id"] == rank0.run_id and rec["status"] == "failed"
    assert rec["error"].startswith("torchrun launch failed: rank 1 exited with code -9 (Signal 9 (SIGKILL)")
    assert "rank 0 raised RuntimeError: [gloo/transport/tcp/pair.cc:534] Connection reset by peer" in rec["error"]
