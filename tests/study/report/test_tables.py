"""study/report/tables.py: a timing cell and a trend line take the one estimator (the median of runs, their range),
a single run's own spread said to be within it, and a host-bound accelerator's flat step is said."""

from __future__ import annotations

from record_fixtures import record

from study.frame import frame
from study.report.tables import host_bound, spread_cell, trend


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


def test_a_timing_cell_says_whether_its_spread_is_between_runs_or_within_them():
    assert spread_cell(frame(timed([30, 45, 60], 16)), "samples_per_s") == "45 (30–60, 3 runs)"
    assert spread_cell(frame(timed([30, 60], 16)), "samples_per_s") == "45 (30–60, 2 runs)"
    assert spread_cell(frame(timed([30], 16)), "samples_per_s") == "30 (one run; within it 29.1–30.9)"
    assert spread_cell(frame(timed([30, 60], 16)), "test_acc") == "90 (90–90, 2 runs)"  # not a timing: runs' range


def test_the_trend_uses_the_range_between_runs_once_each_row_has_three():
    df = frame(timed([30, 45, 60], 16) + timed([35, 50, 65], 32))
    line = trend(df, "batch", "samples_per_s", df["label"].iloc[0])
    assert "range between runs" in line and "0 of 1 neighbouring steps differ" in line
    single = frame(timed([30], 16) + timed([60], 32))
    line = trend(single, "batch", "samples_per_s", single["label"].iloc[0])
    assert line.endswith(
        "(2.00x); not resolved: fewer than 3 runs a row, no range between runs to tell neighbours apart."
    )


def gpu_steps(step_ms: dict[int, float], device: str = "h200") -> list[dict]:
    """Return batch_scaling runs of minilm, one per batch, with these step times."""
    return [
        record(device, "batch_scaling", {"model_name": "minilm", "batch": b}, run_name=f"bs-{b}", step_ms=ms)
        for b, ms in step_ms.items()
    ]


def test_a_flat_gpu_step_is_called_host_bound_and_a_growing_one_is_not():
    flat = frame(gpu_steps({8: 19.0, 16: 14.2, 32: 17.7, 64: 19.2}))  # the H200's batch_scaling, 8x the batch
    line = host_bound(flat, flat["label"].iloc[0])
    assert line.startswith("On H200 (host-bound) the step is flat, 14.2–19.2 ms") and "measures the host" in line
    growing = frame(gpu_steps({8: 20.0, 16: 35.0, 32: 70.0, 64: 140.0}))
    assert host_bound(growing, growing["label"].iloc[0]) == ""
    cpu = frame(gpu_steps({8: 19.0, 64: 19.2}, "cpu"))  # on a CPU the host is the device
    assert host_bound(cpu, cpu["label"].iloc[0]) == ""
