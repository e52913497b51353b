"""The report's throughput and shape tables from the frame: a column group per device, published ones beside."""

from __future__ import annotations

import math

import pandas as pd

from study import frame
from study.frame import MIN_RUNS
from study.notation import DASH, fmt
from study.sweep.suites import Suite

# named frame column: label in words, with units
LABELS = {
    "step_ms": "step ms (median)",
    "samples_per_s": "samples/s",
    "tokens_per_s": "tokens/s",
    "train_s": "train s",
    "first_step_s": "first step s",
    "tflops": "TFLOP/s",
    "mfu_pct": "MFU %",
    "ai": "FLOP/byte",
    "mem_gib": "peak memory GiB",
    "util_pct": "utilization %",
    "compilations": "compilations",
    "compile_s": "compile s",
    "shapes": "distinct shapes",
    "test_acc": "test accuracy %",
    "val_acc": "validation accuracy %",
    "final_loss": "final loss",
    "compilations_after_warmup": "compilations after warm-up",
    "steps": "steps",
    "share_matmul": "matmul %",
    "share_attention": "attention %",
    "share_elementwise_norm_act": "elementwise %",
    "share_optimizer": "optimizer %",
    "share_copy_data_movement": "copy %",
    "share_other": "other %",
    "share_host_gap": "host gap %",
    "energy_j": "energy J",
    "samples_per_j": "samples/J",
}
PERCENT = ("test_acc", "val_acc")  # fractions shown as percent
WITHIN = {"samples_per_s": ("window_min", "window_max"), "step_ms": ("step_ms_p10", "step_ms_p90")}  # one run's own


def spread_cell(group: pd.DataFrame, name: str) -> str:
    """Return a group's cell: frame.estimate's median with the lowest and highest run; one run's timing with its own
    windows or steps, said to be within it."""
    values = group[name].dropna()
    if values.empty:
        return DASH
    scale = 100 if name in PERCENT else 1
    band = frame.estimate(group, name)
    if len(values) > 1:
        return f"{fmt(band.mid * scale)} ({fmt(band.lo * scale)}–{fmt(band.hi * scale)}, {len(values)} runs)"
    lo, hi = WITHIN.get(name, (name, name))
    r = group.loc[values.index[0]]
    return fmt(band.mid * scale) + (
        "" if lo == hi or pd.isna(r[lo]) else f" (one run; within it {fmt(r[lo])}–{fmt(r[hi])})"
    )


def grid_table(
    df: pd.DataFrame,
    keys: list[str],
    values: list[str],
    pub: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """Return rows = the keys' values, columns = each value per measured device, `pub`'s (keyed) beside."""
    out = None
    devices = list(dict.fromkeys(df["label"]))
    for device in devices:
        mine = df[df["label"] == device]
        label = f" · {device}" if len(devices) > 1 else ""
        table = mine.groupby(keys, dropna=False, sort=True).apply(
            lambda g: pd.Series(
                {f"{LABELS.get(v, v)}{label}": spread_cell(g, v) for v in values}
                | ({f"runs{label}": str(len(g))} if len(g) > 1 else {})
            ),
            include_groups=False,
        )
        out = table if out is None else out.join(table, how="outer")
    if out is None:
        out = pd.DataFrame(columns=keys).set_index(keys)
    if pub is not None:
        out = keyed(out).join(pub, how="outer")
    return out.fillna(DASH)


def keyed(table: pd.DataFrame) -> pd.DataFrame:
    """Return `table` with its index values as rows match on (`_key`), the index names kept."""
    names = table.index.names
    index = table.index.map(lambda k: tuple(map(_key, k)) if isinstance(k, tuple) else _key(k))
    if len(names) > 1 and not isinstance(index, pd.MultiIndex):  # an empty index maps to a flat one
        index = pd.MultiIndex.from_tuples(list(index), names=names)
    index.names = names
    return table.set_axis(index)


def _key(value) -> str:
    """Return a key value as rows match and show on: numbers as %g, None as 'none'."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "none"
    try:
        return f"{float(value):g}"
    except (TypeError, ValueError):
        return str(value)


def markdown(table: pd.DataFrame) -> str:
    """Return a table as GitHub Markdown, its index as the first columns, sorted numerically."""
    flat = table.reset_index()
    for column in flat.columns[: table.index.nlevels]:
        flat[column] = flat[column].map(_key)
    keys = list(flat.columns[: table.index.nlevels])
    order = flat[keys].apply(lambda col: pd.to_numeric(col, errors="coerce").fillna(float("inf")))
    flat = flat.iloc[order.sort_values(keys, kind="stable").index] if len(flat) else flat
    return flat.to_markdown(index=False, disable_numparse=True)


def trend(df: pd.DataFrame, key: str, value: str, device: str) -> str:
    """Return a line saying how `value` moves along `key` on `device`, and which neighbouring rows differ beyond the
    range between their runs (>= MIN_RUNS a row; with fewer, nothing is resolved)."""
    mine = df[(df["label"] == device) & df[value].notna()]
    rows = pd.DataFrame({k: frame.estimate(g, value) for k, g in mine.groupby(key)}, index=["mid", "lo", "hi"]).T
    if len(rows) < 2:
        return ""
    first, last = rows.iloc[0], rows.iloc[-1]
    said = (
        f"On {device}, {LABELS.get(value, value)} goes from {fmt(first.mid)} at {key}={_key(rows.index[0])} to "
        f"{fmt(last.mid)} at {key}={_key(rows.index[-1])} ({last.mid / first.mid:.2f}x); "
    )
    if (mine.groupby(key)[value].count() < MIN_RUNS).any():
        return said + f"not resolved: fewer than {MIN_RUNS} runs a row, no range between runs to tell neighbours apart."
    neighbours = zip(rows.iterrows(), rows.iloc[1:].iterrows())
    apart = sum(not (a.hi >= b.lo and b.hi >= a.lo) for (_, a), (_, b) in neighbours)
    return said + (
        f"{apart} of {len(rows) - 1} neighbouring steps differ beyond the range between runs (>= {MIN_RUNS} each)"
        + ("" if apart == len(rows) - 1 else " (the others overlap: not resolved)")
        + "."
    )


def host_bound(df: pd.DataFrame, device: str) -> str:
    """Return a line saying a host-bound accelerator's step stayed flat across batches, or ''."""
    rows = df[(df["label"] == device) & (df["host_bound"] != "") & df["step_ms"].notna()]
    steps = rows.groupby("batch")["step_ms"].median().sort_index()
    if len(steps) < 2:
        return ""
    batches, grown = steps.index[-1] / steps.index[0], steps.iloc[-1] / steps.iloc[0]
    return (
        f"On {device} the step is flat, {fmt(steps.min())}–{fmt(steps.max())} ms (medians of runs) "
        f"at every batch from {_key(steps.index[0])} to {_key(steps.index[-1])} ({grown:.2f}x the time for "
        f"{batches:.0f}x the samples): the device waited on the host (Python, kernel launches, the input), so its "
        "samples/s here measures the host, not the accelerator's capacity, and rises with batch only because "
        "the host's cost per step is spread over more samples."
    )


def caption(suite: Suite, df: pd.DataFrame) -> str:
    """Return the line under a table saying which variant(s), devices and runs it shows, and what was fixed."""
    parts = []
    for variant, g in df.groupby("variant", dropna=False):
        fixed = suite.variants.get(variant, {}).get("params", {})
        devices = ", ".join(f"{d} ({n} runs)" for d, n in g["label"].value_counts().items())
        parts.append(
            f"`{variant}` variant on {devices}; fixed: "
            + ", ".join(f"{k}={v}" for k, v in fixed.items() if k != "progress")
        )
    return "; ".join(parts) + "."


def no_runs(suite: Suite) -> str:
    """Return what a suite without records says, and the command that fills it."""
    return f"No runs of this suite are recorded yet: run `python -m study.sweep {suite.name}` (or `make report`)."
