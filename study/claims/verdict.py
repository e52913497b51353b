"""What a finding stands on: the device class of a record, whether it is a proxy, a cell's timing band,
and how the per-device comparisons of a claim combine into one verdict graded by its evidence.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
import pandas as pd

from helpers.study.drift import drift_pcts
from helpers.study.frame import MIN_RUNS, profiled
from helpers.study.notation import fmt, short_device

# "holds" / "does not hold" only on records of the claim's own kind (bert-base on a GPU or a trn1 NeuronCore);
# a proxy shows a direction and a model (an estimate from shapes, prices, memory arithmetic) a consistency.
# Each with its symbol in the summary, so that a reader tells them apart at a glance (DejaVu Sans draws each)
VERDICTS = {
    "holds": "✔",
    "does not hold": "✘",
    "consistent on proxy": "☑",
    "contradicted on proxy": "☒",
    "consistent with the model": "≈",
    "contradicted by the model": "≉",
    "inconclusive": "?",
    "not testable here": "·",
}
GRADES = {
    "proxy (direction only)": ("consistent on proxy", "contradicted on proxy"),
    "estimate": ("consistent with the model", "contradicted by the model"),
}
CLASSES = {"gpu": "GPU", "trn1": "trn1 NeuronCore", "xla-cpu": "XLA on the CPU", "cpu": "CPU"}
PROXY = "The proxy rule applies (direction only)."
PROXY_RULE = (
    "Proxy rule: a record of another model than bert-base-uncased, "
    "or of the CPU or XLA on the CPU, "
    "stands in only for the direction of an effect, and the verdict names it; a magnitude, an "
    "accuracy level or a ranking of devices needs bert-base on a GPU or a trn1 NeuronCore. Where "
    "any real record is here, proxies are left out."
)
# None -> NaN
NUMERIC = ("batch", "max_length", "lr", "seed", "pad_to_multiple_of", "num_devices", "optlevel")


@dataclass(frozen=True)
class Finding:
    """One claim of the study: its published evidence, the evidence here, the verdict, its rule and why."""

    claim: str
    published: str
    measured: str
    verdict: str
    rule: str
    reason: str = ""
    basis: str = "measured"  # measured | proxy (direction only) | estimate | none
    headline: str = ""  # the one number the verdict rests on, with its device ('' when nothing was compared)

    def __post_init__(self) -> None:
        if self.verdict not in VERDICTS:
            raise ValueError(f"verdict {self.verdict!r}; expected one of {tuple(VERDICTS)}")
        if self.basis in GRADES and self.verdict in ("holds", "does not hold"):
            # the grade of the evidence, in the verdict itself: never a plain "holds" on a proxy or a model
            consistent, contradicted = GRADES[self.basis]
            object.__setattr__(self, "verdict", consistent if self.verdict == "holds" else contradicted)


class Band(NamedTuple):
    """A cell's median and the spread around it (timing windows, step p10-p90, or runs' min-max)."""

    mid: float
    lo: float
    hi: float

    def __str__(self) -> str:
        if math.isclose(self.lo, self.hi):
            return fmt(self.mid)
        return f"{fmt(self.mid)} ({fmt(self.lo)}–{fmt(self.hi)})"


def prepare(df: pd.DataFrame) -> pd.DataFrame:
    """Return frame.frame()'s rows with numeric parameters and every variant named ('adhoc' outside a suite)."""
    df = df.assign(**{name: pd.to_numeric(df[name], errors="coerce") for name in NUMERIC})
    return df.assign(variant=df["variant"].fillna("adhoc"))


def cells(
    df: pd.DataFrame,
    suites: tuple[str, ...],
    classes: tuple[str, ...] = tuple(CLASSES),
    prefer_real: bool = True,
    timed: bool = False,
) -> list[pd.DataFrame]:
    """Return the finished rows of `suites` on `classes` per (device, variant, suite); only the real ones if any is."""
    rows = df[df["suite"].isin(suites) & df["cls"].isin(classes) & (df["status"] == "finished")]
    if timed:  # the profiler slows the steps it watches
        rows = rows[~profiled(rows)]
    if prefer_real and (~rows["proxy"]).any():
        rows = rows[~rows["proxy"]]
    return [g for _, g in rows.groupby(["device_key", "variant", "suite"], sort=True)]


def who(rows: pd.DataFrame) -> str:
    """Return 'device (class), variant suite, model, N runs' for a group of rows."""
    r = rows.iloc[0]
    n = len(rows)
    return (
        f"{short_device(str(r['device']))} [{CLASSES[r['cls']]}], {r['variant']} {r['suite']}, "
        f"{r['model_name']}, {n} run{'s' if n != 1 else ''}"
    )


def proxies(groups: list[pd.DataFrame]) -> str:
    """Return the proxies among the groups, as 'model on class', or '' when every group is real."""
    found = dict.fromkeys(
        f"{g['model_name'].iloc[0]} on {CLASSES[g['cls'].iloc[0]]}" for g in groups if g["proxy"].iloc[0]
    )
    return ", ".join(found)


def band(rows: pd.DataFrame, metric: str) -> Band:
    """Return a metric's median over rows and its spread: between runs with >= 3 of them, else within the runs."""
    values = rows[metric].astype(float)
    if values.notna().sum() >= MIN_RUNS:
        lo, hi = values, values
    elif metric == "samples_per_s":
        lo, hi = rows["window_min"].fillna(values), rows["window_max"].fillna(values)
    elif metric == "step_ms":
        lo, hi = rows["step_ms_p10"].fillna(values), rows["step_ms_p90"].fillna(values)
    elif metric in ("train_s", "cost_usd"):
        rel = ((rows["step_ms_p90"] - rows["step_ms_p10"]) / (2 * rows["step_ms"])).astype(float).fillna(0)
        lo, hi = values * (1 - rel), values * (1 + rel)
    else:
        lo, hi = values, values
    return Band(float(values.median()), float(lo.min()), float(hi.max()))


def compare(a: Band, b: Band) -> int:
    """Return +1 when a is above b beyond both spreads, -1 when below, 0 when they overlap."""
    if any(math.isnan(x) for x in (*a, *b)):
        return 0
    return 1 if a.lo > b.hi else (-1 if a.hi < b.lo else 0)


def interleaved(*arms: pd.DataFrame) -> bool:
    """Return whether the arms ran interleaved in one suite, each with >= 3 runs of which some are repeats."""
    # a suite's repeats (`-rep<r>`) come every cell once, then every cell again; seeds of a cell run back to back
    suites = {s for arm in arms for s in arm["suite"].dropna()}
    repeated = all(len(arm) >= MIN_RUNS and arm["run_name"].astype(str).str.contains("-rep").any() for arm in arms)
    return len(suites) == 1 and repeated


def drift(df: pd.DataFrame, rows: pd.DataFrame) -> float | None:
    """Return the drift (%) between suites on the rows' device, else the largest any device shows, else None."""
    # a machine that timed no configuration in two suites is not known to drift less than the others
    drifts = drift_pcts(df)
    return drifts.get(str(rows["device_key"].iloc[0]), max(drifts.values(), default=None))


def compare_timed(a: Band, b: Band, together: bool, drift_pct: float | None) -> int:
    """Return compare(a, b); 0 for arms not run together whose gap is within the drift (or the drift unknown)."""
    sign = compare(a, b)
    if sign and not together:  # the drift is a noise the range between back-to-back runs does not show
        if drift_pct is None:
            return 0
        gap = 100 * abs(a.mid - b.mid) / min(a.mid, b.mid)
        return sign if gap > drift_pct else 0
    return sign


@dataclass
class Evidence:
    """A claim's comparisons: signs, headlines, groups judged, evidence in words, blocks, how each timed one ran."""

    df: pd.DataFrame
    groups: list[pd.DataFrame] = field(default_factory=list)
    signs: list[int] = field(default_factory=list)
    heads: list[str] = field(default_factory=list)  # one per comparison
    parts: list[str] = field(default_factory=list)
    blocked: list[str] = field(default_factory=list)  # comparisons that could not speak (an arm that did not learn)
    together: list[bool] = field(default_factory=list)
    drifts: list[float | None] = field(default_factory=list)
    resolvable: list[float] = field(default_factory=list)

    def compare(self, group: pd.DataFrame, arm_a: pd.DataFrame, arm_b: pd.DataFrame, a: Band, b: Band) -> int:
        """Return compare_timed(a, b) of two arms of `group`, noting how they ran."""
        self.together.append(interleaved(arm_a, arm_b))
        self.drifts.append(drift(self.df, group))
        self.resolvable.append(resolvable_pct(a, b))
        return compare_timed(a, b, self.together[-1], self.drifts[-1])

    def unresolved(self, spread: str) -> str:
        """Return `spread` and what bounded the comparisons: the range between interleaved runs, or the drift too."""
        known = [d for d, t in zip(self.drifts, self.together) if not t and d is not None]
        unknown = sum(1 for d, t in zip(self.drifts, self.together) if not t and d is None)
        parts = [spread]
        if known:
            parts.append(
                f"arms not interleaved: resolved only beyond the drift between suites ({max(known):.1f}%; a device "
                "that timed no configuration in two suites takes the largest another device here shows)"
            )
        if unknown:
            parts.append(
                "arms not interleaved and no device here measured the drift between suites: not resolved "
                "(interleaved repeats, or one configuration timed by two suites, would resolve them)"
            )
        return "; ".join(parts)

    def finding(
        self,
        claim: str,
        published: str,
        empty: str,
        rule: str,
        unresolved: str,
        needs: str,
        tested: bool | None = None,
        headline: str | None = None,
    ) -> Finding:
        """Return the Finding of the comparisons; untested (default: no groups), its reason is `needs`."""
        signs = self.signs
        verdict = combine(signs)
        reason = (
            f"{sum(s > 0 for s in signs)} of {len(signs)} comparisons resolved in the claimed direction, "
            f"{sum(s < 0 for s in signs)} against it"
        )
        if verdict == "inconclusive" and unresolved:  # what the sample could have resolved
            reason += f"; {unresolved}"
        proxy = proxies(self.groups)
        if proxy:
            reason += f"; direction only, on proxy: {proxy}"
        if self.blocked and verdict == "inconclusive":
            reason = "; ".join(self.blocked) + "; " + reason
        if not (bool(self.groups) if tested is None else tested):
            reason = needs
        basis = "none" if not signs else ("proxy (direction only)" if proxy else "measured")
        headline = deciding(signs, self.heads) if headline is None else headline
        return Finding(claim, published, "; ".join(self.parts) or empty, verdict, rule, reason, basis, headline)


def resolvable_pct(a: Band, b: Band) -> float:
    """Return the smallest relative difference (%) two cells with these spreads resolve: their half-widths summed."""
    return 100 * ((a.hi - a.lo) + (b.hi - b.lo)) / 2 / ((a.mid + b.mid) / 2)


def ratio(a: Band, b: Band) -> Band:
    """Return a / b with the band of the extreme ratios."""
    return Band(a.mid / b.mid, a.lo / b.hi, a.hi / b.lo)


def combine(signs: list[int]) -> str:
    """Return the verdict of comparisons: +1 the claimed effect resolved, -1 the opposite, 0 unresolved."""
    if not signs:
        return "not testable here"
    if any(s < 0 for s in signs):
        return "does not hold"
    return "holds" if all(s > 0 for s in signs) else "inconclusive"


def device(rows: pd.DataFrame) -> str:
    """Return the short name of a group's device (for a headline)."""
    return short_device(str(rows.iloc[0]["device"]))


def deciding(signs: list[int], heads: list[str]) -> str:
    """Return the heads that decided the verdict: the first against the claim, else the unresolved, else the first."""
    if -1 in signs:
        return heads[signs.index(-1)]
    open_ = [h for s, h in zip(signs, heads) if s == 0]
    if open_:
        return "; ".join(open_[:2]) + (f"; {len(open_) - 2} more unresolved" if len(open_) > 2 else "")
    return heads[0] if heads else ""


def listing(groups: list[pd.DataFrame]) -> str:
    """Return 'device (class), variant suite, model, N runs; ...' for groups that were not judged."""
    return "; ".join(who(g) for g in groups) or "no records"


def isclose(series: pd.Series, value: float) -> pd.Series:
    """Return where a column (numbers, or 'none' / None) equals `value` to float precision."""
    return np.isclose(pd.to_numeric(series, errors="coerce").astype(float), value, rtol=1e-9, atol=0)


def claim(fn: Callable[[pd.DataFrame, str], Finding]) -> Callable[[pd.DataFrame, str], Finding]:
    """Return a claim function that accepts the plain frame (it prepares it once)."""

    @functools.wraps(fn)
    def wrapped(df: pd.DataFrame, published_dir: str) -> Finding:
        return fn(prepare(df), published_dir)

    return wrapped
