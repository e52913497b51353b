"""Time, dollars and energy of a fine-tuning job per device, from the run records (measured) and the study's own
figures and prices (published): the report's cost page (Experiment/cost.md) and a user's own job.

    python -m study.cost --epochs 3 --rows 16000 --target-accuracy 0.94 [--runs-sharing-cache 4]

A job is `epochs` passes over `rows` training rows. Its wall time is a one-off part (graph compilation, the first
step's warm-up) plus epochs x the steady per-epoch time. Compiled graphs land in a cache: runs that share it (same
shapes, flags, compiler) split the one-off; warm-up no cache keeps (a CUDA context) every run pays. Its energy is its
samples over the run's steady samples per joule, which cover every device of the run. Prices: on-demand, the whole
instance a user rents (helpers/facts/instance_prices.csv); the study's rows at the prices it printed.
"""

from __future__ import annotations

import argparse
import functools
import math
import sys
from dataclasses import dataclass

import numpy as np
import pandas as pd

from helpers import devices, record
from helpers.arguments import PRESETS
from study import frame
from study.notation import DASH, fmt
from study.published import PUBLISHED_DIR, STUDY_KEYS, published
from study.sweep import suites

SECONDS_PER_HOUR = 3600
FULL_ROWS = 16_000  # dair-ai/emotion's train split: the study's task
CORES_PER_TRN1_CHIP = 2  # facts/device_peaks.csv: trn1-chip is 2 NeuronCore-v2
CPU_STANDIN, CPU_STANDIN_VCPUS = "cpu-2vcpu", 2  # the facts' 2-vCPU instance, priced for a CPU run per 2 threads
STUDY_SETUP = (frame.STUDY_MODEL, PRESETS["optimized"]["batch"], PRESETS["optimized"]["max_length"], "bf16")
# which record stands for a device, first match wins; within a tier: a validation curve, the fastest
TIERS = (
    "speedup suite, optimized preset, all rows",
    "a run over all rows",
    "speedup suite, optimized preset, subset",
    "a run on a subset: not the study's task",
)
PAIRS = (("trn1", "gpu"), ("xla-cpu", "cpu"))  # (compiled class, eager class): where a one-off can be repaid
RESOLVED_GAP = 0.10  # per-epoch costs of single runs closer than this are not told apart
RULES = (
    "Rules: one record per device (finished; the speedup suite's optimized preset over all rows first, then any run "
    "over all rows, then subsets; within a rule a run with a validation curve, then the fastest). One-off = the larger "
    "of the run's compile time and its first step's excess over a steady step, split over the runs sharing a compile "
    "cache (XLA); CUDA/CPU warm-up is paid by every run. Per epoch = rows / steady samples/s. Energy = the job's "
    "samples / the run's steady samples per joule. Time to target = the one-off + the epochs at which the run's "
    "validation curve first reached it. Source: measured (bert-base-uncased on a GPU or trn1), proxy (another model, "
    "or a CPU: stands in for the study's job, never ranked) or published (the study's times at the prices it "
    "printed). Marks (cheapest, fastest) only among measured or published rows of one configuration and one source; "
    f"break-even only within one configuration and one source; 'never' only beyond a {RESOLVED_GAP:.0%} gap."
)


@functools.cache
def prices() -> pd.DataFrame:
    """Return instance_prices.csv by instance: device, accelerators, on-demand USD per hour, date, source."""
    return pd.read_csv(devices.FACTS / "instance_prices.csv").set_index("instance", drop=False)


def instance_price(instance: str) -> tuple[float, str]:
    """Return an instance's on-demand price, USD per hour (the whole instance), and where it comes from."""
    if instance not in prices().index:
        raise ValueError(f"no price for {instance!r}; known: {', '.join(prices().index)}")
    row = prices().loc[instance]
    return float(row["price_per_hour_usd"]), f"{row['source']}, {row['region']}, taken {row['date']}"


def accelerator_price(instance: str | None, device_key: str | None, units: int = 1) -> tuple[str | None, float, str]:
    """Return (instance, USD per hour of `units` accelerators' share, note): the named instance, else the cheapest
    instance carrying `device_key` (helpers/facts/devices.csv key)."""
    table = prices()
    named = table[table["instance"] == instance]
    if len(named) and named["device"].iloc[0] == device_key:
        row, note = named.iloc[0], ""
    else:
        carrying = table[table["device"] == device_key]
        if carrying.empty:
            return instance, math.nan, f"no price for {device_key or 'this device'} in the facts"
        row = carrying.loc[(carrying["price_per_hour_usd"] / carrying["accelerators"]).idxmin()]
        note = f"{instance} carries {named['device'].iloc[0]}, not {device_key}" if len(named) else "stand-in"
    return row["instance"], float(row["price_per_hour_usd"] / row["accelerators"] * units), note


def study_price(device: str, instance_as_printed: str) -> tuple[str | None, float, str]:
    """Return (instance, USD per hour of one of the study's `device` on it, note) at our prices (cost.csv's row)."""
    printed = instance_as_printed.lower().replace("-", ".")  # the study printed trn1.2xlarge as Trn1-2xlarge
    return accelerator_price(printed, STUDY_KEYS.get(device))


def whole_instances_price(instance: str | None, units: int = 1) -> float:
    """Return USD per hour of the whole instances that hold `units` accelerators (what a single user pays)."""
    if instance not in prices().index:
        return math.nan
    row = prices().loc[instance]
    return float(row["price_per_hour_usd"] * math.ceil(units / row["accelerators"]))


def usd(seconds, usd_per_hour):
    """Return the dollars of `seconds` at an hourly price (EC2 bills per second; its 60 s minimum ignored)."""
    return seconds / SECONDS_PER_HOUR * usd_per_hour


def one_off_s(compile_s: float, first_step_s: float, step_s: float) -> float:
    """Return a run's one-off seconds: the larger of its compile time and its first step's excess (NaN: neither)."""
    # each misses part of what the other sees (a graph compiled after warm-up; runtime load, CUDA context)
    known = [v for v in (compile_s, first_step_s - step_s) if not math.isnan(v)]
    return max(0.0, *known) if known else math.nan


def epochs_to_target(curve: list[dict], target: float, run_rows: int, scale: float = 1.0) -> float | None:
    """Return the epochs (of the run's own rows) a curve took to first reach `target` validation accuracy, or None."""
    for point in sorted(curve, key=lambda p: p["samples"]):
        if (point.get("val_accuracy") or 0) >= target:
            return point["samples"] * scale / run_rows  # x ranks where the curve counts one rank's samples
    return None


def break_even_epochs(one_off_a: float, epoch_a: float, one_off_b: float, epoch_b: float) -> float | None:
    """Return the epochs at which a (paying `one_off_a` up front) and b cost the same; None where they never meet."""
    extra_one_off = one_off_a - one_off_b  # what a pays up front beyond b
    saving_per_epoch = epoch_b - epoch_a  # what a saves on every epoch
    if saving_per_epoch == 0 or math.isnan(extra_one_off) or math.isnan(saving_per_epoch):
        return None
    epochs = extra_one_off / saving_per_epoch
    return epochs if epochs > 0 else None


@dataclass(frozen=True)
class Job:
    """A user's fine-tuning job: epochs over rows, a target validation accuracy, runs sharing one compile cache."""

    epochs: float = 3
    rows: int = FULL_ROWS
    target_accuracy: float | None = 0.94
    runs_sharing_cache: int = 1


def representative(df: pd.DataFrame) -> pd.DataFrame:
    """Return one finished full fine-tuning record per device key, by TIERS, with its `rule`."""
    d = df[(df["status"] == "finished") & (df["samples_per_s"] > 0)].copy()
    d = d[pd.to_numeric(d["lora_r"], errors="coerce").fillna(0) == 0]
    full, optimized = d["train_subset"].isna(), (d["suite"] == "speedup") & (d["preset"] == "optimized")
    d["tier"] = np.select([optimized & full, full, optimized], [0, 1, 2], 3)
    d["rule"] = [TIERS[t] for t in d["tier"]]
    d["has_curve"] = d["curve"].map(lambda c: isinstance(c, list) and len(c) > 0)
    d = d.sort_values(["tier", "has_curve", "samples_per_s"], ascending=[True, False, False], kind="stable")
    return d.drop_duplicates("device_key").reset_index(drop=True)


def measured_price(row) -> tuple[str | None, float]:
    """Return (instance, USD per hour of the whole instances holding the accelerators a record used)."""
    units = 1 if pd.isna(row.get("num_devices")) else int(row["num_devices"])
    if row["cls"] == "gpu":
        key, instance = row["kind"], row["instance"]
    elif row["cls"] == "trn1":
        key, instance, units = "trn1-chip", row["instance"], math.ceil(units / CORES_PER_TRN1_CHIP)
    else:  # a CPU, and XLA on it: the 2-vCPU instance per 2 threads (m6i prices scale with size)
        threads = CPU_STANDIN_VCPUS if pd.isna(row.get("threads")) else row["threads"]
        key, instance, units = CPU_STANDIN, None, math.ceil(threads / CPU_STANDIN_VCPUS)
    used, _, _ = accelerator_price(instance if isinstance(instance, str) else None, key, units)
    return used, whole_instances_price(used, units)


def setup(model, batch, max_length, precision, rows: int) -> str:
    """Return what makes two rows one configuration, for marks and break-even."""
    return f"{model}, b{batch}, L{max_length}, {precision}, {int(rows):,} rows"


def _measured(row, job: Job) -> dict:
    """Return a record's row of the cost table: its seconds one-off, per epoch, to the target; its price."""
    one_off = one_off_s(row["compile_s"], row["first_step_s"], row["step_ms"] / 1000)
    share = one_off / job.runs_sharing_cache if row["device_type"] == "xla" else one_off  # a compile cache shares
    epoch_s = job.rows / row["samples_per_s"]
    run_rows = FULL_ROWS if pd.isna(row["train_subset"]) else int(row["train_subset"])
    ranks = 1 if pd.isna(row.get("num_devices")) else int(row["num_devices"])  # the curve counts rank 0's samples
    epochs = epochs_to_target(row["curve"], job.target_accuracy, run_rows, ranks) if job.target_accuracy else None
    best = max((p.get("val_accuracy") or 0 for p in row["curve"]), default=None)
    target = (
        "no curve recorded (run with eval_every)"
        if best is None
        else f"not reached (best {best:.1%})"
        if epochs is None
        else f"not reached in {job.epochs:g} epochs (needs {epochs:.2f})"
        if epochs > job.epochs
        else f"{fmt(share + epochs * epoch_s)} s ({epochs:.2f} epochs)"
    )
    instance, per_hour = measured_price(row)
    energy = (
        f"{job.epochs * job.rows / row['samples_per_j'] / 1e3:.3g} kJ ({row['energy_method']})"
        if row["samples_per_j"] > 0
        else "not measured"
    )
    return {
        "device": row["label"],  # with its host-bound status
        "source": "proxy" if row["proxy"] else "measured",
        "cls": row["cls"],
        "kind": row["kind"],
        "device_key": row["device_key"],
        "setup": setup(row["model_name"], row["batch"], row["max_length"], row["precision"], run_rows),
        "configuration": row["rule"],
        "instance": instance,
        "usd_per_h": per_hour,
        "one_off_s": share,
        "epoch_s": epoch_s,
        "target_s": share + epochs * epoch_s if epochs is not None and epochs <= job.epochs else math.nan,
        "target": target,
        "energy": energy,
    }


def _published(job: Job, published_dir) -> list[dict]:
    """Return the study's optimized runs as rows: its seconds per epoch at the instance price it printed."""
    return [
        {
            "device": r["device"],
            "source": "published",
            "cls": "trn1" if r["device"] == "trn1" else "gpu",
            "setup": setup(*STUDY_SETUP, FULL_ROWS),
            "configuration": "the study's optimized run",
            "instance": f"{r['instance_as_printed']} (as printed)",
            "usd_per_h": float(r["cost_per_hour_usd"]),
            "one_off_s": math.nan if r["device"] == "trn1" else 0.0,  # trn1's compile time: not published
            "epoch_s": float(r["sec_per_epoch"]) * job.rows / FULL_ROWS,
            "target_s": math.nan,
            "target": "no curve published",
            "energy": "not published",
        }
        for _, r in published("cost.csv", published_dir).iterrows()
    ]


def decision(df: pd.DataFrame, job: Job, published_dir=PUBLISHED_DIR) -> pd.DataFrame:
    """Return one row per device (measured records, then the study's figures): seconds, USD, energy, marks."""
    df = df.assign(label=df.get("label", df["device"]))
    t = pd.DataFrame([_measured(r, job) for _, r in representative(df).iterrows()] + _published(job, published_dir))
    t["one_off_usd"] = usd(t["one_off_s"], t["usd_per_h"])
    t["epoch_usd"] = usd(t["epoch_s"], t["usd_per_h"])
    t["job_s"] = t["one_off_s"].fillna(0) + job.epochs * t["epoch_s"]
    t["job_usd"] = usd(t["job_s"], t["usd_per_h"])
    t["target_usd"] = usd(t["target_s"], t["usd_per_h"])
    t["lower_bound"] = t["one_off_s"].isna()  # a compiled device whose compile time is unknown
    t["mark"] = ""
    for _, group in t[t["source"] != "proxy"].groupby(["setup", "source"]):  # a proxy never ranks
        for column, word in (("job_usd", "cheapest"), ("job_s", "fastest")):
            if group[column].notna().sum() > 1:
                t.loc[group[column].idxmin(), "mark"] += f"{word} of {group[column].notna().sum()}; "
    t["mark"] = t["mark"].str.rstrip("; ")
    return t


def reading(a, b, epochs: float | None, job: Job) -> str:
    """Return, in words, when compiled row `a` is cheaper than eager row `b`, within what single runs resolve."""
    gap = abs(a["epoch_usd"] - b["epoch_usd"]) / min(a["epoch_usd"], b["epoch_usd"])
    if math.isnan(gap):
        return "no price"
    if gap <= RESOLVED_GAP:
        return f"per-epoch costs {gap:.0%} apart, within the {RESOLVED_GAP:.0%} single runs resolve: no order"
    cheaper = a["epoch_usd"] < b["epoch_usd"]
    if a["lower_bound"] and cheaper:  # the most compile seconds a may spend and still cost no more than b
        budget_s = usd(b["job_s"], b["usd_per_h"]) - job.epochs * a["epoch_usd"]
        return f"compile not measured; cheaper for {job.epochs:g} epochs if it takes under {fmt(budget_s / a['usd_per_h'] * 3600)} s"
    if epochs is None:
        return "cheaper at every epoch count" if cheaper else f"never: costs {gap:.0%} more per epoch"
    return f"cheaper beyond {epochs:.3g} epochs" if cheaper else f"cheaper only below {epochs:.3g} epochs"


def break_even(table: pd.DataFrame, job: Job) -> pd.DataFrame:
    """Return, per (compiled, eager) pair of one configuration and one source, the epochs where their costs meet."""
    out = []
    for compiled, eager in PAIRS:
        for _, a in table[table["cls"] == compiled].iterrows():
            alike = table[(table["cls"] == eager) & (table["source"] == a["source"]) & (table["setup"] == a["setup"])]
            for _, b in alike.iterrows():
                epochs = break_even_epochs(a["one_off_usd"], a["epoch_usd"], b["one_off_usd"], b["epoch_usd"])
                out.append(
                    {
                        "device": f"{a['device']} ({a['source']})",
                        "against": f"{b['device']} ({b['source']})",
                        "$/epoch": money(a["epoch_usd"]),
                        "against $/epoch": money(b["epoch_usd"]),
                        "one-off $": "not measured" if a["lower_bound"] else money(a["one_off_usd"]),
                        "reading": reading(a, b, epochs, job),
                    }
                )
    return pd.DataFrame(out)


def money(value) -> str:
    """Return dollars with 4 significant digits, or the dash."""
    return DASH if pd.isna(value) else f"${value:.4g}"


def markdown(table: pd.DataFrame, job: Job) -> str:
    """Return the cost page: the question, the table, break-even epochs, rules, prices and the conclusion."""
    target = f", target {job.target_accuracy:.0%} validation accuracy" if job.target_accuracy else ""
    at_least = table["lower_bound"].map(lambda low: "≥ " if low else "")
    shown = pd.DataFrame(
        {
            "device": table["device"],
            "source": table["source"],
            "configuration": table["setup"] + "; " + table["configuration"],
            "instance, $/h (whole)": table["instance"].fillna("no instance priced")
            + ", "
            + table["usd_per_h"].map(money),
            "one-off s": table["one_off_s"].map(lambda v: "not measured" if pd.isna(v) else fmt(v)),
            "s/epoch": table["epoch_s"].map(fmt),
            "job s": at_least + table["job_s"].map(fmt),
            "job $": at_least + table["job_usd"].map(money),
            "to target": table["target"],
            "$ to target": table["target_usd"].map(money),
            "energy (training)": table["energy"],
            "mark": table["mark"],
        }
    )
    breaks = break_even(table, job)
    used = prices().loc[[i for i in dict.fromkeys(table["instance"]) if i in prices().index]]
    listed = "; ".join(
        f"{i} ${r.price_per_hour_usd:g}/h for {r.accelerators} (taken {r.date})" for i, r in used.iterrows()
    )
    done = table[(table["source"] != "proxy") & table["job_usd"].notna()]
    ranked = [
        f"{s}: {g.loc[g['job_usd'].idxmin(), 'device']} is cheapest ({money(g['job_usd'].min())}), "
        f"{g.loc[g['job_s'].idxmin(), 'device']} fastest ({fmt(g['job_s'].min())} s)"
        for (_, s), g in done.groupby(["setup", "source"], sort=False)
        if len(g) > 1
    ]
    return "\n\n".join(
        [
            f"Which device for {job.epochs:g} epochs over {job.rows:,} training rows{target}, {job.runs_sharing_cache} "
            "run(s) sharing a compile cache, priced at the whole instance a user rents? Time, dollars and energy per "
            "device from the run records and the study's published figures.",
            shown.to_markdown(index=False, disable_numparse=True),
            "Break-even epochs of each compiled device against each eager one (job cost = one-off + epochs × $/epoch):",
            breaks.to_markdown(index=False, disable_numparse=True) if len(breaks) else "No pair of one configuration.",
            RULES,
            f"Prices, on-demand Linux us-east-1, whole instance: {listed} (helpers/facts/instance_prices.csv); "
            "published rows at the prices the study printed.",
            f"For {job.epochs:g} epochs over {job.rows:,} rows: "
            + ("; ".join(ranked) if ranked else "no configuration has two priced measured or published rows")
            + f" (proxies are not ranked; gaps under {RESOLVED_GAP:.0%} between single runs are not resolved).",
        ]
    )


def main(argv: list[str] | None = None) -> None:
    """Command line: print the cost table of a job from the records below --results."""
    p = argparse.ArgumentParser(prog="python -m study.cost", description=__doc__.split("\n\n")[0])
    p.add_argument("--epochs", type=float, default=3, help="epochs of the job")
    p.add_argument("--rows", type=int, default=FULL_ROWS, help="training rows per epoch")
    p.add_argument("--target-accuracy", type=float, default=0.94, help="validation accuracy to reach (0-1)")
    p.add_argument("--runs-sharing-cache", type=int, default=1, help="runs that share one compile cache")
    p.add_argument("--results", default=record.RESULTS_DIR, help="folder of run records")
    args = p.parse_args(argv)
    if args.runs_sharing_cache < 1 or not 0 < args.target_accuracy <= 1 or not 0 < args.epochs <= 1e6 or args.rows < 1:
        p.error("need --runs-sharing-cache >= 1, 0 < --target-accuracy <= 1, 0 < --epochs <= 1e6, --rows >= 1")
    if not record.repo_path(args.results).is_dir():
        p.error(f"--results {args.results}: no such folder of run records")
    df, skipped = frame.load(args.results)
    df = frame.current_points(df, suites.find_suites(suites.SUITES_DIR))  # as the report reads them
    for what in skipped:  # a foreign record that fails the schema, or a newer one: named, never fatal
        print(f"skipped record {what}", file=sys.stderr)
    job = Job(args.epochs, args.rows, args.target_accuracy, args.runs_sharing_cache)
    print(markdown(decision(df, job), job))


if __name__ == "__main__":
    main()
