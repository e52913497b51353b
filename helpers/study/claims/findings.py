"""The findings table that opens Experiment/REPORT.md: one row per claim of the study, with the published
evidence, the evidence measured here (device, variant, runs), and a verdict a stated rule computes.

    table = findings(df, "Experiment/published")    # df: helpers.study.report.frame.load(...)[0]
    print(markdown(table))

Verdicts are "holds", "does not hold" (records of the claim's own kind only), "consistent on proxy" /
"contradicted on proxy", "consistent with the model" / "contradicted by the model", "inconclusive" (with
the smallest effect the sample resolves) or "not testable here" (with what it needs). The rules and how comparisons combine are in
helpers/study/claims/evidence.py; the throughput claims in rules.py, the trn1-only ones in rules_trn1.py; the
accuracy, speedup and cost claims here.
"""
from __future__ import annotations

from dataclasses import asdict

import pandas as pd

from helpers.calc.cost import price_per_accelerator_hour
from helpers.calc.facts import cuda_device_key
from helpers.study.claims import rules as claims
from helpers.study.claims import rules_lora as claims_lora
from helpers.study.claims import rules_trn1 as claims_trn1
from helpers.study.claims.accuracy import mean_interval, paired_diffs, resolvable_difference
from helpers.study.claims.evidence import (PROXY, PROXY_RULE, Band, Finding, band, cells, claim, compare, concluded,
                                    isclose, judged, listing, proxies, ratio, who)
from helpers.study.report.tables import PUBLISHED_DIR, fmt, published

QUESTION = "What do the study's claims come to on the machines whose records are here?"
STUDY_GPUS = {"a100-40gb": "A100", "a100-80gb": "A100", "t4": "T4", "l4": "L4"}  # device key -> the study's name
SPEEDUP_TOLERANCE = 0.10  # the study's speedups are single runs with no stated spread


def study_device(rows: pd.DataFrame) -> str | None:
    """Return the study's name of a group's device (trn1, T4, L4, A100), None if it did not measure it."""
    r = rows.iloc[0]
    return "trn1" if r["cls"] == "trn1" else STUDY_GPUS.get(cuda_device_key(str(r["device"])) or "")


@claim
def stochastic_rounding(df: pd.DataFrame, published_dir: str) -> Finding:
    """Return whether stochastic rounding helps at L=16 and hurts at L=32, paired by seed."""
    pub = {(r.max_length, r.stochastic_rounding): float(r.accuracy)
           for r in published("stochastic_rounding.csv", published_dir).itertuples()}
    one_run = resolvable_difference([pub[("16", "off")]], 2000)
    text = (f"trn1, one run per cell: SR − no SR {100 * (pub[('16', 'on')] - pub[('16', 'off')]):+.2f} points at "
            f"L=16, {100 * (pub[('32', 'on')] - pub[('32', 'off')]):+.2f} at L=32; one run per cell on 2,000 test "
            f"rows resolves ±{100 * one_run:.1f} points (published)")
    rule = ("bf16-pure-sr − bf16-pure test accuracy paired by seed at L=16 and L=32, 95% interval (t over ≥ 2 "
            "pairs; one pair: the binomial interval of a difference): holds if L=16's lies above 0 and L=32's "
            "below 0 (the study's signs) on every device; does not hold if either lies beyond 0 on the other "
            "side; inconclusive when an interval contains 0. " + PROXY)
    signs, parts, groups, halves = [], [], [], []
    for g in cells(df, ("precision",)):
        diffs = paired_diffs(g, "precision", "bf16-pure-sr", "bf16-pure", "max_length")
        if not (diffs.get(16) and diffs.get(32)):
            continue
        groups.append(g)
        rows = int(g["test_rows"].max()) if g["test_rows"].notna().any() else None
        shown = []
        for length, claimed in ((16, 1), (32, -1)):
            mean, half, _ = mean_interval(diffs[length])
            if len(diffs[length]) == 1:
                half = resolvable_difference([g[g["max_length"] == length]["test_acc"].mean()], rows)
            signs.append(claimed * (1 if mean - half > 0 else (-1 if mean + half < 0 else 0)))
            halves.append(half)
            shown.append(f"L={length} {100 * mean:+.2f} ± {100 * half:.2f} points ({len(diffs[length])} pairs)")
        parts.append(f"{who(g)}: SR − no SR paired by seed: " + ", ".join(shown))
    return concluded("Stochastic rounding's effect depends on sequence length", text, parts,
                     listing(cells(df, ("precision",))), signs, groups, rule,
                     f"an interval contains 0; these pairs resolve an SR effect of "
                     f"±{100 * max(halves, default=0):.2f} points",
                     "needs precision runs in bf16-pure and bf16-pure-sr with the same seeds at L=16 and L=32")


@claim
def lr_llrd(df: pd.DataFrame, published_dir: str) -> Finding:
    """Return whether LLRD raises test accuracy apart from the learning rate (the 2x2 of lr and LLRD)."""
    pub = published("lr_llrd.csv", published_dir)
    ref = float(pub[(pub["lr"] == "2e-5") & (pub["llrd_decay"] == "")]["accuracy"].iloc[0])
    tuned = float(pub[(pub["lr"] == "1.5e-4") & (pub["llrd_decay"] == "0.95")]["accuracy"].iloc[0])
    text = (f"trn1, mean of 2 runs: {100 * ref:.2f}% at lr 2e-5 without LLRD → {100 * tuned:.2f}% at lr 1.5e-4, "
            f"LLRD 0.95 ({100 * (tuned - ref):+.2f} points), credited to LLRD (published)")
    rule = ("the 2x2 of lr (2e-5, 1.5e-4) and LLRD (none, 0.95) on one device, runs near the majority class left "
            "out: the LLRD effect is the mean over the two lrs of LLRD minus none, the lr effect the mean over the "
            "two LLRD settings of 1.5e-4 minus 2e-5, the interaction their difference of differences. Holds if the "
            "LLRD effect exceeds the smallest difference the cells' seeds resolve (the largest of the four); does "
            "not hold if it is below minus that; inconclusive otherwise, or when a cell is missing or learned "
            "nothing (then the lr effect alone cannot be told from LLRD's). " + PROXY)
    signs, parts, groups, res = [], [], [], []
    for g in cells(df, ("lr_llrd",)):
        cell = {(lr, d): g[isclose(g["lr"], lr) & (g["llrd_decay"] == "none" if d is None else isclose(g["llrd_decay"], d))]
                for lr in (2e-5, 1.5e-4) for d in (None, 0.95)}
        if any(c.empty for c in cell.values()):
            continue
        groups.append(g)
        learned = {k: c[~c["near_majority"].fillna(False).astype(bool)]["test_acc"].dropna().tolist() for k, c in cell.items()}
        if not all(learned.values()):
            signs.append(0)
            parts.append(f"{who(g)}: a cell learned nothing (every run near the majority class)")
            continue
        m = {k: sum(v) / len(v) for k, v in learned.items()}
        rows = int(g["test_rows"].max()) if g["test_rows"].notna().any() else None
        res.append(max(resolvable_difference(v, rows) for v in learned.values()))
        llrd = ((m[2e-5, 0.95] - m[2e-5, None]) + (m[1.5e-4, 0.95] - m[1.5e-4, None])) / 2
        lr = ((m[1.5e-4, None] - m[2e-5, None]) + (m[1.5e-4, 0.95] - m[2e-5, 0.95])) / 2
        both = (m[1.5e-4, 0.95] - m[1.5e-4, None]) - (m[2e-5, 0.95] - m[2e-5, None])
        signs.append(1 if llrd > res[-1] else (-1 if llrd < -res[-1] else 0))
        seeds = min(len(v) for v in learned.values())
        parts.append(f"{who(g)}: LLRD effect {100 * llrd:+.2f} points, lr effect {100 * lr:+.2f}, interaction "
                     f"{100 * both:+.2f} (at least {seeds} seed(s) a cell); resolvable {100 * res[-1]:.2f}")
    unresolved = "; ".join([f"the seeds resolve a difference of {100 * max(res, default=0):.2f} points"] * bool(res)
                           + ["a cell learned nothing, so LLRD's effect cannot be told apart"] * (len(res) < len(signs)))
    return concluded("LLRD raises accuracy, apart from the learning rate", text, parts,
                     listing(cells(df, ("lr_llrd",))), signs, groups, rule, unresolved,
                     "needs the lr_llrd 2x2: lr 2e-5 and 1.5e-4, each without LLRD and with LLRD 0.95")


@claim
def speedup(df: pd.DataFrame, published_dir: str) -> Finding:
    """Return whether baseline/optimized train-time ratios match the study's per device."""
    pub = published("speedup.csv", published_dir).set_index("device")["speedup"].astype(float)
    gpus = pub.drop("trn1")
    text = ", ".join(f"{d} {s:.2f}x" for d, s in pub.items()) + " baseline/optimized train time (published)"
    rule = (f"per device, baseline/optimized train time with the band of the steps' spread: holds if the band "
            f"meets the study's figure for that device ±{100 * SPEEDUP_TOLERANCE:.0f}% (a GPU it did not measure: "
            f"its GPUs' range {gpus.min():.2f}–{gpus.max():.2f}x); does not hold if outside on any. A magnitude: "
            "proxies show only whether optimized is faster and leave it not testable here.")
    signs, parts, real = [], [], []
    for g in cells(df, ("speedup",), ("gpu", "trn1", "cpu", "xla-cpu")):
        base, opt = g[g["preset"] == "baseline"], g[g["preset"] == "optimized"]
        if base.empty or opt.empty:
            continue
        times = ratio(band(base, "train_s"), band(opt, "train_s"))
        if g["proxy"].iloc[0]:
            parts.append(f"{who(g)}: {times}x (proxy: direction only)")
            continue
        name = study_device(g)
        lo, hi = (pub[name], pub[name]) if name else (gpus.min(), gpus.max())
        signs.append(1 if times.hi >= lo * (1 - SPEEDUP_TOLERANCE) and times.lo <= hi * (1 + SPEEDUP_TOLERANCE)
                     else -1)
        real.append(g)
        parts.append(f"{who(g)}: {times}x against {fmt(lo)}" + (f"–{fmt(hi)}" if hi != lo else "") + "x published")
    verdict, reason, basis = judged(signs, real)
    if not real:
        reason = "needs full bert-base baseline and optimized runs on a GPU or trn1"
        proxy = proxies([g for g in cells(df, ("speedup",)) if g["proxy"].iloc[0]])
        reason += f"; the proxies here ({proxy}) show the direction only" if proxy else ""
    return Finding("The optimized configuration is 3.7–7.3x faster", text, "; ".join(parts) or "no records",
                   verdict, rule, reason, basis)


@claim
def cost_ranking(df: pd.DataFrame, published_dir: str) -> Finding:
    """Return whether the optimized runs' cost per task ranks the study's devices as it did."""
    pub = published("cost.csv", published_dir)
    pub = pub.assign(usd=pub["cost_for_task_usd"].astype(float)).sort_values("usd")
    text = "cost per 3-epoch task: " + " < ".join(f"{r.device} ${r.cost_for_task_usd}" for r in pub.itertuples()) \
        + " (published)"
    rule = ("optimized train time × on-demand price per accelerator-hour (helpers/facts/instance_prices.csv), "
            "for the study's devices measured with bert-base: holds if every pair adjacent in the study's order "
            "costs more in that order beyond the steps' spread; does not hold if any pair is reversed beyond it; "
            "inconclusive otherwise. A ranking: no proxy.")
    found: dict[str, tuple[Band, pd.DataFrame]] = {}
    for g in cells(df, ("speedup",), ("gpu", "trn1")):
        g = g[(g["preset"] == "optimized") & ~g["proxy"]]
        name = study_device(g) if len(g) else None
        if name and name not in found:
            try:
                price = price_per_accelerator_hour(str(g["instance"].iloc[0])) / 3600
            except ValueError:  # no price for the instance
                continue
            found[name] = (Band(*(x * price for x in band(g, "train_s"))), g)
    order = [d for d in pub["device"] if d in found]
    signs = [compare(found[b][0], found[a][0]) for a, b in zip(order, order[1:])]
    measured = "; ".join(f"{who(found[d][1])}: ${found[d][0]}" for d in order)
    verdict, reason, basis = judged(signs, [found[d][1] for d in order], "neighbouring costs overlap")
    if len(order) < 2:
        reason = "needs optimized bert-base runs, with their instance, on at least two of trn1, T4, L4, A100"
    return Finding("Cost ranking of the devices", text, measured or listing(cells(df, ("speedup",))), verdict,
                   rule, reason, basis)


CLAIMS = (claims.batch_scaling, claims.seq_len, claims.padding, claims_trn1.padding_77h, claims_trn1.optlevel,
          stochastic_rounding, lr_llrd, claims.small_batch_util, claims_trn1.dma_bound, speedup, cost_ranking,
          claims_trn1.allreduce, claims_trn1.gradient_checkpointing, claims_trn1.host_memory,
          claims_lora.lora_accuracy, claims_lora.lora_speed)


def study_says(key: str, published_dir: str) -> str:
    """Return the study's sentence for a claim, its section and whether it is a quote or a paraphrase."""
    rows = published("statements.csv", published_dir).set_index("claim")
    if key not in rows.index:
        return "—"
    r = rows.loc[key]
    return f"§ {r['section']}: \"{r['statement']}\" ({r['source']})"


def findings(df: pd.DataFrame, published_dir: str = PUBLISHED_DIR) -> pd.DataFrame:
    """Return one row per claim: claim, the study's words, published, measured, verdict, rule, reason, basis."""
    return pd.DataFrame([{"claim": (f := asdict(judge(df, published_dir)))["claim"],
                          "study": study_says(judge.__name__, published_dir), **f} for judge in CLAIMS])


def markdown(table: pd.DataFrame) -> str:
    """Return the findings as Markdown: the question, the proxy rule, the table, and the verdict counts."""
    shown = pd.DataFrame({"claim": table["claim"], "the study says": table["study"],
                          "published (the study)": table["published"],
                          "measured here": table["measured"],
                          "verdict": "**" + table["verdict"] + "**: " + table["reason"], "rule": table["rule"]})
    shown = shown.map(lambda s: str(s).replace("|", "\\|").replace("\n", " "))
    counts = table["verdict"].value_counts()
    last = (f"Of {len(table)} claims, on records of the claim's own kind {counts.get('holds', 0)} hold and "
            f"{counts.get('does not hold', 0)} do not hold; on proxies (direction only) "
            f"{counts.get('consistent on proxy', 0)} are consistent and {counts.get('contradicted on proxy', 0)} "
            f"contradicted; against a model's estimate {counts.get('consistent with the model', 0)} are consistent "
            f"and {counts.get('contradicted by the model', 0)} contradicted; {counts.get('inconclusive', 0)} are "
            f"inconclusive and {counts.get('not testable here', 0)} are not testable here.")
    return f"{QUESTION}\n\n{PROXY_RULE}\n\n{shown.to_markdown(index=False, disable_numparse=True)}\n\n{last}\n"
