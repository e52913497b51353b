"""finish never loses a record, and a run's destination and name are checked before anything is built."""

import dataclasses
import json
import math
import multiprocessing
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import steps
from helpers.run import record_destination, records
from helpers.run.args import ConfigError, build_args


def _args(tiny_model_dir, tiny_data_dir, results, **kw):
    base = dict(
        model_name=str(tiny_model_dir),
        data_dir=str(tiny_data_dir),
        batch=32,
        max_length=16,
        epochs=1,
        max_steps=4,
        timing_warmup_steps=1,
        lr=5e-3,
        results_path=str(results),
        progress=False,
        log_every=1,
        precision="fp32",
    )
    return build_args({**base, **kw})


STORED = '{"fp32, 1 threads": {"peak_tflops": %s, "mem_bw_gbps": 10.0, "threads": 1, "shape": "s", "by_shape": {}}}'


@pytest.mark.parametrize(
    "peaks",
    [
        "[]",
        '{"fp32, 1 threads": {"peak_tflops": 1.0}}',
        "{not json",
        "",
        STORED % "-1",
        STORED % "NaN",
        STORED % "0.0012",
    ],
)
def test_a_malformed_peaks_file_is_measured_again_and_never_costs_the_record(
    tiny_model_dir, tiny_data_dir, tmp_path, peaks, monkeypatch
):
    monkeypatch.setattr("helpers.measure.peaks.BUSY_CORES", math.inf)  # tests share the machine: not tested here
    run = steps.start(_args(tiny_model_dir, tiny_data_dir, tmp_path, run_name="p"))
    peaks_file = records.peaks_dir(run.record_path) / f"{run.dev.key}.json"
    peaks_file.parent.mkdir(parents=True)
    peaks_file.write_text(peaks)
    splits = steps.tokenize(run, steps.load_data(run))
    model = steps.build_model(run)
    steps.train(run, model, splits)
    rec = steps.finish(run)
    assert records.read_record(run.record_path)["run_id"] == rec["run_id"]
    assert 0 < rec["systems"]["mfu"] <= 1  # measured again before training, not trusted
    assert isinstance(json.loads(peaks_file.read_text()), dict)


def test_a_roof_that_cannot_be_found_is_a_reason_in_a_written_record(
    tiny_model_dir, tiny_data_dir, tmp_path, monkeypatch
):
    def full_disk(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("helpers.calc.roofline.machine_peak", full_disk)
    rec = steps.run_all(_args(tiny_model_dir, tiny_data_dir, tmp_path, run_name="disk"))
    saved = records.read_record(records.record_path(tmp_path, None, "disk", rec["device"]["key"]))
    assert saved["status"] == "finished" and "No space left" in saved["systems"]["reason"]


def test_a_record_that_cannot_go_where_it_belongs_is_printed_and_saved_in_the_working_folder(
    tiny_model_dir, tiny_data_dir, tmp_path, monkeypatch, capsys
):
    monkeypatch.chdir(tmp_path)
    run = steps.start(_args(tiny_model_dir, tiny_data_dir, tmp_path / "results", run_name="lost"))
    shutil.rmtree(run.record_path.parent)
    run.record_path.parent.write_text("a file where the folder was")  # the folder went away mid-run
    rec = steps.finish(run, "failed", "stopped early")
    err = capsys.readouterr().err
    assert f'"run_id": "{rec["run_id"]}"' in err  # printed whole
    assert records.read_record(tmp_path / run.record_path.name)["run_id"] == rec["run_id"]
    assert f"saved to {tmp_path / run.record_path.name}" in err


def test_a_record_name_too_long_for_the_file_system_is_refused_naming_run_name(tmp_path):
    fits = tmp_path / ("x" * 200 + "@" + "d" * 35 + ".json")  # 241 bytes + the temporary name's 14 = 255
    record_destination.check_destination(fits)
    with pytest.raises(ConfigError, match="run_name is too long.*at most 200 characters"):
        record_destination.check_destination(fits.with_name("x" * 201 + "@" + "d" * 35 + ".json"))
    assert not list(tmp_path.iterdir())  # the probe is gone


def _probe_many(path: str, n: int) -> None:
    """Check one destination n times (a torchrun rank starting)."""
    for _ in range(n):
        record_destination.check_destination(Path(path))


def test_ranks_checking_one_destination_at_once_do_not_trip_over_each_others_probe(tmp_path):
    path = tmp_path / "killed@cpu-amd-epyc.json"
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_probe_many, args=(str(path), 300)) for _ in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
    assert [p.exitcode for p in procs] == [0, 0, 0, 0]  # a shared probe name fails one with "File exists"
    assert not list(tmp_path.iterdir())


def test_the_suites_own_folder_is_checked_before_training(tiny_model_dir, tiny_data_dir, tmp_path):
    (tmp_path / "demo").write_text("a file where the suite's folder goes")
    with pytest.raises(records.RecordWriteError, match="demo"):
        steps.start(_args(tiny_model_dir, tiny_data_dir, tmp_path, run_name="r", suite="demo"))


def test_one_run_per_name_at_a_time_and_a_finished_name_needs_replace_record(tiny_model_dir, tiny_data_dir, tmp_path):
    args = _args(tiny_model_dir, tiny_data_dir, tmp_path, run_name="once")
    path = records.record_path(tmp_path, None, "once", steps.start(args).dev.key)
    record_destination.release(record_destination._claim_path(path))
    hold = (
        "import sys, time, pathlib; from helpers.run import record_destination; "
        "record_destination.claim_name(pathlib.Path(sys.argv[1])); print('held', flush=True); time.sleep(60)"
    )
    other = subprocess.Popen([sys.executable, "-c", hold, str(path)], stdout=subprocess.PIPE, text=True)
    try:
        assert other.stdout.readline().strip() == "held"
        with pytest.raises(ConfigError, match=f"is running on this device now .claimed by pid {other.pid}"):
            steps.start(args)
    finally:
        other.kill()
        other.wait()
    steps.run_all(args)  # the claim's process is gone (its file left behind): a stale claim is taken over
    assert not record_destination._claim_path(path).exists()  # released by finish
    with pytest.raises(ConfigError, match="replace_record=True"):
        steps.start(args)
    again = steps.run_all(_args(tiny_model_dir, tiny_data_dir, tmp_path, run_name="once", replace_record=True))
    assert records.read_record(path)["run_id"] == again["run_id"]


def test_gradient_checkpointing_on_neuron_runs_and_a_failure_keeps_its_own_error(
    tiny_model_dir, tiny_data_dir, tmp_path, monkeypatch
):
    """Upstream trains BERT on trn1 with it (torch_xla.utils.checkpoint): it runs like any other setting (it
    was refused), and a failure is recorded with its real error (it was relabelled 'unsupported by the
    compiler'). Here the device says Neuron; then the 'compiler' fails at the model build."""
    from helpers.run import device

    real = device.resolve_device
    monkeypatch.setattr(device, "resolve_device", lambda kind: dataclasses.replace(real("cpu"), neuron=True))
    args = dict(gradient_checkpointing=True, run_name="gc", replace_record=True)
    assert steps.run_all(_args(tiny_model_dir, tiny_data_dir, tmp_path, **args))["status"] == "finished"

    def compiler_rejects(run):
        raise RuntimeError("neuronx-cc: unsupported checkpoint region")

    monkeypatch.setattr(steps, "build_model", compiler_rejects)
    rec = steps.run_all(_args(tiny_model_dir, tiny_data_dir, tmp_path, **args))
    assert rec["status"] == "failed"
    assert rec["error"] == "RuntimeError: neuronx-cc: unsupported checkpoint region"


def test_a_failed_or_interrupted_rerun_never_replaces_the_finished_record(
    tiny_model_dir, tiny_data_dir, tmp_path, capsys
):
    """replace_record=True with a mistyped data_dir, or Ctrl-C while it trains: the finished record stays, the
    rerun's record is written aside and the run says where both are."""
    finished = steps.run_all(_args(tiny_model_dir, tiny_data_dir, tmp_path, run_name="kept"))
    path = Path(finished["_source"])
    typo = _args(tiny_model_dir, tmp_path / "emotoin", tmp_path, run_name="kept", replace_record=True)
    with pytest.raises(ConfigError, match="emotoin.* holds no train.jsonl, validation.jsonl, test.jsonl"):
        steps.run_all(typo)  # refused before anything is recorded
    assert records.read_record(path)["run_id"] == finished["run_id"]
    for status, error in (("failed", "DataError: train.jsonl:3: not valid JSON"), ("interrupted", steps.INTERRUPTED)):
        run = steps.start(_args(tiny_model_dir, tiny_data_dir, tmp_path, run_name="kept", replace_record=True))
        steps.finish(run, status, error)
        assert records.read_record(path)["run_id"] == finished["run_id"]
        aside = records.read_record(records.aside_path(path))
        assert aside["status"] == status and aside["run_id"] == run.record.run_id
        assert f"(the finished record at {path} is kept)" in capsys.readouterr().out


def test_make_baseline_never_asks_to_replace_a_record_and_refuses_a_name_of_two_words():
    """`make baseline` run again keeps the finished record unless the user asks (EXTRA="-p replace_record True");
    a BASELINE_RUN of two words is refused before anything runs; the name goes to papermill as text (-r)."""
    repo = Path(__file__).resolve().parents[1]
    plan = subprocess.run(["make", "-n", "baseline"], cwd=repo, capture_output=True, text=True, timeout=60)
    assert "replace_record" not in plan.stdout and "-r run_name 'minilm-baseline'" in plan.stdout
    bad = subprocess.run(
        ["make", "-n", "baseline", "BASELINE_RUN=my run"], cwd=repo, capture_output=True, text=True, timeout=60
    )
    assert bad.returncode != 0 and "papermill" not in bad.stdout and "date" not in bad.stdout
    assert "BASELINE_RUN='my run' is not one word" in bad.stderr


@pytest.mark.parametrize("bad", [{"suite": "demo"}, {"run_name": "fifo"}])
def test_a_bad_destination_is_refused_before_the_precision_probe_runs(
    tiny_model_dir, tiny_data_dir, tmp_path, monkeypatch, bad
):
    """A fresh results folder with a bad destination was refused after the bf16 probe (28-45 s on a CPU)."""
    import os

    from helpers.measure import precision_probe
    from helpers.run import device

    probed = []
    monkeypatch.setattr(precision_probe, "resolve", lambda *a: probed.append(a))
    (tmp_path / "demo").write_text("a file where the suite's folder goes")
    (tmp_path / "adhoc").mkdir()
    os.mkfifo(records.record_path(tmp_path, None, "fifo", device.resolve_device("cpu").key))
    with pytest.raises(records.RecordWriteError, match="demo|a FIFO is at the record's path"):
        steps.start(_args(tiny_model_dir, tiny_data_dir, tmp_path, **{"precision": "auto", **bad}))
    assert not probed
