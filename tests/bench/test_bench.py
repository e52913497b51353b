"""bench/ (harness, cases, render, __main__): the timed windows, the sections on a tiny model, the
Markdown."""

import argparse
import json
import re
from pathlib import Path

import pytest
import torch
from bench_cli import run_bench
from conftest import tiny_bert_config
from transformers import BertForSequenceClassification

import bench.harness
from bench import cases, render
from helpers.measure.timing import StepTimer
from helpers.run import train
from helpers.run.device import resolve_device
from helpers.run.optim import build_optimizer, build_scheduler
from helpers.run.precision import grad_scaler

CPU = resolve_device("cpu")


class FakeClock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


def test_alternate_rotates_order_skips_warmup_and_takes_medians():
    clock, order = FakeClock(), []
    seconds = {"a": [9.0, 1.0, 2.0, 4.0, 2.0, 1.0], "b": [9.0, 4.0, 4.0, 8.0, 4.0, 2.0]}

    def workload(name):
        def run():
            order.append(name)
            clock.t += seconds[name][sum(1 for n in order if n == name) - 1]
            return {"samples": 8, "flops": 80}

        return run

    syncs = []
    rates = bench.harness.alternate(
        {"a": workload("a"), "b": workload("b")}, windows=5, warmup=1, sync=lambda: syncs.append(1), clock=clock
    )
    assert order == ["a", "b", "b", "a", "a", "b", "b", "a", "a", "b", "b", "a"]  # rotated each round
    assert len(syncs) == 2 * len(order)  # the device is synced before every clock read
    assert [w["seconds"] for w in rates["a"]] == [1.0, 2.0, 4.0, 2.0, 1.0]  # warm-up window dropped
    assert bench.harness.median_rate(rates, "a") == pytest.approx(8 / 2.0)
    assert bench.harness.median_rate(rates, "b", "flops") == pytest.approx(80 / 4.0)
    assert bench.harness.ratio(rates, "a", "b") == pytest.approx(2.0)


def test_a_workload_may_time_its_own_loop():
    clock = FakeClock()

    def setup_then_loop():
        clock.t += 100.0  # per-call setup the workload leaves out of its own loop time
        return {"samples": 8, "seconds": 0.5}

    rates = bench.harness.alternate({"w": setup_then_loop}, windows=5, warmup=1, clock=clock)
    assert [w["samples"] for w in rates["w"]] == [16.0] * 5
    assert [w["seconds"] for w in rates["w"]] == [0.5] * 5


def test_the_matmul_window_counts_its_repeats_flops():
    window = bench.harness.matmul_window((8, 16, 4), torch.float32, reps=3)()
    assert window["flops"] == 2 * 8 * 16 * 4 * 3 and window["seconds"] > 0


def test_timed_loader_records_one_wait_per_batch():
    loader = bench.harness.TimedLoader([{"x": torch.zeros(2)}] * 3)
    assert len(loader) == 3 and len(list(loader)) == 3 and len(loader.wait_s) == 3
    assert all(w >= 0 for w in loader.wait_s)


def _model():
    torch.manual_seed(0)  # dropout stays on: both loops must draw the same masks in the same order
    return BertForSequenceClassification(tiny_bert_config(vocab_size=200))


def _batches(n, batch=4, length=12):
    g = torch.Generator().manual_seed(0)
    return [
        {
            "input_ids": torch.randint(1, 200, (batch, length), generator=g),
            "attention_mask": torch.ones(batch, length, dtype=torch.long),
            "labels": torch.randint(0, 6, (batch,), generator=g),
        }
        for _ in range(n)
    ]


@pytest.mark.parametrize("precision", ["fp32", "bf16", "fp16"])  # fp16: both scale the loss (GradScaler)
def test_bare_loop_and_fit_do_the_same_work(precision):
    """Same seed, batches, optimizer and schedule: identical weights after N steps, so the ratio is fair."""
    batches, harness, bare = _batches(6), _model(), _model()
    opts = [build_optimizer(m, 1e-3, 0.9, 0.01) for m in (harness, bare)]
    scheds = [build_scheduler(o, 6, 0.5) for o in opts]
    torch.manual_seed(1)
    train.fit(
        harness,
        batches,
        opts[0],
        scheds[0],
        CPU,
        precision,
        epochs=1,
        log_every=2,
        progress=False,
        max_grad_norm=0.5,
        timer=StepTimer(),
    )
    torch.manual_seed(1)
    bench.harness.bare_loop(
        bare,
        batches,
        opts[1],
        scheds[1],
        precision,
        "cpu",
        max_grad_norm=0.5,
        scaler=grad_scaler(precision, "cpu"),
    )  # as bench.harness.bare_window passes it
    for (name, a), (_, b) in zip(harness.named_parameters(), bare.named_parameters()):
        assert torch.equal(a, b), name
    assert not torch.equal(harness.classifier.weight, _model().classifier.weight)  # it did train


def _fake_results():
    rates = lambda a, b: {
        "x": [{"samples": a, "flops": 1e12 * a, "seconds": 1.0}] * 5,  # noqa: E731
        "y": [{"samples": b, "flops": 1e12 * b, "seconds": 1.0}] * 5,
    }
    ov = rates(99.0, 100.0)
    ov = {"fit (harness)": ov["x"], "bare loop": ov["y"], "Trainer": ov["y"]}
    sp = rates(120.0, 10.0)
    sp = {"optimized preset": sp["x"], "baseline preset": sp["y"], "matmul peak": [{"flops": 2e14, "seconds": 1.0}] * 5}
    return {
        "overhead": {"config": {**cases.OVERHEAD_CFG}, "precision": "bf16", "rates": ov, "steps_per_window": 3},
        "speedup": {
            "model": "bert-base-random",
            "baseline": {},
            "optimized": {},
            "precision": "bf16",
            "rates": sp,
            "steps_per_window": 3,
            "peak": {"precision": "bf16", "source": "measured", "scan": {"square 1024": 0.2}},
            "stall": {
                "micro_batches": 15,
                "wait_median_ms": 1.0,
                "wait_max_ms": 2.0,
                "step_median_ms": 500.0,
                "stall_fraction": 0.002,
            },
        },
        "accuracy": {
            "rows": 100,
            "epochs": 1,
            "runs": {
                p: {
                    "status": "finished",
                    "test_accuracy": acc,
                    "test_macro_f1": 0.5,
                    "val_accuracy": acc,
                    "samples_per_s": 10.0,
                    "train_time_s": 5.0,
                    "steps": 4,
                    "precision": "bf16",
                }
                for p, acc in (("baseline", 0.6), ("optimized", 0.7))
            },
        },
        "data": {"rows": 16000, "max_length": 32, "padding": "static", "tokenize_s": [1.0, 2.0, 3.0]},
        "levers": {
            "steps_per_window": 3,
            "reference": {},
            "levers": [
                {
                    "name": "bf16 autocast vs fp32",
                    "control": {},
                    "variant": {},
                    "control_samples_per_s": 1.0,
                    "variant_samples_per_s": 3.0,
                    "ratio": 3.0,
                    "warmup_s": 9.0,
                    "rates": {"control": [{"samples": 1.0}] * 5, "variant": [{"samples": 3.0}] * 5},
                }
            ],
        },
    }


META = {
    "command": "python -m bench",
    "date": "2026-01-01 00:00",
    "machine": "cpu (AVX2)",
    "torch": "2",
    "transformers": "5",
    "threads": 2,
    "load_start": 0.5,
    "load_end": 0.7,
}


def _cells(block: str) -> list[list[str]]:
    """Return the Markdown table lines of `block` as stripped cells, alignment colons reduced to '---' / '--:'."""
    lines = [line.strip("|").split("|") for line in block.splitlines() if line.startswith("|")]
    return [[re.sub(r"^:?-+(:?)$", lambda m: "--:" if m[1] else "---", c.strip()) for c in cells] for cells in lines]


def test_report_has_every_section_and_its_verdict():
    blocks = render.render(_fake_results(), META)
    main = blocks["main"]
    assert main.startswith("_Written by `python -m bench`")
    for heading in (
        "### 1. Harness overhead",
        "### 2. `fit` vs Hugging Face `Trainer`",
        "### 3. Optimized preset",
        "### 4. MFU",
        "### 5. Data pipeline",
        "### Accuracy",
    ):
        assert heading in main
    assert (
        "**fit / bare loop = 0.990x (median of 5 per-round ratios, range 0.990 .. 0.990; ratio of "
        "medians 0.990x)** (target >= 0.97x: met)"
    ) in main
    assert "**fit / Trainer = 0.990x (median of 5" in main and "(target >= 1.0x: **not met**)" in main
    assert "**optimized / baseline samples/s = 12.000x (median of 5" in main
    assert "**MFU = 60.0%**" in main  # 120 TFLOP/s of a 200 TFLOP/s peak timed in the same rounds
    assert "median of 3 = **2.00 s**" in main and "**+0.1000**" in main
    lever = ["bf16 autocast vs fp32", "`{}`", "`{}`", "1.00", "3.00", "3.000x", "3.000 .. 3.000", "9.0"]
    assert _cells(blocks["levers"])[2] == lever
    header, align, *rows = _cells(main)[:5]
    assert header == ["configuration", "median samples/s", "min .. max", "windows"]
    assert align == ["---", "--:", "--:", "--:"]  # configurations left, figures right
    assert rows == [
        ["fit (harness)", "99", "99 .. 99", "5"],
        ["bare loop", "100", "100 .. 100", "5"],
        ["Trainer", "100", "100 .. 100", "5"],
    ]
    empty = render.render({}, META)["main"]
    assert empty.count("Not measured in this run") == 5 and "levers" not in render.render({}, META)


@pytest.mark.parametrize(
    "fit, verdict",
    [
        ((0.98, 0.99, 1.0), "met"),
        ((0.90, 0.92, 0.95), "**not met**"),
        ((0.90, 0.99, 1.06), "**not resolved**: its rounds fall on both sides (0.900 .. 1.060)"),
    ],
)
def test_a_verdict_follows_the_rounds_and_says_when_they_span_the_target(fit, verdict):
    """fit / bare loop against 0.97: every round above, every round below, and rounds on both sides (a
    median of 0.99 alone would say met)."""
    rates = {
        "fit (harness)": [{"samples": f} for f in fit],
        "bare loop": [{"samples": 1.0}] * 3,
        "Trainer": [{"samples": 1.0}] * 3,
    }
    ov = {"config": {**cases.OVERHEAD_CFG}, "precision": "bf16", "rates": rates, "steps_per_window": 3}
    main = render.render({"overhead": ov}, META)["main"]
    assert f"(target >= 0.97x: {verdict})." in main


def test_paired_ratios_cancel_a_drifting_machine():
    # the machine slows down 2x over the run; the harness is always 10% slower than the bare loop
    speed = [1.0, 1.5, 2.0, 2.0, 2.0]
    rates = {"fit": [{"samples": 9.0 / s} for s in speed], "bare": [{"samples": 10.0 / s} for s in speed[1:] + [1.0]]}
    assert bench.harness.paired_ratios(rates, "fit", "bare")[0] == pytest.approx(0.9 * 1.5)  # rounds misaligned
    rates["bare"] = [{"samples": 10.0 / s} for s in speed]
    assert bench.harness.paired_ratios(rates, "fit", "bare") == pytest.approx([0.9] * 5)
    med, text = bench.harness.paired_text(rates, "fit", "bare")
    assert med == pytest.approx(0.9) and "range 0.900 .. 0.900" in text


def test_render_raw_keeps_the_latest_of_each_section_and_lever_with_its_command(tmp_path):
    results = _fake_results()
    raw = tmp_path / "bench.jsonl"
    stale = {
        **results["overhead"],
        "rates": {k: [{"samples": 1.0, "seconds": 1.0}] * 5 for k in results["overhead"]["rates"]},
    }
    later = {**META, "command": "python -m bench --sections overhead", "date": "2026-01-02 00:00"}
    old_lever = {**results["levers"]["levers"][0], "name": "batch 128 vs 64"}
    rows = [
        (META, "overhead", stale),
        (META, "speedup", results["speedup"]),
        (META, "levers", {**results["levers"], "levers": [old_lever, results["levers"]["levers"][0]]}),
        (later, "overhead", results["overhead"]),
        (later, "levers", results["levers"]),
    ]
    with open(raw, "w") as f:
        for meta, section, result in rows:
            f.write(json.dumps({"meta": meta, "section": section, "result": result}) + "\n")
    blocks = render.render_raw(raw)
    main = blocks["main"]
    assert "\n\n_speedup: written by `python -m bench` on 2026-01-01" in main
    assert main.startswith("_overhead: written by `python -m bench --sections overhead` on 2026-01-02")
    assert "fit / bare loop = 0.990x" in main and "**optimized / baseline samples/s = 12.000x" in main
    # the lever measured again later is shown once, from the later run; the other one from the first
    levers = blocks["levers"]
    assert levers.count("| bf16 autocast vs fp32 |") == 1 and levers.count("| batch 128 vs 64 |") == 1
    assert (
        levers.index("| batch 128 vs 64 |")
        < levers.index("--sections overhead")
        < levers.index("| bf16 autocast vs fp32 |")
    )


def _lever(name: str, ratio: float) -> dict:
    """Return a lever's raw result whose variant runs `ratio` times its control's samples/s in every round."""
    lever = {**_fake_results()["levers"]["levers"][0], "name": name, "variant_samples_per_s": ratio}
    return lever | {"rates": {"control": [{"samples": 1.0}] * 5, "variant": [{"samples": ratio}] * 5}}


def test_render_raw_puts_each_levers_run_in_the_block_its_command_wrote(tmp_path):
    """A run of a few lever sections (`--sections optim`) wrote `bench:levers-optim`, a `--sections levers` run
    `bench:levers`: rendering the raw windows again gives the same blocks, not every lever row in one."""
    raw, base = tmp_path / "bench.jsonl", _fake_results()["levers"]
    optim = {**META, "command": "python -m bench --sections optim --model minilm"}
    rows = [
        ({**optim, "date": "2026-01-01 00:00"}, [_lever("fused vs for-loop AdamW", 1.5)]),
        ({**optim, "date": "2026-01-01 00:00"}, [_lever("fused vs for-loop AdamW", 1.25)]),  # the run's later record
        ({**META, "command": "python -m bench --sections attention threads --windows 3"}, [_lever("SDPA", 0.5)]),
        ({**META, "command": "python -m bench --sections levers --lever L=32"}, [_lever("L=32 vs L=64", 2.0)]),
        ({**META, "command": "python -m bench --sections levers --lever bf16"}, [_lever("bf16 weights", 0.75)]),
    ]
    raw.write_text(
        "".join(json.dumps({"meta": m, "section": "levers", "result": base | {"levers": x}}) + "\n" for m, x in rows)
    )
    blocks = render.render_raw(raw)
    assert list(blocks) == ["levers-optim", "levers-attention-threads", "levers"]
    assert [c[5] for c in _cells(blocks["levers-optim"])[2:]] == ["1.250x"]
    assert "--sections optim --model minilm` on 2026-01-01" in blocks["levers-optim"]
    assert [c[0] for c in _cells(blocks["levers-attention-threads"])[2:]] == ["SDPA"]
    # the two `--sections levers` runs share one block, each table under its own command line
    levers = blocks["levers"]
    assert [c[0] for c in _cells(levers) if c[0] not in ("lever", "---")] == ["L=32 vs L=64", "bf16 weights"]
    assert levers.index("--lever L=32`") < levers.index("| L=32 vs L=64") < levers.index("--lever bf16`")


@pytest.mark.parametrize(
    "command, block",
    [
        ("python -m bench --sections levers --lever compile", "levers"),
        ("python -m bench --sections levers optim", "levers"),  # the whole table asked for: its rows join it
        ("python -m helpers.study.bench --sections compile --model minilm", "levers-compile"),
        ("python -m bench --sections attention threads", "levers-attention-threads"),
        ("python -m bench", "levers"),
    ],
)
def test_a_levers_command_names_the_block_its_rows_go_to(command, block):
    assert render.lever_block(command) == block


def test_write_blocks_replaces_generated_text_and_keeps_the_rest(tmp_path):
    path = tmp_path / "BENCHMARKS.md"
    render.write_blocks(path, {"main": "first"})
    path.write_text(path.read_text() + "\nhand-written notes\n")
    render.write_blocks(path, {"main": "second", "levers": "table"})
    text = path.read_text()
    assert "first" not in text and "second" in text and "hand-written notes" in text
    assert text.index("<!-- bench:main begin -->") < text.index("hand-written notes") < text.index("table")
    render.write_blocks(path, {"levers": "table 2"})
    assert text.replace("table", "table 2") == path.read_text()


def test_another_machines_raw_windows_render_beside_this_machines_blocks(tmp_path):
    from bench.__main__ import main as bench_main

    results, raw, out = _fake_results(), tmp_path / "bench-gpu.jsonl", tmp_path / "BENCHMARKS.md"
    raw.write_text(json.dumps({"meta": META, "section": "overhead", "result": results["overhead"]}) + "\n")
    render.write_blocks(out, {"main": "this machine's figures"})
    bench_main(["--render", str(raw), "--out", str(out), "--block-prefix", "h200-"])
    text = out.read_text()
    assert "this machine's figures" in text  # its block kept
    assert text.index("<!-- bench:h200-main begin -->") < text.index("fit / bare loop = 0.990x")


@pytest.mark.parametrize("step_mode", ["eager", "compile"])  # compile: fit, the bare loop and Trainer compiled
def test_overhead_section_runs_end_to_end_on_a_tiny_model(tiny_model_dir, tiny_data_dir, monkeypatch, step_mode):
    monkeypatch.setattr(cases, "OVERHEAD_CFG", {**cases.OVERHEAD_CFG, "batch": 8})
    args = argparse.Namespace(
        data_dir=str(tiny_data_dir),
        device="cpu",
        windows=2,
        warmup=1,
        steps=2,
        model=str(tiny_model_dir),
        gate=None,
        step_mode=step_mode,
    )
    out = cases.overhead_section(args, sync=lambda: None)
    assert out["config"]["step_mode"] == step_mode
    assert set(out["rates"]) == {"fit (harness)", "bare loop", "Trainer"}
    for windows in out["rates"].values():
        assert len(windows) == 2 and all(w["samples"] > 0 and w["flops"] > 0 for w in windows)


def test_mfu_is_per_round_against_the_peak_timed_beside_it_else_the_published_one_else_not_measured():
    sp = _fake_results()["speedup"]
    # the machine drifts: rounds 2-3 run both sides twice as fast, rounds 4-5 the peak alone
    optimized = [{"samples": 120.0, "flops": 1.2e14 * f, "seconds": 1.0} for f in (1, 2, 2, 1, 1)]
    peak = [{"flops": 2e14 * f, "seconds": 1.0} for f in (1, 2, 2, 2, 2)]
    rates = {**sp["rates"], "optimized preset": optimized, "matmul peak": peak}
    main = render.render({"speedup": {**sp, "rates": rates}}, META)["main"]
    # per round 0.6, 0.6, 0.6, 0.3, 0.3: median 0.6 (the ratio of the medians, 120 / 400, would say 0.3)
    assert "**MFU = 60.0%**" in main and "median 0.600 of 5 rounds, range 0.300 .. 0.600" in main
    rates = {k: v for k, v in sp["rates"].items() if k != "matmul peak"}
    peak = {**sp["peak"], "peak_tflops": 240.0}
    published = render.render({"speedup": {**sp, "rates": rates, "peak": peak}}, META)["main"]
    assert "**MFU = 50.0%**" in published and "Per round" not in published
    peak = {"precision": "bf16", "source": "unknown GPU"}
    unknown = render.render({"speedup": {**sp, "rates": rates, "peak": peak}}, META)["main"]
    assert "**MFU = not measured** (target >= 40%: not measured)" in unknown
    assert "Peak: unknown GPU" in unknown


def test_the_bench_command_writes_its_block_and_the_raw_row(tiny_model_dir, tiny_data_dir, monkeypatch, tmp_path):
    monkeypatch.setattr(cases, "OVERHEAD_CFG", {**cases.OVERHEAD_CFG, "batch": 8})
    sizes = ["--windows", "2", "--warmup", "1", "--steps", "2"]
    (row,) = run_bench(tmp_path, tiny_data_dir, "--model", str(tiny_model_dir), "--sections", "overhead", *sizes)
    assert row["section"] == "overhead"
    assert set(row["result"]["rates"]) == {"fit (harness)", "bare loop", "Trainer"}
    assert row["meta"]["command"].startswith("python -m bench --device cpu")
    assert "fit / bare loop" in (tmp_path / "BENCH.md").read_text()
    assert render.render_raw(tmp_path / "results" / "_bench" / "bench.jsonl")["main"].count("fit / bare loop") == 1


def _eval_args(model_dir, data_dir, **extra) -> argparse.Namespace:
    """Return the eval section's arguments on the tiny model and data: 2 windows, 4 training steps."""
    return argparse.Namespace(
        data_dir=str(data_dir),
        device="cpu",
        windows=2,
        warmup=0,
        gate=None,
        eval_model=str(model_dir),
        eval_train_steps=4,
        **extra,
    )


def test_eval_section_times_both_evaluations_and_finds_them_equal(tiny_model_dir, tiny_data_dir):
    """Evaluation before and after the sorted, built-once loader, alternated: both sides count every row, agree on accuracy and on
    every row's prediction, and the section renders its ratio with the verdict."""
    out = cases.eval_section(_eval_args(tiny_model_dir, tiny_data_dir), sync=lambda: None)
    # before, after, eager attention (one thread), CUDA's 256 rows a batch against a CPU's 64
    assert [len(w) for w in out["rates"].values()] == [2, 2, 2, 2] and out["batch_rows"]["after"] == 64
    assert all(w["samples"] > 0 for windows in out["rates"].values() for w in windows)
    assert out["figures"]["before"]["rows"] == out["figures"]["after"]["rows"] == out["rows"] == 64
    assert out["same_predictions"]
    assert out["figures"]["before"]["accuracy"] == out["figures"]["after"]["accuracy"]
    text = render.render({"eval": out}, META)["eval"]
    assert "after / before rows/s = " in text and "identical" in text and "**different**" not in text
    assert "before and after the sorted, built-once loader" in text and not re.search(r"issue \d|#\d", text)


def test_eval_section_times_each_inference_lever_against_the_current_evaluation(tiny_model_dir, tiny_data_dir):
    """Under bf16 autocast the levers are bf16 weights, eager attention (one thread: no half of them) and the
    other device type's batch, each alternated with the rest, with the rows its predictions differ on; the block
    gives each one's ratio."""
    out = cases.eval_section(_eval_args(tiny_model_dir, tiny_data_dir, eval_precision="bf16"), sync=lambda: None)
    levers = {"bf16 weights (a copy)", "eager attention", "256 rows a batch"}
    assert out["precision"] == "bf16" and set(out["levers"]) == levers
    assert all(len(out["rates"][name]) == 2 for name in out["levers"])
    assert all(0 <= lever["rows_predicted_apart"] <= 64 for lever in out["levers"].values())
    assert out["figures"]["bf16 weights (a copy)"]["rows"] == out["figures"]["256 rows a batch"]["rows"] == 64
    text = render.render({"eval": out}, META)["eval"]
    assert all(f"- **{name} / after rows/s = " in text for name in levers)


def test_a_live_run_counts_the_windows_of_every_section_its_levers_included():
    # the levers section's levers are sections with windows; the eval section's a dict of figures, no windows
    window = {"samples": 10.0, "seconds": 1.0, "other_cores": 0.9}
    results = {
        "levers": {"levers": [{"rates": {"control": [window], "variant": [window]}}]},
        "eval": {"rates": {"after": [window]}, "levers": {"eager attention": {"rows_predicted_apart": 0}}},
    }
    head = render._head(results, META | {"max_other_cores": 0.5})
    assert "3 of 3 windows started without that" in head


def test_the_eval_levers_follow_the_precision_and_the_threads():
    assert set(cases.eval_levers("fp32", 1)) == {"eager attention"}
    assert set(cases.eval_levers("bf16", 4)) == {"eager attention", "bf16 weights (a copy)", "half the threads"}
    assert cases.eval_levers("bf16", 4)["half the threads"].threads == 2


def test_a_lever_window_runs_with_its_threads_and_gives_the_process_its_own_back():
    before = torch.get_num_threads()
    seen = []
    window = cases.with_threads(lambda: seen.append(torch.get_num_threads()) or {"samples": 1}, before + 1)
    assert window() == {"samples": 1} and seen == [before + 1] and torch.get_num_threads() == before


def test_each_lever_section_names_levers_that_exist():
    """`--sections optim` (compile, attention, threads) runs at least one lever: a renamed lever cannot
    leave its section empty."""
    for only in cases.LEVER_SECTIONS.values():
        assert any(s.lower() in name.lower() for name, _, _ in cases.LEVERS for s in only), only


def test_each_bench_process_prepares_in_a_folder_of_its_own(tiny_model_dir, tiny_data_dir):
    """Two benches (or parallel test runs) preparing the same configuration at once must not claim one name
    in one shared folder (the second was refused: 'a run named ... is running on this device now')."""
    import os
    import tempfile

    s = bench.harness.prepare(str(tiny_data_dir), "cpu", 2, model_name=str(tiny_model_dir), batch=8, max_length=16)
    folder = s.run.record_path.parent.parent
    assert folder.parent == Path(tempfile.gettempdir()) and folder.name.endswith(f"-{os.getpid()}")


def test_two_lever_sections_in_one_call_are_one_table_with_both(tiny_model_dir, tiny_data_dir, tmp_path):
    """`--sections attention threads`: each lever section replaced the one before, so the table held threads
    alone though both were measured; both levers are in the one block now."""
    sizes = ["--windows", "1", "--warmup", "0", "--steps", "1"]
    (row,) = run_bench(
        tmp_path, tiny_data_dir, "--model", str(tiny_model_dir), "--sections", "attention", "threads", *sizes
    )
    block = (tmp_path / "BENCH.md").read_text()
    assert "bench:levers-attention-threads begin" in block
    assert "SDPA vs eager attention" in block and "torch threads: all vs half of them" in block
    # one raw row holds both: the second section name does not write the same levers again
    assert row["section"] == "levers" and len(row["result"]["levers"]) == 2
