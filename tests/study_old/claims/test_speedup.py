"""helpers/study/claims/speedup.py: the optimized speedup and the cost ranking reach each of their verdicts on
hand-made records, and a proxy leaves a magnitude not testable here."""

from __future__ import annotations

import pytest

from helpers.study.claims import speedup
from helpers.study.frame import frame
from tests.study.claims.claim_records import PUB, check, judge, presets, run

pytestmark = pytest.mark.usefixtures("no_library_versions")


@pytest.mark.parametrize(
    "device, baseline_s, verdict",
    [("a100", 727.0, "holds"), ("trn1", 551.0, "holds"), ("t4", 372.0, "holds"), ("a100", 200.0, "does not hold")],
)
def test_speedup(device, baseline_s, verdict):
    check(judge(speedup.speedup, presets(device, baseline_s, 100.0)), verdict, device, "full", 2)


def test_speedup_proxy_is_not_testable():
    found = judge(speedup.speedup, presets("cpu", 700.0, 100.0, "quick"))
    check(found, "not testable here", "cpu", "quick", 2)
    assert "minilm on CPU" in found.reason and "direction only" in found.measured


@pytest.mark.parametrize("trn1_s, verdict", [(60.0, "holds"), (400.0, "does not hold"), (82.0, "inconclusive")])
def test_cost_ranking(trn1_s, verdict):
    recs = [
        run("trn1", "speedup", {"preset": "optimized"}, train_s=trn1_s),
        run("a100", "speedup", {"preset": "optimized"}, train_s=40.0),
        run("t4", "speedup", {"preset": "optimized"}, train_s=367.0),
    ]
    found = judge(speedup.cost_ranking, recs)
    check(found, verdict, "trn1", "full", 1)
    assert "A100" in found.measured and "T4" in found.measured


def test_cost_ranking_needs_two_study_devices():
    found = judge(speedup.cost_ranking, [run("a100", "speedup", {"preset": "optimized"}, train_s=40.0)])
    check(found, "not testable here", "a100", "full", 1)


def test_the_cost_claim_states_its_price_basis_and_shows_the_other_beside():
    found = speedup.cost_ranking(frame([]), PUB)
    assert "per accelerator-hour (the study's basis) L4" in found.published
    # the A100 of a p4d.24xlarge: cheaper than trn1 per accelerator, the dearest per whole instance
    shared, whole = found.published.split("(the study's basis)")[1].split("beside it, per whole instance")
    assert shared.index("A100 $") < shared.index("trn1 $") and whole.rstrip(".").endswith(tuple("0123456789"))
    assert whole.index("trn1 $") < whole.index("A100 $")
    assert "study's basis: one accelerator's share" in found.rule
