"""What an accuracy figure can carry: intervals over seeds (one run: its test set's binomial one), the
smallest difference a sample resolves, paired differences by seed, and whether a cell learned.
"""

from __future__ import annotations

import math
import statistics

import pandas as pd
from scipy import stats

Z95 = 1.959964
Z90 = 1.644854
# an arm this far below the best its model reached on the device, at that budget, did not learn
FLOOR_POINTS = 5.0
TRAIN_ROWS = 16000  # dair-ai/emotion's training split: the rows a run without train_subset trains on per epoch
# what makes two runs the same cell (seeds and repeats aside)
CELL = ("suite", "variant", "lr", "llrd_decay", "precision", "max_length", "batch", "lora_r", "lora_targets")


def sampling_error(p: float, rows: int, z: float = Z90) -> float:
    """Return the half-width of the test set's sampling error of an accuracy p on `rows` rows (binomial; 90%)."""
    return z * math.sqrt(p * (1 - p) / rows)


def trained_rows(rows: pd.DataFrame) -> pd.Series:
    """Return each run's training rows seen: rows an epoch (train_subset, else the whole split) x epochs."""
    subset = pd.to_numeric(rows["train_subset"], errors="coerce").fillna(TRAIN_ROWS)
    return subset * pd.to_numeric(rows["epochs"], errors="coerce").fillna(1)


def budget_rows(rows: pd.DataFrame) -> float:
    """Return an arm's training budget: the median of its runs' training rows seen."""
    return float(trained_rows(rows).median())


def learning_floor(df: pd.DataFrame, arm: pd.DataFrame) -> tuple[float, str] | None:
    """Return (floor, where it comes from): FLOOR_POINTS below the best cell of the arm's model, device and budget."""
    r = arm.iloc[0]
    done = df[
        (df["model_name"] == r["model_name"])
        & (df["device_key"] == r["device_key"])
        & (df["status"] == "finished")
        & df["test_acc"].notna()
    ]
    done = done[trained_rows(done) <= budget_rows(arm)]
    if done.empty:
        return None
    means = done.groupby(list(CELL), dropna=False)["test_acc"].agg(["mean", "count"])
    top = int(means["mean"].to_numpy().argmax())  # by position: a key holding NaN cannot be looked up by label
    key, best, count = means.index[top], means["mean"].iloc[top], means["count"].iloc[top]
    shown = ("lr", "llrd_decay", "precision", "max_length", "batch")
    shown += ("lora_r", "lora_targets") if key[CELL.index("lora_r")] else ()
    where = ", ".join(
        f"{k}={int(v) if isinstance(v, float) and v.is_integer() else v}"  # 32, never 32.0
        for k, v in zip(CELL, key)
        if k in shown and pd.notna(v)
    )
    return best - FLOOR_POINTS / 100, (
        f"{FLOOR_POINTS:g} points below {100 * best:.2f}%, the best mean test "
        f"accuracy of {r['model_name']} on this device within "
        f"{budget_rows(arm):,.0f} training rows ({key[0]} {key[1]}: {where}, "
        f"{int(count)} run(s))"
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


def binomial_half_width(p: float, rows: int) -> float:
    """Return the 95% half-width of an accuracy p measured on `rows` test rows (normal approximation)."""
    return sampling_error(p, rows, Z95)


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
    """Return the smallest difference between two cells of this size that a 95% interval resolves."""
    values = [v for v in values if v is not None and math.isfinite(v)]
    if len(values) >= 2:
        sd = statistics.stdev(values)
        n = len(values)
        return stats.t.ppf(0.975, 2 * n - 2) * sd * math.sqrt(2 / n)
    if len(values) == 1 and rows:
        p = values[0]
        return Z95 * math.sqrt(2 * p * (1 - p) / rows)
    return math.nan


def fmt_interval(
    values: list[float], rows: int | None, scale: float = 100, digits: int = 2, seeds: int | None = None
) -> str:
    """Return 'mean ± half-width' in percent, the dash for no values; one seed: the test set's sampling error."""
    mean, half, _ = mean_interval(values, rows)
    if math.isnan(mean):
        return "—"
    if seeds is not None and seeds < 2:
        error = f"; test-set sampling error {scale * sampling_error(mean, rows):.{digits}f} points, 90%" if rows else ""
        return f"{scale * mean:.{digits}f} (one seed{error})"
    return f"{scale * mean:.{digits}f}" + ("" if math.isnan(half) else f" ± {scale * half:.{digits}f}")


def distinct_seeds(rows: pd.DataFrame) -> int:
    """Return how many different seeds a cell's runs used (runs without one count as one seed)."""
    return max(int(rows["seed"].nunique()), 1)


def paired_diffs(df: pd.DataFrame, column: str, mode: str, ref: str, by: str) -> dict:
    """Return per value of `by` the differences mode - ref of `test_acc` between runs with the same seed."""
    wide = df.pivot_table(index=[by, "seed"], columns=column, values="test_acc", aggfunc="mean")
    if mode not in wide or ref not in wide:
        return {}
    diff = (wide[mode] - wide[ref]).dropna()
    return {key: list(group.values) for key, group in diff.groupby(level=0)}


def accuracy_table(df: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Return per cell: seeds, test accuracy % (95% interval), validation %, final loss, and whether it learned."""
    rows = {}
    ok = df["learned"] if "learned" in df else learned(df)
    for key, g in df.groupby(keys, dropna=False, sort=True):
        test_rows = int(g["test_rows"].max()) if g["test_rows"].notna().any() else None
        flagged = int((~ok[g.index].astype(bool)).sum())
        seeds = distinct_seeds(g)
        rows[key] = {
            "seeds": str(seeds) + (f" ({len(g)} runs)" if len(g) != seeds else ""),
            "test accuracy %": fmt_interval(list(g["test_acc"]), test_rows, seeds=seeds),
            "validation accuracy %": fmt_interval(list(g["val_acc"]), None, seeds=seeds),
            "final loss": f"{g['final_loss'].mean():.3f}" if g["final_loss"].notna().any() else "—",
            "learned?": f"no: mean below the floor ({FLOOR_POINTS:g} points under its device's best)"
            if flagged
            else "yes",
        }
    out = pd.DataFrame.from_dict(rows, orient="index")
    out.index = pd.MultiIndex.from_tuples(out.index, names=keys) if len(keys) > 1 else out.index.rename(keys[0])
    return out


def best_cell(df: pd.DataFrame, keys: list[str]) -> str:
    """Return a sentence naming the best cell that learned, its runner-up, and whether this sample tells them apart."""
    learned_rows = df[(df["learned"] if "learned" in df else learned(df)).astype(bool)]
    if learned_rows.empty:
        return "No cell learned (every cell's mean is below its learning floor): this sample says nothing."
    means = learned_rows.groupby(keys)["test_acc"].agg(["mean", "count"]).sort_values("mean", ascending=False)
    rows = int(learned_rows["test_rows"].max()) if learned_rows["test_rows"].notna().any() else None
    best = means.index[0]
    cells = learned_rows.set_index(keys)["test_acc"]
    resolvable = resolvable_difference(list(cells.loc[[best]]), rows)
    text = (
        f"Best cell: {_name(keys, best)} at {100 * means.iloc[0]['mean']:.2f}% test accuracy "
        f"({int(means.iloc[0]['count'])} seed(s))."
    )
    if len(means) > 1:
        gap = means.iloc[0]["mean"] - means.iloc[1]["mean"]
        verdict = "resolved" if gap > resolvable else "not resolved"
        text += (
            f" Runner-up {_name(keys, means.index[1])} is {100 * gap:.2f} points lower; the smallest "
            f"difference this sample resolves is {100 * resolvable:.2f} points, so the order is {verdict}."
        )
    dropped = len(df) - len(learned_rows)
    if dropped:
        text += f" {dropped} run(s) of cells that did not learn are left out."
    return text


def _name(keys: list[str], key) -> str:
    values = key if isinstance(key, tuple) else (key,)
    return ", ".join(f"{k}={v}" for k, v in zip(keys, values))
