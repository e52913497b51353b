"""Identical configurations measured by different suites: do their runs agree within the between-run range?

Two suites that time the same setting (small_batch's batch 16 and batch_scaling's batch 16, say) must give
the same samples/s within the noise between independent runs; where they do not, the report says so, and a
reader knows the machine drifted between the suites (or a parameter that should not matter does).
"""
from __future__ import annotations

import pandas as pd

from helpers.study.report.tables import MIN_RUNS, fmt, short_device

# what sets a static-padding step's time; train_subset, epochs and the curve do not (same shapes every step)
SAME = ("device_key", "threads", "model_name", "batch", "max_length", "padding", "pad_to_multiple_of",
        "precision", "num_devices", "gradient_checkpointing", "gradient_accumulation_steps")


def agreement(df: pd.DataFrame) -> pd.DataFrame:
    """Return one row per (configuration, suite) whose configuration more than one suite timed."""
    profiled = df[[f"share_{s}" for s in ("matmul", "host_gap")]].notna().any(axis=1)  # the profiler slows a step
    timed = df[(df["padding"] == "static") & df["samples_per_s"].notna() & (df["status"] == "finished") & ~profiled]
    if timed.empty:
        return pd.DataFrame(columns=["config", "suite", "runs", "median", "lo", "hi", "device"])
    timed = timed.assign(config=[" ".join(map(str, row)) for row in timed[list(SAME)].itertuples(index=False)])
    rows = timed.groupby(["config", "suite"]).agg(
        runs=("samples_per_s", "count"), median=("samples_per_s", "median"), lo=("samples_per_s", "min"),
        hi=("samples_per_s", "max"), device=("device", "first"), batch=("batch", "first"),
        max_length=("max_length", "first"), model=("model_name", "first")).reset_index()
    shared = rows.groupby("config")["suite"].transform("nunique") > 1
    return rows[shared].reset_index(drop=True)


def verdict(group: pd.DataFrame) -> str:
    """Return whether one configuration's suites agree: ranges overlap, differ, or too few runs to tell."""
    if (group["runs"] < MIN_RUNS).any():
        return f"not resolved: fewer than {MIN_RUNS} runs in a suite"
    apart = group["hi"].min() < group["lo"].max()
    return "differ beyond the between-run range" if apart else "agree within the between-run range"


def agreement_markdown(df: pd.DataFrame) -> str:
    """Return the report's paragraph and table on identical configurations in different suites."""
    rows = agreement(df)
    if rows.empty:
        return "No configuration was timed by more than one suite on one machine."
    table, said_all = [], []
    for _, group in rows.groupby("config", sort=True):
        first = group.iloc[0]
        what = f"{first['model']}, batch {first['batch']}, L={first['max_length']} on {short_device(first['device'])}"
        said = verdict(group)
        said_all.append(said.split(":")[0].split(" beyond")[0].split(" within")[0])
        for _, r in group.iterrows():
            table.append({"configuration": what, "suite": r["suite"], "runs": int(r["runs"]),
                          "samples/s (median, range between runs)": f"{fmt(r['median'])} ({fmt(r['lo'])}–{fmt(r['hi'])})",
                          "agreement": said})
    head = ("Identical configurations timed by different suites (static padding, same model, batch, length, "
            "precision, device and threads, not profiled: train_subset does not change a step) should agree within "
            "the range between their runs.")
    counts = pd.Series(said_all).value_counts()
    tally = (f"Of {len(said_all)} configurations timed by several suites, {counts.get('agree', 0)} agree, "
             f"{counts.get('differ', 0)} differ, {counts.get('not resolved', 0)} are not resolved (fewer than "
             f"{MIN_RUNS} runs in a suite).")
    keys = df.drop_duplicates("device").set_index("device")["device_key"]
    drifts = {short_device(d): drift_pct(df, keys[d]) for d in sorted(rows["device"].unique())}
    drift = (" The drift between suites (the largest gap between two suites' medians of one configuration): "
             + "; ".join(f"{d} {v:.1f}%" for d, v in drifts.items() if v is not None)
             + ". A timing verdict whose arms did not run as interleaved repeats of one suite resolves only "
               "beyond it (helpers/study/claims/evidence.py).")
    return "\n\n".join([head, pd.DataFrame(table).to_markdown(index=False), tally + drift])


def drift_pct(df: pd.DataFrame, device_key: str) -> float | None:
    """Return the largest gap (%) between two suites' median samples/s of one configuration on a device, the
    drift this machine shows between suites; None when no configuration there was timed by several suites."""
    df = df.reindex(columns=list(dict.fromkeys([*df.columns, *SAME, "share_matmul", "share_host_gap"])))
    rows = agreement(df[df["device_key"] == device_key])
    if rows.empty:
        return None
    medians = rows.groupby("config")["median"]
    return float((100 * (medians.max() - medians.min()) / medians.min()).max())
