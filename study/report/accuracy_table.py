"""Accuracy cells of the report's tables: the mean over seeds with its 95% interval (one seed: the test set's
binomial error, labelled so), whether a cell learned (the claims' criterion), and which cell is best and by how much
this sample tells it from the runner-up."""

from __future__ import annotations

import math
import statistics

import pandas as pd
from scipy import stats

from study.claims import accuracy
from study.claims.accuracy import FLOOR_POINTS, binomial_half_width, mean_interval
from study.claims.verdict import prepare
from study.notation import DASH


def fmt_interval(values: list[float], rows: int | None, seeds: int | None = None) -> str:
    """Return 'mean ± half-width' in percent (the dash for none); one seed: the test set's sampling error, said so."""
    mean, half, _ = mean_interval(values, rows)
    if math.isnan(mean):
        return DASH
    if seeds is not None and seeds < 2:
        error = f"; test-set sampling error {100 * binomial_half_width(mean, rows):.2f} points, 95%" if rows else ""
        return f"{100 * mean:.2f} (one seed{error})"
    return f"{100 * mean:.2f}" + ("" if math.isnan(half) else f" ± {100 * half:.2f}")


def seeds(rows: pd.DataFrame) -> int:
    """Return how many different seeds a cell's runs used (runs without one count as one seed)."""
    return max(int(rows["seed"].nunique()), 1)


def accuracy_table(df: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Return per cell: seeds, test accuracy % (95% interval), validation %, final loss, and whether it learned."""
    rows, ok = {}, learned(df)
    for key, g in df.groupby(keys, dropna=False, sort=True):
        test_rows = int(g["test_rows"].max()) if g["test_rows"].notna().any() else None
        n = seeds(g)
        rows[key] = {
            "seeds": str(n) + (f" ({len(g)} runs)" if len(g) != n else ""),
            "test accuracy %": fmt_interval(list(g["test_acc"]), test_rows, n),
            "validation accuracy %": fmt_interval(list(g["val_acc"]), None, n),
            "final loss": f"{g['final_loss'].mean():.3f}" if g["final_loss"].notna().any() else DASH,
            "learned?": "yes" if ok[g.index].all() else f"no: below the floor ({FLOOR_POINTS:g} points)",
        }
    out = pd.DataFrame.from_dict(rows, orient="index")
    out.index = pd.MultiIndex.from_tuples(out.index, names=keys) if len(keys) > 1 else out.index.rename(keys[0])
    return out


def learned(df: pd.DataFrame) -> pd.Series:
    """Return whether each run's cell learned: the report's `learned` column (the claims' criterion), else computed."""
    return (df["learned"] if "learned" in df else accuracy.learned(prepare(df))).astype(bool)


def resolvable(values: list[float], rows: int | None) -> float:
    """Return the smallest difference between two cells of this size that a 95% interval resolves (a fraction)."""
    if len(values) >= 2:  # two cells of n seeds each, pooled: t at 2n - 2 degrees of freedom
        return stats.t.ppf(0.975, 2 * len(values) - 2) * statistics.stdev(values) * math.sqrt(2 / len(values))
    return math.sqrt(2) * binomial_half_width(values[0], rows) if values and rows else math.nan


def best_cell(df: pd.DataFrame, keys: list[str]) -> str:
    """Return a sentence naming the best cell that learned, its runner-up, and whether this sample tells them apart."""
    done = df[learned(df)]
    if done.empty:
        return "No cell learned (every cell's mean is below its learning floor): this sample says nothing."
    means = done.groupby(keys)["test_acc"].agg(["mean", "count"]).sort_values("mean", ascending=False)
    name = lambda key: ", ".join(f"{k}={v}" for k, v in zip(keys, key if isinstance(key, tuple) else (key,)))  # noqa: E731
    best = means.index[0]
    text = f"Best cell: {name(best)} at {100 * means.iloc[0]['mean']:.2f}% test accuracy ({int(means.iloc[0]['count'])} seed(s))."
    if len(means) > 1:
        rows = int(done["test_rows"].max()) if done["test_rows"].notna().any() else None
        smallest = resolvable(list(done.set_index(keys)["test_acc"].loc[[best]]), rows)
        gap = means.iloc[0]["mean"] - means.iloc[1]["mean"]
        text += (
            f" Runner-up {name(means.index[1])} is {100 * gap:.2f} points lower; the smallest difference this sample "
            f"resolves is {100 * smallest:.2f} points, so the order is {'resolved' if gap > smallest else 'not resolved'}."
        )
    left = len(df) - len(done)
    return text + (f" {left} run(s) of cells that did not learn are left out." if left else "")
