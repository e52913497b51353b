"""The study's claims about the training recipe: stochastic rounding by sequence length, and the tuned
learning rate with LLRD, judged on arms that learned and use the same optimizer.
"""

from __future__ import annotations

import pandas as pd

from helpers.study.claims.accuracy import FLOOR_POINTS, mean_interval, paired_diffs, resolvable_difference, unlearned
from helpers.study.claims.verdict import PROXY, Evidence, Finding, cells, claim, device, isclose, listing, who
from helpers.study.published import published


def optimizers(arms: dict[str, pd.DataFrame]) -> str:
    """Return 'the arms use different optimizers (name: class, ...)' when they do, else ''."""
    used = {
        name: ", ".join(sorted(set(arm["optimizer"].dropna().astype(str)))) or "not recorded"
        for name, arm in arms.items()
    }
    if len(set(used.values())) <= 1:
        return ""
    return (
        "the arms use different optimizers ("
        + "; ".join(f"{k}: {v}" for k, v in used.items())
        + "): these records hold no same-optimizer arms"
    )


@claim
def stochastic_rounding(df: pd.DataFrame, published_dir: str) -> Finding:
    """Return whether stochastic rounding helps at L=16 and hurts at L=32, paired by seed, on arms that learned."""
    pub = {
        (r.max_length, r.stochastic_rounding): float(r.accuracy)
        for r in published("stochastic_rounding.csv", published_dir).itertuples()
    }
    one_run = resolvable_difference([pub[("16", "off")]], 2000)
    text = (
        f"trn1, one run a cell: SR − no SR "
        f"{100 * (pub[('16', 'on')] - pub[('16', 'off')]):+.2f} points "
        f"at L=16, {100 * (pub[('32', 'on')] - pub[('32', 'off')]):+.2f} at L=32. Its figures do not "
        f"resolve its words: one run a cell on 2,000 test rows resolves ±{100 * one_run:.1f} points "
        "(95%), so on its own figures this rule is inconclusive"
    )
    rule = (
        "bf16-pure-sr − bf16-pure test accuracy paired by seed at L=16 and L=32, "
        "95% interval (t over ≥ "
        "2 pairs; one pair: the binomial interval of a difference): holds if L=16's lies above 0 and "
        "L=32's below 0 (the study's signs) on every device; does not hold if either lies beyond 0 on "
        "the other side; inconclusive when an interval contains 0. Only arms that learned (test "
        f"accuracy at or above the floor: {FLOOR_POINTS:g} points below the best its model reached on "
        "that device at that budget) and that use the same optimizer speak: on a CPU or GPU "
        "bf16-pure-sr is torchao's AdamW, bf16-pure torch's, and then the verdict says so. " + PROXY
    )
    evidence, halves = Evidence(df), []
    for g in cells(df, ("precision",)):
        diffs = paired_diffs(g, "precision", "bf16-pure-sr", "bf16-pure", "max_length")
        if not (diffs.get(16) and diffs.get(32)):
            continue
        evidence.groups.append(g)
        rows = int(g["test_rows"].max()) if g["test_rows"].notna().any() else None
        arms = {
            f"{mode} L={length}": g[(g["precision"] == mode) & (g["max_length"] == length)]
            for length in (16, 32)
            for mode in ("bf16-pure", "bf16-pure-sr")
        }
        why = [w for w in (unlearned(df, arms), optimizers(arms)) if w]
        evidence.blocked.extend(f"{w} [{who(g)}]" for w in why)
        shown = []
        for length, claimed in ((16, 1), (32, -1)):
            mean, half, _ = mean_interval(diffs[length])
            if len(diffs[length]) == 1:
                half = resolvable_difference([g[g["max_length"] == length]["test_acc"].mean()], rows)
            evidence.signs.append(0 if why else claimed * (1 if mean - half > 0 else (-1 if mean + half < 0 else 0)))
            halves.append(half)
            shown.append(f"L={length} {100 * mean:+.2f} ± {100 * half:.2f} points ({len(diffs[length])} pairs)")
        evidence.parts.append(f"{who(g)}: SR − no SR paired by seed: " + ", ".join(shown))
        evidence.heads.extend(f"{device(g)}: SR − no SR {x.split(' ±')[0]}" for x in shown)
    return evidence.finding(
        "Stochastic rounding's effect depends on sequence length",
        text,
        listing(cells(df, ("precision",))),
        rule,
        f"these pairs resolve an SR effect of ±{100 * max(halves, default=0):.2f} points",
        "needs precision runs in bf16-pure and bf16-pure-sr with the same seeds at L=16 and L=32",
    )


@claim
def lr_llrd(df: pd.DataFrame, published_dir: str) -> Finding:
    """Return whether lr 1.5e-4 with LLRD 0.95 beats lr 2e-5 without, and (ours) LLRD's own effect."""
    pub = published("lr_llrd.csv", published_dir)
    acc = {(r.lr, r.llrd_decay): float(r.accuracy) for r in pub.itertuples()}
    ref, tuned = acc["2e-5", ""], acc["1.5e-4", "0.95"]
    study_llrd = ((acc["2e-5", "0.95"] - ref) + (tuned - acc["1.5e-4", ""])) / 2
    text = (
        f"trn1, mean of 2 runs: {100 * ref:.2f}% at lr 2e-5 without LLRD → {100 * tuned:.2f}% at lr "
        f"1.5e-4 with LLRD 0.95 ({100 * (tuned - ref):+.2f} points; 2,000 test rows resolve "
        f"±{100 * resolvable_difference([ref], 2000):.2f}). On its 2x2 LLRD's own effect is "
        f"{100 * study_llrd:+.2f} points (ours)"
    )
    rule = (
        "the study's claim: the tuned corner (lr 1.5e-4, LLRD 0.95) minus the baseline (lr 2e-5, no "
        "LLRD): holds if above the smallest difference the cells' seeds resolve (one seed: the binomial "
        "one of the test rows); does not hold if below minus that; inconclusive otherwise, or when an "
        f"arm did not learn (test accuracy more than {FLOOR_POINTS:g} points below the best its model "
        "reached on that device at that budget). Ours, shown beside and deciding nothing: LLRD's effect "
        "apart from the lr, the mean over the two lrs of LLRD minus none, from the 2x2. " + PROXY
    )
    evidence, res = Evidence(df), []
    for g in cells(df, ("lr_llrd",)):
        cell = {
            (lr, d): g[isclose(g["lr"], lr) & (g["llrd_decay"] == "none" if d is None else isclose(g["llrd_decay"], d))]
            for lr in (2e-5, 1.5e-4)
            for d in (None, 0.95)
        }
        base, best = cell[2e-5, None], cell[1.5e-4, 0.95]
        if base.empty or best.empty:
            continue
        evidence.groups.append(g)
        rows = int(g["test_rows"].max()) if g["test_rows"].notna().any() else None
        values = {k: c["test_acc"].dropna().tolist() for k, c in cell.items()}
        res.append(max(resolvable_difference(values[k], rows) for k in ((2e-5, None), (1.5e-4, 0.95))))
        m = {k: sum(v) / len(v) for k, v in values.items() if v}
        gain = m[1.5e-4, 0.95] - m[2e-5, None]
        why = unlearned(df, {"lr 2e-5 without LLRD": base, "lr 1.5e-4 with LLRD 0.95": best})
        evidence.blocked += [f"{why} [{who(g)}]"] * bool(why)
        evidence.signs.append(0 if why else (1 if gain > res[-1] else (-1 if gain < -res[-1] else 0)))
        ours = ""
        if len(m) == 4:
            llrd = ((m[2e-5, 0.95] - m[2e-5, None]) + (m[1.5e-4, 0.95] - m[1.5e-4, None])) / 2
            ours = f"; ours: LLRD's effect apart from the lr {100 * llrd:+.2f} points"
        seeds = min(len(values[2e-5, None]), len(values[1.5e-4, 0.95]))
        evidence.heads.append(f"{device(g)}: tuned − baseline {100 * gain:+.2f} points")
        evidence.parts.append(
            f"{who(g)}: tuned − baseline {100 * gain:+.2f} points ({100 * m[2e-5, None]:.2f}% → "
            f"{100 * m[1.5e-4, 0.95]:.2f}%, at least {seeds} seed(s) a cell; resolvable "
            f"{100 * res[-1]:.2f}){ours}"
        )
    return evidence.finding(
        "Tuning (lr 1.5e-4 with LLRD 0.95) raises accuracy over lr 2e-5",
        text,
        listing(cells(df, ("lr_llrd",))),
        rule,
        f"the seeds resolve a difference of {100 * max(res, default=0):.2f} points",
        "needs lr_llrd runs at lr 2e-5 without LLRD and lr 1.5e-4 with LLRD 0.95",
    )
