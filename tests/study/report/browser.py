"""A page of Markdown as a reader sees it: rendered as a code host renders it (markdown-it, GitHub's table style,
the DejaVu fonts of a Linux desktop) in headless Chromium at a 1000 x 1000 window. Needs selenium and Debian's
chromium and chromium-driver (`make browser`); `missing_reason()` says which is missing elsewhere."""

from __future__ import annotations

import importlib.util
import os
import shutil
from pathlib import Path

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
SCREEN_PX = 1000
# GitHub's rendering of a Markdown file, near enough: its font size, line height, a 936 px column, table cells
STYLE = (
    "html{scrollbar-width:none}body{font-family:'DejaVu Sans',sans-serif;font-size:16px;line-height:1.5;width:936px;margin:0 auto;"
    "padding:32px;box-sizing:content-box}body>:first-child{margin-top:0}p,table,ul{margin:0 0 16px}"
    "h1,h2{font-weight:600;line-height:1.25;padding-bottom:.3em;border-bottom:1px solid #d0d7de;margin:24px 0 16px}"
    "h1{font-size:2em}h2{font-size:1.5em}table{border-spacing:0;border-collapse:collapse;display:block;"
    "width:max-content;max-width:100%;overflow:auto}th,td{padding:6px 13px;border:1px solid #d0d7de}th{font-weight:600}"
    "code{padding:.2em .4em;font-size:85%;font-family:'DejaVu Sans Mono',monospace}"
)


def missing_reason() -> str | None:
    """Return why the browser cannot be driven here, or None."""
    if importlib.util.find_spec("selenium") is None or importlib.util.find_spec("markdown_it") is None:
        return "selenium or markdown-it-py is not installed"
    for path, package in ((CHROMIUM, "chromium"), (CHROMEDRIVER, "chromium-driver")):
        if not os.access(path, os.X_OK):
            return f"{path} not found: install Debian's {package} (`make browser` does, as root)"
    return None


def chromium():
    """Return a headless Chromium whose page area is SCREEN_PX x SCREEN_PX."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    metrics = {"width": SCREEN_PX, "height": SCREEN_PX, "deviceScaleFactor": 1, "mobile": False}
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", metrics)
    return driver


def layout(driver, markdown: str, folder: Path) -> dict:
    """Return where the page's parts end (px from the top) and how wide its tables are against the column."""
    from markdown_it import MarkdownIt

    body = MarkdownIt("commonmark").enable("table").render(markdown)
    page = folder / "page.html"
    page.write_text(f"<html><head><meta charset='utf-8'><style>{STYLE}</style></head><body>{body}</body></html>")
    driver.get(page.as_uri())
    return driver.execute_script(
        """
        const bottom = (el) => el ? el.getBoundingClientRect().bottom + window.scrollY : null;
        const ps = [...document.querySelectorAll('p')];
        const tables = [...document.querySelectorAll('table')];
        return {
          bottom_line: bottom(ps.find((p) => p.textContent.startsWith('Bottom line.'))),
          summary: bottom(tables[0]),
          rows: tables[0] ? tables[0].rows.length - 1 : 0,
          counts: bottom(ps.find((p) => /^Of \\d+ claims/.test(p.textContent))),
          widths: tables.map((t) => t.scrollWidth),
          row_heights: tables[0] ? [...tables[0].rows].map((r) => r.getBoundingClientRect().height) : [],
          page: document.documentElement.scrollHeight,
          screen: window.innerHeight,
        };
        """
    )
