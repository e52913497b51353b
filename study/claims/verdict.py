"""What a claim's verdict stands on: the records of a comparison, each figure's estimate (the median of runs and
their range), whether the arms ran interleaved, and how the comparisons of a claim make one verdict.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from study.frame import Band, estimate
from study.notation import short_device

# "holds" / "does not hold" only on records of the claim's own kind (bert-base on a GPU or a trn1 NeuronCore);
# a proxy (another model, another device class) shows a direction. Each with its symbol in the summary
VERDICTS = {
    "holds": "✔",
    "does not hold": "✘",
    "consistent on proxy": "☑",
    "contradicted on proxy": "☒",
    "inconclusive": "?",
    "not testable here": "·",
}
ON_PROXY = {"holds": "consistent on proxy", "does not hold": "contradicted on proxy"}
CLASSES = {"gpu": "GPU", "trn1": "trn1 NeuronCore", "trn2": "trn2 NeuronCore", "inf2": "inf2 NeuronCore"}
CLASSES |= {"xla-cpu": "XLA on the CPU", "cpu": "CPU"}
PROXY = "The proxy rule applies (direction only)."
PROXY_RULE = (
    "Proxy rule: a record of another model than bert-base-uncased, or of another device class than a GPU or a "
    "trn1 NeuronCore, stands in only for the direction of an effect, and the verdict names it; a magnitude, an "
    "accuracy level or a ranking of devices needs bert-base on a GPU or a trn1 NeuronCore. Where any real record "
    "is here, proxies are left out."
)
MIN_RUNS = 3  # runs of each arm, repeats of one suite, before their range is a spread between runs
SPREAD = "the range between interleaved runs (≥ 3 repeats of each arm in one suite; arms without them are not judged)"
NO_SPREAD = "no spread between runs (timings: ≥ 3 interleaved repeats of each arm in one suite; accuracies: ≥ 2 seeds)"
ONE_RUN = "one run a cell (the study states no spread): on its own figures this rule is inconclusive"
NUMERIC = ("batch", "max_length", "lr", "seed", "pad_to_multiple_of", "num_devices", "optlevel")


@dataclass(frozen=True)
class Finding:
    """One claim of the study: its published figure, the figure measured here, the rule, the verdict and why."""

    claim: str
    published: str
    measured: str
    verdict: str
    rule: str
    reason: str = ""
    headline: str = ""  # the figure the verdict rests on, with its device ('' when nothing was compared)

    def __post_init__(self) -> None:
        if self.verdict not in VERDICTS:
            raise ValueError(f"verdict {self.verdict!r}; expected one of {tuple(VERDICTS)}")


def interleaved(*arms: pd.DataFrame) -> bool:
    """Return whether every arm has >= MIN_RUNS runs, repeats (`-rep<r>`) of one suite, which ran interleaved."""
    # a suite's repeats run every cell once, then every cell again; seeds of a cell run back to back
    suites = {s for arm in arms for s in arm["suite"].dropna()}
    return len(suites) == 1 and all(
        len(arm) >= MIN_RUNS and arm["run_name"].astype(str).str.contains("-rep").any() for arm in arms
    )


def versus(a_rows: pd.DataFrame, b_rows: pd.DataFrame, metric: str) -> tuple[Band, Band, int | None]:
    """Return both arms' estimates, and +1 if a's runs all lie above b's, -1 all below, 0 overlapping, None: no
    spread."""
    a, b = estimate(a_rows, metric), estimate(b_rows, metric)
    if not interleaved(a_rows, b_rows):
        return a, b, None
    return a, b, 1 if a.lo > b.hi else (-1 if a.hi < b.lo else 0)


def prepare(df: pd.DataFrame) -> pd.DataFrame:
    """Return frame.frame()'s rows with numeric parameters and every variant named ('adhoc' outside a suite)."""
    df = df.assign(**{name: pd.to_numeric(df[name], errors="coerce") for name in NUMERIC})
    return df.assign(variant=df["variant"].fillna("adhoc")).copy()  # one block a dtype: filters copy it fast


def profiled(df: pd.DataFrame) -> pd.Series:
    """Return, per row, whether torch.profiler's op classes were recorded (records before v6 timed those steps)."""
    shares = [c for c in df if c.startswith("share_")]
    return df[shares].notna().any(axis=1) if shares else pd.Series(False, index=df.index)


def cells(
    df: pd.DataFrame, suites: tuple[str, ...], classes: tuple[str, ...] = tuple(CLASSES), timed: bool = False
) -> list[pd.DataFrame]:
    """Return the finished rows of `suites` on `classes` per (device, variant, suite); only the real ones if any is."""
    rows = df[df["suite"].isin(suites) & df["cls"].isin(classes) & (df["status"] == "finished")]
    if timed:  # the profiler slows the steps it watches
        rows = rows[~profiled(rows)]
    if (~rows["proxy"]).any():
        rows = rows[~rows["proxy"]]
    return [g for _, g in rows.groupby(["device_key", "variant", "suite"], sort=True)]


def who(rows: pd.DataFrame) -> str:
    """Return 'device [class], variant suite, model, N runs' for a group of rows."""
    r, n = rows.iloc[0], len(rows)
    return (
        f"{device(rows)} [{CLASSES[r['cls']]}], {r['variant']} {r['suite']}, {r['model_name']}, "
        f"{n} run{'s' if n != 1 else ''}"
    )


def device(rows: pd.DataFrame) -> str:
    """Return the short name of a group's device."""
    return short_device(str(rows.iloc[0]["device"]))


def listing(groups: list[pd.DataFrame]) -> str:
    """Return 'device [class], variant suite, model, N runs; ...' for groups that were not judged."""
    return "; ".join(who(g) for g in groups) or "no records"


@dataclass
class Evidence:
    """A claim's comparisons: each one's sign (None: it cannot speak), headline and words, and what blocked it."""

    groups: list[pd.DataFrame] = field(default_factory=list)  # one per comparison: whose proxy it is
    signs: list[int | None] = field(default_factory=list)  # +1 the claimed direction, -1 against, 0 within spread
    heads: list[str] = field(default_factory=list)
    parts: list[str] = field(default_factory=list)
    blocked: list[str] = field(default_factory=list)

    def add(self, group: pd.DataFrame, sign: int | None, head: str, part: str) -> None:
        """Note one comparison of `group`."""
        self.groups.append(group)
        self.signs.append(sign)
        self.heads.append(head)
        self.parts.append(part)

    def finding(self, claim: str, published: str, rule: str, empty: str, needs: str) -> Finding:
        """Return the Finding: not testable without comparisons (the reason: `needs`), else their verdict."""
        if not self.signs:
            return Finding(claim, published, empty, "not testable here", rule, needs)
        speaking = [s for s in self.signs if s is not None]
        verdict = "inconclusive"
        if any(s < 0 for s in speaking):
            verdict = "does not hold"
        elif speaking and all(s > 0 for s in speaking):
            verdict = "holds"
        proxy = ", ".join(
            dict.fromkeys(
                f"{g['model_name'].iloc[0]} on {CLASSES[g['cls'].iloc[0]]}" for g in self.groups if g["proxy"].iloc[0]
            )
        )
        verdict = ON_PROXY.get(verdict, verdict) if proxy else verdict
        mute, reasons = len(self.signs) - len(speaking), list(self.blocked)
        if speaking:
            reasons.append(
                f"{sum(s > 0 for s in speaking)} of {len(speaking)} comparisons resolved in the claimed direction, "
                f"{sum(s < 0 for s in speaking)} against it"
            )
        if mute and not self.blocked:
            reasons.append(f"{mute} of {len(self.signs)} comparisons not judged: {NO_SPREAD}")
        if proxy:
            reasons.append(f"direction only, on proxy: {proxy}")
        reason = "; ".join(reasons)
        return Finding(claim, published, "; ".join(self.parts), verdict, rule, reason, self.deciding())

    def deciding(self) -> str:
        """Return the heads that decided: the first against the claim, else the open ones (up to 2) unless one is for
        it and none within its spread, else the first for it."""
        by = {k: [h for s, h in zip(self.signs, self.heads) if s == k] for k in (-1, 0, 1, None)}
        if by[-1] or (by[1] and not by[0]):
            return (by[-1] or by[1])[0]
        open_ = by[0] or by[None]
        return "; ".join(open_[:2]) + (f"; {len(open_) - 2} more" if len(open_) > 2 else "")
