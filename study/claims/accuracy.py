"""What an accuracy figure can carry: the mean over seeds with its 95% interval (one seed: the test set's
binomial error, shown and never a verdict's spread), differences paired by seed, and whether a cell learned.
"""

from __future__ import annotations

import math
import statistics

import pandas as pd
from scipy import stats

Z95 = 1.959964
# an arm this far below the best its model reached on the device, at that budget, did not learn
FLOOR_POINTS = 5.0
TRAIN_ROWS = 16000  # dair-ai/emotion's training split: the rows a run without train_subset trains on per epoch
# what makes two runs the same cell (seeds and repeats aside)
CELL = ("suite", "variant", "lr", "llrd_decay", "precision", "max_length", "batch", "lora_r", "lora_targets")


def binomial_half_width(p: float, rows: int) -> float:
    """Return the 95% half-width of an accuracy p measured on `rows` test rows (normal approximation)."""
    return Z95 * math.sqrt(p * (1 - p) / rows)


def mean_interval(values: list[float], rows: int | None = None) -> tuple[float, float, str]:
    """Return the mean, the 95% half-width and what the interval covers ('seeds', 'test set' for one, or '')."""
    values = [v for v in values if v is not None and math.isfinite(v)]
    if not values:
        return math.nan, math.nan, ""
    mean = statistics.fmean(values)
    if len(values) == 1:
        return mean, binomial_half_width(mean, rows) if rows else math.nan, "test set"
    half = stats.t.ppf(0.975, len(values) - 1) * statistics.stdev(values) / math.sqrt(len(values))
    return mean, half, "seeds"


def seeds_interval(values: list[float]) -> tuple[float, float]:
    """Return the mean and its 95% half-width over >= 2 seeds (NaN half-width for fewer: no spread)."""
    mean, half, over = mean_interval(values)
    return mean, half if over == "seeds" else math.nan


def gap(a: list[float], b: list[float]) -> tuple[float, float]:
    """Return mean(a) - mean(b) in points and its 95% half-width (the halves combined; NaN under 2 seeds a side)."""
    (ma, ha), (mb, hb) = seeds_interval(a), seeds_interval(b)
    return 100 * (ma - mb), 100 * math.hypot(ha, hb)


def side(mean: float, half: float, threshold: float = 0.0) -> int | None:
    """Return +1 if the interval mean ± half lies above `threshold`, -1 below, 0 across it, None without one."""
    if not math.isfinite(half):
        return None
    return 1 if mean - half > threshold else (-1 if mean + half < threshold else 0)


def paired_diffs(df: pd.DataFrame, column: str, mode: str, ref: str, by: str) -> dict:
    """Return per value of `by` the differences mode - ref of `test_acc` between runs with the same seed."""
    wide = df.pivot_table(index=[by, "seed"], columns=column, values="test_acc", aggfunc="mean")
    if mode not in wide or ref not in wide:
        return {}
    diff = (wide[mode] - wide[ref]).dropna()
    return {key: list(group.values) for key, group in diff.groupby(level=0)}


def trained_rows(rows: pd.DataFrame) -> pd.Series:
    """Return each run's training rows seen: rows an epoch (train_subset, else the whole split) x epochs."""
    subset = pd.to_numeric(rows["train_subset"], errors="coerce").fillna(TRAIN_ROWS)
    return subset * pd.to_numeric(rows["epochs"], errors="coerce").fillna(1)


def learning_floor(df: pd.DataFrame, arm: pd.DataFrame) -> tuple[float, str] | None:
    """Return (floor, where it comes from): FLOOR_POINTS below the best cell of the arm's model, device and budget."""
    r = arm.iloc[0]
    done = df[
        (df["model_name"] == r["model_name"])
        & (df["device_key"] == r["device_key"])
        & (df["status"] == "finished")
        & df["test_acc"].notna()
    ]
    budget = float(trained_rows(arm).median())
    done = done[trained_rows(done) <= budget]
    if done.empty:
        return None
    means = done.groupby(list(CELL), dropna=False)["test_acc"].mean()
    top = int(means.to_numpy().argmax())  # by position: a key holding NaN cannot be looked up by label
    key, best = means.index[top], means.iloc[top]
    return best - FLOOR_POINTS / 100, (
        f"{FLOOR_POINTS:g} points below {100 * best:.2f}%, the best mean test accuracy of {r['model_name']} on this "
        f"device within {budget:,.0f} training rows ({key[0]} {key[1]}, lr {key[2]:g})"
    )


def learned(df: pd.DataFrame) -> pd.Series:
    """Return per row whether its cell's mean is at or above its learning floor (True without accuracy or floor)."""
    out = pd.Series(True, index=df.index)
    rows = df[df["test_acc"].notna() & (df["status"] == "finished")]
    for _, cell in rows.groupby(["device_key", "model_name", *CELL], dropna=False, sort=False):
        found = learning_floor(df, cell)
        if found and cell["test_acc"].mean() < found[0]:
            out[cell.index] = False
    return out


def unlearned(df: pd.DataFrame, arms: dict[str, pd.DataFrame]) -> str:
    """Return 'an arm did not learn: NAME (x%) below the floor y% (where)' naming every such arm, or ''."""
    below, source = [], ""
    for name, arm in arms.items():
        found = learning_floor(df, arm)
        acc = arm["test_acc"].mean()
        if found and acc < found[0]:
            below.append(f"{name} ({100 * acc:.2f}%)")
            source = f"{100 * found[0]:.2f}%: {found[1]}"
    return f"an arm did not learn: {', '.join(below)} below the floor {source}" if below else ""
