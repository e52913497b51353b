"""The study's future work as claims: LoRA against full fine-tuning in accuracy and speed (the lora suite),
and what makes a setting and its best learning rate, which the LoRA table shows.
"""

from __future__ import annotations

import math

import pandas as pd

from helpers.study.claims.accuracy import mean_interval
from helpers.study.claims.verdict import (
    PROXY,
    Evidence,
    Finding,
    band,
    cells,
    claim,
    device,
    listing,
    ratio,
    who,
)

WITHIN_POINTS = 1.0  # the claim: LoRA's test accuracy within 1 point of full fine-tuning's
NO_FIGURE = "no published figure: the study names LoRA as future work (§9); the claim tested is ours"
MIN_LRS = 3  # learning rates a setting's search tries before its best one stands for the setting
SWEEP = "python -m helpers.study.sweep lora"


def setting(row: pd.Series) -> str:
    """Return a row's setting in words: 'full fine-tuning' or 'LoRA r=8 (query,value)'."""
    r = row["lora_r"]
    if pd.isna(r) or int(r) == 0:
        return "full fine-tuning"
    return f"LoRA r={int(r)} ({row['lora_targets'] or 'query,value'})"


def best_lr(runs: pd.DataFrame) -> tuple[float, pd.DataFrame, list[float]]:
    """Return a setting's learning rate with the highest mean validation accuracy, its runs, and every lr tried."""
    by_lr = runs.groupby("lr")["val_acc"].mean()
    lrs = sorted(float(x) for x in runs["lr"].dropna().unique())
    lr = float(by_lr.idxmax()) if by_lr.notna().any() else lrs[0]
    return lr, runs[runs["lr"] == lr], lrs


def searched(runs: pd.DataFrame) -> str:
    """Return 'best lr (of lr, lr, lr); N runs, k collapsed' for one setting's runs."""
    lr, _, lrs = best_lr(runs)
    collapsed = int(runs["near_majority"].fillna(False).astype(bool).sum())
    tried = ", ".join(f"{x:g}" for x in lrs)
    return f"{lr:g} (of {tried}); {len(runs)} run{'s' if len(runs) != 1 else ''}, {collapsed} collapsed"


def gap(full: list[float], mine: list[float]) -> tuple[float, float]:
    """Return full's mean minus mine's, in points, and the half-width of its 95% interval."""
    a, ha, _ = mean_interval(full)
    b, hb, _ = mean_interval(mine)
    return 100 * (a - b), 100 * math.sqrt((ha if math.isfinite(ha) else 0) ** 2 + (hb if math.isfinite(hb) else 0) ** 2)


def _settings(g: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, pd.DataFrame]]:
    """Return a group's full fine-tuning rows and its LoRA rows per setting (every lr)."""
    g = g.assign(setting=g.apply(setting, axis=1))
    return g[g["setting"] == "full fine-tuning"], {k: c for k, c in g.groupby("setting") if k != "full fine-tuning"}


def unsearched(full: pd.DataFrame, lora: dict[str, pd.DataFrame]) -> list[str]:
    """Return the settings whose runs tried fewer than MIN_LRS learning rates."""
    every = {"full fine-tuning": full, **lora}
    return [k for k, c in every.items() if c["lr"].nunique() < MIN_LRS]


def at_edge(runs: pd.DataFrame) -> bool:
    """Return whether a setting's best learning rate is the lowest or the highest its runs tried."""
    lr, _, lrs = best_lr(runs)
    return lr in (lrs[0], lrs[-1])


def budget(g: pd.DataFrame) -> str:
    """Return the training budget a group's runs share, in words ('1 epoch of 8,000 rows')."""
    epochs = g["epochs"].dropna().unique()
    rows = g["train_subset"].dropna().unique()
    n = f"{int(epochs[0])} epoch{'s' if epochs[0] != 1 else ''}" if len(epochs) == 1 else "epochs as set"
    return f"{n} of {int(rows[0]):,} rows" if len(rows) == 1 else f"{n} of the whole training split"


@claim
def lora_accuracy(df: pd.DataFrame, published_dir: str) -> Finding:
    """Return whether LoRA's best setting reaches full fine-tuning's test accuracy within 1 point."""
    rule = (
        "per device, each setting (full fine-tuning and each LoRA one) at its best learning rate, the "
        f"highest mean validation accuracy among ≥ {MIN_LRS} lrs its runs tried; the LoRA setting with "
        "the highest mean test accuracy against full fine-tuning, over seeds: the gap (full − LoRA) "
        f"with its 95% interval; holds if the whole interval is below {WITHIN_POINTS:g} point; does not "
        "hold if the whole interval is above it; inconclusive otherwise (needs ≥ 2 seeds a cell), and "
        "inconclusive where the best lr of full fine-tuning or of that LoRA setting is the lowest or the "
        "highest it tried (the search has not bracketed it: a wider one may move the gap). Both "
        "train the same epochs on the same rows, so this is accuracy at an equal budget, the one a user "
        "pays for; LoRA at convergence (many more epochs) is not tested. " + PROXY
    )
    evidence, widths = Evidence(df), []
    for g in cells(df, ("lora",)):
        full, lora = _settings(g)
        full_acc = best_lr(full)[1]["test_acc"].dropna().tolist() if len(full) else []
        seeded = {k: best_lr(c)[1]["test_acc"].dropna().tolist() for k, c in lora.items()}
        seeded = {k: v for k, v in seeded.items() if len(v) >= 2}
        if len(full_acc) < 2 or not seeded:
            continue
        best = max(seeded, key=lambda k: sum(seeded[k]) / len(seeded[k]))
        diff, half = gap(full_acc, seeded[best])
        evidence.groups.append(g)
        widths.append(half)
        missing = unsearched(full, lora)
        if missing:
            evidence.blocked.append(
                f"{device(g)}: the learning-rate search has not been run ({', '.join(missing)}: "
                f"fewer than {MIN_LRS} lrs); `{SWEEP}`"
            )
        edge = [] if missing else [k for k, c in (("full fine-tuning", full), (best, lora[best])) if at_edge(c)]
        if edge:
            evidence.blocked.append(
                f"{device(g)}: the best lr of {' and of '.join(edge)} is the edge of the lrs tried "
                f"(the search has not bracketed it): add lrs beyond it to the suite, then `{SWEEP}`"
            )
        unresolved = missing or edge
        evidence.signs.append(
            0 if unresolved else (1 if diff + half < WITHIN_POINTS else (-1 if diff - half > WITHIN_POINTS else 0))
        )
        state = " (lr search not run)" if missing else (" (best lr at the searched edge)" if edge else "")
        evidence.heads.append(f"{device(g)}: gap {diff:+.2f} ± {half:.2f} points{state}")
        evidence.parts.append(
            f"{who(g)}, {budget(g)}: best {best}: gap to full {diff:+.2f} ± {half:.2f} points "
            f"({len(seeded[best])} seeds vs {len(full_acc)}); lr: full fine-tuning "
            f"{searched(full)}; " + "; ".join(f"{k} {searched(c)}" for k, c in lora.items())
        )
    return evidence.finding(
        "LoRA reaches full fine-tuning's accuracy within 1 point at the same budget",
        NO_FIGURE,
        listing(cells(df, ("lora",))),
        rule,
        f"the gap's interval (± {max(widths, default=0):.2f} points) straddles {WITHIN_POINTS:g} point",
        "needs lora runs: full fine-tuning and LoRA, ≥ 2 seeds each, on one device",
    )


@claim
def lora_speed(df: pd.DataFrame, published_dir: str) -> Finding:
    """Return whether every LoRA setting trains more samples per second than full fine-tuning."""
    rule = (
        "per device and LoRA setting, samples/s against full fine-tuning's with their spread (the range "
        "between runs, ≥ 3 each; else the timing windows), and, as the seeds of a cell run back to back, "
        "beyond the drift between suites: holds if every setting is faster beyond both "
        "spreads; does not hold if any is slower beyond them; inconclusive otherwise. " + PROXY
    )
    evidence = Evidence(df)
    for g in cells(df, ("lora",), timed=True):
        full, lora = _settings(g)
        if full["samples_per_s"].notna().sum() == 0 or not lora:
            continue
        evidence.groups.append(g)
        base = band(full, "samples_per_s")
        shown = []
        for name, c in lora.items():
            mine = band(c, "samples_per_s")
            evidence.signs.append(evidence.compare(g, full, c, mine, base))
            shown.append(f"{name} {ratio(mine, base)}x")
            evidence.heads.append(f"{device(g)}: {name} {ratio(mine, base).mid:.2f}x full's samples/s")
        evidence.parts.append(
            f"{who(g)}: samples/s over full fine-tuning's {base} (every lr's runs: speed does not "
            "depend on it): " + ", ".join(shown)
        )
    return evidence.finding(
        "LoRA trains faster per step",
        NO_FIGURE,
        listing(cells(df, ("lora",))),
        rule,
        evidence.unresolved("the samples/s spreads overlap"),
        "needs lora runs: full fine-tuning and at least one LoRA setting on one device",
    )
