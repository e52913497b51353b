"""One run's curves, drawn inline by the notebooks from its record: the training loss per timing window,
the validation accuracy against training seconds (when `eval_every` was set) and the samples/s of each
steady timing window.

    from study.report import run_curves
    run_curves.draw(record)
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns

from study import plot_style


def frames(record: dict) -> dict[str, pd.DataFrame]:
    """Return the record's curves as tables: loss per window, validation accuracy, samples/s per window."""
    loss = pd.DataFrame((record.get("metrics") or {}).get("loss_curve") or [], columns=["step", "loss"])
    curve = pd.DataFrame(record.get("curve") or [], columns=["step", "train_time_s", "val_accuracy"])
    rates = pd.DataFrame((record.get("timing") or {}).get("window_series") or [], columns=["step", "samples_per_s"])
    return {"loss": loss, "accuracy": curve.assign(val_accuracy_pct=100 * curve["val_accuracy"]), "rate": rates}


def draw(record: dict) -> plt.Figure:
    """Return a figure of the run's three curves (a panel says so when its curve was not recorded)."""
    data = frames(record)
    with plot_style.theme():  # the report's look, without changing the notebook's own settings
        fig, (a, b, c) = plt.subplots(1, 3, figsize=(15, 4))
        panels = [
            (a, "loss", "step", "loss", "training loss (mean per timing window)", "optimizer step"),
            (b, "accuracy", "train_time_s", "val_accuracy_pct", "validation accuracy (%)", "training seconds"),
            (c, "rate", "step", "samples_per_s", "samples/s per steady timing window", "optimizer step"),
        ]
        for ax, key, x, y, title, xlabel in panels:
            ax.set(title=title, xlabel=xlabel, ylabel="")
            if data[key].empty:
                why = "set eval_every to record it" if key == "accuracy" else "no steady window recorded"
                ax.text(0.5, 0.5, f"not recorded: {why}", ha="center", va="center", transform=ax.transAxes)
                continue
            sns.lineplot(data=data[key], x=x, y=y, marker="o", ax=ax)
        if not data["rate"].empty:  # the median the record reports, so a reader sees how the windows spread
            c.axhline(data["rate"]["samples_per_s"].median(), ls="--", color="grey", label="median")
            c.legend(loc="lower right")
        device = (record.get("device") or {}).get("name")
        fig.suptitle(f"{record.get('run_name')} on {device}: {record.get('status')}")
        fig.tight_layout()
    return fig
