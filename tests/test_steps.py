"""The run path: every outcome of a run reaches its record file, and nothing is built before the checks."""

import math

import pytest

import helpers.run.train
from helpers import steps
from helpers.measure import peaks
from helpers.measure.precision_probe import cpu_probe as real_cpu_probe  # before conftest's canned one
from helpers.run import record_destination, records
from helpers.run.args import ConfigError, build_args
from helpers.run.summary import headline


def _args(tiny_model_dir, tiny_data_dir, results, **kw):
    base = dict(
        model_name=str(tiny_model_dir),
        data_dir=str(tiny_data_dir),
        batch=32,
        max_length=16,
        epochs=1,
        lr=5e-3,
        results_path=str(results),
        progress=False,
        log_every=2,
    )
    return build_args({**base, **kw})


def _only_record(results):
    found, skipped = records.read_records(results)
    assert not skipped
    (rec,) = found
    return rec


def test_finished_run_is_written_where_its_name_says(tiny_model_dir, tiny_data_dir, tmp_path, monkeypatch):
    monkeypatch.setattr(peaks, "BUSY_CORES", math.inf)  # tests share the machine: its load is not tested here
    rec = steps.run_all(_args(tiny_model_dir, tiny_data_dir, tmp_path, run_name="ok", suite="demo"))
    saved = _only_record(tmp_path)
    assert saved["_source"] == str(tmp_path / "demo" / f"ok@{rec['device']['key']}.json")
    assert saved["run_id"] == rec["run_id"] and saved["status"] == "finished"
    assert saved["timing"]["steps"] == 256 // 32 and saved["metrics"]["test_rows"] == 64
    assert set(saved["phases"]) >= {"load_data", "tokenize", "build_model", "train", "evaluate"}
    assert saved["systems"]["mfu"] > 0 and saved["params_given"][0] == "batch"
    assert saved["optimizer"]["class"] == "torch.optim.adamw.AdamW"  # what stepped, by its class


def test_a_section_a_step_sets_on_the_record_is_checked_as_it_is_set(tiny_model_dir, tiny_data_dir, tmp_path):
    """A misspelled section, or a figure of the wrong type, is refused where a step sets it, before anything
    is written; the run goes on and its record holds only what the schema knows."""
    from helpers.run import schema

    run = steps.start(_args(tiny_model_dir, tiny_data_dir, tmp_path, run_name="typed"))
    with pytest.raises(AttributeError, match="shard"):
        run.shard = {"rows_per_rank": [128]}  # the run's own fields are as typed: `shards`
    with pytest.raises(ValueError, match="metrcs"):
        run.record.metrcs = schema.Metrics(final_loss=0.5)
    with pytest.raises(ValueError, match="timing.steps"):
        run.record.timing = {"steps": "many"}
    with pytest.raises(ValueError, match="status"):
        run.record.status = "done"
    run.record.metrics = {"final_loss": 0.5}  # a mapping becomes the typed section
    assert isinstance(run.record.metrics, schema.Metrics)
    steps.finish(run, "failed", "stopped by the test")
    saved = _only_record(tmp_path)
    assert saved["metrics"] == {"final_loss": 0.5} and "metrcs" not in saved and "timing" not in saved


def test_oom_is_recorded_and_does_not_raise(tiny_model_dir, tiny_data_dir, tmp_path, monkeypatch):
    def boom(run):
        raise MemoryError("host ran out of memory")

    monkeypatch.setattr(steps, "build_model", boom)
    rec = steps.run_all(_args(tiny_model_dir, tiny_data_dir, tmp_path, run_name="big"))
    saved = _only_record(tmp_path)
    assert rec["status"] == saved["status"] == "oom" and "MemoryError" in saved["error"]
    assert saved["params"]["batch"] == 32  # the configuration that ran out is kept


def test_nan_divergence_is_recorded(tiny_model_dir, tiny_data_dir, tmp_path):
    rec = steps.run_all(
        _args(tiny_model_dir, tiny_data_dir, tmp_path, lr=1e6, run_name="nan", max_grad_norm=None, warmup_ratio=0.0)
    )
    assert rec["status"] == "diverged" and rec["metrics"]["diverged_at_step"] % 2 == 0
    assert "test_accuracy" not in rec["metrics"]  # no evaluation of a diverged model


def test_a_loss_that_explodes_but_stays_finite_is_diverged(tiny_model_dir, tiny_data_dir, tmp_path):
    rec = steps.run_all(
        _args(
            tiny_model_dir,
            tiny_data_dir,
            tmp_path,
            lr=30.0,
            run_name="boom",
            log_every=1,
            max_grad_norm=None,
            warmup_ratio=0.0,
            diverge_factor=3.0,
            precision="fp32",
        )
    )
    assert rec["status"] == "diverged" and "above 3 x the first window's" in rec["error"]


def test_parameter_errors_raise_before_anything_is_recorded(tiny_model_dir, tiny_data_dir, tmp_path):
    with pytest.raises(ConfigError, match="max_length=4096 is above"):
        steps.run_all(_args(tiny_model_dir, tiny_data_dir, tmp_path, max_length=4096))
    assert not list(tmp_path.rglob("*.json"))


def test_a_run_that_would_make_no_optimizer_step_is_failed_before_the_model(
    tiny_model_dir, tiny_data_dir, tmp_path, monkeypatch
):
    built = []
    monkeypatch.setattr(steps, "build_model", lambda run: built.append(run))
    rec = steps.run_all(
        _args(
            tiny_model_dir,
            tiny_data_dir,
            tmp_path,
            train_subset=32,
            batch=16,
            gradient_accumulation_steps=4,
            run_name="zero",
        )
    )
    assert rec["status"] == "failed" and "makes no optimizer step" in rec["error"] and not built


@pytest.mark.parametrize("step_mode, planned", [("eager", 4), ("compile", 3)])
def test_the_planned_steps_leave_out_the_short_last_batch_a_compiled_step_drops(
    tiny_model_dir, tiny_data_dir, tmp_path, step_mode, planned
):
    """100 rows in batches of 32: the eager loader's fourth batch is short, a compiled step's loader drops it."""
    run = steps.start(
        _args(tiny_model_dir, tiny_data_dir, tmp_path, train_subset=100, padding="static", step_mode=step_mode)
    )
    steps.tokenize(run, steps.load_data(run))
    record_destination.release(run.claim)
    assert run.record.data.optimizer_steps_planned == planned


@pytest.mark.parametrize("batch", [257, 10**20])
def test_a_batch_above_the_training_rows_is_failed_before_the_model(
    tiny_model_dir, tiny_data_dir, tmp_path, monkeypatch, batch
):
    monkeypatch.setattr(steps, "build_model", lambda run: pytest.fail("model built"))
    rec = steps.run_all(_args(tiny_model_dir, tiny_data_dir, tmp_path, batch=batch, run_name="huge"))
    assert rec["status"] == "failed" and f"batch={batch} is above the 256 training rows" in rec["error"]


def test_the_destination_is_checked_before_any_model_is_built(tiny_model_dir, tiny_data_dir, tmp_path, monkeypatch):
    monkeypatch.setattr(steps.models, "load_model", lambda *a, **k: pytest.fail("model built"))
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.raises(records.RecordWriteError, match="results_path=.*cannot hold run records"):
        steps.start(_args(tiny_model_dir, tiny_data_dir, blocker / "results"))


def test_a_second_run_in_one_process_reports_its_own_peak_memory(tiny_model_dir, tiny_data_dir, tmp_path):
    import torch

    hog = torch.ones(300 * 2**20 // 4)  # ~300 MiB touched before the first run's training
    first = steps.run_all(_args(tiny_model_dir, tiny_data_dir, tmp_path, run_name="a"))
    del hog
    second = steps.run_all(_args(tiny_model_dir, tiny_data_dir, tmp_path, run_name="b"))
    assert second["memory"]["host_source"].startswith("VmHWM since the run's reset")
    assert second["memory"]["host_peak_rss_gib"] < first["memory"]["host_peak_rss_gib"] - 0.2


class ConstantReader:
    """An energy reader of one fake device at 50 W on the meter's clock."""

    reason, source, covers, device_count = None, "a fake device at 50 W", "one fake device", 1

    def __init__(self):
        self.samples = []

    def start(self, now):
        self.t0 = now

    def poll(self, now):
        pass

    def begin(self, now):
        self.opened = now

    def end(self, now):
        return {"fake": 50.0 * (now - self.opened)}

    def stop(self, now, seconds, interval_s):
        from helpers.measure.energy_readers import result

        return result("measured", self.source, seconds, 50.0 * seconds)

    def close(self):
        pass


def test_energy_covers_the_steady_windows_and_their_samples(tiny_model_dir, tiny_data_dir, tmp_path, monkeypatch):
    from helpers import measured_training
    from helpers.measure.energy_meter import EnergyMeter

    monkeypatch.setattr(
        measured_training,
        "start_energy",
        lambda device_type, cuda_devices=None: EnergyMeter(ConstantReader(), device_type, start_thread=False),
    )
    rec = steps.run_all(_args(tiny_model_dir, tiny_data_dir, tmp_path, run_name="joules", eval_every=2, curve_rows=16))
    e, t = rec["energy"], rec["timing"]
    assert e["method"] == "measured" and e["window"] == "steady" and e["windows"] == t["windows"]
    assert e["seconds"] == pytest.approx(t["steady_time_s"])  # the timer's own windows, evaluation pauses out
    assert e["whole_run"]["seconds"] > t["train_time_s"]  # warm-up and evaluation pauses are in the whole run
    assert e["samples"] == t["steady_samples"] == sum(8 * [32]) - 3 * 32  # the steps after the 3 warm-up ones
    assert e["samples_per_joule"] == pytest.approx(e["samples"] / e["joules"])
    assert e["mean_watts"] == pytest.approx(e["joules"] / e["seconds"])


def test_job_energy_counts_every_rank_samples_in_the_steady_windows():
    import types

    import torch

    from helpers import measured_training
    from helpers.run.ddp import Rank
    from helpers.run.schema import Energy, Timing

    section = Energy(method="measured", joules=400.0, seconds=4.0, mean_watts=100.0)
    timing = Timing(steady_samples=40, samples_processed=56)
    run = types.SimpleNamespace(
        rank=Rank(0, 2, 0),
        record=types.SimpleNamespace(timing=timing),
        dev=types.SimpleNamespace(type="cpu", torch_device=torch.device("cpu")),
    )
    out = measured_training.job_energy(run, section, node_lead=True)  # one node: its lead read both ranks' devices
    assert out.samples == 80 and out.samples_per_joule == pytest.approx(80 / 400)
    assert out.joules == 400.0  # no collective, no scaling of the node's joules by the ranks


def test_auto_precision_on_a_cpu_says_why_and_keeps_the_probe_beside_the_roofs(
    tiny_model_dir, tiny_data_dir, tmp_path, monkeypatch, capsys
):
    from helpers.measure import precision_probe
    from helpers.run import device, record_destination

    monkeypatch.setattr(device, "cpu_bf16_fast", lambda: True)  # whatever this host's flags
    monkeypatch.setattr(precision_probe, "cpu_probe", real_cpu_probe)  # conftest cans it
    monkeypatch.setattr(precision_probe, "_MEASURED", {})
    monkeypatch.setattr(
        precision_probe,
        "paired_probe",
        lambda: {"ratio": 1.4, "fp32_step_s": 0.7, "bf16_step_s": 0.5, "rounds": 5, "threads": 2},
    )
    run = steps.start(_args(tiny_model_dir, tiny_data_dir, tmp_path, device="cpu"))
    record_destination.release(run.claim)
    section = run.record.precision
    assert run.precision == section.used == section.compute_dtype == run.compute_dtype == "bf16"
    assert section.requested == "auto"
    assert section.auto_reason.startswith("bf16 autocast: probe 1.40x faster than fp32 on this CPU")
    assert section.probe.ratio == 1.4 and (tmp_path / "_peaks" / f"{run.dev.key}.precision.json").exists()
    assert "precision auto: bf16 autocast: probe 1.40x" in capsys.readouterr().out
    given = steps.start(_args(tiny_model_dir, tiny_data_dir, tmp_path, device="cpu", precision="fp32", run_name="x"))
    record_destination.release(given.claim)
    assert given.record.precision.auto_reason is None and given.record.precision.probe is None


def test_stop_at_accuracy_none_trains_to_the_end_and_a_value_stops_at_the_first_evaluation_reaching_it(
    tiny_model_dir, tiny_data_dir, tmp_path
):
    curve_args = dict(eval_every=2, curve_rows=32, lr=5e-3)
    full = steps.run_all(
        _args(tiny_model_dir, tiny_data_dir, tmp_path, run_name="full", stop_at_accuracy=None, **curve_args)
    )
    assert full["status"] == "finished" and full["timing"]["steps"] == 8 and "stopped_early" not in full
    accuracies = [p["val_accuracy"] for p in full["curve"]]
    assert [p["step"] for p in full["curve"]] == [2, 4, 6, 8]
    target = max(accuracies[:-1])  # reached before the last evaluation (same seed: the same curve)
    assert target > 0, accuracies
    stop = next(p["step"] for p in full["curve"] if p["val_accuracy"] >= target)
    early = steps.run_all(
        _args(tiny_model_dir, tiny_data_dir, tmp_path, run_name="early", stop_at_accuracy=target, **curve_args)
    )
    assert early["status"] == "finished" and early["timing"]["steps"] == stop < 8
    assert [p["step"] for p in early["curve"]][-1] == stop and f"step {stop} reached" in early["stopped_early"]
    assert early["metrics"]["test_rows"] == 64  # the stopped model is evaluated as a finished one


INTERRUPTED_RUN = """
import sys
from helpers import steps
from helpers.measure import peaks
from helpers.run.args import build_args
steps.run_all(build_args(dict(model_name=sys.argv[1], data_dir=sys.argv[2], results_path=sys.argv[3], batch=8,
                              max_length=16, epochs=1000, lr=5e-3, progress=False, log_every=1, precision="fp32",
                              run_name="stopped")))
"""


def test_sigint_while_training_is_recorded_as_interrupted_and_frees_the_name(tiny_model_dir, tiny_data_dir, tmp_path):
    import os
    import signal
    import subprocess
    import sys

    proc = subprocess.Popen(
        [sys.executable, "-c", INTERRUPTED_RUN, str(tiny_model_dir), str(tiny_data_dir), str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        # Ctrl-C as a terminal delivers it, even where this test was started in the
        # background (a shell's `&` hands its children SIGINT ignored)
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    seen = []
    for line in proc.stdout:  # a loss line per step: training has begun
        seen.append(line)
        if line.startswith("step") or "loss" in line:
            break
    proc.send_signal(signal.SIGINT)
    out = "".join(seen) + proc.communicate(timeout=120)[0]
    assert proc.returncode != 0, out  # the interrupt still stops the caller
    rec = _only_record(tmp_path)
    assert rec["status"] == "interrupted" and rec["error"] == steps.INTERRUPTED, out
    assert rec["phases"]["train"] > 0, rec["phases"]  # its seconds until the interrupt, not `other`'s
    assert f"train interrupted after {rec['phases']['train']:.1f} s" in headline(rec)
    assert not list(tmp_path.rglob("*.claim"))
    steps.start(_args(tiny_model_dir, tiny_data_dir, tmp_path, run_name="stopped"))  # the name is free again


def test_every_second_of_the_run_is_in_a_phase(tiny_model_dir, tiny_data_dir, tmp_path, capsys):
    """Every phase is in the record, none negative, together no more than the wall, and the training phase
    is the timed windows; each periodic evaluation is timed on its curve point; `make baseline`'s last
    command (helpers.run.records) prints the split."""
    from helpers.run.schema import Phases

    steps.run_all(_args(tiny_model_dir, tiny_data_dir, tmp_path, run_name="wall", eval_every=2, max_steps=6))
    rec = _only_record(tmp_path)
    phases = rec["phases"]
    assert set(Phases.model_fields) - {"reason", "save"} <= set(phases)  # save: only with save_dir
    assert all(v >= 0 for v in phases.values())
    measured = sum(v for k, v in phases.items() if k not in ("wall", "periodic_evals", "other"))
    assert measured <= phases["wall"] + 1e-6  # no second counted twice
    assert measured + phases["other"] == pytest.approx(phases["wall"], rel=1e-9)
    assert phases["train"] == rec["timing"]["train_time_s"] > 0
    assert phases["periodic_evals"] == len(rec["curve"]) == 3
    assert phases["periodic_eval"] == pytest.approx(sum(p["eval_s"] for p in rec["curve"]))
    walls = [p["wall_s"] for p in rec["curve"]]
    assert walls == sorted(walls) and walls[-1] < phases["wall"] - phases["startup"]
    capsys.readouterr()
    records.main([str(tmp_path), "--run", "wall"])
    line = next(x for x in capsys.readouterr().out.splitlines() if x.strip().startswith("wall "))
    assert line.startswith(f"  wall {phases['wall']:.1f} s = start-up ") and "periodic evaluation" in line
    assert "final evaluation" in line and line.endswith("x the training seconds")


@pytest.mark.parametrize("eval_every, evaluations", [(2, 2), (3, 2)])
def test_the_final_evaluation_reuses_a_periodic_one_of_the_same_weights(
    tiny_model_dir, tiny_data_dir, tmp_path, monkeypatch, eval_every, evaluations
):
    """Training that ends on a periodic evaluation's step is not evaluated on the validation split again:
    every 2 steps of 4, steps 2 and 4 are all; every 3, step 3 and the final one."""
    run = steps.start(
        _args(
            tiny_model_dir, tiny_data_dir, tmp_path, run_name=f"every{eval_every}", eval_every=eval_every, max_steps=4
        )
    )
    splits = steps.tokenize(run, steps.load_data(run))
    model = steps.build_model(run)
    real, seen = helpers.run.train.evaluate, []
    monkeypatch.setattr(
        helpers.run.train, "evaluate", lambda m, batches, *a, **kw: seen.append(batches) or real(m, batches, *a, **kw)
    )
    steps.train(run, model, splits)
    out = steps.evaluate(run, model, splits)
    rec = steps.finish(run)
    whole = run.eval_batches[("validation", len(splits["validation"]), False)]
    assert sum(b is whole for b in seen) == evaluations
    assert rec["curve"][-1]["step"] == (4 if eval_every == 2 else 3)
    last = run.last_validation[1]
    assert out["val_accuracy"] == rec["metrics"]["val_accuracy"]
    if eval_every == 2:  # the step-4 evaluation's figures are the final ones
        assert {k: out[f"val_{k}"] for k in last} == last
