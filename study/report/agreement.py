"""Identical configurations measured by different suites: do their runs agree within the between-run range?"""

from __future__ import annotations

import pandas as pd

from study.drift import agreement, drift_pcts
from study.frame import MIN_RUNS
from study.notation import fmt


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
        what = f"{first['model']}, batch {first['batch']}, L={first['max_length']} on {first['label']}"
        said = verdict(group)
        said_all.append(said.split(":")[0].split(" beyond")[0].split(" within")[0])
        for _, r in group.iterrows():
            table.append(
                {
                    "configuration": what,
                    "suite": r["suite"],
                    "runs": int(r["runs"]),
                    "samples/s (median, range between runs)": f"{fmt(r['median'])} ({fmt(r['lo'])}–{fmt(r['hi'])})",
                    "agreement": said,
                }
            )
    head = (
        "Identical configurations timed by different suites (static padding; the same device, threads, model, batch, "
        "length, precision, LLRD, optimizer, LoRA, preset and compiler flags, every parameter that changes a step's "
        "work; not profiled: train_subset, the lr and the seed do not change a step) should agree within the range "
        "between their runs."
    )
    counts = pd.Series(said_all).value_counts()
    tally = (
        f"Of {len(said_all)} configurations timed by several suites, {counts.get('agree', 0)} agree, "
        f"{counts.get('differ', 0)} differ, {counts.get('not resolved', 0)} are not resolved (fewer than {MIN_RUNS} "
        "runs in a suite)."
    )
    labels = df.drop_duplicates("device_key").set_index("device_key")["label"]
    drifts = "; ".join(f"{labels[k]} {v:.1f}%" for k, v in sorted(drift_pcts(df).items()))
    drift = (
        f" The drift between suites (the largest gap between two suites' medians of one configuration, each with >= "
        f"{MIN_RUNS} runs): {drifts or 'no configuration resolves one'}. It is why a claim takes its spread only "
        "from interleaved runs of the arms it compares."
    )
    return "\n\n".join([head, pd.DataFrame(table).to_markdown(index=False), tally + drift])
