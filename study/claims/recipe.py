"""The study's claims about the training recipe: stochastic rounding by sequence length, and the tuned
learning rate with LLRD, judged on arms that learned and use the same optimizer, over seeds.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from study.claims.accuracy import FLOOR_POINTS, binomial_half_width, gap, paired_diffs, seeds_interval, side, unlearned
from study.claims.verdict import PROXY, Evidence, Finding, cells, device, listing, who
from study.published import published

STUDY_TEST_ROWS = 2000  # dair-ai/emotion's test split, on which the study's accuracies were measured
SEEDS = "a 95% interval over seeds (t; ≥ 2 seeds a cell, else no spread and the comparison is not judged)"


def optimizers(arms: dict[str, pd.DataFrame]) -> str:
    """Return 'the arms use different optimizers (name: class, ...)' when they do, else ''."""
    used = {name: ", ".join(sorted(set(arm["optimizer"].dropna().astype(str)))) or "?" for name, arm in arms.items()}
    if len(set(used.values())) <= 1:
        return ""
    return "the arms use different optimizers (" + "; ".join(f"{k}: {v}" for k, v in used.items()) + ")"


def isclose(series: pd.Series, value: float) -> pd.Series:
    """Return where a column (numbers, or 'none' / None) equals `value` to float precision."""
    return np.isclose(pd.to_numeric(series, errors="coerce").astype(float), value, rtol=1e-9, atol=0)


def stochastic_rounding(df: pd.DataFrame, published_dir: str) -> Finding:
    """Return whether stochastic rounding helps at L=16 and hurts at L=32, paired by seed, on arms that learned."""
    pub = {
        (r.max_length, r.stochastic_rounding): float(r.accuracy)
        for r in published("stochastic_rounding.csv", published_dir).itertuples()
    }
    noise = 100 * math.sqrt(2) * binomial_half_width(pub[("16", "off")], STUDY_TEST_ROWS)
    text = (
        f"trn1, one run a cell: SR − no SR {100 * (pub[('16', 'on')] - pub[('16', 'off')]):+.2f} accuracy points at "
        f"L=16, {100 * (pub[('32', 'on')] - pub[('32', 'off')]):+.2f} at L=32. Its figures do not resolve its words: "
        f"one run a cell has no spread over seeds, and its 2,000 test rows alone blur a difference by ±{noise:.1f} "
        "points (95%), so on its own figures this rule is inconclusive"
    )
    rule = (
        f"bf16-pure-sr − bf16-pure test accuracy paired by seed at L=16 and L=32, {SEEDS}: holds if L=16's lies "
        "above 0 and L=32's below 0 (the study's signs) on every device; does not hold if either lies beyond 0 on "
        "the other side; inconclusive when an interval contains 0. Only arms that learned (test accuracy at or above "
        f"the floor: {FLOOR_POINTS:g} points below the best its model reached on that device at that budget) and "
        "that use the same optimizer speak: on a CPU or GPU bf16-pure-sr is torchao's AdamW, bf16-pure torch's. "
        + PROXY
    )
    evidence = Evidence()
    for g in cells(df, ("precision",)):
        diffs = paired_diffs(g, "precision", "bf16-pure-sr", "bf16-pure", "max_length")
        if not (diffs.get(16) and diffs.get(32)):
            continue
        arms = {
            f"{m} L={n}": g[(g["precision"] == m) & (g["max_length"] == n)]
            for n in (16, 32)
            for m in ("bf16-pure", "bf16-pure-sr")
        }
        why = [w for w in (unlearned(df, arms), optimizers(arms)) if w]
        evidence.blocked += [f"{w} [{who(g)}]" for w in why]
        for length, claimed in ((16, 1), (32, -1)):
            mean, half = seeds_interval(diffs[length])
            sign = None if why or side(mean, half) is None else claimed * side(mean, half)
            said = f"SR − no SR L={length} {100 * mean:+.2f} ± {100 * half:.2f} accuracy points"
            evidence.add(g, sign, f"{device(g)}: {said}", f"{who(g)}: {said} ({len(diffs[length])} pairs by seed)")
    return evidence.finding(
        "Stochastic rounding's effect depends on sequence length",
        text,
        rule,
        listing(cells(df, ("precision",))),
        "needs precision runs in bf16-pure and bf16-pure-sr with the same seeds at L=16 and L=32",
    )


def lr_llrd(df: pd.DataFrame, published_dir: str) -> Finding:
    """Return whether lr 1.5e-4 with LLRD 0.95 beats lr 2e-5 without."""
    pub = published("lr_llrd.csv", published_dir)
    acc = {(r.lr, r.llrd_decay): float(r.accuracy) for r in pub.itertuples()}
    ref, tuned = acc["2e-5", ""], acc["1.5e-4", "0.95"]
    text = (
        f"trn1, mean of 2 runs: {100 * ref:.2f}% at lr 2e-5 without LLRD → {100 * tuned:.2f}% at lr 1.5e-4 with "
        f"LLRD 0.95 ({100 * (tuned - ref):+.2f} points); the runs' spread is not published, so on its own figures "
        "this rule is inconclusive"
    )
    rule = (
        f"the tuned corner (lr 1.5e-4, LLRD 0.95) minus the baseline (lr 2e-5, no LLRD), {SEEDS}: holds if it lies "
        "above 0; does not hold if below 0; inconclusive otherwise, or when an arm did not learn (test accuracy more "
        f"than {FLOOR_POINTS:g} points below the best its model reached on that device at that budget). " + PROXY
    )
    evidence = Evidence()
    for g in cells(df, ("lr_llrd",)):
        base = g[isclose(g["lr"], 2e-5) & (g["llrd_decay"] == "none")]
        best = g[isclose(g["lr"], 1.5e-4) & isclose(g["llrd_decay"], 0.95)]
        if base.empty or best.empty:
            continue
        why = unlearned(df, {"lr 2e-5 without LLRD": base, "lr 1.5e-4 with LLRD 0.95": best})
        if why:
            evidence.blocked.append(f"{why} [{who(g)}]")
        diff, half = gap(best["test_acc"].dropna().tolist(), base["test_acc"].dropna().tolist())
        evidence.add(
            g,
            None if why else side(diff, half),
            f"{device(g)}: tuned − baseline {diff:+.2f} points",
            f"{who(g)}: tuned − baseline {diff:+.2f} ± {half:.2f} points ({100 * base['test_acc'].mean():.2f}% → "
            f"{100 * best['test_acc'].mean():.2f}%, {len(base)} and {len(best)} run(s))",
        )
    return evidence.finding(
        "Tuning (lr 1.5e-4 with LLRD 0.95) raises accuracy over lr 2e-5",
        text,
        rule,
        listing(cells(df, ("lr_llrd",))),
        "needs lr_llrd runs at lr 2e-5 without LLRD and lr 1.5e-4 with LLRD 0.95",
    )
