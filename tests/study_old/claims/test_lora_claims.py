"""helpers/study/claims/lora.py (this file is named apart from tests/run/test_lora.py): the LoRA claims reach
each verdict on hand-made records of the lora suite, each setting at its best learning rate by validation."""

from __future__ import annotations

import pytest

from helpers.study.claims import lora
from helpers.study.frame import frame
from tests.study.claims.claim_records import PUB, lora_runs, searched, steady

pytestmark = pytest.mark.usefixtures("no_library_versions")


@pytest.mark.parametrize(
    "accs, verdict",
    [
        ([0.930, 0.931, 0.929], "holds"),  # 0.1 points below
        ([0.900, 0.901, 0.899], "does not hold"),  # 3 points below
        ([0.925, 0.935, 0.915], "inconclusive"),
    ],
)  # ± straddles 1 point
def test_lora_accuracy_within_one_point(accs, verdict):
    found = lora.lora_accuracy(frame(searched("a100", 0, [0.931, 0.932, 0.930]) + searched("a100", 8, accs)), PUB)
    assert found.verdict == verdict, (found.reason, found.measured)
    assert "gap to full" in found.measured and "0.0005 (of 0.00025, 0.0005, 0.001); 9 runs" in found.measured


def test_lora_accuracy_without_the_learning_rate_search_says_so():
    found = lora.lora_accuracy(
        frame(lora_runs("a100", 0, [0.931, 0.932, 0.930]) + lora_runs("a100", 8, [0.930, 0.931, 0.929])), PUB
    )
    assert found.verdict == "inconclusive"
    assert found.reason.startswith("A100-SXM4-40GB: the learning-rate search has not been run"), found.reason
    assert "`python -m helpers.study.sweep lora`" in found.reason


@pytest.mark.parametrize("best_lr, verdict", [(5e-4, "does not hold"), (1e-3, "inconclusive")])
def test_a_best_lr_at_the_edge_of_the_search_leaves_the_gap_unresolved(best_lr, verdict):
    """LoRA 3 points below full fine-tuning, its best lr (by validation) in the middle of the three it tried,
    then the highest of them: there, a higher lr not tried may close the gap."""
    lora_recs = [
        rec
        for lr in (2.5e-4, 5e-4, 1e-3)
        for rec in lora_runs("a100", 8, [0.900, 0.901, 0.899] if lr == best_lr else [0.85] * 3, lr=lr)
    ]
    found = lora.lora_accuracy(frame(searched("a100", 0, [0.931, 0.932, 0.930]) + lora_recs), PUB)
    assert found.verdict == verdict, (found.reason, found.measured)
    if verdict == "inconclusive":
        assert found.reason.startswith(
            "A100-SXM4-40GB: the best lr of LoRA r=8 (query,value) is the edge of the lrs tried"
        ), found.reason


def test_the_accuracy_verdict_names_the_budget_both_trained_for():
    recs = searched("a100", 0, [0.931, 0.932, 0.930]) + searched("a100", 8, [0.900, 0.901, 0.899])
    for rec in recs:
        rec["params"].update(epochs=1, train_subset=8000)
    found = lora.lora_accuracy(frame(recs), PUB)
    assert "1 epoch of 8,000 rows" in found.measured and "same budget" in found.claim


def test_lora_accuracy_needs_seeds_and_grades_a_proxy():
    one_seed = lora.lora_accuracy(frame(lora_runs("a100", 0, [0.93]) + lora_runs("a100", 8, [0.93])), PUB)
    assert one_seed.verdict == "not testable here"
    proxy = lora.lora_accuracy(
        frame(
            searched("cpu", 0, [0.931, 0.932, 0.930], model="minilm")
            + searched("cpu", 8, [0.930, 0.931, 0.929], model="minilm")
        ),
        PUB,
    )
    assert proxy.verdict == "consistent on proxy"


@pytest.mark.parametrize(
    "rates, verdict", [([150, 152, 149], "holds"), ([70, 72, 71], "does not hold"), ([95, 130, 100], "inconclusive")]
)
def test_lora_speed_against_full_fine_tuning_between_runs(rates, verdict):
    recs = lora_runs("a100", 0, [0.93] * 3, [100, 102, 98]) + lora_runs("a100", 8, [0.92] * 3, rates)
    found = lora.lora_speed(frame(recs + steady()), PUB)
    assert found.verdict == verdict, (found.reason, found.measured)


def test_the_speed_headline_is_the_setting_that_decided_not_the_first():
    """Two LoRA settings on one device: the faster first, the slower second; the summary's figure is the
    slower one's (it contradicts the claim), and with both faster it is a figure that supports it."""
    full = lora_runs("a100", 0, [0.93] * 3, [100, 102, 98])
    fast = lora_runs("a100", 8, [0.92] * 3, [150, 152, 149], targets="all-linear")
    slow = lora_runs("a100", 8, [0.92] * 3, [70, 72, 71])
    found = lora.lora_speed(frame(full + fast + slow + steady()), PUB)
    assert found.verdict == "does not hold"
    assert found.headline == "A100-SXM4-40GB: LoRA r=8 (query,value) 0.71x full's samples/s", found.headline
    both = lora.lora_speed(frame(full + fast + steady()), PUB)
    assert both.verdict == "holds" and both.headline.startswith("A100-SXM4-40GB: LoRA r=8 (all-linear) 1.5"), both


def test_the_accuracy_headline_says_what_ran_on_each_device():
    unsearched = lora_runs("t4", 0, [0.931, 0.932, 0.930]) + lora_runs("t4", 8, [0.925, 0.935, 0.915])
    edge = searched("a100", 0, [0.931, 0.932, 0.930]) + [
        rec for lr in (2.5e-4, 5e-4, 1e-3) for rec in lora_runs("a100", 8, [0.90 if lr == 1e-3 else 0.85] * 3, lr=lr)
    ]
    found = lora.lora_accuracy(frame(unsearched + edge), PUB)
    assert "A100-SXM4-40GB: gap" in found.headline and "(best lr at the searched edge)" in found.headline
    assert "Tesla T4: gap" in found.headline and "(lr search not run)" in found.headline, found.headline
    bracketed = lora.lora_accuracy(
        frame(searched("a100", 0, [0.931, 0.932, 0.930]) + searched("a100", 8, [0.9] * 3)), PUB
    )
    assert "lr search" not in bracketed.headline and "edge" not in bracketed.headline, bracketed.headline
