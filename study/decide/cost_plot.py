"""The decision figure: a job's cost against its epochs per device, one panel per (compiled, eager) pair,
the epochs where a compiled device's one-off is repaid marked.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.patches import Patch

from helpers.study import plot_style


def _colour(r: pd.Series, measured: dict[str, tuple[str, str]] | None = None) -> str:
    """Return the device's colour as the report's other figures give it (published devices by the study's name)."""
    if r["source"] == "published":
        return plot_style.published_colour(str(r["device"]))
    return (measured or plot_style.device_styles({r["device"]: r["colour_family"]}))[r["device"]][0]


def _panel(ax, d: pd.DataFrame, crossings: pd.DataFrame, job, title: str, compiled: str) -> None:
    top = max([10.0, 2 * job.epochs] + [1.2 * e for e in crossings["epochs"] if e < 100])
    epochs = np.linspace(0, top, 201)
    mine = d[d["source"] != "published"]
    # two CPUs: two colours
    measured = plot_style.device_styles({r["device"]: r["colour_family"] for _, r in mine.iterrows()})
    costs = {i: np.nan_to_num(r["one_off_usd"]) + epochs * r["epoch_usd"] for i, r in d.iterrows()}
    # a line far above the others (an 8-GPU instance priced whole) would squeeze them into the bottom: it
    # leaves the axes, labelled with its cost at the right edge
    ends = sorted(c[-1] for c in costs.values())
    ceiling = 2.5 * ends[-2] if len(ends) > 1 and ends[-1] > 4 * ends[-2] else None
    for i, r in d.iterrows():
        label = f"{r['device']} ({r['source']}{', compile not measured' if r['lower_bound'] else ''})"
        ax.plot(
            epochs,
            costs[i],
            label=label,
            color=_colour(r, measured),
            linestyle="--" if r["source"] == "published" else "-",
        )
        if ceiling and costs[i][-1] > ceiling:
            at = int(np.argmax(costs[i] > ceiling))
            ax.annotate(
                f"{r['device']} ↑ ${costs[i][-1]:.2f} at {top:g} epochs\n({r['instance']}, whole instance)",
                (epochs[at], ceiling),
                xytext=(6, -26),
                textcoords="offset points",
                fontsize=7,
                color=_colour(r, measured),
            )
    shown = crossings[crossings["epochs"] <= top]
    for _, c in shown.iterrows():
        ax.plot(c["epochs"], c["usd_at"], "o", color="black", markersize=4)
        ax.annotate(
            f"{c['epochs']:.3g}", (c["epochs"], c["usd_at"]), textcoords="offset points", xytext=(4, -10), fontsize=7
        )
    ax.axvline(job.epochs, color="gray", linewidth=0.8, linestyle=":")
    ax.set(
        xlabel=f"epochs over {job.rows:,} rows (dotted: the job, {job.epochs:g})",
        ylabel="job cost, USD",
        xlim=(0, top),
        ylim=(0, ceiling),
        title=f"{title}\n"
        + (f"{d['setup'].iloc[0]}\n" if d["setup"].nunique() == 1 else "")
        + ("(dots: break-even epochs)" if len(shown) else "(no break-even in this range)"),
    )
    if d["lower_bound"].any():
        ax.text(
            0.02,
            0.97,
            f"{compiled} compile time not measured:\nits one-off is missing, no break-even drawn",
            transform=ax.transAxes,
            fontsize=7,
            va="top",
        )


def compared(table: pd.DataFrame, breaks: pd.DataFrame, pair: tuple[str, str]) -> pd.DataFrame:
    """Return the rows of `pair`'s families that break-even compared (one configuration, one source), priced."""
    met = breaks[(breaks["family"] == pair[0]) & ~breaks["reading"].str.startswith("not compared")]
    names = set(met["device"]) | set(met["against"])
    who = table["device"] + " (" + table["source"] + ")"
    return table[table["family"].isin(pair) & table["epoch_usd"].notna() & who.isin(names)]


def figure(table: pd.DataFrame, breaks: pd.DataFrame, job, command: str, pairs: dict[tuple[str, str], str]):
    """Return the finished figure: a panel per pair with rows of one configuration, the price basis on top."""
    panels = [(pair, title, compared(table, breaks, pair)) for pair, title in pairs.items()]
    drawn = [p for p in panels if len(p[2])] or [(*next(iter(pairs.items())), table.iloc[0:0])]
    with plot_style.theme():
        fig, axes = plot_style.figure(len(drawn), width=6.4, height=6.0)
        for ax, (pair, title, d) in zip(axes, drawn):
            crossings = breaks[(breaks["family"] == pair[0]) & breaks["epochs"].notna()]
            _panel(ax, d, crossings, job, title, pair[0])
        for pair, title, d in panels:
            if d.empty and (table["family"] == pair[0]).any():
                why = f"not drawn: {title} (no eager run of the same configuration)"
                plot_style.key(fig, Patch(facecolor="white", label=why))
        price = "one accelerator's share of the instance" if job.shared_instance else "the whole instance"
        cache = ", warm cache" if job.warm_cache else ""
        drawn_rows = pd.concat([p[2] for p in drawn])
        lines = (
            "every line published (dashed):\nno measured run of a like configuration is drawn"
            if len(drawn_rows) and (drawn_rows["source"] == "published").all()
            else "solid: measured, dashed: published"
        )
        fig.suptitle(
            f"Job cost against epochs\n{lines};\none-off compile shared by "
            f"{job.runs_sharing_cache} run(s){cache}, then $ per epoch,\n"
            f"priced at {price}: on-demand us-east-1"
        )
        plot_style.finish(fig, command)
    return fig


def plot(
    table: pd.DataFrame, breaks: pd.DataFrame, job, command: str, path: str | Path, pairs: dict[tuple[str, str], str]
) -> Path:
    """Write the figure to `path` (PNG) with a footer naming `command`; return the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    return plot_style.save(figure(table, breaks, job, command, pairs), path)
