"""Experiment/REPORT.md as a reader sees it (tests/study/report/browser.py: a code host's rendering, DejaVu fonts,
headless Chromium at 1000 x 1000), made from the committed records: the bottom line, every summary row and the counts
end within the first screen, and every table of the page fits its column. Skipped, saying which is missing, where
Chromium or its driver is not installed (`make browser` installs them)."""

from __future__ import annotations

import browser
import pytest

from study.claims import findings
from study.report.build import build_report

COLUMN_PX = 936


@pytest.fixture(scope="module")
def driver():
    reason = browser.missing_reason()
    if reason:
        pytest.skip(reason)
    chromium = browser.chromium()
    yield chromium
    chromium.quit()


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> str:
    """REPORT.md as `python -m study.report` writes it from the committed records (its tables; figures aside)."""
    out = tmp_path_factory.mktemp("report")
    build_report(out_dir=out / "Experiment", pictures_dir=out / "Pictures", plots=False)
    return (out / "Experiment" / "REPORT.md").read_text()


def test_the_first_screen_holds_the_bottom_line_every_summary_row_and_the_counts(driver, report, tmp_path):
    at = browser.layout(driver, report, tmp_path)
    assert at["screen"] == browser.SCREEN_PX and at["rows"] == len(findings.CLAIMS), at
    assert None not in (at["bottom_line"], at["summary"], at["counts"]), at
    assert at["bottom_line"] < at["summary"] < at["counts"] <= at["screen"], at


def test_every_table_of_the_first_page_fits_its_column(driver, report, tmp_path):
    widths = browser.layout(driver, report, tmp_path)["widths"]
    assert len(widths) >= 3 and max(widths) <= COLUMN_PX, widths  # the smoke table's samples/J and date included


def test_the_measure_fails_a_report_whose_summary_falls_below_the_first_screen(driver, report, tmp_path):
    top, rest = report.split("\n\n| claim", 1)
    at = browser.layout(driver, top + "\n\n" + "A paragraph in the way.\n\n" * 20 + "| claim" + rest, tmp_path)
    assert at["counts"] > at["screen"], at  # the same rows pushed down: the test above would fail
    wide = report + "\n\n| " + " | ".join(["a long column heading"] * 12) + " |\n|" + "---|" * 12 + "\n"
    assert max(browser.layout(driver, wide, tmp_path)["widths"]) > COLUMN_PX
