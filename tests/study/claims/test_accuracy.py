"""study/claims/accuracy.py: an accuracy's spread is over seeds (one seed: the test set's error, shown and never
a verdict's spread), differences pair by seed or combine two cells' intervals, and an arm below the learning
floor is named."""

from __future__ import annotations

import math

import pytest

from study.claims import accuracy
from study.claims.verdict import prepare
from study.frame import frame
from tests.study.claims.claim_records import seeds


def test_one_seed_has_no_spread_over_seeds_and_a_gap_needs_two_a_side():
    assert accuracy.mean_interval([0.85], 2000) == (0.85, pytest.approx(0.01565, abs=1e-5), "test set")
    assert math.isnan(accuracy.seeds_interval([0.85])[1])
    mean, half = accuracy.seeds_interval([0.84, 0.85, 0.86])
    assert mean == pytest.approx(0.85) and half == pytest.approx(0.02484, abs=1e-4)  # t(2) x 0.01 / sqrt(3)
    diff, half = accuracy.gap([0.90, 0.91, 0.92], [0.84, 0.85, 0.86])
    assert diff == pytest.approx(6.0) and half == pytest.approx(100 * math.hypot(0.02484, 0.02484), abs=0.01)
    assert math.isnan(accuracy.gap([0.90], [0.84, 0.85])[1])


@pytest.mark.parametrize(
    "mean, half, threshold, sign",
    [(3, 1, 0, 1), (-3, 1, 0, -1), (0.5, 1, 0, 0), (0.5, 0.2, 1, -1), (1, math.nan, 0, None)],
)
def test_an_interval_lies_on_one_side_of_a_threshold_or_across_it(mean, half, threshold, sign):
    assert accuracy.side(mean, half, threshold) == sign


def test_differences_pair_by_seed():
    runs = seeds("trn1", "precision", {"precision": "bf16-pure", "max_length": 16}, [0.90, 0.91])
    runs += seeds("trn1", "precision", {"precision": "bf16-pure-sr", "max_length": 16}, [0.92, 0.90])
    diffs = accuracy.paired_diffs(prepare(frame(runs)), "precision", "bf16-pure-sr", "bf16-pure", "max_length")
    assert diffs == {16: pytest.approx([0.02, -0.01])}


def cell(accs: list[float], lr: float) -> list[dict]:
    return seeds("cpu", "lr_llrd", {"lr": lr}, accs, "quick")


@pytest.mark.parametrize("low, learned", [(0.60, False), (0.87, True)])  # 30 points under the best; 3 under
def test_an_arm_below_the_floor_is_named_and_the_tables_learned_agrees(low, learned):
    df = prepare(frame(cell([0.90, 0.91], 2e-4) + cell([low, low + 0.01], 2e-5)))
    said = accuracy.unlearned(df, {"lr 2e-5": df[df["lr"] < 1e-4]})
    assert said.startswith(f"an arm did not learn: lr 2e-5 ({100 * low + 0.5:.2f}%) below the floor 85.50%") != learned
    assert "5 points below 90.50%, the best mean test accuracy of minilm" in said or learned
    assert list(accuracy.learned(df)[df["lr"] < 1e-4]) == [learned] * 2
