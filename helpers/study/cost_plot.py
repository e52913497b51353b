"""The decision figure: a job's cost against its epochs per device, one panel per (compiled, eager) pair,
the epochs where a compiled device's one-off is repaid marked. Drawn from helpers.study.decide's table.

Each line is one-off dollars + epochs x dollars per epoch; published devices dashed. Written with no
version stamp, so the same table gives the same bytes.
"""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402


def _panel(ax, d: pd.DataFrame, crossings: pd.DataFrame, job, title: str, compiled: str) -> None:
    top = max([10.0, 2 * job.epochs] + [1.2 * e for e in crossings["epochs"] if e < 100])
    epochs = np.linspace(0, top, 201)
    for i, r in d.reset_index(drop=True).iterrows():
        label = f"{r['device']} ({r['source']}{', compile not measured' if r['lower_bound'] else ''})"
        ax.plot(epochs, np.nan_to_num(r["one_off_usd"]) + epochs * r["epoch_usd"], label=label,
                color=f"C{i % 10}", linestyle="--" if r["source"] == "published" else "-")
    for _, c in crossings[crossings["epochs"] <= top].iterrows():
        ax.plot(c["epochs"], c["usd_at"], "o", color="black", markersize=4)
        ax.annotate(f"{c['epochs']:.3g}", (c["epochs"], c["usd_at"]), textcoords="offset points", xytext=(4, -10),
                    fontsize=7)
    ax.axvline(job.epochs, color="gray", linewidth=0.8, linestyle=":")
    ax.set(xlabel=f"epochs over {job.rows:,} rows (dotted: the job, {job.epochs:g})", ylabel="job cost, USD",
           xlim=(0, top), ylim=(0, None), title=f"{title} (dots: break-even epochs)")
    if d["lower_bound"].any():
        ax.text(0.02, 0.97, f"{compiled} compile time not measured: its one-off is missing, no break-even drawn",
                transform=ax.transAxes, fontsize=7, va="top")
    ax.legend(fontsize=7, bbox_to_anchor=(1.01, 1), loc="upper left", title="dashed: published", title_fontsize=7)


def plot(table: pd.DataFrame, breaks: pd.DataFrame, job, command: str, path: str | Path,
         pairs: dict[tuple[str, str], str]) -> Path:
    """Write the figure to `path` (PNG) with a footer naming `command`; return the path."""
    panels = [(pair, title, table[table["family"].isin(pair) & table["epoch_usd"].notna()])
              for pair, title in pairs.items()]
    panels = [p for p in panels if len(p[2])] or [(*next(iter(pairs.items())), table.iloc[0:0])]
    fig, axes = plt.subplots(1, len(panels), figsize=(7 * len(panels) + 3, 5), squeeze=False)
    for ax, (pair, title, d) in zip(axes[0], panels):
        crossings = breaks[(breaks["family"] == pair[0]) & breaks["epochs"].notna()]
        _panel(ax, d, crossings, job, title, pair[0])
    fig.suptitle(f"Job cost against epochs: one-off compilation shared by {job.runs_sharing_cache} run(s)"
                 f"{', warm cache' if job.warm_cache else ''}, then $ per epoch", fontsize=10)
    fig.text(0.005, 0.005, f"Written by `{command}`", fontsize=7, color="gray")
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110, metadata={"Software": None})  # no version stamp: same figures, same bytes
    plt.close(fig)
    return path
