"""The findings table that opens Experiment/REPORT.md: one row per claim of the study, with the published
evidence, the evidence measured here (device, variant, runs), and a verdict a stated rule computes.

    table = findings(df, "Experiment/published")    # df: helpers.study.frame.load(...)[0]
    print(markdown(table))

Verdicts are "holds", "does not hold" (records of the claim's own kind only), "consistent on proxy" /
"contradicted on proxy", "consistent with the model" / "contradicted by the model", "inconclusive" (with
the smallest effect the sample resolves) or "not testable here" (with what it needs). How comparisons
combine into a verdict is in helpers/study/claims/verdict.py; the throughput claims in throughput.py, the
trn1-only ones in trn1.py, LoRA's in lora.py; the accuracy, speedup and cost claims here.
"""
from __future__ import annotations

from dataclasses import asdict

import pandas as pd

from helpers.calc.cost import accelerator_price, price_per_accelerator_hour
from helpers.calc.facts import cuda_device_key
from helpers.study.claims import lora, throughput, trn1
from helpers.study.claims.accuracy import (FLOOR_POINTS, mean_interval, paired_diffs, resolvable_difference,
                                           unlearned)
from helpers.study.claims.quotes import short_says, study_says
from helpers.study.claims.verdict import (PROXY, PROXY_RULE, Band, Finding, band, cells, claim, compare,
                                          concluded, device, isclose, judged, listing, proxies, ratio, who)
from helpers.study.notation import fmt
from helpers.study.published import PUBLISHED_DIR, published

QUESTION = "What do the study's claims come to on the machines whose records are here?"
STUDY_GPUS = {"a100-40gb": "A100", "a100-80gb": "A100", "t4": "T4", "l4": "L4"}  # device key -> the study's name
STUDY_KEYS = {"trn1": "trn1-chip", "T4": "t4", "L4": "l4", "A100": "a100-40gb"}  # the study's name -> price key
SPEEDUP_TOLERANCE = 0.10  # the study's speedups are single runs with no stated spread


def study_device(rows: pd.DataFrame) -> str | None:
    """Return the study's name of a group's device (trn1, T4, L4, A100), None if it did not measure it."""
    r = rows.iloc[0]
    return "trn1" if r["cls"] == "trn1" else STUDY_GPUS.get(cuda_device_key(str(r["device"])) or "")


def optimizers(arms: dict[str, pd.DataFrame]) -> str:
    """Return 'the arms use different optimizers (name: class, ...)' when they do, else ''."""
    used = {name: ", ".join(sorted(set(arm["optimizer"].dropna().astype(str)))) or "not recorded"
            for name, arm in arms.items()}
    if len(set(used.values())) <= 1:
        return ""
    return ("the arms use different optimizers (" + "; ".join(f"{k}: {v}" for k, v in used.items())
            + "): these records hold no same-optimizer arms")


@claim
def stochastic_rounding(df: pd.DataFrame, published_dir: str) -> Finding:
    """Return whether stochastic rounding helps at L=16 and hurts at L=32, paired by seed, on arms that learned."""
    pub = {(r.max_length, r.stochastic_rounding): float(r.accuracy)
           for r in published("stochastic_rounding.csv", published_dir).itertuples()}
    one_run = resolvable_difference([pub[("16", "off")]], 2000)
    text = (f"trn1, one run a cell: SR − no SR {100 * (pub[('16', 'on')] - pub[('16', 'off')]):+.2f} points "
            f"at L=16, {100 * (pub[('32', 'on')] - pub[('32', 'off')]):+.2f} at L=32. Its figures do not "
            f"resolve its words: one run a cell on 2,000 test rows resolves ±{100 * one_run:.1f} points "
            "(95%), so on its own figures this rule is inconclusive")
    rule = ("bf16-pure-sr − bf16-pure test accuracy paired by seed at L=16 and L=32, 95% interval (t over ≥ "
            "2 pairs; one pair: the binomial interval of a difference): holds if L=16's lies above 0 and "
            "L=32's below 0 (the study's signs) on every device; does not hold if either lies beyond 0 on "
            "the other side; inconclusive when an interval contains 0. Only arms that learned (test "
            f"accuracy at or above the floor: {FLOOR_POINTS:g} points below the best its model reached on "
            "that device at that budget) and that use the same optimizer speak: on a CPU or GPU "
            "bf16-pure-sr is torchao's AdamW, bf16-pure torch's, and then the verdict says so. " + PROXY)
    signs, parts, groups, halves, blocked, heads = [], [], [], [], [], []
    for g in cells(df, ("precision",)):
        diffs = paired_diffs(g, "precision", "bf16-pure-sr", "bf16-pure", "max_length")
        if not (diffs.get(16) and diffs.get(32)):
            continue
        groups.append(g)
        rows = int(g["test_rows"].max()) if g["test_rows"].notna().any() else None
        arms = {f"{mode} L={length}": g[(g["precision"] == mode) & (g["max_length"] == length)]
                for length in (16, 32) for mode in ("bf16-pure", "bf16-pure-sr")}
        why = [w for w in (unlearned(df, arms), optimizers(arms)) if w]
        blocked += [f"{w} [{who(g)}]" for w in why]
        shown = []
        for length, claimed in ((16, 1), (32, -1)):
            mean, half, _ = mean_interval(diffs[length])
            if len(diffs[length]) == 1:
                half = resolvable_difference([g[g["max_length"] == length]["test_acc"].mean()], rows)
            signs.append(0 if why else claimed * (1 if mean - half > 0 else (-1 if mean + half < 0 else 0)))
            halves.append(half)
            shown.append(f"L={length} {100 * mean:+.2f} ± {100 * half:.2f} points ({len(diffs[length])} pairs)")
        parts.append(f"{who(g)}: SR − no SR paired by seed: " + ", ".join(shown))
        heads.append(f"{device(g)}: SR − no SR " + ", ".join(x.split(" ±")[0] for x in shown))
    return concluded("Stochastic rounding's effect depends on sequence length", text, parts,
                     listing(cells(df, ("precision",))), signs, groups, rule,
                     f"these pairs resolve an SR effect of ±{100 * max(halves, default=0):.2f} points",
                     "needs precision runs in bf16-pure and bf16-pure-sr with the same seeds at L=16 and "
                     "L=32",
                     blocked=blocked, headline="; ".join(heads[:1]))


@claim
def lr_llrd(df: pd.DataFrame, published_dir: str) -> Finding:
    """Return whether the tuned setting (lr 1.5e-4, LLRD 0.95) beats the baseline (2e-5, no LLRD), and,
    as ours, LLRD's effect apart from the learning rate (the 2x2)."""
    pub = published("lr_llrd.csv", published_dir)
    acc = {(r.lr, r.llrd_decay): float(r.accuracy) for r in pub.itertuples()}
    ref, tuned = acc["2e-5", ""], acc["1.5e-4", "0.95"]
    study_llrd = ((acc["2e-5", "0.95"] - ref) + (tuned - acc["1.5e-4", ""])) / 2
    text = (f"trn1, mean of 2 runs: {100 * ref:.2f}% at lr 2e-5 without LLRD → {100 * tuned:.2f}% at lr "
            f"1.5e-4 with LLRD 0.95 ({100 * (tuned - ref):+.2f} points; 2,000 test rows resolve "
            f"±{100 * resolvable_difference([ref], 2000):.2f}). On its 2x2 LLRD's own effect is "
            f"{100 * study_llrd:+.2f} points (ours)")
    rule = ("the study's claim: the tuned corner (lr 1.5e-4, LLRD 0.95) minus the baseline (lr 2e-5, no "
            "LLRD): holds if above the smallest difference the cells' seeds resolve (one seed: the binomial "
            "one of the test rows); does not hold if below minus that; inconclusive otherwise, or when an "
            f"arm did not learn (test accuracy more than {FLOOR_POINTS:g} points below the best its model "
            "reached on that device at that budget). Ours, shown beside and deciding nothing: LLRD's effect "
            "apart from the lr, the mean over the two lrs of LLRD minus none, from the 2x2. " + PROXY)
    signs, parts, groups, res, blocked, heads = [], [], [], [], [], []
    for g in cells(df, ("lr_llrd",)):
        cell = {(lr, d): g[isclose(g["lr"], lr) & (g["llrd_decay"] == "none" if d is None else isclose(g["llrd_decay"], d))]
                for lr in (2e-5, 1.5e-4) for d in (None, 0.95)}
        base, best = cell[2e-5, None], cell[1.5e-4, 0.95]
        if base.empty or best.empty:
            continue
        groups.append(g)
        rows = int(g["test_rows"].max()) if g["test_rows"].notna().any() else None
        values = {k: c["test_acc"].dropna().tolist() for k, c in cell.items()}
        res.append(max(resolvable_difference(values[k], rows) for k in ((2e-5, None), (1.5e-4, 0.95))))
        m = {k: sum(v) / len(v) for k, v in values.items() if v}
        gain = m[1.5e-4, 0.95] - m[2e-5, None]
        why = unlearned(df, {"lr 2e-5 without LLRD": base, "lr 1.5e-4 with LLRD 0.95": best})
        blocked += [f"{why} [{who(g)}]"] * bool(why)
        signs.append(0 if why else (1 if gain > res[-1] else (-1 if gain < -res[-1] else 0)))
        ours = ""
        if len(m) == 4:
            llrd = ((m[2e-5, 0.95] - m[2e-5, None]) + (m[1.5e-4, 0.95] - m[1.5e-4, None])) / 2
            ours = f"; ours: LLRD's effect apart from the lr {100 * llrd:+.2f} points"
        seeds = min(len(values[2e-5, None]), len(values[1.5e-4, 0.95]))
        heads.append(f"{device(g)}: tuned − baseline {100 * gain:+.2f} points")
        parts.append(f"{who(g)}: tuned − baseline {100 * gain:+.2f} points ({100 * m[2e-5, None]:.2f}% → "
                     f"{100 * m[1.5e-4, 0.95]:.2f}%, at least {seeds} seed(s) a cell; resolvable "
                     f"{100 * res[-1]:.2f}){ours}")
    return concluded("Tuning (lr 1.5e-4 with LLRD 0.95) raises accuracy over lr 2e-5", text, parts,
                     listing(cells(df, ("lr_llrd",))), signs, groups, rule,
                     f"the seeds resolve a difference of {100 * max(res, default=0):.2f} points",
                     "needs lr_llrd runs at lr 2e-5 without LLRD and lr 1.5e-4 with LLRD 0.95", blocked=blocked,
                     headline="; ".join(heads[:1]))


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
    signs, parts, real, heads = [], [], [], []
    for g in cells(df, ("speedup",), ("gpu", "trn1", "cpu", "xla-cpu")):
        base, opt = g[g["preset"] == "baseline"], g[g["preset"] == "optimized"]
        if base.empty or opt.empty:
            continue
        times = ratio(band(base, "train_s"), band(opt, "train_s"))
        if g["proxy"].iloc[0]:
            parts.append(f"{who(g)}: {times}x (proxy: direction only)")
            continue
        heads.append(f"{device(g)}: {times.mid:.2f}x")
        name = study_device(g)
        lo, hi = (pub[name], pub[name]) if name else (gpus.min(), gpus.max())
        signs.append(1 if times.hi >= lo * (1 - SPEEDUP_TOLERANCE) and times.lo <= hi * (1 + SPEEDUP_TOLERANCE)
                     else -1)
        real.append(g)
        parts.append(f"{who(g)}: {times}x against {fmt(lo)}" + (f"–{fmt(hi)}" if hi != lo else "") + "x published")
    verdict, reason, basis = judged(signs, real)
    if not real:
        reason = "needs bert-base on a GPU or trn1: baseline and optimized runs of the full variant"
        proxy = proxies([g for g in cells(df, ("speedup",)) if g["proxy"].iloc[0]])
        reason += f"; the proxies here ({proxy}) show the direction only" if proxy else ""
    return Finding("The optimized configuration is 3.7–7.3x faster", text, "; ".join(parts) or "no records",
                   verdict, rule, reason, basis, "; ".join(heads[:1]))


def at_our_prices(pub: pd.DataFrame) -> str:
    """Return the study's seconds per task (cost.csv) priced at helpers/facts/instance_prices.csv, ranked, with
    where its price or instance differs from the facts'."""
    costs, notes = {}, []
    for r in pub.itertuples():
        instance = r.instance_as_printed.lower().replace("-", ".")
        used, per_hour, note = accelerator_price(instance, STUDY_KEYS[r.device])
        costs[r.device] = float(r.sec_per_epoch) * int(r.epochs_in_task) * per_hour / 3600
        if note or abs(per_hour - float(r.cost_per_hour_usd)) > 0.005:
            notes.append(f"{r.device}: ${r.cost_per_hour_usd}/h printed, ${per_hour:.3f}/h for one on {used}"
                         + (f" ({note})" if note else ""))
    ranked = " < ".join(f"{d} ${c:.4f}" for d, c in sorted(costs.items(), key=lambda x: x[1]))
    return ranked + (f" ({'; '.join(notes)})" if notes else "")


@claim
def cost_ranking(df: pd.DataFrame, published_dir: str) -> Finding:
    """Return whether the optimized runs' cost per task ranks the study's devices as it did."""
    pub = published("cost.csv", published_dir)
    pub = pub.assign(usd=pub["cost_for_task_usd"].astype(float)).sort_values("usd")
    text = ("cost per 3-epoch task: " + " < ".join(f"{r.device} ${r.cost_for_task_usd}" for r in pub.itertuples())
            + f". At this repository's prices its own times rank {at_our_prices(pub)}")
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
        reason = "needs bert-base on two of trn1, T4, L4, A100: optimized runs, with their instance"
    ranked = " < ".join(f"{d} ${found[d][0].mid:.4f}" for d in order) if len(order) > 1 else ""
    return Finding("Cost ranking of the devices", text, measured or listing(cells(df, ("speedup",))), verdict,
                   rule, reason, basis, ranked)


CLAIMS = (throughput.batch_scaling, throughput.seq_len, throughput.padding, trn1.padding_77h, trn1.optlevel,
          stochastic_rounding, lr_llrd, throughput.small_batch_util, trn1.dma_bound, speedup, cost_ranking,
          trn1.allreduce, trn1.gradient_checkpointing, trn1.host_memory,
          lora.lora_accuracy, lora.lora_speed)


# claims about trn1's internals: they wait for a trn1 record and are never proxied; the others concern the
# workload, where a proxy may speak, graded as a proxy
TRN1_INTERNALS = ("padding_77h", "optlevel", "small_batch_util", "dma_bound", "allreduce", "gradient_checkpointing",
                  "host_memory")
SCOPES = {True: "trn1 internals: waits for a trn1 record, never proxied",
          False: "workload: a proxy may speak, graded as a proxy"}
# each claim's name in the summary, a few words
NAMES = {"batch_scaling": "Batch 8 → 64", "seq_len": "L=32 vs L=128", "padding": "Dynamic padding on XLA",
         "padding_77h": "77 h of recompiles", "optlevel": "--optlevel 1 vs 2, 3", "stochastic_rounding":
         "Stochastic rounding", "lr_llrd": "LR and LLRD tuning", "small_batch_util": "Small-batch utilization",
         "dma_bound": "DMA-bound at batch 8", "speedup": "Optimized speedup", "cost_ranking": "Cost per task",
         "allreduce": "AllReduce bandwidth", "gradient_checkpointing": "Gradient checkpointing",
         "host_memory": "Host memory", "lora_accuracy": "LoRA accuracy", "lora_speed": "LoRA speed"}
# why an inconclusive verdict could not speak (the reasons' openings), shown in the summary
BLOCKS = ("an arm did not learn", "the arms use different optimizers", "the learning-rate search has not been run")


def findings(df: pd.DataFrame, published_dir: str = PUBLISHED_DIR) -> pd.DataFrame:
    """Return one row per claim: key, claim, the study's words (whole and short), scope, published, measured,
    verdict, rule, reason, basis, headline."""
    return pd.DataFrame([{"key": judge.__name__, "claim": (f := asdict(judge(df, published_dir)))["claim"],
                          "study": study_says(judge.__name__, published_dir),
                          "short": short_says(judge.__name__, published_dir),
                          "scope": SCOPES[judge.__name__ in TRN1_INTERNALS], **f} for judge in CLAIMS])


def escaped(text: str) -> str:
    """Return text safe inside a Markdown table cell."""
    return str(text).replace("|", "\\|").replace("\n", " ")


def verdict_cell(row: pd.Series) -> str:
    """Return the verdict in bold, with what kept an inconclusive one from speaking."""
    blocks = [b for b in BLOCKS if b in row["reason"]] if row["verdict"] == "inconclusive" else []
    return f"**{row['verdict']}**" + (": " + "; ".join(blocks) if blocks else "")


def rests_on(row: pd.Series) -> str:
    """Return the one number a verdict rests on, or, untested, what it needs (up to the first colon)."""
    if row["headline"]:
        return row["headline"]
    return row["reason"].split(":")[0].split(";")[0]


def summary(table: pd.DataFrame) -> str:
    """Return the at-a-glance table: per claim a short quote, the verdict and the number it rests on, each
    claim linked to its section below."""
    shown = pd.DataFrame({"claim": [f"[{NAMES[k]}](#claim-{k})" for k in table["key"]],
                          "the study says": table["short"], "verdict": table.apply(verdict_cell, axis=1),
                          "rests on": table.apply(rests_on, axis=1)})
    return shown.map(escaped).to_markdown(index=False, disable_numparse=True)


def counts(table: pd.DataFrame) -> str:
    """Return the verdict counts in one sentence."""
    n = table["verdict"].value_counts()
    return (f"Of {len(table)} claims, on records of the claim's own kind {n.get('holds', 0)} hold and "
            f"{n.get('does not hold', 0)} do not hold; on proxies (direction only) "
            f"{n.get('consistent on proxy', 0)} are consistent and {n.get('contradicted on proxy', 0)} "
            f"contradicted; against a model's estimate {n.get('consistent with the model', 0)} are "
            f"consistent and {n.get('contradicted by the model', 0)} contradicted; "
            f"{n.get('inconclusive', 0)} are inconclusive and {n.get('not testable here', 0)} are not "
            "testable here.")


def details(row: pd.Series) -> str:
    """Return one claim's own section: the study's words, who may speak, the published figures, the rule, the
    measurements and records, and the verdict with its reason."""
    return "\n".join([f'### <a id="claim-{row["key"]}"></a>{row["claim"]}', "",
                       f"- **The study** {row['study']}", f"- **Who may speak**: {row['scope']}.",
                       f"- **Published**: {row['published']}.", f"- **Rule**: {row['rule']}",
                       f"- **Measured here** (records): {row['measured']}.",
                       f"- **Verdict**: **{row['verdict']}**: {row['reason']}."])


def markdown(table: pd.DataFrame) -> str:
    """Return the findings as Markdown: the question, the summary table and the counts, then the proxy rule
    and one section per claim."""
    sections = "\n\n".join(details(r) for _, r in table.iterrows())
    return (f"{QUESTION}\n\n{summary(table)}\n\n{counts(table)}\n\n## The claims one by "
            f"one\n\n{PROXY_RULE}\n\n{sections}\n")
