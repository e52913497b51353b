"""The plan (graphs per point, estimated seconds and dollars) and the precompile trials; no test asserts a time."""

from __future__ import annotations

import io
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import psutil
import pytest

from helpers.run import records
from helpers.run.args import build_args
from helpers.run.argv import parse_cli
from helpers.study.sweep import graphs, plan, points, precompile, runner, suites
from tests.record_fixtures import write

REPO = Path(__file__).resolve().parents[3]


def synthetic_lengths(model_name=None, data_dir=None) -> dict[str, np.ndarray]:
    """Token lengths of a made-up corpus shaped like the emotion data's (median ~20, a long tail to ~90)."""
    rng = np.random.default_rng(0)
    return {
        split: np.clip(rng.lognormal(3.0, 0.45, n), 4, 90).astype(np.int64)
        for split, n in (("train", 16_000), ("validation", 2_000), ("test", 2_000))
    }


def on_trn1(name: str) -> suites.Suite:
    return suites.retarget(suites.resolve_suite(name), "trainium")


def keys_of(point: suites.Point) -> list[graphs.GraphKey]:
    return precompile.point_graphs(point, synthetic_lengths)


# ----------------------------------------------------------------------------- which graphs a point needs
def test_static_padding_needs_one_training_and_one_evaluation_graph_dynamic_one_per_length():
    found = {
        p.params.get("pad_to_multiple_of", p.params["padding"]): keys_of(p)
        for p in suites.expand(on_trn1("padding"), "full")
    }
    assert [k.kind for k in found["static"]] == ["train", "eval"] and {k.length for k in found["static"]} == {128}
    # rounding to a coarser multiple leaves fewer distinct lengths, hence fewer graphs
    assert len(found["static"]) < len(found[16]) < len(found[8]) < len(found["dynamic"])
    assert all(k.length % 16 == 0 for k in found[16])


def test_graph_keys_follow_what_changes_the_hlo_and_not_what_is_data():
    precision = [keys_of(p) for p in suites.expand(on_trn1("precision"), "full")]
    distinct = {k for ks in precision for k in ks}
    # fp32, bf16, bf16-pure (bf16-pure-sr: the same graph, rounded by the runtime) x L16, L32 x train, eval; seeds share
    assert len(distinct) == 3 * 2 * 2 and {k.precision for k in distinct} == {"fp32", "bf16", "bf16-pure"}
    llrd = {k for p in suites.expand(on_trn1("lr_llrd"), "full") for k in keys_of(p)}
    assert len(llrd) == 3  # LLRD on / off changes the optimizer's graph; lr, the decay factor and seeds are data
    a, b = (build_args({"max_length": 32, "batch": 64, "optlevel": o}) for o in (1, 2))
    assert graphs.graph_keys(a, [32], [32]) != graphs.graph_keys(b, [32], [32])  # compiler flags
    c = build_args({"max_length": 32, "batch": 64, "optlevel": 1, "neuron_cache_dir": "/elsewhere"})
    assert graphs.graph_keys(a, [32], [32]) == graphs.graph_keys(c, [32], [32])  # where the cache is: not a key


def test_predicted_shapes_match_the_committed_padding_records(real_data_dir):
    """The dynamic-padding lengths follow the loader's own order: the quick padding records' shapes exactly."""
    lengths = graphs.data_token_lengths("minilm", str(real_data_dir))
    seen = 0
    for point in suites.expand(on_trn1("padding"), "quick"):
        for rec in records.read_records(REPO / "Experiment/results/padding")[0]:
            if rec["run_name"] != point.run_name or not rec.get("shapes") or not rec.get("xla"):
                continue
            args = build_args(point.params)
            train, evaluate = graphs.padded_lengths(args, lengths)
            counts = {f"{args.train.batch}x{n}": int((train == n).sum()) for n in set(train.tolist())}
            assert counts == rec["shapes"]["counts"], point.run_name
            keys = graphs.graph_keys(args, train, evaluate)
            assert sum(k.kind == "train" for k in keys) == rec["xla"]["train"]["uncached_compiles"]
            assert sum(k.kind == "eval" for k in keys) == rec["xla"]["eval"]["uncached_compiles"]
            seen += 1
    assert seen, "no committed padding record (with shapes and xla) of the current quick points: run the suite"


# ----------------------------------------------------------------------------- the plan's arithmetic
def trn1_frame(names: list[str], variant: str = "full", instance: str | None = None):
    target = plan.target_of("trainium", instance)
    frame, keys = plan.plan_frame([on_trn1(n) for n in names], variant, target, synthetic_lengths)
    return frame, keys, target


def test_shared_graphs_are_compiled_once():
    frame, keys, _ = trn1_frame(["batch_scaling", "seq_len"])
    distinct = {k for ks in keys.values() for k in ks}
    assert frame["new"].sum() == len(distinct) < frame["graphs"].sum()  # repeats and shared shapes pay nothing
    assert (frame.loc[frame["point"].str.endswith("-rep2"), "new"] == 0).all()
    tot = plan.totals(frame, keys).set_index("suite")
    assert tot.loc["whole study", "compile h"] == pytest.approx(len(distinct) * plan.COMPILE_S_PER_GRAPH / 3600)
    # seq_len's L=128 points reuse batch_scaling's batch-64 graphs: fewer new graphs than it has
    assert tot.loc["seq_len", "new graphs"] < tot.loc["seq_len", "distinct graphs"]


def test_a_missing_price_or_figure_gives_a_reason_not_zero():
    frame, keys, target = trn1_frame(["seq_len"], instance="trn9.xlarge")
    assert math.isnan(target.price_per_hour_usd) and frame["usd"].isna().all()
    assert frame["note"].str.contains("no price for trn9.xlarge").all()
    text = plan.render(frame, keys, target, "seq_len --plan")
    head, study = (
        line.split("|")[1:-1]
        for line in text.splitlines()
        if line.startswith("| suite ") or line.startswith("| whole study ")
    )
    study = dict(zip((c.strip() for c in head), (c.strip() for c in study)))
    assert study["usd"] == "n/a" and study["not estimated"] == study["points"] == str(len(frame))
    cpu = plan.plan_frame([suites.resolve_suite("seq_len")], "quick", plan.target_of("nvidia", "m6i.large"))[0]
    assert cpu["train_s"].isna().all() and cpu["note"].str.contains("no published MFU for cpu-2vcpu").all()
    frame, _ = plan.plan_frame(
        [on_trn1("padding")], "full", plan.target_of("trainium"), lambda *_: "no local data (set EMOTION_DATA_DIR)"
    )
    dynamic = frame[frame["point"].str.contains("dynamic")]
    assert dynamic["graphs"].isna().all() and dynamic["note"].str.contains("no local data").all()
    assert frame.loc[~frame.index.isin(dynamic.index), "graphs"].tolist() == [2]  # the static point still counts


def test_a_dynamic_points_time_is_taken_at_its_padded_lengths_not_max_length():
    """Dynamic padding trains mostly far below max_length=128, where the study's trn1 profile has half the
    MFU."""
    frame, _, _ = trn1_frame(["padding"])
    mfu = dict(zip(frame["point"].str.contains("dynamic"), frame["mfu"]))
    at_128, at_32 = plan.assumed_mfu("trn1-core", 128)[0], plan.assumed_mfu("trn1-core", 32)[0]
    assert mfu[False] == pytest.approx(at_128)  # static: every batch at max_length
    assert at_32 <= mfu[True] < at_128


def test_the_assumed_mfu_names_its_published_source():
    for device, length in (("trn1-core", 32), ("trn1-core", 128), ("a100-40gb", 32)):
        mfu, source = plan.assumed_mfu(device, length)
        assert 0 < mfu < 1 and "Experiment/published" in source


def test_only_the_card_the_study_ran_lends_its_mfu_and_a_rank_is_one_neuroncore():
    assert math.isnan(plan.assumed_mfu("a100-80gb", 32)[0])  # the study's A100 was the 40GB card
    assert plan.target_of("trainium").device == "trn1-core" and plan.target_of("nvidia").device == "l4"
    assert set(plan.NO_FAST_BF16) == {"t4"}  # Turing: fp16 tensor cores only


def test_a_point_modelled_past_its_timeout_is_marked_and_counted():
    frame, keys, _ = trn1_frame(["padding"])
    limit = suites.timeout_of(on_trn1("padding"), "full")
    modelled = frame["compile_s"] + frame["train_s"] + frame["eval_s"]
    marked = frame["note"].str.contains(plan.WILL_TIME_OUT)
    assert marked.tolist() == (modelled > limit).tolist() and marked.any()  # the unrounded dynamic point
    assert not marked[~frame["point"].str.contains("dynamic")].any()
    assert plan.totals(frame, keys).set_index("suite").loc["whole study", "will time out"] == marked.sum()


@pytest.mark.parametrize(
    "modelled, compiling, says",
    [
        (16_036, 15_900, "WILL TIME OUT unless precompiled: 16,036 s modelled, 15,900 of them compiling"),
        (16_036, 100, "WILL TIME OUT: 16,036 s modelled against its 14,400 s timeout"),
        (14_000, 13_000, ""),
        (math.nan, 0, ""),
    ],
)
def test_the_timeout_mark_says_whether_precompiling_brings_a_point_within(modelled, compiling, says):
    assert plan.timeout_mark(modelled, compiling, 14_400).startswith(says) and bool(says) == bool(
        plan.timeout_mark(modelled, compiling, 14_400)
    )


def test_a_gpu_plan_names_no_neuron_compiler():
    text = plan.plan_text([suites.resolve_suite("seq_len")], "quick", "nvidia", "g6.xlarge", "seq_len --plan")
    assert "neuronx-cc" not in text and "eager CUDA compiles no graphs" in text
    assert "neuronx-cc" in plan.plan_text([on_trn1("seq_len")], "quick", "trainium", None, "seq_len --plan")


def test_plan_runs_no_point(tmp_path, monkeypatch, capsys):
    def refuse(*args, **kwargs):
        raise AssertionError("--plan ran something")

    monkeypatch.setattr(points, "run_point", refuse)
    monkeypatch.setattr(points, "device_of", refuse)
    results, runs = tmp_path / "results", tmp_path / "runs"
    runner.main(
        [
            "seq_len",
            "--variant",
            "full",
            "--target",
            "trainium",
            "--plan",
            "--results",
            str(results),
            "--runs-dir",
            str(runs),
        ]
    )
    out = capsys.readouterr().out
    assert "## Totals" in out and "| whole study " in out and "seq_len-full-max_length=16" in out
    assert not results.exists() and not runs.exists()  # no record, no notebook


# ----------------------------------------------------------------------------- precompile
def test_one_trial_per_new_graph_not_per_point():
    trials = precompile.trials([on_trn1("lr_llrd"), on_trn1("precision")], "full", synthetic_lengths)
    names = [t.point for t in trials]
    assert len(names) == 2 + 5  # lr_llrd: LLRD off, on; precision: 6 shapes x precisions, less the one lr_llrd made
    # lr_llrd's LLRD-0.95 L=32 graphs (training, evaluation) are precision's bf16 L=32 ones
    assert sum(t.new_graphs for t in trials) == 3 + 12 - 2
    assert not any("bf16-pure-sr" in n for n in names)


def test_precompile_command_is_the_points_own_run_with_a_few_steps(tmp_path):
    point = suites.expand(on_trn1("seq_len"), "full")[0]
    params = precompile.trial_params(point.params, point.run_name, "seq_len", tmp_path)
    cmd = precompile.precompile_command("/venv/bin/python", params)
    assert cmd[:3] == ["neuron_parallel_compile", "/venv/bin/python", "Trainium/train.py"]
    args = parse_cli(cmd[3:])  # what Trainium/train.py will read
    assert args.train.max_steps == precompile.TRIAL_STEPS and args.measure.run_name.endswith("-precompile")
    assert args.measure.results_path == str(tmp_path) and args.measure.eval_every is None
    full = build_args(point.params)
    assert graphs.graph_keys(args, [args.task.max_length], [args.task.max_length]) == graphs.graph_keys(
        full, [full.task.max_length], [full.task.max_length]
    )  # the trial compiles the point's graphs


def test_without_neuron_parallel_compile_it_says_so_and_what_would_run(monkeypatch):
    monkeypatch.setattr(precompile.shutil, "which", lambda name: None)
    out = io.StringIO()
    state = precompile.precompile([on_trn1("seq_len")], "full", out=out)
    text = out.getvalue()
    assert not state["ran"] and "not on PATH" in text and "nothing was precompiled" in text
    assert text.count("neuron_parallel_compile ") >= 4 and "--max_steps=10" in text


def test_a_trial_hands_neuron_parallel_compile_the_points_cache_and_one_retry(monkeypatch, tmp_path):
    """neuron_parallel_compile compiles in its own process: the cache must be in its environment, not only
    in the trial's child (which sets NEURON_CC_FLAGS itself, too late for the tool)."""
    suite = on_trn1("seq_len")
    point = suites.expand(suite, "full")[0]
    params = {
        **precompile.trial_params(point.params, point.run_name, "seq_len", tmp_path),
        "neuron_cache_dir": str(tmp_path / "cache"),
    }
    env = precompile.trial_env(params)
    assert f"--cache_dir={tmp_path / 'cache'}" in env["NEURON_CC_FLAGS"]
    assert env["NEURON_COMPILE_CACHE_URL"] == str(tmp_path / "cache")
    assert env["NEURON_PARALLEL_COMPILE_MAX_RETRIES"] == "1"
    seen = tmp_path / "seen"
    tool = tmp_path / "neuron_parallel_compile"  # what the tool's own process finds in its environment
    tool.write_text(f'#!/bin/sh\necho "$NEURON_PARALLEL_COMPILE_MAX_RETRIES ${{NEURON_CC_FLAGS:+set}}" >> {seen}\n')
    tool.chmod(0o755)
    precompile.precompile([suite], "full", out=io.StringIO(), tool=str(tool))
    ran = seen.read_text().splitlines()
    assert ran and all(line == "1 set" for line in ran)


def test_a_trial_past_its_limit_is_killed_with_its_compilers(monkeypatch, tmp_path):
    monkeypatch.setattr(precompile, "TRIAL_START_S", 0.5)
    monkeypatch.setattr(precompile, "COMPILE_S_PER_GRAPH", 0.0)
    pid = tmp_path / "pid"
    tool = tmp_path / "neuron_parallel_compile"  # a compile that hangs, in a child of the tool
    tool.write_text(f"#!/bin/sh\nsleep 60 &\necho $! > {pid}\nwait\n")
    tool.chmod(0o755)
    trial = precompile.Trial("seq_len", "p", 1, ["neuron_parallel_compile", "python"], {})
    assert precompile.run_trial(str(tool), trial) is None  # killed, not waited for 60 s
    assert not psutil.pid_exists(int(pid.read_text())) or psutil.Process(int(pid.read_text())).status() == "zombie"
    out = io.StringIO()
    monkeypatch.setattr(precompile, "trials", lambda suites, variant: [trial])
    precompile.precompile([], "quick", out=out, tool=str(tool))
    assert "killed after its limit of 0 s" in out.getvalue()


def test_the_tool_is_found_beside_the_trials_python_off_path(monkeypatch, tmp_path):
    monkeypatch.setattr(precompile.shutil, "which", lambda name: None)
    (tmp_path / "python").touch()
    trial = precompile.Trial("seq_len", "p", 1, ["neuron_parallel_compile", str(tmp_path / "python")], {})
    assert precompile.find_tool([trial]) is None
    (tmp_path / "neuron_parallel_compile").touch()  # .venv-neuron/bin has it; PATH need not
    assert precompile.find_tool([trial]) == str(tmp_path / "neuron_parallel_compile")


def test_a_dynamic_point_with_many_graphs_is_precompiled_a_few_graphs_at_a_time():
    """The unrounded dynamic-padding point meets dozens of lengths; no trial hands the tool more than the
    limit,
    and the trials together still cover every graph of the point."""
    suite = on_trn1("padding")
    point = next(
        p
        for p in suites.expand(suite, "full")
        if p.params["padding"] == "dynamic" and not p.params.get("pad_to_multiple_of")
    )
    every = precompile.trials([suite], "full", synthetic_lengths)
    found = [t for t in every if t.point == point.run_name]
    assert len(keys_of(point)) > 2 * precompile.MAX_GRAPHS_PER_TRIAL and len(found) > 2
    handed = [t.new_graphs for t in every]
    assert all(0 < n <= precompile.MAX_GRAPHS_PER_TRIAL for n in handed), handed
    # each distinct graph of the suite is handed over exactly once
    assert sum(handed) == len({k for p in suites.expand(suite, "full") for k in keys_of(p)})
    parts = [parse_cli(t.command[3:]) for t in found[:-1]]  # prefixes of the point's steps, then of its rows
    assert all(a.task.model_name == build_args(point.params).task.model_name for a in parts)
    train_parts = [a.train.max_steps for a in parts if a.train.max_steps > 1]
    eval_parts = [a.task.eval_subset for a in parts if a.train.max_steps == 1]
    assert train_parts == sorted(set(train_parts)) and eval_parts == sorted(set(eval_parts))
    last = parse_cli(found[-1].command[3:])  # the point's own trial: its whole run, as before
    assert (
        last.measure.run_name == f"{point.run_name}-precompile"
        and last.train.max_steps == build_args(point.params).train.max_steps
    )


def test_cache_report_counts_hits_and_misses(tmp_path):
    cache, results = tmp_path / "cache", tmp_path / "results"
    for module in ("MODULE_a", "MODULE_b", "MODULE_c"):
        (cache / "neuronxcc-2.26" / module).mkdir(parents=True)
        (cache / "neuronxcc-2.26" / module / "model.neff").write_bytes(b"")
    suite = on_trn1("seq_len")
    names = [p.run_name for p in suites.expand(suite, "full")][:2]
    state = {"cache": str(cache), "started": "2026-01-01T00:00:00+00:00", "ran": True, "precompiled": 2}
    for name, n in zip(names, (3, 2)):
        write(
            results / "seq_len" / f"{name}@xla-neuron.json",
            {
                "schema_version": 5,
                "run_id": name,
                "run_name": name,
                "suite": "seq_len",
                "status": "finished",
                "params": {},
                "finished_at": "2026-01-02T00:00:00+00:00",
                "xla": {"graph_compilations": n, "compile_time_s": 1.5},
            },
        )
    report = precompile.cache_report(state, [suite], "full", results, out=io.StringIO())
    assert report == {"runs": 2, "compilations": 5, "compile_s": 3.0, "misses": 1, "hits": 4}


# ----------------------------------------------------------------------------- the plan against torch-xla
@pytest.mark.xla
@pytest.mark.slow
@pytest.mark.parametrize("padding", ["static", "dynamic"])
def test_a_tiny_points_compilations_match_the_plan(padding, tiny_model_dir, tiny_data_dir, tmp_path):
    """A 2-layer hidden-64 BERT, 3 steps, in a fresh process (torch-xla's graph cache is process-wide)."""
    pytest.importorskip("torch_xla", reason="needs torch-xla: run in .venv-xla (make test-xla)")
    params = dict(
        model_name=str(tiny_model_dir),
        data_dir=str(tiny_data_dir),
        device="xla",
        batch=8,
        max_length=32,
        padding=padding,
        precision="fp32",
        max_steps=3,
        log_every=3,
        eval_subset=16,
        xla_fast_compile=True,
        progress=False,
        results_path=str(tmp_path),
    )
    args = build_args(params)
    lengths = graphs.data_token_lengths(str(tiny_model_dir), str(tiny_data_dir))
    keys = graphs.graph_keys(args, *graphs.padded_lengths(args, lengths), bf16_fast=False)
    code = (
        "import json; from helpers import steps; from helpers.run.args import build_args; "
        f"rec = steps.run_all(build_args({params!r})); print('XLA', json.dumps(rec['xla']))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=REPO,
        env={**os.environ, "PJRT_DEVICE": "CPU", "PYTHONPATH": str(REPO)},
    )
    line = next((x for x in out.stdout.splitlines() if x.startswith("XLA ")), None)
    assert line, out.stdout[-2000:] + out.stderr[-3000:]
    xla = json.loads(line[4:])
    assert xla["train"]["uncached_compiles"] == sum(k.kind == "train" for k in keys)
    assert xla["eval"]["uncached_compiles"] == sum(k.kind == "eval" for k in keys)
    assert xla["graph_compilations"] == len(keys)
