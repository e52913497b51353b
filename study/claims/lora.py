"""The study's future work as claims: LoRA against full fine-tuning in accuracy and speed (the lora suite), each
setting at its best learning rate (the cell the LoRA table shows too).
"""

from __future__ import annotations

import pandas as pd

from study.claims.accuracy import gap, side
from study.claims.verdict import PROXY, SPREAD, Evidence, Finding, cells, device, listing, versus, who
from study.frame import ratio

WITHIN_POINTS = 1.0  # the claim: LoRA's test accuracy within 1 point of full fine-tuning's
NO_FIGURE = "no published figure: the study names LoRA as future work (§9); the claim tested is ours"
MIN_LRS = 3  # learning rates a setting's search tries before its best one stands for the setting
SWEEP = "python -m study.sweep lora"


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


def settings(g: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """Return a group's runs per setting, full fine-tuning first (every lr)."""
    g = g.assign(setting=g.apply(setting, axis=1))
    return dict(sorted(g.groupby("setting"), key=lambda kv: kv[0] != "full fine-tuning"))


def at_edge(runs: pd.DataFrame) -> bool:
    """Return whether a setting's best learning rate is the lowest or the highest its runs tried."""
    lr, _, lrs = best_lr(runs)
    return lr in (lrs[0], lrs[-1])


def unsearched(every: dict[str, pd.DataFrame], best: str) -> str:
    """Return why full fine-tuning's and the best LoRA setting's lrs do not stand for them, or ''."""
    few = [k for k, c in every.items() if c["lr"].nunique() < MIN_LRS]
    if few:
        return f"the learning-rate search has not been run ({', '.join(few)}: fewer than {MIN_LRS} lrs); `{SWEEP}`"
    edge = [k for k in ("full fine-tuning", best) if at_edge(every[k])]
    return (
        f"the best lr of {' and of '.join(edge)} is the edge of the lrs tried (the search has not bracketed it): add "
        f"lrs beyond it to the suite, then `{SWEEP}`"
        if edge
        else ""
    )


def lora_accuracy(df: pd.DataFrame, published_dir: str) -> Finding:
    """Return whether LoRA's best setting reaches full fine-tuning's test accuracy within 1 point."""
    rule = (
        f"per device, each setting at its best learning rate (the highest mean validation accuracy among ≥ {MIN_LRS} "
        "lrs its runs tried); the LoRA setting with the highest mean test accuracy against full fine-tuning: the gap "
        f"(full − LoRA) with its 95% interval over seeds (≥ 2 a side): holds if the whole interval is below "
        f"{WITHIN_POINTS:g} point; does not hold if above; inconclusive otherwise, and where a best lr is the edge "
        "of the lrs tried (a wider search may move the gap). Both train the same epochs on the same rows: accuracy "
        "at an equal budget. " + PROXY
    )
    evidence = Evidence()
    for g in cells(df, ("lora",)):
        every = settings(g)
        acc = {k: best_lr(c)[1]["test_acc"].dropna().tolist() for k, c in every.items()}
        lora = {k: v for k, v in acc.items() if k != "full fine-tuning" and v}
        if not acc.get("full fine-tuning") or not lora:
            continue
        best = max(lora, key=lambda k: sum(lora[k]) / len(lora[k]))
        diff, half = gap(acc["full fine-tuning"], lora[best])
        why = unsearched(every, best)
        if why:
            evidence.blocked.append(f"{device(g)}: {why}")
        sign = side(diff, half, WITHIN_POINTS)
        state = " (lr search not run)" if "not been run" in why else (" (best lr at the searched edge)" if why else "")
        evidence.add(
            g,
            None if why or sign is None else -sign,
            f"{device(g)}: gap {diff:+.2f} ± {half:.2f} points{state}",
            f"{who(g)}: best {best}: gap to full {diff:+.2f} ± {half:.2f} points ({len(lora[best])} seeds vs "
            f"{len(acc['full fine-tuning'])}); lr: " + "; ".join(f"{k} {searched(c)}" for k, c in every.items()),
        )
    return evidence.finding(
        "LoRA reaches full fine-tuning's accuracy within 1 point at the same budget",
        NO_FIGURE,
        rule,
        listing(cells(df, ("lora",))),
        "needs lora runs: full fine-tuning and LoRA, ≥ 2 seeds each, on one device",
    )


def lora_speed(df: pd.DataFrame, published_dir: str) -> Finding:
    """Return whether every LoRA setting trains more samples per second than full fine-tuning."""
    rule = (
        "per device and LoRA setting at its best learning rate, samples/s against full fine-tuning's at its best, "
        f"with {SPREAD}: holds if every setting is faster; does not hold if any is slower; inconclusive otherwise. "
        + PROXY
    )
    evidence = Evidence()
    for g in cells(df, ("lora",), timed=True):
        every = {k: best_lr(c)[1] for k, c in settings(g).items()}
        full = every.pop("full fine-tuning", None)
        for name, mine in every.items() if full is not None else ():
            a, b, sign = versus(mine, full, "samples_per_s")
            evidence.add(
                g,
                sign,
                f"{device(g)}: {name} {a.mid / b.mid:.2f}x full's samples/s",
                f"{who(g)}: {name} {a} samples/s vs full fine-tuning's {b} ({ratio(a, b)}x)",
            )
    return evidence.finding(
        "LoRA trains faster per step",
        NO_FIGURE,
        rule,
        listing(cells(df, ("lora",))),
        "needs lora runs: full fine-tuning and at least one LoRA setting on one device",
    )
