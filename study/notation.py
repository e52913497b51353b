"""How the study writes a value in a table or a sentence: numbers to 4 significant digits, the dash for
none, and a device's name short enough for a column header."""

from __future__ import annotations

import math

DASH = "—"


def fmt(value) -> str:
    """Return a number with 4 significant digits (thousands with separators), or the dash for none."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return DASH
    if isinstance(value, str):
        return value
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.4g}"


def short_device(name: str) -> str:
    """Return a device name short enough for a column header."""
    for long, short in (
        ("Intel(R) Xeon(R) Processor", "Xeon"),
        ("(R)", ""),
        ("(TM)", ""),
        ("NVIDIA ", ""),
        ("Processor", ""),
        ("AMD EPYC", "EPYC"),
    ):
        name = name.replace(long, short)
    return " ".join(name.split())


def header(command: str) -> str:
    """Return the first line of every generated Markdown file."""
    return f"<!-- Written by `{command}`; regenerate it, do not edit by hand. -->"
