"""helpers/study/claims/verdict.py: a verdict carries the grade of its evidence, comparisons combine into
one verdict each way, and a timing comparison of arms that did not run interleaved resolves only beyond the
drift between suites."""

from __future__ import annotations

import pandas as pd
import pytest

from helpers.study.claims.verdict import Band, Evidence, Finding, combine, compare_timed, deciding

pytestmark = pytest.mark.usefixtures("no_library_versions")


@pytest.mark.parametrize(
    "basis, verdict, graded",
    [
        ("measured", "holds", "holds"),
        ("measured", "does not hold", "does not hold"),
        ("proxy (direction only)", "holds", "consistent on proxy"),
        ("proxy (direction only)", "does not hold", "contradicted on proxy"),
        ("estimate", "holds", "consistent with the model"),
        ("estimate", "does not hold", "contradicted by the model"),
        ("proxy (direction only)", "inconclusive", "inconclusive"),
    ],
)
def test_a_verdict_carries_the_grade_of_its_evidence(basis, verdict, graded):
    assert Finding("c", "p", "m", verdict, "r", basis=basis).verdict == graded


def test_an_unknown_verdict_is_refused():
    with pytest.raises(ValueError):
        Finding("c", "p", "m", "maybe", "r")


@pytest.mark.parametrize(
    "signs, verdict",
    [
        ([], "not testable here"),
        ([1, 1], "holds"),
        ([1, 0], "inconclusive"),
        ([1, -1], "does not hold"),
        ([0, -1], "does not hold"),
    ],
)
def test_comparisons_combine_into_one_verdict(signs, verdict):
    assert combine(signs) == verdict


@pytest.mark.parametrize(
    "together, drift_pct, sign", [(True, 20.0, 1), (False, 20.0, 0), (False, 5.0, 1), (False, None, 0), (True, None, 1)]
)
def test_a_timing_comparison_resolves_beyond_the_drift_unless_interleaved(together, drift_pct, sign):
    faster, slower = Band(110.0, 109.0, 111.0), Band(100.0, 99.0, 101.0)  # 10% apart beyond both spreads
    assert compare_timed(faster, slower, together, drift_pct) == sign
    assert compare_timed(slower, faster, together, drift_pct) == -sign


@pytest.mark.parametrize(
    "signs, head",
    [
        ([1, -1, 1], "b"),  # the one against the claim decides
        ([1, 0, 0], "b; c"),  # the unresolved ones keep it inconclusive
        ([0, 0, 0, 0], "a; b; 2 more unresolved"),
        ([1, 1, 1], "a"),
        ([], ""),
    ],
)
def test_the_headline_is_the_deciding_comparisons(signs, head):
    assert deciding(signs, ["a", "b", "c", "d"][: len(signs)]) == head


@pytest.mark.parametrize(
    "signs, blocked, verdict, opens",
    [
        ([1, 0], ["an arm did not learn"], "inconclusive", "an arm did not learn; 1 of 2 comparisons"),
        ([1, 1], ["an arm did not learn"], "holds", "2 of 2 comparisons"),  # a block speaks only for an open verdict
        ([], [], "not testable here", "needs runs"),
    ],
)
def test_the_evidence_concludes_with_what_blocked_it_or_what_it_needs(signs, blocked, verdict, opens):
    groups = [pd.DataFrame({"proxy": [False], "model_name": ["bert-base-uncased"], "cls": ["gpu"]})] * bool(signs)
    evidence = Evidence(pd.DataFrame(), groups, signs, ["a", "b"][: len(signs)], ["A100: x"] * bool(signs), blocked)
    found = evidence.finding("c", "p", "no records", "r", "spread overlaps", "needs runs")
    assert found.verdict == verdict and found.reason.startswith(opens), found.reason
    assert ("spread overlaps" in found.reason) == (verdict == "inconclusive")  # what the sample resolves: when open
    assert (found.measured, found.basis) == (("A100: x", "measured") if signs else ("no records", "none"))
