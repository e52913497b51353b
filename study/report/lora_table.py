"""The LoRA table: each adapter setting against full fine-tuning on the same device, over seeds (the lora
suite): accuracy and its gap to full fine-tuning with 95% intervals, time and cost to a validation target,
speed, memory, what trains; then the largest bert-base batch each setting fits on each accelerator (a model)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from study import cost, frame
from study.claims.accuracy import gap, mean_interval
from study.claims.lora import best_lr, searched, setting
from study.notation import DASH, fmt
from study.report.tables import caption, markdown, no_runs
from study.report.tta_table import cell, process_cpu

TARGET = 0.88  # the lowest of the headline's targets: whether, and when, each setting gets there at all
ACCELERATORS = ("t4", "a10g", "a100-40gb", "h100", "trn1-core")  # device_peaks.csv keys, the study's devices

NOTE = (
    "Each setting at its best learning rate: the highest mean validation accuracy among the lrs its runs tried (all "
    "shown); runs counts every run of the setting, at every lr, and how many collapsed to the majority class. Test "
    "accuracy: mean ± half-width of the 95% t-interval over seeds. Gap: full fine-tuning minus the row, in points, ± "
    "the two intervals combined (root of the sum of squares); positive: LoRA is below. samples/s: over every run "
    "of the setting at every lr (a step's speed does not depend on it), as the claims take it (study/frame.py "
    f"`estimate`). AdamW state: two moments per trainable element. To {100 * TARGET:.0f}%: training seconds "
    "(the timed windows) at the first evaluation of the whole validation split at or past it, an upper bound (≤) by "
    "up to one evaluation interval, mean ± 95% interval over the seeds that did (`k/n`); "
    "\"loaded\": a run's process used under 90% of its threads' "
    "CPU (a shared machine: its seconds are slow); not reached: with the best validation accuracy any seed saw; — : no "
    "validation curve (run without eval_every). USD: those seconds at the cost page's price for the record's "
    "device (the whole instance holding the accelerators it used; a CPU: the 2-vCPU instance per 2 threads)."
)


def lora_rows(df: pd.DataFrame) -> pd.DataFrame:
    """Return one row per (device, variant, setting) at the setting's best learning rate by validation."""
    done = df[df["status"] == "finished"].assign(setting=lambda d: d.apply(setting, axis=1))
    out = []
    for (device, variant), g in done.groupby(["label", "variant"], sort=True, dropna=False):
        full = (
            best_lr(g[g["setting"] == "full fine-tuning"])[1]["test_acc"].dropna().tolist()
            if (g["setting"] == "full fine-tuning").any()
            else []
        )
        for name, every in g.groupby("setting", sort=False):
            cells = best_lr(every)[1]
            acc = cells["test_acc"].dropna().tolist()
            mean, half, _ = mean_interval(acc)
            diff, diff_half = gap(full, acc) if full and acc and name != "full fine-tuning" else (math.nan, math.nan)
            timed = every[~frame.profiled(every) & every["samples_per_s"].notna()]  # every lr: speed is the lr's
            out.append(
                {
                    "device": device,
                    "variant": variant,
                    "setting": name,
                    "lr: best by validation (searched); runs": searched(every),
                    "seeds": len(cells),
                    "test accuracy %": DASH
                    if math.isnan(mean)
                    else f"{100 * mean:.2f}" + (f" ± {100 * half:.2f}" if math.isfinite(half) else ""),
                    "gap to full (points)": DASH
                    if math.isnan(diff)
                    else f"{diff:+.2f}" + (f" ± {diff_half:.2f}" if math.isfinite(diff_half) else " (one seed a side)"),
                    f"to {100 * TARGET:.0f}% (s, ≤)": to_target(cells),
                    f"USD to {100 * TARGET:.0f}%": usd(cells),
                    "samples/s (every lr's runs)": DASH if timed.empty else str(frame.estimate(timed, "samples_per_s")),
                    "peak memory GiB": fmt(cells["mem_gib"].median()),
                    "trainable": fmt(cells["trainable"].median()),
                    "AdamW state MiB": fmt(cells["optimizer_mib"].median()),
                }
            )
    return pd.DataFrame(out)


def to_target(cells: pd.DataFrame) -> str:
    """Return the seconds to TARGET over seeds, else the best validation accuracy, else a dash (no curve)."""
    curves = [c for c in cells["curve"] if c]
    if not curves:
        return DASH
    seconds = cells.get(f"tta_{TARGET:.2f}", pd.Series(np.nan, index=cells.index))
    if seconds.notna().any():
        return cell(seconds, process_cpu(cells)[1])
    best = max(p.get("val_accuracy") or 0 for c in curves for p in c)
    return f"not reached (0/{len(seconds)}; best {100 * best:.1f}%)"


def usd(cells: pd.DataFrame) -> str:
    """Return the mean seconds to TARGET of the seeds that reached it, in USD at the cell's accelerator price."""
    seconds = cells.get(f"tta_{TARGET:.2f}", pd.Series(dtype=float)).dropna()
    if seconds.empty:
        return DASH
    _, per_hour = cost.measured_price(cells.iloc[0])
    return DASH if math.isnan(per_hour) else f"{seconds.mean() / 3600 * per_hour:.4f}"


def fits(settings: pd.DataFrame, seq_len: int) -> pd.DataFrame:
    """Return per LoRA setting and accelerator the largest bert-base batch that fits (calc.memory.fit_table)."""
    from transformers import BertConfig

    from helpers import flops, memory, models

    cfg = BertConfig(num_labels=6)
    rows = []
    for r in settings.itertuples():
        rank = 0 if pd.isna(r.lora_r) else int(r.lora_r)
        trainable = (
            flops.lora_trainable(models.architecture(cfg), rank, r.lora_targets or "query,value") if rank else None
        )
        table = memory.fit_table(cfg, seq_len, "bf16", trainable=trainable).set_index("key").loc[list(ACCELERATORS)]
        rows.append(
            {
                "setting": setting(pd.Series({"lora_r": rank, "lora_targets": r.lora_targets})),
                **{f"{d.device} ({fmt(d.memory_gib)} GiB)": d.largest_batch for d in table.itertuples()},
            }
        )
    return pd.DataFrame(rows).set_index("setting")


def lora_section(suite, df: pd.DataFrame, published_dir) -> str:
    """Return the LoRA suite's table and its note, or what fills it."""
    done = df[df["status"] == "finished"] if len(df) else df
    if done.empty:
        return no_runs(suite)
    table = lora_rows(done).set_index(["device", "variant", "setting"])
    seq_len = int(done["max_length"].median())
    settings = done[["lora_r", "lora_targets"]].drop_duplicates()
    model = (
        f"Largest batch that fits, a model: bert-base-uncased at L={seq_len}, bf16 autocast, per accelerator "
        "(helpers/memory.py with each setting's trainable parameters: gradients and AdamW moments for those "
        "only; activations as full fine-tuning's, so a LoRA batch here is a lower bound; 1 GiB reserved). The records "
        "above are the measurement; this answers the question for the study's model and devices."
    )
    return "\n\n".join([caption(suite, done), markdown(table), NOTE, model, markdown(fits(settings, seq_len))])
