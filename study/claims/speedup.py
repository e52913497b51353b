"""The study's claims on its speedup suite: the optimized configuration's speedup per device, and the cost
per task ranking its devices at this repository's prices (helpers/facts/instance_prices.csv).
"""

from __future__ import annotations

import pandas as pd

from helpers.calc.facts import cuda_device_key, device_column
from helpers.calc.prices import price_per_accelerator_hour, whole_instances_price
from helpers.study.claims.verdict import (
    Band,
    Evidence,
    Finding,
    band,
    cells,
    claim,
    compare,
    device,
    listing,
    proxies,
    ratio,
    who,
)
from helpers.study.notation import fmt
from helpers.study.published import published, study_price

STUDY_NAMES = device_column("study_name")  # device key -> the study's name
SPEEDUP_TOLERANCE = 0.10  # the study's speedups are single runs with no stated spread


def study_device(rows: pd.DataFrame) -> str | None:
    """Return the study's name of a group's device (trn1, T4, L4, A100), None if it did not measure it."""
    r = rows.iloc[0]
    return "trn1" if r["cls"] == "trn1" else STUDY_NAMES.get(cuda_device_key(str(r["device"])) or "")


@claim
def speedup(df: pd.DataFrame, published_dir: str) -> Finding:
    """Return whether baseline/optimized train-time ratios match the study's per device."""
    pub = published("speedup.csv", published_dir).set_index("device")["speedup"].astype(float)
    gpus = pub.drop("trn1")
    text = ", ".join(f"{d} {s:.2f}x" for d, s in pub.items()) + " baseline/optimized train time (published)"
    rule = (
        f"per device, baseline/optimized train time with the band of the steps' spread: holds if the band "
        f"meets the study's figure for that device ±{100 * SPEEDUP_TOLERANCE:.0f}% (a GPU it did not measure: "
        f"its GPUs' range {gpus.min():.2f}–{gpus.max():.2f}x); does not hold if outside on any. A magnitude: "
        "proxies show only whether optimized is faster and leave it not testable here."
    )
    evidence = Evidence(df)
    for g in cells(df, ("speedup",), ("gpu", "trn1", "cpu", "xla-cpu"), timed=True):
        base, opt = g[g["preset"] == "baseline"], g[g["preset"] == "optimized"]
        if base.empty or opt.empty:
            continue
        times = ratio(band(base, "train_s"), band(opt, "train_s"))
        if g["proxy"].iloc[0]:
            evidence.parts.append(f"{who(g)}: {times}x (proxy: direction only)")
            continue
        evidence.heads.append(f"{device(g)}: {times.mid:.2f}x")
        name = study_device(g)
        lo, hi = (pub[name], pub[name]) if name else (gpus.min(), gpus.max())
        evidence.signs.append(
            1 if times.hi >= lo * (1 - SPEEDUP_TOLERANCE) and times.lo <= hi * (1 + SPEEDUP_TOLERANCE) else -1
        )
        evidence.groups.append(g)
        evidence.parts.append(
            f"{who(g)}: {times}x against {fmt(lo)}" + (f"–{fmt(hi)}" if hi != lo else "") + "x published"
        )
    proxy = proxies([g for g in cells(df, ("speedup",)) if g["proxy"].iloc[0]])
    return evidence.finding(
        "The optimized configuration is 3.7–7.3x faster",
        text,
        "no records",
        rule,
        "",
        "needs bert-base on a GPU or trn1: baseline and optimized runs of the full variant"
        + (f"; the proxies here ({proxy}) show the direction only" if proxy else ""),
    )


def at_our_prices(pub: pd.DataFrame) -> str:
    """Return the study's seconds per task at our prices, ranked per accelerator-hour and per whole instance."""
    shared, whole, notes = {}, {}, []
    for r in pub.itertuples():
        used, per_hour, note = study_price(r.device, r.instance_as_printed)
        task_h = float(r.sec_per_epoch) * int(r.epochs_in_task) / 3600
        shared[r.device], whole[r.device] = task_h * per_hour, task_h * whole_instances_price(used, 1)
        if note or abs(per_hour - float(r.cost_per_hour_usd)) > 0.005:
            notes.append(
                f"{r.device}: ${r.cost_per_hour_usd}/h printed, ${per_hour:.3f}/h for one on {used}"
                + (f" ({note})" if note else "")
            )

    def ranked(costs: dict) -> str:
        return " < ".join(f"{d} ${c:.4f}" for d, c in sorted(costs.items(), key=lambda x: x[1]))

    return (
        f"per accelerator-hour (the study's basis) {ranked(shared)}"
        + (f" ({'; '.join(notes)})" if notes else "")
        + f"; beside it, per whole instance (a single user's bill, the decision's basis in cost.md) {ranked(whole)}"
    )


@claim
def cost_ranking(df: pd.DataFrame, published_dir: str) -> Finding:
    """Return whether the optimized runs' cost per task ranks the study's devices as it did."""
    pub = published("cost.csv", published_dir)
    pub = pub.assign(usd=pub["cost_for_task_usd"].astype(float)).sort_values("usd")
    text = (
        "cost per 3-epoch task: "
        + " < ".join(f"{r.device} ${r.cost_for_task_usd}" for r in pub.itertuples())
        + f". At this repository's prices its own times rank {at_our_prices(pub)}"
    )
    rule = (
        "optimized train time × on-demand price per accelerator-hour (helpers/facts/instance_prices.csv; the "
        "study's basis: one accelerator's share of the instance, where the decision in cost.md prices the whole "
        "instance), "
        "for the study's devices measured with bert-base: holds if every pair adjacent in the study's order "
        "costs more in that order beyond the steps' spread; does not hold if any pair is reversed beyond it; "
        "inconclusive otherwise. A ranking: no proxy."
    )
    found: dict[str, tuple[Band, pd.DataFrame]] = {}
    for g in cells(df, ("speedup",), ("gpu", "trn1"), timed=True):
        g = g[(g["preset"] == "optimized") & ~g["proxy"]]
        name = study_device(g) if len(g) else None
        if name and name not in found:
            try:
                price = price_per_accelerator_hour(str(g["instance"].iloc[0])) / 3600
            except ValueError:  # no price for the instance
                continue
            found[name] = (Band(*(x * price for x in band(g, "train_s"))), g)
    order = [d for d in pub["device"] if d in found]
    evidence = Evidence(df, [found[d][1] for d in order])
    evidence.signs = [compare(found[b][0], found[a][0]) for a, b in zip(order, order[1:])]
    evidence.parts = [f"{who(found[d][1])}: ${found[d][0]}" for d in order]
    return evidence.finding(
        "Cost ranking of the devices",
        text,
        listing(cells(df, ("speedup",))),
        rule,
        "neighbouring costs overlap",
        "needs bert-base on two of trn1, T4, L4, A100: optimized runs, with their instance",
        tested=len(order) >= 2,
        headline=" < ".join(f"{d} ${found[d][0].mid:.4f}" for d in order) if len(order) > 1 else "",
    )
