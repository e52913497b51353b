"""study/claims/lora.py: LoRA's accuracy and speed against full fine-tuning come out each way, each setting at
its best learning rate, and the accuracy rule waits for a search that brackets that lr."""

from __future__ import annotations

import pytest

from study.claims import lora
from study.frame import frame
from tests.study.claims.claim_records import arm, check, judge, seeds

FULL = {"lora_r": 0}
QV = {"lora_r": 8, "lora_targets": "query,value"}


def searched(setting: dict, accs: list[float], lrs=(1e-4, 5e-4, 1e-3), best: float = 5e-4, device="a100"):
    """Return a setting's runs at three lrs: `accs` at `best`, 5 points less at the others."""
    return [
        r
        for lr in lrs
        for r in seeds(device, "lora", {**setting, "lr": lr}, accs if lr == best else [a - 0.05 for a in accs])
    ]


@pytest.mark.parametrize(
    "mine, verdict",
    [
        ([0.928, 0.929, 0.930], "holds"),  # 0.2 points below full, well within 1
        ([0.850, 0.851, 0.852], "does not hold"),  # 8 points below
        ([0.905, 0.925, 0.935], "inconclusive"),  # the gap's interval straddles 1 point
    ],
)
def test_lora_accuracy(mine, verdict):
    found = judge(lora.lora_accuracy, searched(FULL, [0.930, 0.931, 0.932]) + searched(QV, mine))
    check(found, verdict, "A100", "best LoRA r=8 (query,value)", "0.0005 (of 0.0001, 0.0005, 0.001)")


@pytest.mark.parametrize(
    "lrs, best, why",
    [
        ((5e-4,), 5e-4, "the learning-rate search has not been run"),
        ((1e-4, 5e-4, 1e-3), 1e-3, "is the edge of the lrs"),
    ],
)
def test_lora_accuracy_waits_for_a_search_that_brackets_the_best_lr(lrs, best, why):
    recs = searched(FULL, [0.930, 0.931, 0.932]) + searched(QV, [0.850, 0.851, 0.852], lrs, best)
    found = judge(lora.lora_accuracy, recs)
    check(found, "inconclusive")
    assert why in found.reason


@pytest.mark.parametrize(
    "rates, verdict",
    [([150.0, 151.0, 149.0], "holds"), ([80.0, 81.0, 79.0], "does not hold"), ([95.0, 130.0, 110.0], "inconclusive")],
)
def test_lora_speed(rates, verdict):
    recs = arm("a100", "lora", {**FULL, "lr": 5e-4}, [100.0, 101.0, 99.0], "samples_per_s")
    recs += arm("a100", "lora", {**QV, "lr": 5e-4}, rates, "samples_per_s")
    check(judge(lora.lora_speed, recs), verdict, "LoRA r=8 (query,value)")


def test_lora_speed_of_seeds_run_back_to_back_is_not_judged():
    recs = seeds("a100", "lora", {**FULL, "lr": 5e-4}, [0.93] * 3) + seeds(
        "a100", "lora", {**QV, "lr": 5e-4}, [0.92] * 3
    )
    found = judge(lora.lora_speed, recs)
    check(found, "inconclusive")
    assert "not judged: no spread between runs" in found.reason


def test_the_lora_table_and_the_claim_take_one_cell_per_setting():
    runs = frame(searched(QV, [0.93, 0.94, 0.95]))
    lr, best, tried = lora.best_lr(runs)
    assert (lr, len(best), tried) == (5e-4, 3, [1e-4, 5e-4, 1e-3])
    assert lora.searched(runs).startswith("0.0005 (of 0.0001, 0.0005, 0.001); 9 runs")
    assert lora.setting(runs.iloc[0]) == "LoRA r=8 (query,value)"
