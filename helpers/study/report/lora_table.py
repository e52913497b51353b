"""The LoRA table: each adapter setting against full fine-tuning on the same device, over seeds (the lora
suite): accuracy and its gap to full fine-tuning with 95% intervals, speed, memory, what trains."""
from __future__ import annotations

import math

import pandas as pd

from helpers.study.claims.accuracy import mean_interval
from helpers.study.report.tables import DASH, caption, fmt, markdown, no_runs, short_device

NOTE = ("Test accuracy: mean ± half-width of the 95% t-interval over seeds. Gap: full fine-tuning minus the "
        "row, in points, ± the two intervals combined (root of the sum of squares); positive: LoRA is below. "
        "samples/s: median over the runs (their range). AdamW state: two moments per trainable element.")


def gap(full: list[float], mine: list[float]) -> tuple[float, float]:
    """Return full's mean minus mine's, in points, and the half-width of its 95% interval."""
    a, ha, _ = mean_interval(full)
    b, hb, _ = mean_interval(mine)
    return 100 * (a - b), 100 * math.sqrt((ha if math.isfinite(ha) else 0) ** 2 + (hb if math.isfinite(hb) else 0) ** 2)


def setting(row: pd.Series) -> str:
    """Return a row's setting in words: 'full fine-tuning' or 'LoRA r=8 (query,value)'."""
    r = row["lora_r"]
    if r is None or (isinstance(r, float) and math.isnan(r)) or int(r) == 0:
        return "full fine-tuning"
    return f"LoRA r={int(r)} ({row['lora_targets'] or 'query,value'})"


def lora_rows(df: pd.DataFrame) -> pd.DataFrame:
    """Return one row per (device, variant, setting) with its accuracy, gap, speed and memory."""
    done = df[df["status"] == "finished"].assign(setting=lambda d: d.apply(setting, axis=1))
    out = []
    for (device, variant), g in done.groupby(["device", "variant"], sort=True, dropna=False):
        full = g[g["setting"] == "full fine-tuning"]["test_acc"].dropna().tolist()
        for name, cell in g.groupby("setting", sort=False):
            acc = cell["test_acc"].dropna().tolist()
            mean, half, _ = mean_interval(acc)
            diff, diff_half = gap(full, acc) if full and acc and name != "full fine-tuning" else (math.nan, math.nan)
            rate = cell["samples_per_s"].dropna()
            out.append({"device": short_device(device), "variant": variant, "setting": name, "seeds": len(cell),
                        "test accuracy %": DASH if math.isnan(mean) else
                        f"{100 * mean:.2f}" + (f" ± {100 * half:.2f}" if math.isfinite(half) else ""),
                        "gap to full (points)": DASH if math.isnan(diff) else f"{diff:+.2f} ± {diff_half:.2f}",
                        "samples/s": DASH if rate.empty else f"{fmt(rate.median())} ({fmt(rate.min())}–{fmt(rate.max())})",
                        "peak memory GiB": fmt(cell["mem_gib"].median()), "trainable": fmt(cell["trainable"].median()),
                        "AdamW state MiB": fmt(cell["optimizer_mib"].median())})
    return pd.DataFrame(out)


def lora_section(suite, df: pd.DataFrame, published_dir) -> str:
    """Return the LoRA suite's table and its note, or what fills it."""
    done = df[df["status"] == "finished"] if len(df) else df
    if done.empty:
        return no_runs(suite)
    table = lora_rows(done).set_index(["device", "variant", "setting"])
    return "\n\n".join([caption(suite, done), markdown(table), NOTE])
