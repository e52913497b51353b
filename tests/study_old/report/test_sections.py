"""helpers/study/report/sections.py: the speedup table's estimator is the claims' (the median of runs), so the
table, the claim and the plot print one number for one quantity."""

from __future__ import annotations

import pytest

from helpers.study.claims import speedup
from helpers.study.frame import frame
from helpers.study.report import sections
from helpers.study.sweep.suites import resolve_suite
from tests.record_fixtures import record

pytestmark = pytest.mark.usefixtures("no_library_versions")


def runs(preset: str, times: list[float]) -> list[dict]:
    """Return speedup-suite runs of `preset` on this CPU, one per train time."""
    return [
        record(
            "cpu",
            "speedup",
            {"model_name": "minilm", "preset": preset, "seed": i},
            run_name=f"s-{preset}-{i}",
            train_s=t,
        )
        for i, t in enumerate(times, 1)
    ]


@pytest.mark.parametrize("baseline", [[100.0, 100.0, 400.0], [100.0, 110.0, 120.0]])
def test_the_speedup_table_prints_the_claims_ratio_of_medians(baseline):
    """A slow outlier moves the mean (200 s, 2x) but not the median (100 s, 1x): the table follows the claim."""
    df = frame(runs("baseline", baseline) + runs("optimized", [50.0, 50.0, 50.0]))
    table = sections.speedup_section(resolve_suite("speedup"), df, "Experiment/published")
    row = next(line for line in table.splitlines() if line.startswith("| speedup"))
    median = sorted(baseline)[1] / 50.0
    assert f"| {median:.4g} " in row, row
    assert f"{median:.4g} " in speedup.speedup(df, "Experiment/published").measured
