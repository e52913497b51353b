"""Experiment/REPORT.md as a reader sees it: rendered to HTML (markdown-it, GitHub's table style) and opened
in headless Chromium at a 1000 x 1000 window. The first screen holds the bottom line, every summary row and
the counts; the whole page is at most 10 screens. Needs selenium and Debian's chromium and chromium-driver
(`make browser`); skipped, saying which is missing, elsewhere.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
SCREEN_PX = 1000
MAX_SCREENS = 10
# GitHub's rendering of a Markdown file, near enough: its font size, line height, page width and table cells
STYLE = (
    "body{font-family:'DejaVu Sans',sans-serif;font-size:16px;line-height:1.5;max-width:980px;margin:0 auto;"
    "padding:16px 32px;box-sizing:border-box}table{border-collapse:collapse;display:block;width:max-content;max-width:100%;overflow:auto}"
    "th,td{padding:6px 13px;border:1px solid #d0d7de}p,table,ul{margin:0 0 16px}"
)


def missing_reason() -> str | None:
    """Return why the browser cannot be driven here, or None."""
    if importlib.util.find_spec("selenium") is None or importlib.util.find_spec("markdown_it") is None:
        return "selenium or markdown-it-py is not installed (requirements.txt)"
    for path, package in ((CHROMIUM, "chromium"), (CHROMEDRIVER, "chromium-driver")):
        if not os.access(path, os.X_OK):
            return f"{path} not found: install Debian's {package} (`make browser` does, as root)"
    return None


@pytest.fixture(scope="module")
def browser():
    reason = missing_reason()
    if reason:
        pytest.skip(reason)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    # the page's own area, 1000 x 1000 px, whatever the window's frame takes
    metrics = {"width": SCREEN_PX, "height": SCREEN_PX, "deviceScaleFactor": 1, "mobile": False}
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", metrics)
    yield driver
    driver.quit()


def layout(driver, markdown: str, folder: Path) -> dict:
    """Return where the page's parts end (px from the top): the bottom line, the summary table, the counts,
    the whole page, and the screen's height."""
    from markdown_it import MarkdownIt

    body = MarkdownIt("commonmark").enable("table").render(markdown)
    page = folder / "page.html"
    page.write_text(f"<html><head><meta charset='utf-8'><style>{STYLE}</style></head><body>{body}</body></html>")
    driver.get(page.as_uri())
    return driver.execute_script(
        """
        const bottom = (el) => el ? el.getBoundingClientRect().bottom + window.scrollY : null;
        const ps = [...document.querySelectorAll('p')];
        return {
          bottom_line: bottom(ps.find((p) => p.textContent.startsWith('Bottom line.'))),
          summary: bottom(document.querySelector('table')),
          rows: document.querySelectorAll('table')[0] ? document.querySelectorAll('table')[0].rows.length - 1 : 0,
          counts: bottom(ps.find((p) => /^Of \\d+ claims/.test(p.textContent))),
          page: document.documentElement.scrollHeight,
          screen: window.innerHeight,
        };
        """
    )


def test_the_first_screen_holds_the_bottom_line_every_summary_row_and_the_counts(browser, tmp_path):
    from helpers.study.claims import findings

    at = layout(browser, (REPO / "Experiment" / "REPORT.md").read_text(), tmp_path)
    assert at["screen"] == SCREEN_PX, at
    assert at["rows"] == len(findings.CLAIMS), at
    assert None not in at.values(), at
    assert at["bottom_line"] < at["summary"] < at["counts"] <= at["screen"], at
    assert at["page"] <= MAX_SCREENS * at["screen"], at


def test_the_measure_fails_a_report_whose_summary_falls_below_the_first_screen(browser, tmp_path):
    report = (REPO / "Experiment" / "REPORT.md").read_text()
    top, rest = report.split("\n\n| claim", 1)
    at = layout(browser, top + "\n\n" + "A paragraph in the way.\n\n" * 20 + "| claim" + rest, tmp_path)
    assert at["counts"] > at["screen"], at  # the same rows pushed down: the test above would fail
    long_page = report + "\n\n".join(["| a | b |\n|---|---|\n" + "| x | y |\n" * 60] * 5)
    assert layout(browser, long_page, tmp_path)["page"] > MAX_SCREENS * SCREEN_PX
