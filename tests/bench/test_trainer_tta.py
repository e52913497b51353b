"""bench/trainer_tta.py: time to a validation accuracy through the platform's loop and through Hugging Face Trainer
(run_glue.py's defaults, the project's recipe), each on a tiny slice here."""

import json
import re
from dataclasses import asdict
from pathlib import Path

import pytest
from bench_cli import META, row, run_bench

from bench import render, trainer_tta
from helpers import arguments

REPO = Path(__file__).resolve().parents[2]
LOOP, DEFAULTS, RECIPE = trainer_tta.LOOP, trainer_tta.TRAINER_DEFAULTS, trainer_tta.TRAINER_RECIPE


def tiny(tiny_model_dir, **kw) -> trainer_tta.Sizes:
    """Return the case's sizes on the tiny model: 64 rows (two steps of 32), an evaluation every 2 steps."""
    return trainer_tta.Sizes(**{"model": str(tiny_model_dir), "train_rows": 64, "eval_every": 2, "max_steps": 4, **kw})


def section(tiny_data_dir, tmp_path, sizes: trainer_tta.Sizes) -> dict:
    """Return the section's result on the CPU, its records in `tmp_path`."""
    values = {"device": "cpu", "data_dir": str(tiny_data_dir), "results_path": str(tmp_path)}
    return json.loads(json.dumps(trainer_tta.section(values, sizes)))  # as a raw row holds it


def block(result: dict) -> str:
    """Return the tta block of `result`."""
    return render.blocks([{"meta": META, "section": "tta", "result": result}])["tta"]


def test_the_recipe_is_make_baselines():
    makefile = (REPO / "Makefile").read_text().split("BASELINE_PARAMS ?=")[1].split("\nbaseline:")[0]
    params = dict(re.findall(r"-p (\w+) (\S+)", makefile))  # the Makefile's text as papermill's -p reads it
    made = arguments.build({k: params[k] for k in trainer_tta.RECIPE}, arguments.NvidiaArgs).flat()
    assert {k: made[k] for k in trainer_tta.RECIPE} == trainer_tta.RECIPE
    assert "train_subset" not in params and trainer_tta.Sizes().train_rows == 16000  # the whole training split
    assert params["eval_every"] == str(trainer_tta.Sizes().eval_every)


def test_each_configuration_trains_and_records_its_time_to_target(tmp_path, tiny_model_dir, tiny_data_dir):
    # a target any evaluation reaches: each configuration stops at its first evaluation (step 2)
    out = section(tiny_data_dir, tmp_path, tiny(tiny_model_dir, target=1e-9))
    assert list(out["rates"]) == [DEFAULTS, RECIPE, LOOP] == list(out["configs"])
    for name, (w,) in out["rates"].items():
        assert w["time_to_target_s"] > 0 and w["target_step"] == 2 == w["steps"], name
        assert w["curve"][0]["rows"] == 64 and w["curve"][0]["train_time_s"] == w["time_to_target_s"], name
        assert 0 < w["wall_to_target_s"] and w["time_to_target_s"] < w["wall_to_target_s"], name
        assert w["samples"] > 0 and w["seconds"] == w["train_time_s"] and w["test_accuracy"] is None, name
    assert out["rates"][DEFAULTS][0]["precision"] == "fp32"  # run_glue's
    assert all(r["median"] > 0 and len(r["per_round"]) == 1 for r in out["ratios"].values())
    text = block(out)
    assert row(text, DEFAULTS)[1] == "L=128 static, batch 32, lr 2e-05, 3 epoch(s)"
    assert f"**{RECIPE} / {LOOP} = " in text and "one round: no spread" in text


def test_short_of_the_target_each_trains_to_its_end_and_a_budget_ends_the_trainers(
    tmp_path, tiny_model_dir, tiny_data_dir
):
    # an unreachable target: each trains 4 steps (max_steps; 128 rows); with 0 s, the Trainers stop at step 2
    out = section(tiny_data_dir, tmp_path, tiny(tiny_model_dir, target=1.0, budget_s=0.0, train_rows=128))
    assert {name: w["steps"] for name, (w,) in out["rates"].items()} == {DEFAULTS: 2, RECIPE: 2, LOOP: 4}
    for (w,) in out["rates"].values():
        assert w["time_to_target_s"] is None and w["reason"].startswith("not reached")
        assert w["beyond_s"] == w["curve"][-1]["train_time_s"] > 0
    text = block(out)
    assert all(row(text, name)[3].endswith("(a minimum: not reached)") for name in out["rates"])
    assert f"**{DEFAULTS} / {LOOP}: not measured**" in text  # the loop reached nothing either: no bound


def fake(times: dict, beyond: float | None = None) -> dict:
    """Return a tta result whose configurations reached the target after `times` training seconds, round by round."""
    run = dict(steps=400, train_time_s=300.0, samples=40.0, precision="fp32", best_val_accuracy=0.91, curve=[])
    rates = {
        name: [
            run
            | {
                "time_to_target_s": t,
                "wall_to_target_s": t,
                "target_step": 100 if t else None,
                "beyond_s": None if t else beyond,
            }
            for t in ts
        ]
        for name, ts in times.items()
    }
    return {
        "sizes": asdict(trainer_tta.Sizes()),
        "configs": trainer_tta.CONFIGS,
        "rates": rates,
        "ratios": {f"{a} / {b}": trainer_tta.ratios(rates, a, b) for a, b in trainer_tta.RATIOS},
        "wall_ratios": {},
    }


def test_ratios_are_paired_by_round():
    t = fake({DEFAULTS: [600.0, 900.0, None], RECIPE: [330.0, 360.0, 300.0], LOOP: [300.0, 300.0, 200.0]})
    assert t["ratios"][f"{DEFAULTS} / {LOOP}"] == {
        "median": 2.5,
        "per_round": [2.0, 3.0, None],
        "at_least": [2.0, 3.0, None],
    }
    assert t["ratios"][f"{RECIPE} / {LOOP}"]["median"] == pytest.approx(1.2)
    text = block(t)
    assert row(text, DEFAULTS)[3] == "750 (2 of 3)"
    assert "= 1.200x (median of 3 per-round ratios, range 1.100 .. 1.500)" in text
    # a round short of the target with no bound: no ratio is claimed, the rounds both reached are named
    assert (
        f"{DEFAULTS} / {LOOP}: not measured** (a side did not reach 90% in every round); where both did, median 2.50x"
        in text
    )


def test_a_trainer_short_of_the_target_within_its_budget_gives_a_lower_bound_and_only_that():
    t = fake({DEFAULTS: [None, 900.0], RECIPE: [330.0, 360.0], LOOP: [150.0, 200.0]}, beyond=600.0)
    assert t["ratios"][f"{DEFAULTS} / {LOOP}"] == {"median": 4.5, "per_round": [None, 4.5], "at_least": [4.0, 4.5]}
    text = block(t)
    assert row(text, DEFAULTS)[3] == "900 (1 of 2)"
    assert f"**{DEFAULTS} / {LOOP} >= 4.00x** in each of 2 round(s) (a lower bound" in text
    never = block(fake({DEFAULTS: [None], RECIPE: [330.0], LOOP: [300.0]}, beyond=600.0))
    assert row(never, DEFAULTS)[3] == "≥ 600 (a minimum: not reached)"


def test_to_the_end_each_seed_trains_the_whole_recipe_through_the_command(tmp_path, tiny_model_dir, tiny_data_dir):
    # a target the first evaluation reaches: without --tta-to-the-end both would stop at step 2 of 4
    sizes = ["--tta-model", str(tiny_model_dir), "--tta-train-rows", "128", "--tta-eval-every", "2"]
    flags = ["--tta-seeds", "0", "1", "--tta-rounds", "2", "--tta-to-the-end", "--tta-target", "0.000001"]
    (raw,) = run_bench(tmp_path, tiny_data_dir, "--sections", "tta", *sizes, *flags, "--tta-configs", RECIPE, LOOP)
    rates = raw["result"]["rates"]
    assert list(rates) == [RECIPE, LOOP] and list(raw["result"]["ratios"]) == [f"{RECIPE} / {LOOP}"]
    for name, runs in rates.items():
        assert [w["seed"] for w in runs] == [0, 1], name
        assert all(w["steps"] == 4 and 0 <= w["test_accuracy"] <= 1 for w in runs), name  # 128 rows, batch 32
    text = (tmp_path / "BENCH.md").read_text()
    assert "seeds 0, 1 in turn; each configuration trains its whole recipe, then evaluates the test split" in text
    assert f"**{RECIPE} - {LOOP}: " in text and "mean of 2 paired seed(s)" in text


def test_the_final_test_table_pairs_the_seeds_both_measured():
    rates = {
        RECIPE: [{"seed": 0, "test_accuracy": 0.925}, {"seed": 1, "test_accuracy": 0.915}],
        LOOP: [{"seed": 0, "test_accuracy": 0.915}, {"seed": 2, "test_accuracy": 0.5}],
    }
    text = "\n".join(render.final_test(rates, LOOP))
    assert row(text, RECIPE) == [RECIPE, "0: 92.50%, 1: 91.50%", "92.00%"]
    assert row(text, LOOP) == [LOOP, "0: 91.50%, 2: 50.00%", "70.75%"]
    assert f"**{RECIPE} - {LOOP}: +1.00 points** (mean of 1 paired seed(s); per seed +1.00)" in text  # seed 0 only
    assert render.final_test({LOOP: [{"seed": 0, "test_accuracy": None}]}, LOOP) == []
