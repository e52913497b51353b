"""study/report/agreement.py: identical configurations in different suites agree, differ or are not resolved, by the
range between runs, and the paragraph names each machine's drift between suites where runs resolve one."""

from __future__ import annotations

import pytest
from record_fixtures import record

from study.frame import frame
from study.report.agreement import agreement_markdown


def timed(suite: str, rates: list[float], batch: int = 16, subset: int = 1024) -> list[dict]:
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


@pytest.mark.parametrize("other, said", [([31, 33, 32], "agree"), ([40, 41, 42], "differ"), ([32], "not resolved")])
def test_identical_configurations_in_two_suites(other, said):
    df = frame(timed("small_batch", [30, 32, 34]) + timed("batch_scaling", other, subset=2048))
    tally = agreement_markdown(df).split("\n\n")[-1]
    assert {"agree": "1 agree", "differ": "1 differ", "not resolved": "1 are not resolved"}[said] in tally, tally


def test_the_paragraph_names_each_machines_drift_between_suites_only_where_runs_resolve_it():
    df = frame(timed("small_batch", [30, 32, 34]) + timed("batch_scaling", [40, 41, 42], subset=2048))
    assert "Xeon @ 2.80GHz 28.1%" in agreement_markdown(df)
    single = frame(timed("small_batch", [30]) + timed("batch_scaling", [40], subset=2048))
    assert "no configuration resolves one" in agreement_markdown(single)
    alone = frame(timed("small_batch", [30, 32, 34]))
    assert agreement_markdown(alone) == "No configuration was timed by more than one suite on one machine."
