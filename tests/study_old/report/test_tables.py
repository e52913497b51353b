"""helpers/study/report/tables.py: a trend line says whether neighbouring rows differ beyond the range between
runs (three runs a row) or, with fewer, beyond the timing spread within a run."""

from __future__ import annotations

import pytest

from helpers.study.frame import frame
from helpers.study.report.tables import host_bound, trend
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


def gpu_steps(step_ms: dict[int, float], device: str = "a100") -> list[dict]:
    """Return batch_scaling runs of minilm, one per batch, with these step times."""
    return [
        record(device, "batch_scaling", {"model_name": "minilm", "batch": b}, run_name=f"bs-{b}", step_ms=ms)
        for b, ms in step_ms.items()
    ]


def test_a_flat_gpu_step_is_called_host_bound_and_a_growing_one_is_not():
    flat = frame(gpu_steps({8: 19.0, 16: 14.2, 32: 17.7, 64: 19.2}))  # the H200's batch_scaling, 8x the batch
    line = host_bound(flat, flat["device"].iloc[0])
    assert "the step is flat, 14.2–19.2 ms" in line and "measures the host, not the accelerator" in line
    growing = frame(gpu_steps({8: 20.0, 16: 35.0, 32: 70.0, 64: 140.0}))
    assert host_bound(growing, growing["device"].iloc[0]) == ""
    cpu = frame(gpu_steps({8: 19.0, 64: 19.2}, "cpu"))  # on a CPU the host is the device
    assert host_bound(cpu, cpu["device"].iloc[0]) == ""
