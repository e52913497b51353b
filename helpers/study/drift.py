"""Identical configurations timed by different suites, and the drift between suites they show.

Two suites that time the same setting (small_batch's batch 16 and batch_scaling's batch 16, say) must give
the same samples/s within the noise between independent runs; the largest gap between two suites' medians
of one configuration is the drift a machine shows between suites, a noise the range between back-to-back
runs does not show. The report tabulates it; a timing claim resolves only beyond it.
"""

from __future__ import annotations

import pandas as pd

# what sets a static-padding step's time; train_subset, epochs and the curve do not (same shapes every step)
SAME = (
    "device_key",
    "threads",
    "model_name",
    "batch",
    "max_length",
    "padding",
    "pad_to_multiple_of",
    "precision",
    "num_devices",
    "gradient_checkpointing",
    "gradient_accumulation_steps",
)


def agreement(df: pd.DataFrame) -> pd.DataFrame:
    """Return one row per (configuration, suite) whose configuration more than one suite timed."""
    profiled = df[[f"share_{s}" for s in ("matmul", "host_gap")]].notna().any(axis=1)  # the profiler slows a step
    timed = df[(df["padding"] == "static") & df["samples_per_s"].notna() & (df["status"] == "finished") & ~profiled]
    if timed.empty:
        return pd.DataFrame(columns=["config", "suite", "runs", "median", "lo", "hi", "device"])
    timed = timed.assign(config=[" ".join(map(str, row)) for row in timed[list(SAME)].itertuples(index=False)])
    rows = (
        timed.groupby(["config", "suite"])
        .agg(
            runs=("samples_per_s", "count"),
            median=("samples_per_s", "median"),
            lo=("samples_per_s", "min"),
            hi=("samples_per_s", "max"),
            device=("device", "first"),
            batch=("batch", "first"),
            max_length=("max_length", "first"),
            model=("model_name", "first"),
        )
        .reset_index()
    )
    shared = rows.groupby("config")["suite"].transform("nunique") > 1
    return rows[shared].reset_index(drop=True)


def drift_pct(df: pd.DataFrame, device_key: str) -> float | None:
    """Return the largest gap (%) between two suites' median samples/s of one configuration on a device, the
    drift this machine shows between suites; None when no configuration there was timed by several suites."""
    df = df.reindex(columns=list(dict.fromkeys([*df.columns, *SAME, "share_matmul", "share_host_gap"])))
    rows = agreement(df[df["device_key"] == device_key])
    if rows.empty:
        return None
    medians = rows.groupby("config")["median"]
    return float((100 * (medians.max() - medians.min()) / medians.min()).max())
