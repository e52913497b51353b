"""The headline table: time to each validation accuracy target per device, over seeds (the time_to_accuracy
suite; each record's `time_to_accuracy` section, written by the training loop)."""

from __future__ import annotations

import math

import pandas as pd

from study.claims.accuracy import mean_interval
from study.notation import DASH, fmt
from study.report.tables import caption, markdown, no_runs

LOADED_SHARE = 0.9  # a CPU run whose process used under this share of its threads shared the cores: a loaded machine

NOTE = (
    "Training seconds (the timed windows: evaluations and start-up excluded, so not wall time) at the first "
    "evaluation of the whole validation split at or past the target; evaluations come every `eval_every` steps, so "
    "the crossing happened at or before it and each figure is an upper bound (≤) by up to one evaluation interval. "
    "Mean ± half-width of the 95% t-interval over the seeds that reached it (a single seed: no interval); `k/n`: "
    "seeds that reached it. Steps to 90%: optimizer steps (also ≤), which a busy machine does not change (its seconds "
    "it does). Process CPU: the runs' range of the training process's CPU use against what its threads could use; "
    f"below {LOADED_SHARE:.0%} of it another process shared the cores, and that row's seconds are marked "
    '"loaded": compare its steps, not its seconds. Test accuracy: of the checkpoint that first reached '
    "90%; final test accuracy: the whole test split after training, mean over the seeds. Host CPU: the machine "
    "the seconds are from (a CPU device is its own host; a GPU's host CPU by its recorded vector units); seconds on "
    "another host differ."
)


def cell(values: pd.Series, loaded: bool = False) -> str:
    """Return '≤ mean ± half (k/n)' over the seeds that reached a target (', loaded' on a shared machine)."""
    reached = [float(v) for v in values if pd.notna(v)]
    if not reached:
        return f"not reached (0/{len(values)})"
    mean, half, _ = mean_interval(reached)
    spread = f" ± {fmt(half)}" if len(reached) > 1 and math.isfinite(half) else ""
    return f"≤ {fmt(mean)}{spread} ({len(reached)}/{len(values)})" + (", loaded" if loaded else "")


def process_cpu(g: pd.DataFrame) -> tuple[str, bool]:
    """Return the runs' range of process CPU % against their threads' capacity, and whether a run was loaded."""
    cpu = g[g["util_metric"].astype(str).str.startswith("process CPU") & g["util_pct"].notna()]
    if cpu.empty:
        return DASH, False
    used = cpu["util_pct"] * cpu["threads"].astype(float)  # util_pct is per thread: back to the process's %
    capacity = 100 * cpu["threads"].astype(float).max()
    loaded = bool((cpu["util_pct"] < 100 * LOADED_SHARE).any())
    span = f"{used.min():.0f}" if round(used.min()) == round(used.max()) else f"{used.min():.0f}–{used.max():.0f}"
    return f"{span}% of {capacity:.0f}%" + (" (loaded)" if loaded else ""), loaded


def tta_section(suite, df: pd.DataFrame, published_dir) -> str:
    """Return the time-to-accuracy table: a row per device, variant and the suite's `[report] keys`."""
    done = df[df["status"] == "finished"] if len(df) else df
    if done.empty:
        return no_runs(suite)
    keys = [k for k in suite.report.get("keys") or [] if k in done.columns]
    rows = []
    targets = sorted(c.removeprefix("tta_") for c in done if c.startswith("tta_0"))
    for group, g in done.groupby(["label", "variant", *keys], sort=True, dropna=False):
        row = {"device": group[0], "host CPU": g["host_cpu"].iloc[0], "variant": group[1], **dict(zip(keys, group[2:]))}
        row["seeds"] = len(g)
        cpu, loaded = process_cpu(g)
        for target in targets:
            row[f"to {100 * float(target):.0f}% (s, ≤)"] = cell(g[f"tta_{target}"], loaded)
        row["steps to 90% (≤)"] = cell(g["tta_steps"])
        row["process CPU"] = cpu
        test = g["tta_test_acc"].dropna()
        row["test accuracy at 90% (%)"] = fmt(100 * test.mean()) if len(test) else DASH
        final = g["test_acc"].dropna()
        row["final test accuracy (%)"] = fmt(100 * final.mean()) if len(final) else DASH
        rows.append(row)
    return "\n\n".join([caption(suite, done), markdown(pd.DataFrame(rows).set_index("device")), NOTE])
