"""study/drift.py: configurations two suites timed alike are found, and the drift between suites is the
largest gap between their medians on a device (none where no configuration was timed twice)."""

from __future__ import annotations

import pytest
from record_fixtures import record

from study.drift import agreement, drift_pcts
from study.frame import frame


def timed(suite: str, rates: list[float], batch: int = 16, subset: int = 1024) -> list[dict]:
    """Return runs of one minilm configuration in `suite` on this CPU, one per samples/s in `rates`."""
    return [
        record(
            "cpu",
            suite,
            {"model_name": "minilm", "batch": batch, "train_subset": subset, "seed": i},
            run_name=f"{suite}-{batch}-{i}",
            samples_per_s=r,
        )
        for i, r in enumerate(rates, 1)
    ]


def test_a_configuration_two_suites_timed_is_one_row_per_suite():
    rows = agreement(frame(timed("small_batch", [30, 32, 34]) + timed("batch_scaling", [40, 41, 42], subset=2048)))
    assert sorted(rows["suite"]) == ["batch_scaling", "small_batch"] and rows["config"].nunique() == 1
    assert list(rows.sort_values("suite")["median"]) == [41, 32] and list(rows["runs"]) == [3, 3]


def test_a_configuration_one_suite_timed_is_not_compared():
    df = frame(timed("small_batch", [30, 32, 34]) + timed("batch_scaling", [30, 31, 32], batch=32))
    assert agreement(df).empty


def test_the_drift_between_suites_is_the_largest_gap_between_their_medians():
    df = frame(timed("small_batch", [30, 32, 34]) + timed("batch_scaling", [40, 41, 42], subset=2048))
    assert drift_pcts(df) == {df["device_key"].iloc[0]: pytest.approx(100 * (41 - 32) / 32)}
    alone = frame(timed("small_batch", [30, 32, 34]))
    assert drift_pcts(alone) == {}


def test_single_runs_resolve_no_drift():
    """Two suites' single runs of one configuration: the table calls them unresolved, and no drift is taken."""
    df = frame(timed("small_batch", [30]) + timed("batch_scaling", [40], subset=2048))
    assert len(agreement(df)) == 2 and drift_pcts(df) == {}


@pytest.mark.parametrize(
    "other, compared",
    [
        ({}, True),
        ({"llrd_decay": 0.95}, False),  # LLRD's parameter groups change the update
        ({"lora_r": 8, "lora_targets": "query,value"}, False),
    ],
)
def test_configurations_are_identical_only_in_every_parameter_that_changes_the_work(other, compared):
    b = [
        record(
            "cpu",
            "batch_scaling",
            {"model_name": "minilm", "batch": 16, "seed": i, **other},
            run_name=f"b-{i}",
            samples_per_s=40,
        )
        for i in (1, 2, 3)
    ]
    assert (not agreement(frame(timed("small_batch", [30, 32, 34]) + b)).empty) is compared


def test_another_optimizer_is_another_configuration():
    a, b = timed("small_batch", [30, 32, 34]), timed("batch_scaling", [40, 41, 42])
    assert not agreement(frame(a + b)).empty
    for rec in b:
        rec["optimizer"] = {**(rec.get("optimizer") or {}), "class": "torchao.optim.AdamW"}
    assert agreement(frame(a + b)).empty


def test_a_profiled_run_times_no_drift():
    a, b = timed("small_batch", [30, 32, 34]), timed("batch_scaling", [40, 41, 42])
    for rec in b:
        rec["profile"] = {"class_share": {"matmul": 0.5, "host_gap": 0.1}}
    assert agreement(frame(a + b)).empty
