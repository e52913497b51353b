"""Configurations alternated round by round in one process, and their paired per-round ratios.

The machines the bench runs on are shared and drift (other guests, other jobs): the same configuration's samples/s
moves by up to 20% within minutes. In one round every configuration runs once, back to back, in an order rotated
each round, so the drift cancels in each round's ratio; the median of those ratios is the figure, their range beside.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

from helpers import peaks


def others_busy(interval_s: float = 1.0) -> float:
    """Return how many cores processes other than this one kept busy over the next `interval_s` seconds."""
    mark = peaks.cpu_mark()
    time.sleep(interval_s)
    return peaks.others_cores(mark)


def wait_quiet(max_cores: float, timeout_s: float) -> float:
    """Wait until other processes use fewer than `max_cores` cores (at most `timeout_s`); return their last use."""
    deadline = time.perf_counter() + timeout_s
    while (busy := others_busy()) >= max_cores and time.perf_counter() < deadline:
        time.sleep(4.0)
    return busy


def alternate(runs: dict[str, Callable[[int], dict]], rounds: int, gate: Callable[[], float] | None = None) -> dict:
    """Return each configuration's results, one a round (`run(round)`), the order rotated each round."""
    names, out = list(runs), {name: [] for name in runs}
    for r in range(rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            other = gate() if gate else None  # the cores others kept busy just before this run
            out[name].append({**runs[name](r), "other_cores": other})
    return out


def paired_ratios(results: dict[str, list[dict]], num: str, den: str, key: str = "samples") -> list[float | None]:
    """Return `num`'s `key` / `den`'s per round (None where a side has none): the drift of a round cancels."""
    return [a[key] / b[key] if a.get(key) and b.get(key) else None for a, b in zip(results[num], results[den])]


def summary(ratios: list[float | None]) -> tuple[float | None, str]:
    """Return the median of the known per-round ratios and a line giving it with their range."""
    known = [x for x in ratios if x is not None]
    if not known:
        return None, "not measured (no round where both sides have a figure)"
    med = statistics.median(known)
    spread = f"range {min(known):.3f} .. {max(known):.3f}" if len(known) > 1 else "one round: no spread"
    return med, f"{med:.3f}x (median of {len(known)} per-round ratios, {spread})"
