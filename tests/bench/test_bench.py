"""bench/ (rounds, overhead, render, __main__): paired rounds, the loop against the bare loop on a tiny model, the
blocks rendered from raw rows (the kept ones too), and the command's one-line refusals."""

import json
from pathlib import Path

import pytest
from bench_cli import META, row, run_bench

from bench import overhead, render, rounds
from bench.__main__ import main

REPO = Path(__file__).resolve().parents[2]


def test_alternate_rotates_the_order_each_round_and_tells_each_run_its_round():
    order = []
    runs = {name: (lambda r, name=name: order.append((name, r)) or {"samples": 1.0}) for name in "abc"}
    out = rounds.alternate(runs, 3, gate=lambda: 0.25)
    assert order == [("a", 0), ("b", 0), ("c", 0), ("b", 1), ("c", 1), ("a", 1), ("c", 2), ("a", 2), ("b", 2)]
    assert out["a"] == [{"samples": 1.0, "other_cores": 0.25}] * 3


def test_paired_ratios_cancel_a_drifting_machine():
    """The machine slows 3x over the rounds: each round's ratio stays 0.9, the ratio of medians would not."""
    speed = [3.0, 2.0, 1.0]
    rates = {"loop": [{"samples": 0.9 * s} for s in speed], "bare": [{"samples": s} for s in speed]}
    per_round = rounds.paired_ratios(rates, "loop", "bare")
    assert per_round == pytest.approx([0.9] * 3)
    assert rounds.summary(per_round)[1] == "0.900x (median of 3 per-round ratios, range 0.900 .. 0.900)"
    assert rounds.summary([None, None])[0] is None


def test_the_bare_loop_trains_what_the_loop_trains(tmp_path, tiny_model_dir, tiny_data_dir):
    """Same seeded model, batches, optimizer, schedule and precision (auto: bf16 autocast on a CPU with bf16 units):
    the same mean loss over the steady steps, so the ratio of their samples/s is the cost of what the loop adds."""
    values = dict(
        model_name=str(tiny_model_dir),
        data_dir=str(tiny_data_dir),
        batch=8,
        max_length=32,
        device="cpu",
        results_path=str(tmp_path),
        lr=1e-3,
    )
    args = overhead.loop_args(values, warmup=2, steps=3, cuda=False)
    assert args.train_subset == 5 * 8 and args.max_steps == 5 and args.log_every == 3
    loop, bare = overhead.fresh(overhead.loop, args), overhead.fresh(overhead.bare, args, 3)
    assert loop["loss"] == pytest.approx(bare["loss"], rel=1e-5)
    assert loop["precision"] == bare["precision"] != "auto"
    assert loop["samples"] > 0 and bare["samples"] > 0 and bare["seconds"] > 0


def test_the_bench_command_writes_its_block_and_its_raw_row(tmp_path, tiny_model_dir, tiny_data_dir):
    out = tmp_path / "BENCH.md"
    out.write_text("# Benchmarks\n\nhand-written\n\n<!-- bench:overhead begin -->\nold\n<!-- bench:overhead end -->\n")
    flags = ["--model", str(tiny_model_dir), "--batch", "8", "--windows", "1", "--steps", "2", "--warmup", "1"]
    (raw,) = run_bench(tmp_path, tiny_data_dir, *flags)
    assert raw["section"] == "overhead" and raw["meta"]["device_key"].startswith("cpu-")
    rates = raw["result"]["rates"]
    assert list(rates) == [overhead.LOOP, overhead.BARE] and all(len(runs) == 1 for runs in rates.values())
    text = out.read_text()
    assert "hand-written" in text and "\nold\n" not in text and text.count("<!-- bench:overhead begin -->") == 1
    assert row(text, overhead.LOOP)[3] == "1" and f"**{overhead.LOOP} / bare loop = " in text
    assert "one round: no spread" in text and "(target >= 0.97x: " in text


def rates_of(per_round: list[float]) -> dict:
    """Return an overhead section whose loop runs at `per_round` times the bare loop's samples/s, round by round."""
    rates = {overhead.LOOP: [{"samples": 10 * x} for x in per_round], overhead.BARE: [{"samples": 10.0}] * 3}
    config = {"model_name": "m", "batch": 8, "max_length": 32, "optim": "adamw_torch_fused", "step_mode": "eager"}
    return {"config": config, "precision": "fp32", "steps_per_window": 4, "warmup_steps": 3, "rates": rates}


@pytest.mark.parametrize(
    "per_round, verdict",
    [([0.98, 0.99, 1.2], "met"), ([0.9, 0.95, 0.96], "**not met**"), ([0.9, 0.99, 1.0], "**not resolved**")],
)
def test_the_verdict_follows_the_rounds_and_says_when_they_fall_on_both_sides_of_the_goal(per_round, verdict):
    text = "\n".join(render.overhead(rates_of(per_round)))
    assert f"(target >= 0.97x: {verdict}" in text


def test_a_render_rewrites_its_blocks_from_the_latest_rows_and_keeps_the_rest(tmp_path):
    raw, out = tmp_path / "bench.jsonl", tmp_path / "BENCH.md"
    retired = {"meta": META, "section": "levers", "result": {"levers": []}}  # a retired section's windows: kept, unread
    rows = [{"meta": META, "section": "overhead", "result": rates_of(x)} for x in ([0.5] * 3, [1.0] * 3)]
    raw.write_text("\n".join(json.dumps(r) for r in [rows[0], retired, rows[1]]) + "\n")
    out.write_text("# B\n\nprose\n\n<!-- bench:overhead begin -->\nold\n<!-- bench:overhead end -->\n\nmore prose\n")
    main(["--render", str(raw), "--out", str(out)])
    text = out.read_text()
    assert text.startswith("# B\n\nprose\n") and text.endswith("<!-- bench:overhead end -->\n\nmore prose\n")
    assert "= 1.000x (median of 3" in text and "0.500x" not in text and "levers" not in text
    main(["--render", str(raw), "--out", str(out), "--block-prefix", "other-"])  # another machine's: beside
    assert "<!-- bench:overhead begin -->" in out.read_text() and "<!-- bench:other-overhead end -->" in out.read_text()


def test_the_kept_raw_results_render():
    """The committed raw rows still render: the H200's overhead (the old run path's `fit`), the CPU's latest two."""
    h200 = render.blocks(render.read_raw(REPO / "Experiment/results/_bench/bench-h200.jsonl"))
    assert set(h200) == {"overhead"}
    assert "**fit (harness) / bare loop = 0.933x (median of 5 per-round ratios" in h200["overhead"]
    assert "not resolved" in h200["overhead"] and "NVIDIA H200" in h200["overhead"]
    cpu = render.blocks(render.read_raw(REPO / "Experiment/results/_bench/bench.jsonl"))
    assert set(cpu) == {"tta", "overhead"} and "2026-11-27 22:06" in cpu["tta"]
    assert "**loop (Nvidia/train.py) / bare loop = 0.954x (median of 3 per-round ratios" in cpu["overhead"]
    assert "**Trainer, project recipe - project run path: +0.12 points**" in cpu["tta"]


@pytest.mark.parametrize(
    "flags, says",
    [
        (["--threads", "-1"], "argument --threads: '-1' is not a whole number >= 1"),
        (["--windows", "0"], "argument --windows: '0' is not a whole number >= 1"),
        (["--render", "no/such.jsonl"], "--render no/such.jsonl: no such file"),
        (["--step-mode", "cudagraphs", "--device", "cpu"], "step_mode='cudagraphs' needs CUDA, not cpu"),
        (["--device", "cuda"], "torch sees no CUDA GPU"),
    ],
)
def test_a_refusal_is_one_line_not_a_traceback(tmp_path, tiny_model_dir, flags, says):
    where = ["--out", str(tmp_path / "B.md"), "--results", str(tmp_path), "--model", str(tiny_model_dir)]
    with pytest.raises(SystemExit) as stop:
        main([*where, *flags])
    assert isinstance(stop.value.code, str) and "\n" not in stop.value.code
    assert stop.value.code.startswith("python -m bench: error: ") and says in stop.value.code
    assert not (tmp_path / "B.md").exists() and not (tmp_path / "_bench").exists()  # nothing ran
