"""study/claims/verdict.py: a figure is the median of its runs with their range; two arms' figures compare only
with interleaved repeats of one suite; a claim's comparisons make one verdict each way, graded on a proxy."""

from __future__ import annotations

import pandas as pd
import pytest

from study.claims.verdict import Evidence, Finding, interleaved, prepare, versus
from study.frame import Band, estimate, frame, ratio
from tests.study.claims.claim_records import arm, rec


def rows(values: list[float], names: list[str] | None = None, suite: str = "s") -> pd.DataFrame:
    names = names or ["p", "p-rep2", "p-rep3", "p-rep4"][: len(values)]
    return pd.DataFrame({"v": values, "run_name": names, "suite": suite})


def test_a_figure_is_the_median_of_its_runs_with_their_range_and_a_ratio_the_extreme_ratios():
    assert estimate(rows([3.0, 1.0, 2.0]), "v") == Band(2.0, 1.0, 3.0)
    assert ratio(Band(10.0, 9.0, 12.0), Band(2.0, 1.5, 3.0)) == Band(5.0, 3.0, 8.0)
    assert str(Band(2.0, 2.0, 2.0)) == "2" and str(Band(2.0, 1.0, 3.0)) == "2 (1–3)"


@pytest.mark.parametrize(
    "a, b, together",
    [
        (rows([1, 2, 3]), rows([4, 5, 6]), True),
        (rows([1, 2]), rows([4, 5, 6]), False),  # two runs are not a spread
        (rows([1, 2, 3], ["s1", "s2", "s3"]), rows([4, 5, 6], ["t1", "t2", "t3"]), False),  # seeds back to back
        (rows([1, 2, 3]), rows([4, 5, 6], suite="other"), False),  # two suites: a drift between them
    ],
)
def test_arms_are_interleaved_only_as_three_repeats_each_of_one_suite(a, b, together):
    assert interleaved(a, b) == together


@pytest.mark.parametrize(
    "a, b, sign",
    [
        ([10, 11, 12], [1, 2, 3], 1),
        ([1, 2, 3], [10, 11, 12], -1),
        ([1, 5, 9], [4, 5, 6], 0),  # ranges overlap
    ],
)
def test_versus_resolves_beyond_the_range_between_runs(a, b, sign):
    assert versus(rows(a), rows(b), "v")[2] == sign
    assert versus(rows(a[:1], ["x"]), rows(b[:1], ["y"]), "v")[2] is None  # one run each: cannot speak


def group(proxy: bool = False) -> pd.DataFrame:
    return pd.DataFrame({"proxy": [proxy], "model_name": ["minilm" if proxy else "bert-base-uncased"], "cls": ["gpu"]})


@pytest.mark.parametrize(
    "signs, proxy, verdict",
    [
        ([1, 1], False, "holds"),
        ([1, -1], False, "does not hold"),
        ([1, 0], False, "inconclusive"),
        ([1, None], False, "holds"),  # a comparison without a spread does not speak
        ([None, None], False, "inconclusive"),
        ([1, 1], True, "consistent on proxy"),
        ([0, -1], True, "contradicted on proxy"),
        ([], False, "not testable here"),
    ],
)
def test_comparisons_make_one_verdict_each_way(signs, proxy, verdict):
    evidence = Evidence()
    for i, sign in enumerate(signs):
        evidence.add(group(proxy), sign, f"head {i}", f"part {i}")
    found = evidence.finding("c", "p", "r", "no records", "needs runs")
    assert found.verdict == verdict, found.reason
    if not signs:
        assert (found.reason, found.measured) == ("needs runs", "no records")
    if None in signs:
        assert "not judged: no spread between runs" in found.reason
    if -1 in signs:
        assert found.headline == f"head {signs.index(-1)}"  # the comparison against the claim decides


def test_a_block_names_why_a_comparison_could_not_speak():
    evidence = Evidence(blocked=["an arm did not learn"])
    evidence.add(group(), None, "h", "p")
    found = evidence.finding("c", "p", "r", "", "")
    assert found.verdict == "inconclusive" and found.reason.startswith("an arm did not learn")


def test_an_unknown_verdict_is_refused():
    with pytest.raises(ValueError):
        Finding("c", "p", "m", "maybe", "r")


def test_a_claims_frame_has_numeric_parameters_and_named_variants():
    df = prepare(frame(arm("a100", "batch_scaling", {"batch": 8}, [1.0], "samples_per_s") + [rec("cpu", None, {})]))
    assert df["batch"].dtype.kind == "f" and list(df["variant"]) == ["full", "adhoc"]
