"""Identical configurations timed by different suites, and the drift between suites they show.

Two suites that time the same setting (small_batch's batch 16 and batch_scaling's batch 16, say) must give
the same samples/s within the noise between independent runs; the largest gap between two suites' medians
of one configuration is the drift a machine shows between suites, a noise the range between back-to-back
runs does not show. The report tabulates it.
"""

from __future__ import annotations

import pandas as pd

from study.frame import MIN_RUNS, profiled

# every parameter that changes the work of a static-padding step (LLRD's parameter groups and the optimizer's
# class change the update; LoRA, the preset and the compiler's flags the graph); train_subset, epochs, the lr,
# the seed and the curve do not (same shapes and the same operations every step)
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
    "llrd_decay",
    "optimizer",
    "lora_r",
    "lora_targets",
    "preset",
    "optlevel",
    "model_type",
    "distribution_strategy",
)


def agreement(df: pd.DataFrame) -> pd.DataFrame:
    """Return one row per (configuration, suite) whose configuration more than one suite timed."""
    timed = df[(df["padding"] == "static") & df["samples_per_s"].notna() & (df["status"] == "finished") & ~profiled(df)]
    timed = timed.assign(config=[" ".join(map(str, row)) for row in timed[list(SAME)].itertuples(index=False)])
    rows = (
        timed.groupby(["config", "suite"])
        .agg(
            runs=("samples_per_s", "count"),
            median=("samples_per_s", "median"),
            lo=("samples_per_s", "min"),
            hi=("samples_per_s", "max"),
            device=("device", "first"),
            label=("label", "first"),
            device_key=("device_key", "first"),
            batch=("batch", "first"),
            max_length=("max_length", "first"),
            model=("model_name", "first"),
        )
        .reset_index()
    )
    shared = rows.groupby("config")["suite"].transform("nunique") > 1
    return rows[shared].reset_index(drop=True)


def drift_pcts(df: pd.DataFrame) -> dict[str, float]:
    """Return per device key the drift between suites (%) over configurations every suite of which ran >= MIN_RUNS
    times (single runs resolve no drift); absent where none did."""
    df = df.reindex(columns=list(dict.fromkeys([*df.columns, *SAME])))
    rows = agreement(df)
    rows = rows[rows.groupby("config")["runs"].transform("min") >= MIN_RUNS]
    if rows.empty:
        return {}
    gaps = rows.groupby(["device_key", "config"])["median"].agg(lambda m: 100 * (m.max() - m.min()) / m.min())
    return {str(k): float(v) for k, v in gaps.groupby(level=0).max().items()}
