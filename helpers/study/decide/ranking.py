"""Which accelerator for a fine-tuning job: time, dollars and energy per device, to the job's end and to
a target validation accuracy, from the run records (measured) and the study's figures (published).

    python -m helpers.study.decide --epochs 3 --rows 16000 --target-accuracy 0.94 [--runs-sharing-cache 4]

Which record stands for a device (one per device key, finished, fixtures left out), first match wins:
  1. suite `speedup`, preset `optimized`, over all 16,000 rows (the study's optimized configuration);
  2. any run over all rows; 3. `speedup`/`optimized` on a subset (quick); 4. any run (subset: flagged).
Within a rule: a run with a validation curve first, then the highest steady samples/s, then the latest.
Published rows: Experiment/published/cost.csv (seconds per epoch over 16,000 rows, the study's price).
Prices: the instance the record names when the facts say it carries that device, else the cheapest
instance that does, per accelerator (helpers/facts/instance_prices.csv); CPU runs: a 2-vCPU stand-in.
Arithmetic: helpers/calc/job.py.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from helpers.calc import cost, job as calc
from helpers.calc.facts import cuda_device_key, load_instance_prices
from helpers.run.args import repo_path
from helpers.study.report.tables import DASH, PUBLISHED_DIR, fmt, short_device

FULL_ROWS, STUDY_MODEL = 16_000, "bert-base-uncased"  # dair-ai/emotion train split: the study's task
CORES_PER_TRN1_CHIP = 2  # facts/device_peaks.csv: trn1-chip is 2 NeuronCore-v2
CPU_STANDIN, CPU_STANDIN_VCPUS = "cpu-2vcpu", 2  # facts key of the 2-vCPU instance priced for CPU runs
STUDY_KEYS = {"trn1": "trn1-chip", "T4": "t4", "L4": "l4", "A100": "a100-40gb"}  # cost.csv device -> facts key
# (compiled family, eager family) for break-even epochs: its panel title
PAIRS = {("trn1", "gpu"): "trn1 against GPUs", ("xla-cpu", "cpu"): "XLA on this CPU against eager on it"}
RULES = ("Rules: one record per device (finished; the speedup suite's optimized preset over all rows first, then "
         "any run over all rows, then subsets; within a rule a run with a validation curve, then the fastest). "
         "One-off = the larger of the run's compile time and its first step's excess over a steady step; compilation "
         "is split over the runs sharing the cache, CUDA/CPU warm-up is paid by every run. Per epoch = rows / steady "
         "samples/s. Energy = the training window's mean power x the job's epochs (one-off not charged). Time to "
         "target = the one-off share + the epochs at which the run's validation curve first reached the target.")


@dataclass(frozen=True)
class Job:
    """A user's fine-tuning job: epochs over rows, a target validation accuracy, runs sharing a cache."""

    epochs: float = 3
    rows: int = FULL_ROWS
    target_accuracy: float | None = 0.94
    runs_sharing_cache: int = 1
    warm_cache: bool = False


def _missing(value) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _count(value, default: int = 1) -> int:
    return default if _missing(value) else int(value)


def _rule(row) -> tuple[int, str]:
    full = _missing(row.get("train_subset"))
    optimized = row.get("suite") == "speedup" and row.get("preset") == "optimized"
    if optimized and full:
        return 0, "speedup suite, optimized preset, all rows"
    if full:
        return 1, "a run over all rows"
    if optimized:
        return 2, "speedup suite, optimized preset, subset (quick)"
    return 3, "a run on a subset: not the study's task"


def representative(df: pd.DataFrame) -> pd.DataFrame:
    """Return one finished, non-fixture record per device key, chosen by the module's rule (`rule`)."""
    if df.empty or "samples_per_s" not in df:
        return df.iloc[0:0].assign(rule=[])
    d = df[(df["status"] == "finished") & df["samples_per_s"].gt(0) & ~df["fixture"]].copy()
    rules = [_rule(r) for _, r in d.iterrows()]
    d["tier"], d["rule"] = [t for t, _ in rules], [why for _, why in rules]
    d["has_curve"] = d["curve"].map(lambda c: isinstance(c, list) and len(c) > 0)
    d = d.sort_values(["tier", "has_curve", "samples_per_s", "finished_at"],
                      ascending=[True, False, False, False], kind="stable")
    return d.drop_duplicates("device_key").reset_index(drop=True)


def _family(row) -> str:
    if row.get("device.neuron") is True:
        return "trn1"
    return {"cuda": "gpu", "xla": "xla-cpu", "cpu": "cpu"}.get(row.get("device_type"), "other")


def _measured_price(row) -> tuple[str | None, float, str]:
    family, devices = _family(row), _count(row.get("num_devices"))
    if family == "gpu":
        return cost.accelerator_price(row.get("instance"), cuda_device_key(row["device"]), int(devices))
    if family == "trn1":
        return cost.accelerator_price(row.get("instance"), "trn1-chip", math.ceil(devices / CORES_PER_TRN1_CHIP))
    # m6i prices scale with size: 2k vCPUs cost k x the 2-vCPU instance
    units = math.ceil(_count(row.get("threads"), CPU_STANDIN_VCPUS) / CPU_STANDIN_VCPUS)
    return cost.accelerator_price(None, CPU_STANDIN, units)


def _target(job: Job, curve, run_rows: int, scale: float, epoch_s: float, share_s: float) -> tuple[float, str]:
    """Return (seconds to the target, in words) from a run's validation curve."""
    if job.target_accuracy is None:
        return math.nan, DASH
    if not isinstance(curve, list) or not curve:
        return math.nan, "no curve recorded (run with eval_every)"
    epochs = calc.epochs_to_target(curve, job.target_accuracy, run_rows, scale)
    if epochs is None:
        best = max(p["val_accuracy"] for p in curve)
        covered = calc.epochs_covered(curve, run_rows, scale)
        return math.nan, f"not reached in {covered:.3g} epoch{'s' * (covered != 1)} (best {best:.1%})"
    if epochs > job.epochs:
        return math.nan, f"not reached in the job's {job.epochs:g} epochs (needs {epochs:.2f})"
    seconds = calc.wall_s(share_s, epoch_s, epochs)
    return seconds, f"{fmt(seconds)} s ({epochs:.2f} epochs" + (", scaled" if run_rows != job.rows else "") + ")"


def _measured(row, job: Job, trn1_one_off: list) -> dict:
    cacheable = row["device_type"] == "xla"
    one_off = calc.one_off_s(row.get("compile_s"), row.get("first_step_s"), row.get("step_ms", math.nan) / 1000)
    if row.get("device.neuron") is True and row.get("model_name") == STUDY_MODEL and not math.isnan(one_off):
        trn1_one_off.append(one_off)  # compile time depends on the model and shapes: only the study's model
    share = calc.one_off_share_s(one_off, job.runs_sharing_cache, cacheable, job.warm_cache)
    epoch_s = calc.per_epoch_s(job.rows, row["samples_per_s"])
    run_rows = int(row["train_subset"]) if not _missing(row.get("train_subset")) else FULL_ROWS
    scale = _count(row.get("num_devices"))  # the curve counts rank 0's samples; ranks step in lockstep
    target_s, target = _target(job, row.get("curve"), run_rows, scale, epoch_s, share)
    instance, usd_h, note = _measured_price(row)
    method, watts = row.get("energy_method"), row.get("watts")
    energy = (f"{calc.energy_j(watts, job.epochs * epoch_s) / 1e3:.3g} kJ ({method})"
              if method in ("measured", "estimated") and not _missing(watts) else "not measured")
    config = (f"{row.get('model_name')}, b{row.get('batch')}, L{row.get('max_length')}, {row.get('precision')}, "
              f"{run_rows:,} rows; {row['rule']}")
    return {"device": short_device(row["device"]), "source": "measured", "family": _family(row),
            "configuration": config, "instance": instance, "usd_per_h": usd_h, "price_note": note,
            "one_off_s": share, "epoch_s": epoch_s, "target_s": target_s, "target": target, "energy": energy}


def _published(job: Job, published_dir, trn1_one_off: list) -> list[dict]:
    study = pd.read_csv(repo_path(published_dir) / "cost.csv")
    rows = []
    for _, r in study.iterrows():
        printed = r["instance_as_printed"].lower().replace("-", ".")
        instance, usd_h, note = cost.accelerator_price(printed, STUDY_KEYS.get(r["device"]))
        compiled = r["device"] == "trn1"
        one_off = trn1_one_off[0] if compiled and trn1_one_off else (math.nan if compiled else 0.0)
        share = calc.one_off_share_s(one_off, job.runs_sharing_cache, True, job.warm_cache)
        rows.append({"device": r["device"], "source": "published", "family": "trn1" if compiled else "gpu",
                     "configuration": "study's optimized run, 16,000 rows" + (
                         "; compile from the measured trn1 record" if compiled and trn1_one_off else ""),
                     "instance": instance, "usd_per_h": usd_h, "price_note": note,
                     "published_usd_per_h": r["cost_per_hour_usd"], "published_instance": r["instance_as_printed"],
                     "one_off_s": share, "epoch_s": r["sec_per_epoch"] * job.rows / FULL_ROWS,
                     "target_s": math.nan, "target": "no curve published", "energy": "not published"})
    return rows


def decision(df: pd.DataFrame, job: Job, published_dir=PUBLISHED_DIR) -> pd.DataFrame:
    """Return one row per device (measured records, then published figures): seconds, USD, energy, marks."""
    trn1_one_off: list[float] = []
    rows = [_measured(r, job, trn1_one_off) for _, r in representative(df).iterrows()]
    t = pd.DataFrame(rows + _published(job, published_dir, trn1_one_off))
    # one-off dollars, dollars per epoch, then the job and the target at this instance price
    t["one_off_usd"] = calc.usd(t["one_off_s"], t["usd_per_h"])
    t["epoch_usd"] = calc.usd(t["epoch_s"], t["usd_per_h"])
    t["job_s"] = calc.wall_s(t["one_off_s"].fillna(0), t["epoch_s"], job.epochs)
    t["job_usd"] = calc.usd(t["job_s"], t["usd_per_h"])
    t["target_usd"] = calc.usd(t["target_s"], t["usd_per_h"])
    t["lower_bound"] = t["one_off_s"].isna()  # a compiled device whose compile time is unknown
    marks = {i: [] for i in t.index}
    for source, group in t.groupby("source"):
        for column, word in (("job_usd", "cheapest"), ("job_s", "fastest")):
            best = group[column].idxmin() if group[column].notna().any() else None
            if best is not None:
                marks[best].append(f"{word} ({source}{', before compile' if t.loc[best, 'lower_bound'] else ''})")
    t["mark"] = ["; ".join(m) for m in marks.values()]
    return t


def break_even(table: pd.DataFrame, job: Job) -> pd.DataFrame:
    """Return, per (compiled, eager) pair of one source, the epochs where their job costs meet, in words."""
    out = []
    for compiled, eager in PAIRS:  # keys: (compiled family, eager family)
        for _, a in table[table["family"] == compiled].iterrows():
            for _, b in table[(table["family"] == eager) & (table["source"] == a["source"])].iterrows():
                epochs = calc.break_even_epochs(a["one_off_usd"], a["epoch_usd"], b["one_off_usd"], b["epoch_usd"])
                out.append({"device": f"{a['device']} ({a['source']})", "against": f"{b['device']} ({b['source']})",
                            "$/epoch": _money(a["epoch_usd"]), "against $/epoch": _money(b["epoch_usd"]),
                            "one-off $": "not measured" if a["lower_bound"] else _money(a["one_off_usd"]),
                            "reading": _reading(a, b, epochs, job), "family": compiled,
                            "epochs": math.nan if epochs is None else epochs,
                            "usd_at": a["one_off_usd"] + (epochs or math.nan) * a["epoch_usd"]})
    return pd.DataFrame(out, columns=["device", "against", "$/epoch", "against $/epoch", "one-off $", "reading",
                                      "family", "epochs", "usd_at"])


def _reading(a, b, epochs: float | None, job: Job) -> str:
    if math.isnan(a["epoch_usd"]) or math.isnan(b["epoch_usd"]):
        return "no price"
    cheaper = a["epoch_usd"] < b["epoch_usd"]
    if a["lower_bound"] and cheaper:
        budget = calc.one_off_budget_s(job.epochs, a["epoch_usd"], b["one_off_usd"], b["epoch_usd"], a["usd_per_h"])
        return (f"compile not measured; cheaper per epoch, so cheaper for {job.epochs:g} epochs "
                f"if compilation takes under {fmt(budget)} s")
    if epochs is None:
        return "cheaper at every epoch count" if cheaper else "never: costs more per epoch"
    return f"cheaper beyond {epochs:.3g} epochs" if cheaper else f"cheaper only below {epochs:.3g} epochs"


def _money(value) -> str:
    return DASH if _missing(value) else f"${value:.4g}"


def _instance_cell(r) -> str:
    notes = [f"published: {r['published_instance']} {_money(r['published_usd_per_h'])}/h"] \
        if isinstance(r.get("published_instance"), str) else []
    notes += [r["price_note"]] if r["price_note"] else []
    return f"{r['instance']} {_money(r['usd_per_h'])}/h" + (f" ({'; '.join(notes)})" if notes else "")


def markdown(table: pd.DataFrame, breaks: pd.DataFrame, job: Job, figure: str | None = None) -> str:
    """Return the decision section: the question first, the table, break-even epochs (and the figure's
    link), the rules and prices, the conclusion last."""
    target = f", target {job.target_accuracy:.0%} validation accuracy" if job.target_accuracy else ""
    at_least = table["lower_bound"].map(lambda low: "≥ " if low else "")
    shown = pd.DataFrame({
        "device": table["device"], "source": table["source"], "configuration": table["configuration"],
        "instance, $/h per accelerator": table.apply(_instance_cell, axis=1),
        "one-off s (this run's share)": [("not measured" if _missing(v) else fmt(v)) + (
            " (eager: not published)" if s == "published" and f == "gpu" else "")
            for v, s, f in zip(table["one_off_s"], table["source"], table["family"])],
        "s/epoch": table["epoch_s"].map(fmt), "job s": at_least + table["job_s"].map(fmt),
        "job $": at_least + table["job_usd"].map(_money), "to target": table["target"],
        "$ to target": table["target_usd"].map(_money), "energy (training)": table["energy"], "mark": table["mark"]})
    return "\n".join([
        f"Which device for {job.epochs:g} epochs over {job.rows:,} training rows{target}, {job.runs_sharing_cache} "
        f"run(s) sharing one compile cache{' (warm)' if job.warm_cache else ''}? Time, dollars and energy per device "
        "from the run records (measured) and the study's figures (published).", "",
        shown.to_markdown(index=False, disable_numparse=True), "",
        "Break-even epochs of each compiled device against each eager one (job cost = one-off + epochs x $/epoch):", "",
        breaks.iloc[:, :6].to_markdown(index=False, disable_numparse=True) if len(breaks) else "No pair.", "",
        *([f"![job cost against epochs]({figure})", ""] if figure else []), RULES, "", _prices(table), "", _conclusion(table, breaks, job)])


def _prices(table: pd.DataFrame) -> str:
    prices = load_instance_prices().set_index("instance")
    used = prices.loc[[i for i in dict.fromkeys(table["instance"]) if isinstance(i, str) and i in prices.index]]
    each = "; ".join(f"{i} ${r['price_per_hour_usd']:g}/h for {r['accelerators']} (taken {r['date']})"
                     for i, r in used.iterrows())
    sources = "; ".join(dict.fromkeys(s.split(", Linux")[0] for s in used["source"]))
    return (f"Prices, on-demand Linux us-east-1, whole instance: {each}. "
            f"Source: {sources} (helpers/facts/instance_prices.csv).")


def _conclusion(table: pd.DataFrame, breaks: pd.DataFrame, job: Job) -> str:
    parts = []
    for source, group in table.groupby("source", sort=False):
        done = group.dropna(subset=["job_usd"])
        if len(done):
            cheap, fast = done.loc[done["job_usd"].idxmin()], done.loc[done["job_s"].idxmin()]
            low = {i: " before compile" if r["lower_bound"] else "" for i, r in done.iterrows()}
            parts.append(f"{source} ({len(group)} devices, one run each): {cheap['device']} is cheapest "
                         f"({_money(cheap['job_usd'])}{low[cheap.name]}) and {fast['device']} fastest "
                         f"({fmt(fast['job_s'])} s{low[fast.name]})")
    for device, pairs in breaks[breaks["family"] == "trn1"].groupby("device", sort=False):
        parts.append(f"{device} against " + ", ".join(f"{r['against']}: {r['reading']}" for _, r in pairs.iterrows()))
    return (f"For {job.epochs:g} epochs over {job.rows:,} rows: " + "; ".join(parts or ["no device has figures"])
            + ". Run-to-run spread is not measured, so gaps of a few percent are not resolved.")


def plot(table: pd.DataFrame, breaks: pd.DataFrame, job: Job, command: str, path: str | Path) -> Path:
    """Write job cost against epochs, a panel per (compiled, eager) pair, break-even marked; return the PNG."""
    from helpers.study.decide import cost_plot  # matplotlib only where the figure is drawn

    return cost_plot.plot(table, breaks, job, command, path, PAIRS)
