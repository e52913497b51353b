"""study/report/sections.py: the speedup table prints the one estimator's ratio (the claims' and the figure's) with
the host-bound status of its device, published accuracies in %, the padding text the table's medians."""

from __future__ import annotations

import pytest
from record_fixtures import record

from study import frame as frames
from study.frame import frame
from study.report import sections
from study.sweep.suites import resolve_suite


def runs(preset: str, times: list[float], device: str = "cpu") -> list[dict]:
    """Return speedup-suite runs of `preset`, one per train time."""
    return [
        record(
            device,
            "speedup",
            {"model_name": "minilm", "preset": preset, "seed": i},
            run_name=f"s-{preset}-{i}",
            train_s=t,
        )
        for i, t in enumerate(times, 1)
    ]


@pytest.mark.parametrize("baseline", [[100.0, 100.0, 400.0], [100.0, 110.0, 120.0]])
def test_the_speedup_table_prints_the_one_estimators_ratio_of_medians(baseline):
    """A slow outlier moves the mean (200 s, 2x) but not the median (100 s, 1x): one number for one quantity."""
    df = frame(runs("baseline", baseline) + runs("optimized", [50.0, 50.0, 50.0]))
    table = sections.speedup_section(resolve_suite("speedup"), df, "Experiment/published")
    row = next(line for line in table.splitlines() if line.startswith("| speedup"))
    base, opt = (frames.estimate(df[df["preset"] == p], "train_s") for p in ("baseline", "optimized"))
    assert f"| {frames.ratio(base, opt)} " in row and f"| {sorted(baseline)[1] / 50.0:.4g} (" in row, row


def test_a_host_bound_device_says_so_where_its_speedup_stands():
    steps = [record("h200", "batch_scaling", {"batch": b}, run_name=f"b{b}", step_ms=19.0) for b in (8, 64)]
    df = frame(steps + runs("baseline", [4.0] * 3, "h200") + runs("optimized", [1.4] * 3, "h200"))
    table = sections.speedup_section(resolve_suite("speedup"), df[df["suite"] == "speedup"], "Experiment/published")
    assert "measured (H200 (host-bound), " in table.splitlines()[0]


def test_published_accuracies_are_in_percent_as_every_page_gives_them():
    text = sections.section(resolve_suite("compiler_flags"), frame([]), "Experiment/published")
    assert "test accuracy %, published (trn1)" in text and "| 94.60 " in text and "| 0.946 " not in text


def test_the_padding_text_quotes_the_medians_of_the_table():
    recs = [
        record(
            "xla-cpu",
            "padding",
            {"padding": "dynamic", "max_length": 64, "batch": 8, "seed": i},
            run_name=f"d{i}",
            compile_s=s,
            compilations=11,
            shapes={"distinct": 8, "counts": {"8x64": 10}},
        )
        for i, s in enumerate((77.41, 78.31, 86.31))
    ]
    text = sections.section(resolve_suite("padding"), frame(recs), "Experiment/published")
    assert "graphs for 8 distinct batch shapes in 78.31 s" in text and "77.41 s" not in text.split("Estimate")[1]


def test_a_suite_the_sweep_accepts_without_report_keys_gets_a_section_that_says_so(tmp_path):
    import dataclasses

    suite = dataclasses.replace(resolve_suite("batch_scaling"), report={"keys": []})
    text = sections.section(suite, frame([record("cpu", "batch_scaling", {"batch": 8})]))
    assert "No table: the suite's file names no `[report]` `keys`" in text
