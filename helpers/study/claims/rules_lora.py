"""The study's future work as claims: LoRA against full fine-tuning (the lora suite), each verdict computed by
a stated rule from records of full fine-tuning and LoRA on the same device, with seeds.
"""
from __future__ import annotations

import pandas as pd

from helpers.study.claims.evidence import PROXY, Finding, band, cells, claim, compare, concluded, listing, ratio, who
from helpers.study.report.lora_table import gap, setting

WITHIN_POINTS = 1.0  # the claim: LoRA's test accuracy within 1 point of full fine-tuning's
NO_FIGURE = "no published figure: the study names LoRA as future work"


def _settings(g: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, pd.DataFrame]]:
    """Return a group's full fine-tuning rows and its LoRA rows per setting."""
    g = g.assign(setting=g.apply(setting, axis=1))
    return g[g["setting"] == "full fine-tuning"], {k: c for k, c in g.groupby("setting") if k != "full fine-tuning"}


def budget(g: pd.DataFrame) -> str:
    """Return the training budget a group's runs share, in words ('1 epoch of 8,000 rows')."""
    epochs = g["epochs"].dropna().unique() if "epochs" in g else []
    rows = g["train_subset"].dropna().unique() if "train_subset" in g else []
    n = f"{int(epochs[0])} epoch{'s' if epochs[0] != 1 else ''}" if len(epochs) == 1 else "epochs as set"
    return f"{n} of {int(rows[0]):,} rows" if len(rows) == 1 else f"{n} of the whole training split"


@claim
def lora_accuracy(df: pd.DataFrame, published_dir: str) -> Finding:
    """Return whether LoRA's best setting reaches full fine-tuning's test accuracy within 1 point."""
    rule = (f"per device, the LoRA setting with the highest mean test accuracy against full fine-tuning, over "
            f"seeds: the gap (full − LoRA) with its 95% interval; holds if the whole interval is below "
            f"{WITHIN_POINTS:g} point; does not hold if the whole interval is above it; inconclusive otherwise "
            f"(needs ≥ 2 seeds a cell). Both train the same epochs on the same rows, so this is accuracy at "
            f"an equal budget, the one a user pays for; LoRA at convergence (many more epochs) is not tested. "
            + PROXY)
    signs, parts, groups, widths = [], [], [], []
    for g in cells(df, ("lora",)):
        full, lora = _settings(g)
        full_acc = full["test_acc"].dropna().tolist()
        seeded = {k: c["test_acc"].dropna().tolist() for k, c in lora.items() if c["test_acc"].notna().sum() >= 2}
        if len(full_acc) < 2 or not seeded:
            continue
        best = max(seeded, key=lambda k: sum(seeded[k]) / len(seeded[k]))
        diff, half = gap(full_acc, seeded[best])
        groups.append(g)
        widths.append(half)
        signs.append(1 if diff + half < WITHIN_POINTS else (-1 if diff - half > WITHIN_POINTS else 0))
        parts.append(f"{who(g)}, {budget(g)}: best {best}: gap to full {diff:+.2f} ± {half:.2f} points "
                     f"({len(seeded[best])} seeds vs {len(full_acc)})")
    return concluded("LoRA reaches full fine-tuning's accuracy within 1 point at the same budget", NO_FIGURE, parts,
                     listing(cells(df, ("lora",))), signs, groups, rule,
                     f"the gap's interval (± {max(widths, default=0):.2f} points) straddles {WITHIN_POINTS:g} point",
                     "needs lora runs: full fine-tuning and LoRA, ≥ 2 seeds each, on one device")


@claim
def lora_speed(df: pd.DataFrame, published_dir: str) -> Finding:
    """Return whether every LoRA setting trains more samples per second than full fine-tuning."""
    rule = ("per device and LoRA setting, samples/s against full fine-tuning's with their spread (the range "
            "between runs, ≥ 3 each; else the timing windows): holds if every setting is faster beyond both "
            "spreads; does not hold if any is slower beyond them; inconclusive otherwise. " + PROXY)
    signs, parts, groups = [], [], []
    for g in cells(df, ("lora",)):
        full, lora = _settings(g)
        if full["samples_per_s"].notna().sum() == 0 or not lora:
            continue
        groups.append(g)
        base = band(full, "samples_per_s")
        shown = []
        for name, c in lora.items():
            mine = band(c, "samples_per_s")
            signs.append(compare(mine, base))
            shown.append(f"{name} {ratio(mine, base)}x")
        parts.append(f"{who(g)}: samples/s over full fine-tuning's {base}: " + ", ".join(shown))
    return concluded("LoRA trains faster per step", NO_FIGURE, parts, listing(cells(df, ("lora",))), signs,
                     groups, rule, "the samples/s spreads overlap",
                     "needs lora runs: full fine-tuning and at least one LoRA setting on one device")

