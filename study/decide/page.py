"""The decision page in words: the table, break-even readings, the rules, the prices and the conclusion."""

from __future__ import annotations

import math

import pandas as pd

from helpers.calc import job_cost
from helpers.calc.facts import load_instance_prices
from helpers.study.notation import DASH, fmt

# per-epoch costs closer than this are not told apart (the study's runs are single, no spread)
RESOLVED_GAP = 0.10
RULES = (
    "Rules: one record per device "
    "(finished; the speedup suite's optimized preset over all rows first, then "
    "any run over all rows, then subsets; "
    "within a rule a run with a validation curve, then the fastest). "
    "One-off = the larger of the run's compile time and its first step's excess over a steady step; "
    "compilation "
    "is split over the runs sharing the cache, CUDA/CPU warm-up is paid by every run. "
    "Per epoch = rows / steady "
    "samples/s. Energy = the job's samples (epochs x rows) / the run's samples per joule "
    "over its steady timing "
    "windows, every device of the run counted (one-off not charged). Time to "
    "target = the one-off share + the epochs at which the run's validation curve "
    "first reached the target. "
    "Source: measured (bert-base-uncased on a GPU or trn1), "
    "proxy (another model, or the CPU or XLA on it: "
    "stands in for the study's job, never ranks its devices) or published (the study's figures). "
    "Marks (cheapest, fastest) only among rows of one configuration "
    "(model, batch, length, precision, rows), "
    "when at least two have it; break-even only between rows of one configuration and one source. "
    "Break-even readings say 'never' only when the per-epoch costs differ by more than "
    f"{RESOLVED_GAP:.0%}."
)


def money(value) -> str:
    """Return dollars with 4 significant digits, or the dash."""
    return DASH if pd.isna(value) else f"${value:.4g}"


def reading(a, b, epochs: float | None, job) -> str:
    """Return, in words, when compiled row `a` is cheaper than eager row `b`, within what single runs resolve."""
    if math.isnan(a["epoch_usd"]) or math.isnan(b["epoch_usd"]):
        return "no price"
    gap = abs(a["epoch_usd"] - b["epoch_usd"]) / min(a["epoch_usd"], b["epoch_usd"])
    if gap <= RESOLVED_GAP:
        return (
            f"per-epoch costs {gap:.0%} apart, within the {RESOLVED_GAP:.0%} single runs resolve: "
            "no order can be claimed"
        )
    cheaper = a["epoch_usd"] < b["epoch_usd"]
    if a["lower_bound"] and cheaper:
        budget = job_cost.one_off_budget_s(job.epochs, a["epoch_usd"], b["one_off_usd"], b["epoch_usd"], a["usd_per_h"])
        return (
            f"compile not measured; cheaper per epoch, so cheaper for {job.epochs:g} epochs "
            f"if compilation takes under {fmt(budget)} s"
        )
    if epochs is None:
        return "cheaper at every epoch count" if cheaper else f"never: costs {gap:.0%} more per epoch"
    return f"cheaper beyond {epochs:.3g} epochs" if cheaper else f"cheaper only below {epochs:.3g} epochs"


def _instance_cell(r) -> str:
    """Return the instance with both prices: whole instance and one accelerator's share."""
    notes = (
        [f"published: {r['published_instance']} {money(r['published_usd_per_h'])}/h"]
        if isinstance(r.get("published_instance"), str)
        else []
    )
    notes += [r["price_note"]] if r["price_note"] else []
    name = r["instance"] if isinstance(r["instance"], str) else "no instance priced"
    return f"{name}: whole {money(r['usd_whole_h'])}/h, shared {money(r['usd_share_h'])}/h" + (
        f" ({'; '.join(notes)})" if notes else ""
    )


def _who(job) -> str:
    """Return the job's model and fine-tuning in words."""
    model = job.model or "any model"
    return f"{model}, " + (f"LoRA r={job.lora_r}" if job.lora_r else "full fine-tuning")


def markdown(table: pd.DataFrame, breaks: pd.DataFrame, job, figure: str | None = None) -> str:
    """Return the decision section: the question, the table, break-even epochs, rules, prices, the conclusion."""
    target = f", target {job.target_accuracy:.0%} validation accuracy" if job.target_accuracy else ""
    price = "one accelerator's share of the instance" if job.shared_instance else "the whole instance (a single user)"
    basis, other = (
        ("one accelerator's share", "whole instance")
        if job.shared_instance
        else ("whole instance", "one accelerator's share")
    )
    question = (
        f"Which device for {job.epochs:g} epochs over {job.rows:,} training rows "
        f"({_who(job)}){target}, "
        f"{job.runs_sharing_cache} run(s) sharing one compile cache"
        f"{' (warm)' if job.warm_cache else ''}, "
        f"priced at {price}? Time, dollars and energy per device from the run records "
        "(measured; proxy: another "
        "model, or the CPU) and the study's figures (published)."
    )
    if table.empty:
        return "\n".join(
            [
                question,
                "",
                f"No record for {_who(job)}: "
                "run it (python -m helpers.study.sweep models / "
                "lora, or a notebook with model_name and lora_r), then ask again.",
            ]
        )
    at_least = table["lower_bound"].map(lambda low: "≥ " if low else "")
    shown = pd.DataFrame(
        {
            "device": table["device"],
            "source": table["source"],
            "configuration": table["configuration"],
            "instance, $/h": table.apply(_instance_cell, axis=1),
            "one-off s (this run's share)": [
                ("not measured" if pd.isna(v) else fmt(v))
                + (" (eager: not published)" if s == "published" and f == "gpu" else "")
                for v, s, f in zip(table["one_off_s"], table["source"], table["family"])
            ],
            "s/epoch": table["epoch_s"].map(fmt),
            "job s": at_least + table["job_s"].map(fmt),
            f"job $ ({basis})": at_least + table["job_usd"].map(money),
            f"job $ ({other}, beside)": at_least + table["job_usd_other"].map(money),
            "to target": table["target"],
            "$ to target": table["target_usd"].map(money),
            "energy (training)": table["energy"],
            "mark": table["mark"],
        }
    )
    return "\n".join(
        [
            question,
            "",
            shown.to_markdown(index=False, disable_numparse=True),
            "",
            "Break-even epochs of each compiled device against each eager one "
            "(job cost = one-off + epochs x $/epoch, "
            f"at {price}):",
            "",
            breaks.iloc[:, :6].to_markdown(index=False, disable_numparse=True) if len(breaks) else "No pair.",
            "",
            *([f"![job cost against epochs]({figure})", ""] if figure else []),
            RULES,
            "",
            _prices(table),
            "",
            _conclusion(table, breaks, job),
        ]
    )


def _prices(table: pd.DataFrame) -> str:
    """Return the prices used, whole instance, with their dates and source."""
    prices = load_instance_prices().set_index("instance")
    used = prices.loc[[i for i in dict.fromkeys(table["instance"]) if isinstance(i, str) and i in prices.index]]
    each = "; ".join(
        f"{i} ${r['price_per_hour_usd']:g}/h for {r['accelerators']} (taken {r['date']})" for i, r in used.iterrows()
    )
    sources = "; ".join(dict.fromkeys(s.split(", Linux")[0] for s in used["source"]))
    return (
        f"Prices, on-demand Linux us-east-1, whole instance: {each}. A shared price divides it by the "
        f"accelerators. Source: {sources} (helpers/facts/instance_prices.csv)."
    )


def _conclusion(table: pd.DataFrame, breaks: pd.DataFrame, job) -> str:
    """Return the page's last line: per job, the cheapest and fastest when resolved, then trn1's readings."""
    parts = []
    for name, group in table.groupby("setup", sort=False):
        done = group.dropna(subset=["job_usd"])
        if len(done) < 2:
            parts.append(f"{name}: only {', '.join(group['device'])} ran it, nothing to rank")
            continue
        cheap, fast = done.loc[done["job_usd"].idxmin()], done.loc[done["job_s"].idxmin()]
        second = done["job_usd"].drop(cheap.name).min()
        close = (second - cheap["job_usd"]) / cheap["job_usd"] <= RESOLVED_GAP
        parts.append(
            f"{name}: {cheap['device']} ({cheap['source']}) is cheapest at {money(cheap['job_usd'])}"
            + (f" (the next within {RESOLVED_GAP:.0%}: not resolved)" if close else "")
            + f", {fast['device']} ({fast['source']}) fastest at {fmt(fast['job_s'])} s"
        )
    for device, pairs in breaks[breaks["family"] == "trn1"].groupby("device", sort=False):
        readings = ", ".join(f"{r['against']}: {r['reading']}" for _, r in pairs.iterrows())
        parts.append(f"{device} against " + readings)
    return (
        f"For {job.epochs:g} epochs over {job.rows:,} rows: "
        + "; ".join(parts or ["no device has figures"])
        + f". Gaps under {RESOLVED_GAP:.0%} between single runs are not resolved."
    )
