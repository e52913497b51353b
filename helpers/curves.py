"""One run's curves, drawn from its record under the notebook's train cell: the loss per timing window, validation
accuracy against training seconds (with eval_every), and the samples/s of each steady window."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns


def draw(rec: dict) -> plt.Figure:
    """Return a figure of the run's three curves (a panel says so when its curve was not recorded)."""
    loss = pd.DataFrame((rec.get("metrics") or {}).get("loss_curve") or [], columns=["step", "loss"])
    curve = pd.DataFrame(rec.get("curve") or [], columns=["step", "train_time_s", "val_accuracy"])
    rates = pd.DataFrame((rec.get("timing") or {}).get("window_series") or [], columns=["step", "samples_per_s"])
    panels = [
        (loss, "step", "loss", "training loss (mean per timing window)", "optimizer step", "no window closed"),
        (
            curve.assign(pct=100 * curve["val_accuracy"]),
            "train_time_s",
            "pct",
            "validation accuracy (%)",
            "training seconds",
            "set eval_every to record it",
        ),
        (rates, "step", "samples_per_s", "samples/s per steady timing window", "optimizer step", "no steady window"),
    ]
    with sns.axes_style("whitegrid"):
        fig, axes = plt.subplots(1, 3, figsize=(15, 4), layout="constrained")
        for ax, (data, x, y, title, xlabel, missing) in zip(axes, panels):
            ax.set(title=title, xlabel=xlabel, ylabel="")
            if data.empty:
                ax.text(0.5, 0.5, f"not recorded: {missing}", ha="center", va="center", transform=ax.transAxes)
            else:
                sns.lineplot(data=data, x=x, y=y, marker="o", ax=ax)
        if not rates.empty:  # the median the record reports, so the windows' spread shows
            axes[2].axhline(rates["samples_per_s"].median(), ls="--", color="grey", label="median")
            axes[2].legend(loc="lower right")
        fig.suptitle(f"{rec.get('run_name')} on {(rec.get('device') or {}).get('name')}: {rec.get('status')}")
    return fig
