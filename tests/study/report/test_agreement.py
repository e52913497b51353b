"""Identical configurations in different suites: agree, differ or not resolved, by the range between runs."""
from __future__ import annotations

import pytest

from helpers.run import records
from helpers.study.report.agreement import agreement, agreement_markdown, drift_pct
from helpers.study.frame import frame
from helpers.study.report.tables import trend
from tests.record_fixtures import record


@pytest.fixture(autouse=True)
def no_library_versions(monkeypatch):
    monkeypatch.setattr(records, "library_versions", lambda: {})


def timed(suite: str, rates: list[float], batch: int = 16, subset: int = 1024) -> list[dict]:
    return [record("cpu", suite, {"model_name": "minilm", "batch": batch, "train_subset": subset, "seed": i},
                   run_name=f"{suite}-{batch}-{i}", samples_per_s=r) for i, r in enumerate(rates, 1)]


@pytest.mark.parametrize("other, said", [([31, 33, 32], "agree"), ([40, 41, 42], "differ"),
                                         ([32], "not resolved")])
def test_identical_configurations_in_two_suites(other, said):
    df = frame(timed("small_batch", [30, 32, 34]) + timed("batch_scaling", other, subset=2048))
    tally = agreement_markdown(df).split("\n\n")[-1]
    assert {"agree": "1 agree", "differ": "1 differ", "not resolved": "1 are not resolved"}[said] in tally, tally


def test_a_configuration_one_suite_timed_is_not_compared():
    df = frame(timed("small_batch", [30, 32, 34]) + timed("batch_scaling", [30, 31, 32], batch=32))
    assert agreement(df).empty


def test_the_trend_uses_the_range_between_runs_once_each_row_has_three():
    df = frame(timed("batch_scaling", [30, 45, 60]) + timed("batch_scaling", [35, 50, 65], batch=32))
    line = trend(df, "batch", "samples_per_s", df["device"].iloc[0])
    assert "range between runs" in line and "0 of 1 neighbouring steps differ" in line
    single = frame(timed("batch_scaling", [30]) + timed("batch_scaling", [60], batch=32))
    line = trend(single, "batch", "samples_per_s", single["device"].iloc[0])
    assert "within a run" in line and "1 of 1 neighbouring steps differ" in line


def test_the_drift_between_suites_is_the_largest_gap_between_their_medians():
    df = frame(timed("small_batch", [30, 32, 34]) + timed("batch_scaling", [40, 41, 42], subset=2048))
    assert drift_pct(df, df["device_key"].iloc[0]) == pytest.approx(100 * (41 - 32) / 32)
    assert drift_pct(df, "another-device") is None
    assert "drift between suites" in agreement_markdown(df) and "Xeon @ 2.80GHz 28.1%" in agreement_markdown(df)
    alone = frame(timed("small_batch", [30, 32, 34]))
    assert drift_pct(alone, alone["device_key"].iloc[0]) is None
