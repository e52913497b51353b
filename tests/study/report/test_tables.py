"""helpers/study/report/tables.py: a trend line says whether neighbouring rows differ beyond the range between
runs (three runs a row) or, with fewer, beyond the timing spread within a run."""

from __future__ import annotations

import pytest

from helpers.study.frame import frame
from helpers.study.report.tables import trend
from tests.record_fixtures import record

pytestmark = pytest.mark.usefixtures("no_library_versions")


def timed(rates: list[float], batch: int) -> list[dict]:
    """Return batch_scaling runs of minilm at `batch` on this CPU, one per samples/s in `rates`."""
    return [
        record(
            "cpu",
            "batch_scaling",
            {"model_name": "minilm", "batch": batch, "seed": i},
            run_name=f"batch_scaling-{batch}-{i}",
            samples_per_s=r,
        )
        for i, r in enumerate(rates, 1)
    ]


def test_the_trend_uses_the_range_between_runs_once_each_row_has_three():
    df = frame(timed([30, 45, 60], 16) + timed([35, 50, 65], 32))
    line = trend(df, "batch", "samples_per_s", df["device"].iloc[0])
    assert "range between runs" in line and "0 of 1 neighbouring steps differ" in line
    single = frame(timed([30], 16) + timed([60], 32))
    line = trend(single, "batch", "samples_per_s", single["device"].iloc[0])
    assert "within a run" in line and "1 of 1 neighbouring steps differ" in line
