"""bench/trainer_tta.py: time to a validation accuracy through the project's run path and through
Hugging Face Trainer (run_glue.py's defaults, the project's recipe), each on a tiny slice here."""

import argparse
import json
import re
from pathlib import Path

import pytest
from bench_cli import run_bench

from bench import render, trainer_tta
from helpers.run.args import build_args

REPO = Path(__file__).resolve().parents[2]
META = {
    "command": "python -m bench --sections tta",
    "date": "2026-01-01 00:00",
    "machine": "cpu",
    "torch": "2",
    "transformers": "5",
    "threads": 1,
    "load_start": 0.5,
    "load_end": 0.7,
}


def _row(block: str, name: str) -> list[str]:
    """Return the cells of the Markdown table row of `block` whose first cell is `name`."""
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in block.splitlines() if line.startswith("|")]
    (row,) = [cells for cells in rows if cells[0] == name]
    return row


def _tiny(tiny_model_dir, **kw):
    return trainer_tta.Sizes(**{"model": str(tiny_model_dir), "train_rows": 64, "eval_every": 2, "max_steps": 4, **kw})


def _args(tiny_data_dir):
    return argparse.Namespace(data_dir=str(tiny_data_dir), device="cpu", gate=None)


def test_the_recipe_is_make_baselines():
    params = dict(
        re.findall(
            r"-p (\w+) (\S+)", (REPO / "Makefile").read_text().split("BASELINE_PARAMS ?=")[1].split("\nbaseline:")[0]
        )
    )
    # the Makefile's text as papermill's -p reads it
    made = build_args({k: params[k] for k in trainer_tta.RECIPE}).flat()
    assert {k: made[k] for k in trainer_tta.RECIPE} == trainer_tta.RECIPE
    assert "train_subset" not in params and trainer_tta.Sizes().train_rows == 16000  # the whole training split
    assert params["eval_every"] == str(trainer_tta.Sizes().eval_every)


def test_each_configuration_trains_and_records_its_time_to_target(tiny_model_dir, tiny_data_dir):
    # a target any evaluation reaches: each configuration stops at its first evaluation (step 2)
    out = trainer_tta.tta_section(_args(tiny_data_dir), _tiny(tiny_model_dir, target=1e-9))
    assert (
        set(out["rates"])
        == {trainer_tta.TRAINER_DEFAULTS, trainer_tta.TRAINER_RECIPE, trainer_tta.PROJECT}
        == set(out["configs"])
    )
    for name, (w,) in out["rates"].items():
        assert w["time_to_target_s"] > 0 and w["target_step"] == 2 == w["steps"], name
        assert w["curve"][0]["rows"] == 64 and w["curve"][0]["train_time_s"] == w["time_to_target_s"]
        assert w["samples"] > 0 and w["seconds"] == w["train_time_s"] and w["precision"] in ("fp32", "bf16")
    assert [c["epochs"] for c in out["configs"].values()] == [3, 1, 1]  # run_glue.py's, the recipe's
    for ratio in out["ratios"].values():
        assert ratio["median"] > 0 and len(ratio["per_round"]) == 1
    block = render.render({"tta": json.loads(json.dumps(out))}, META)["tta"]
    assert _row(block, trainer_tta.TRAINER_DEFAULTS)[1] == "L=128 static, batch 32, lr 2e-05, 3 epoch(s)"
    assert "**Trainer, project recipe / project run path = " in block
    assert "one round: a single run each, no spread" in block


def test_short_of_the_target_every_configuration_trains_to_its_end_and_says_the_target_was_not_reached(
    tiny_model_dir, tiny_data_dir
):
    out = trainer_tta.tta_section(_args(tiny_data_dir), _tiny(tiny_model_dir, target=1.0, rounds=2, max_steps=None))
    steps = {name: [w["steps"] for w in windows] for name, windows in out["rates"].items()}
    # 64 rows of batch 32: 2 steps an epoch; run_glue's 3 epochs, the recipe's 1 on both sides
    assert steps == {
        trainer_tta.TRAINER_DEFAULTS: [6, 6],
        trainer_tta.TRAINER_RECIPE: [2, 2],
        trainer_tta.PROJECT: [2, 2],
    }
    assert [c["epochs"] for c in out["configs"].values()] == [3, 1, 1]
    assert [p["step"] for p in out["rates"][trainer_tta.TRAINER_DEFAULTS][0]["curve"]] == [2, 4, 6]
    for windows in out["rates"].values():
        assert all(w["time_to_target_s"] is None and w["reason"].startswith("not reached") for w in windows)
    assert all(
        r == {"median": None, "per_round": [None, None], "at_least": [None, None]} for r in out["ratios"].values()
    )
    block = render.render({"tta": out}, META)["tta"]
    assert all(_row(block, name)[3].endswith("(a minimum: not reached)") for name in out["rates"])
    assert "**Trainer, run_glue defaults / project run path: not measured**" in block


def test_a_budget_ends_a_trainer_configuration_short_of_the_target_at_its_first_evaluation_past_it(
    tiny_model_dir, tiny_data_dir
):
    # an unreachable target: without the budget each would train 4 steps (max_steps; an epoch of 128 rows);
    # with 0 s the Trainer's stop at their first evaluation, step 2
    sizes = _tiny(tiny_model_dir, target=1.0, budget_s=0.0, train_rows=128)
    out = trainer_tta.tta_section(_args(tiny_data_dir), sizes)
    steps = {name: w["steps"] for name, (w,) in out["rates"].items()}
    # the run path has no budget
    assert steps == {trainer_tta.TRAINER_DEFAULTS: 2, trainer_tta.TRAINER_RECIPE: 2, trainer_tta.PROJECT: 4}
    for (w,) in out["rates"].values():
        assert w["time_to_target_s"] is None and w["beyond_s"] == w["curve"][-1]["train_time_s"] > 0


def _fake(times: dict, beyond: float | None = None) -> dict:
    rates = {
        name: [
            {
                "time_to_target_s": t,
                "wall_to_target_s": t,
                "target_step": 100 if t else None,
                "steps": 400,
                "train_time_s": 300.0,
                "samples": 40.0,
                "seconds": 300.0,
                "precision": "fp32",
                "best_val_accuracy": 0.91,
                "curve": [],
                "beyond_s": None if t else beyond,
            }
            for t in ts
        ]
        for name, ts in times.items()
    }
    return {
        "sizes": {**trainer_tta.Sizes().__dict__},
        "configs": trainer_tta.CONFIGS,
        "rates": rates,
        "ratios": {f"{a} / {b}": trainer_tta.ratios(rates, a, b) for a, b in trainer_tta.RATIOS},
        "wall_ratios": {},
    }


def test_ratios_are_paired_by_round_and_the_raw_file_renders_the_latest(tmp_path):
    t = _fake(
        {
            trainer_tta.TRAINER_DEFAULTS: [600.0, 900.0, None],
            trainer_tta.TRAINER_RECIPE: [330.0, 360.0, 300.0],
            trainer_tta.PROJECT: [300.0, 300.0, 200.0],
        }
    )
    assert t["ratios"][f"{trainer_tta.TRAINER_DEFAULTS} / {trainer_tta.PROJECT}"] == {
        "median": 2.5,
        "per_round": [2.0, 3.0, None],
        "at_least": [2.0, 3.0, None],
    }
    assert t["ratios"][f"{trainer_tta.TRAINER_RECIPE} / {trainer_tta.PROJECT}"]["median"] == pytest.approx(1.2)
    block = render.render({"tta": t}, META)["tta"]
    assert _row(block, trainer_tta.TRAINER_DEFAULTS)[3] == "750 (2 of 3)"
    assert "= 1.20x** (median of 3 per-round ratios, range 1.10 .. 1.50)" in block
    # a round that did not reach the target and has no bound: no ratio is claimed, the reached rounds are
    # named
    assert (
        "run_glue defaults / project run path: not measured** (a side did not reach 90% in every "
        "round); where both did, median 2.50x" in block
    )
    raw = tmp_path / "bench.jsonl"
    old = _fake({name: [1.0] for name in trainer_tta.CONFIGS})
    rows = (json.dumps({"meta": META, "section": "tta", "result": r}) for r in (old, t))
    raw.write_text("\n".join(rows) + "\n")
    blocks = render.render_raw(raw)
    assert set(blocks) == {"tta"} and blocks["tta"] == render.render({"tta": t}, META)["tta"]


def test_a_trainer_short_of_the_target_within_its_budget_gives_a_lower_bound_and_only_that():
    t = _fake(
        {
            trainer_tta.TRAINER_DEFAULTS: [None, 900.0],
            trainer_tta.TRAINER_RECIPE: [330.0, 360.0],
            trainer_tta.PROJECT: [150.0, 200.0],
        },
        beyond=600.0,
    )
    assert t["ratios"][f"{trainer_tta.TRAINER_DEFAULTS} / {trainer_tta.PROJECT}"] == {
        "median": 4.5,
        "per_round": [None, 4.5],
        "at_least": [4.0, 4.5],
    }
    block = render.render({"tta": t}, META)["tta"]
    # one round reached it
    assert _row(block, trainer_tta.TRAINER_DEFAULTS)[3] == "900 (1 of 2)"
    assert (
        "**Trainer, run_glue defaults / project run path >= 4.00x** in each of 2 round(s) (a lower "
        "bound: the Trainer did not reach 90% in 1 of them" in block
    )
    never = _fake(
        {trainer_tta.TRAINER_DEFAULTS: [None], trainer_tta.TRAINER_RECIPE: [330.0], trainer_tta.PROJECT: [300.0]},
        beyond=600.0,
    )
    block = render.render({"tta": never}, META)["tta"]
    assert _row(block, trainer_tta.TRAINER_DEFAULTS)[3] == "≥ 600 (a minimum: not reached)"
    assert _row(block, "configuration")[3] == "time to 90% (s, median; ≥: a minimum)"
    assert "project run path >= 2.00x** in each of 1 round(s)" in block


def test_the_bench_command_runs_the_case_at_the_sizes_given(tiny_model_dir, tiny_data_dir, tmp_path):
    out = tmp_path / "BENCH.md"
    out.write_text("# Benchmarks\n\n<!-- bench:main begin -->\nkept\n<!-- bench:main end -->\n")
    sizes = ["--tta-model", str(tiny_model_dir), "--tta-rows", "64", "--tta-eval-every", "2", "--tta-max-steps", "4"]
    (row,) = run_bench(tmp_path, tiny_data_dir, "--sections", "tta", *sizes, "--tta-target", "0.000001")
    assert row["section"] == "tta" and len(row["result"]["rates"][trainer_tta.PROJECT]) == 1
    text = out.read_text()
    assert "kept" in text and "<!-- bench:tta begin -->" in text  # the main block keeps its last figures
    assert "`python -m bench --device cpu" in text and _row(text, trainer_tta.PROJECT)


def test_to_the_end_each_seed_trains_the_whole_recipe_in_both_and_reports_its_test_accuracy(
    tiny_model_dir, tiny_data_dir
):
    # a target the first evaluation reaches: without to_the_end both would stop at step 2 of 4
    sizes = _tiny(
        tiny_model_dir,
        train_rows=128,
        target=1e-9,
        rounds=2,
        seeds=(0, 1),
        to_the_end=True,
        configs=(trainer_tta.TRAINER_RECIPE, trainer_tta.PROJECT),
    )
    out = trainer_tta.tta_section(_args(tiny_data_dir), sizes)
    assert set(out["rates"]) == {trainer_tta.TRAINER_RECIPE, trainer_tta.PROJECT} and list(out["ratios"]) == [
        f"{trainer_tta.TRAINER_RECIPE} / {trainer_tta.PROJECT}"
    ]
    for name, windows in out["rates"].items():
        assert [w["seed"] for w in windows] == [0, 1], name
        assert all(w["steps"] == 4 and 0 <= w["test_accuracy"] <= 1 for w in windows), name  # 128 rows, batch 32
    block = render.render({"tta": out}, META)["tta"]
    assert "seeds 0, 1 in turn; each configuration trains its whole recipe, then evaluates the test split" in block
    assert f"**{trainer_tta.TRAINER_RECIPE} - project run path: " in block and "mean of 2 paired seed(s)" in block


def test_the_final_test_table_pairs_the_seeds_both_measured():
    rates = {
        trainer_tta.TRAINER_RECIPE: [{"seed": 0, "test_accuracy": 0.925}, {"seed": 1, "test_accuracy": 0.915}],
        trainer_tta.PROJECT: [{"seed": 0, "test_accuracy": 0.915}, {"seed": 2, "test_accuracy": 0.5}],
    }
    text = "\n".join(render._final_test(rates))
    assert _row(text, trainer_tta.TRAINER_RECIPE) == [trainer_tta.TRAINER_RECIPE, "0: 92.50%, 1: 91.50%", "92.00%"]
    assert _row(text, trainer_tta.PROJECT) == [trainer_tta.PROJECT, "0: 91.50%, 2: 50.00%", "70.75%"]
    # seed 0 only: both measured it
    assert (
        "**Trainer, project recipe - project run path: +1.00 points** (mean of 1 paired seed(s); per seed +1.00)"
        in text
    )
    assert render._final_test({trainer_tta.PROJECT: [{"seed": 0, "test_accuracy": None}]}) == []


def test_the_bench_command_takes_the_seeds_the_end_and_the_configurations(tiny_model_dir, tiny_data_dir, tmp_path):
    flags = ["--tta-seeds", "3", "--tta-to-the-end", "--tta-configs", trainer_tta.PROJECT, "--tta-target", "0.000001"]
    sizes = ["--tta-model", str(tiny_model_dir), "--tta-rows", "128", "--tta-eval-every", "2", "--tta-max-steps", "4"]
    (row,) = run_bench(tmp_path, tiny_data_dir, "--sections", "tta", *flags, *sizes)
    (w,) = row["result"]["rates"][trainer_tta.PROJECT]
    assert list(row["result"]["rates"]) == [trainer_tta.PROJECT] and w["seed"] == 3 and w["steps"] == 4
    final_test = (tmp_path / "BENCH.md").read_text().split("Which ends higher on the test split")[1]
    assert w["test_accuracy"] is not None and _row(final_test, trainer_tta.PROJECT)[1].startswith("3: ")


def test_stopping_at_the_target_measures_no_test_accuracy(tiny_model_dir, tiny_data_dir):
    sizes = _tiny(tiny_model_dir, train_rows=128, target=1e-9, configs=(trainer_tta.PROJECT,))
    (w,) = trainer_tta.tta_section(_args(tiny_data_dir), sizes)["rates"][trainer_tta.PROJECT]
    assert w["steps"] == 2 and w["test_accuracy"] is None and w["seed"] == 42
