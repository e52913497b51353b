"""What an accuracy figure can carry: intervals over seeds, the smallest difference a sample resolves,
paired differences by seed, and the runs that learned nothing (near the majority class).

Plain statistics over the frame's `test_acc` (a fraction) and `majority` columns. One run's interval is
the binomial one of its test set (it holds test-set noise only; seed-to-seed variation is not measured
then, and the tables say so); several seeds' is the t-interval of their mean.
"""
from __future__ import annotations

import math
import statistics

import pandas as pd
from scipy import stats

Z95 = 1.959964


def binomial_half_width(p: float, rows: int) -> float:
    """Return the 95% half-width of an accuracy p measured on `rows` test rows (normal approximation)."""
    return Z95 * math.sqrt(p * (1 - p) / rows)


def mean_interval(values: list[float], rows: int | None = None) -> tuple[float, float, str]:
    """Return the mean, the 95% half-width and what the interval covers ('seeds' or 'test set')."""
    values = [v for v in values if v is not None and math.isfinite(v)]
    if not values:
        return math.nan, math.nan, ""
    mean = statistics.fmean(values)
    if len(values) == 1:
        return mean, binomial_half_width(mean, rows) if rows else math.nan, "test set"
    half = stats.t.ppf(0.975, len(values) - 1) * statistics.stdev(values) / math.sqrt(len(values))
    return mean, half, "seeds"


def resolvable_difference(values: list[float], rows: int | None) -> float:
    """Return the smallest difference between two cells of this size that a 95% interval would resolve:
    t x the standard error of a difference of two means (two single runs: the binomial one)."""
    values = [v for v in values if v is not None and math.isfinite(v)]
    if len(values) >= 2:
        sd = statistics.stdev(values)
        n = len(values)
        return stats.t.ppf(0.975, 2 * n - 2) * sd * math.sqrt(2 / n)
    if len(values) == 1 and rows:
        p = values[0]
        return Z95 * math.sqrt(2 * p * (1 - p) / rows)
    return math.nan


def fmt_interval(values: list[float], rows: int | None, scale: float = 100, digits: int = 2) -> str:
    """Return 'mean ± half-width' in percent, with the dash for no values."""
    mean, half, _ = mean_interval(values, rows)
    if math.isnan(mean):
        return "—"
    return f"{scale * mean:.{digits}f}" + ("" if math.isnan(half) else f" ± {scale * half:.{digits}f}")


def paired_diffs(df: pd.DataFrame, column: str, mode: str, ref: str, by: str) -> dict:
    """Return per value of `by` the differences mode - ref of `test_acc` between runs with the same seed."""
    wide = df.pivot_table(index=[by, "seed"], columns=column, values="test_acc", aggfunc="mean")
    if mode not in wide or ref not in wide:
        return {}
    diff = (wide[mode] - wide[ref]).dropna()
    return {key: list(group.values) for key, group in diff.groupby(level=0)}


def accuracy_table(df: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Return per cell: seeds, test accuracy % (95% interval), validation %, final loss, and a flag for a
    cell whose runs ended near the majority class (they learned ~nothing and are left out of conclusions)."""
    rows = {}
    for key, g in df.groupby(keys, dropna=False, sort=True):
        test_rows = int(g["test_rows"].max()) if "test_rows" in g and g["test_rows"].notna().any() else None
        flagged = g["near_majority"].fillna(False).sum()
        rows[key] = {"seeds": str(len(g)),
                     "test accuracy %": fmt_interval(list(g["test_acc"]), test_rows),
                     "validation accuracy %": fmt_interval(list(g["val_acc"]), None),
                     "final loss": f"{g['final_loss'].mean():.3f}" if g["final_loss"].notna().any() else "—",
                     "learned?": (f"no: {flagged} of {len(g)} near the majority class "
                                  f"({100 * g['majority'].max():.1f}%)" if flagged else "yes")}
    out = pd.DataFrame.from_dict(rows, orient="index")
    out.index = pd.MultiIndex.from_tuples(out.index, names=keys) if len(keys) > 1 else out.index.rename(keys[0])
    return out


def best_cell(df: pd.DataFrame, keys: list[str]) -> str:
    """Return a sentence naming the best cell that learned, its runner-up, and whether this sample can
    tell them apart (their difference against the smallest resolvable one)."""
    learned = df[~df["near_majority"].fillna(False)]
    if learned.empty:
        return "No cell learned (every run ended near the majority class): this sample says nothing."
    means = learned.groupby(keys)["test_acc"].agg(["mean", "count"]).sort_values("mean", ascending=False)
    rows = int(learned["test_rows"].max()) if learned["test_rows"].notna().any() else None
    best = means.index[0]
    cells = learned.set_index(keys)["test_acc"]
    resolvable = resolvable_difference(list(cells.loc[[best]]), rows)
    text = (f"Best cell: {_name(keys, best)} at {100 * means.iloc[0]['mean']:.2f}% test accuracy "
            f"({int(means.iloc[0]['count'])} seed(s)).")
    if len(means) > 1:
        gap = means.iloc[0]["mean"] - means.iloc[1]["mean"]
        verdict = "resolved" if gap > resolvable else "not resolved"
        text += (f" Runner-up {_name(keys, means.index[1])} is {100 * gap:.2f} points lower; the smallest "
                 f"difference this sample resolves is {100 * resolvable:.2f} points, so the order is {verdict}.")
    dropped = len(df) - len(learned)
    if dropped:
        text += f" {dropped} run(s) near the majority class are left out."
    return text


def _name(keys: list[str], key) -> str:
    values = key if isinstance(key, tuple) else (key,)
    return ", ".join(f"{k}={v}" for k, v in zip(keys, values))
