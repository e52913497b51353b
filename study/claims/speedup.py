"""The study's claims on its speedup suite: the optimized configuration's speedup per device, and the cost per
task ranking its devices at this repository's prices (helpers/facts/instance_prices.csv).
"""

from __future__ import annotations

import math

import pandas as pd

from helpers import devices
from study.claims.verdict import ONE_RUN, SPREAD, Evidence, Finding, cells, device, interleaved, listing, versus, who
from study.cost import study_price
from study.frame import Band, estimate, ratio
from study.published import published

SPEEDUP_TOLERANCE = 0.10  # the study's speedups are single runs with no stated spread


def study_device(rows: pd.DataFrame) -> str | None:
    """Return the study's name of a group's device (trn1, T4, L4, A100; devices.csv), None if it did not run it."""
    r = rows.iloc[0]
    key = devices.kind({"type": r["device_type"], "name": r["device"], "neuron": r["cls"] == "trn1"})
    name = devices.facts()["study_name"].get(key)
    return name if isinstance(name, str) else None


def within(measured: Band, lo: float, hi: float) -> int:
    """Return +1 if the measured range lies inside [lo, hi], -1 if wholly outside it, 0 if it straddles an edge."""
    if measured.lo >= lo and measured.hi <= hi:
        return 1
    return -1 if measured.hi < lo or measured.lo > hi else 0


def speedup(df: pd.DataFrame, published_dir: str) -> Finding:
    """Return whether baseline/optimized train-time ratios match the study's per device."""
    pub = published("speedup.csv", published_dir).set_index("device")["speedup"].astype(float)
    gpus = pub.drop("trn1")
    band = f"±{100 * SPEEDUP_TOLERANCE:.0f}%"
    text = ", ".join(f"{d} {s:.2f}x" for d, s in pub.items()) + f" baseline/optimized train time; {ONE_RUN}"
    rule = (
        f"per device, baseline/optimized train time (the ratio of the medians; its range: the extreme ratios of "
        f"the runs, with {SPREAD}) against the study's figure for that device {band}; for a GPU it did not measure "
        f"the target is its GPUs' range {gpus.min():.2f}–{gpus.max():.2f}x {band}, "
        f"{gpus.min() * (1 - SPEEDUP_TOLERANCE):.2f}–{gpus.max() * (1 + SPEEDUP_TOLERANCE):.2f}x. Holds if the "
        "whole range lies inside the target on every device judged; does not hold if it lies wholly outside on any; "
        "inconclusive otherwise (a range that only touches the target). A magnitude: proxies show only whether "
        "optimized is faster and leave it not testable here."
    )
    evidence, proxied = Evidence(), []
    for g in cells(df, ("speedup",), timed=True):
        base, opt = g[g["preset"] == "baseline"], g[g["preset"] == "optimized"]
        if base.empty or opt.empty:
            continue
        times = ratio(estimate(base, "train_s"), estimate(opt, "train_s"))
        if g["proxy"].iloc[0]:
            proxied.append(f"{who(g)}: {times}x (proxy: direction only)")
            continue
        name = study_device(g)
        lo, hi = (pub[name], pub[name]) if name else (gpus.min(), gpus.max())
        lo, hi = lo * (1 - SPEEDUP_TOLERANCE), hi * (1 + SPEEDUP_TOLERANCE)
        evidence.add(
            g,
            within(times, lo, hi) if interleaved(base, opt) else None,
            f"{device(g)}: {times.mid:.2f}x",
            f"{who(g)}: {times}x against {lo:.2f}–{hi:.2f}x ("
            + (f"the study's {name} {band}" if name else f"not measured by the study: its GPUs' range {band}")
            + ")",
        )
    return evidence.finding(
        "The optimized configuration is 3.7–7.3x faster",
        text,
        rule,
        "; ".join(proxied) or "no records",
        "needs bert-base on a GPU or trn1: baseline and optimized runs of the full variant"
        + ("; the proxies here show the direction only" if proxied else ""),
    )


def at_our_prices(pub: pd.DataFrame) -> str:
    """Return the study's cost per task at our prices per accelerator-hour, ranked, with where a price differs."""
    costs, notes = {}, []
    for r in pub.itertuples():
        used, per_hour, note = study_price(r.device, r.instance_as_printed)
        costs[r.device] = float(r.sec_per_epoch) * int(r.epochs_in_task) / 3600 * per_hour
        if note or abs(per_hour - float(r.cost_per_hour_usd)) > 0.005:
            notes.append(f"{r.device}: ${r.cost_per_hour_usd}/h printed, ${per_hour:.3f}/h for one on {used}")
    ranked = " < ".join(f"{d} ${c:.4f}" for d, c in sorted(costs.items(), key=lambda x: x[1]))
    return ranked + (f" ({'; '.join(notes)})" if notes else "")


def cost_ranking(df: pd.DataFrame, published_dir: str) -> Finding:
    """Return whether the optimized runs' cost per task ranks the study's devices as it did."""
    pub = published("cost.csv", published_dir)
    pub = pub.assign(usd=pub["cost_for_task_usd"].astype(float)).sort_values("usd")
    text = (
        "cost per 3-epoch task: "
        + " < ".join(f"{r.device} ${r.cost_for_task_usd}" for r in pub.itertuples())
        + f"; {ONE_RUN}. At this repository's prices per accelerator-hour its own times rank {at_our_prices(pub)}"
    )
    rule = (
        "optimized train time × on-demand price of one accelerator (helpers/facts/instance_prices.csv: the "
        "instance's price over its accelerators, the study's basis), for the study's devices measured with "
        f"bert-base, with {SPREAD}: holds if every pair adjacent in the study's order costs more in that order; "
        "does not hold if any pair is reversed; inconclusive otherwise. A ranking: no proxy."
    )
    found: dict[str, pd.DataFrame] = {}
    for g in cells(df, ("speedup",), ("gpu", "trn1"), timed=True):
        g = g[(g["preset"] == "optimized") & ~g["proxy"]]
        name = study_device(g) if len(g) else None
        per_hour = study_price(name, str(g["instance"].iloc[0]))[1] if name else math.nan
        if name and name not in found and math.isfinite(per_hour):
            found[name] = g.assign(cost_usd=g["train_s"] * per_hour / 3600)
    order = [d for d in pub["device"] if d in found]
    evidence = Evidence()
    for cheap, dear in zip(order, order[1:]):
        b, a, sign = versus(found[dear], found[cheap], "cost_usd")
        evidence.add(
            found[dear],
            sign,
            f"{cheap} ${a.mid:.4f} < {dear} ${b.mid:.4f}",
            f"{who(found[cheap])}: ${a}; {who(found[dear])}: ${b}",
        )
    return evidence.finding(
        "Cost ranking of the devices",
        text,
        rule,
        listing(cells(df, ("speedup",))),
        "needs bert-base on two of trn1, T4, L4, A100: optimized runs, with their instance",
    )
