"""Which accelerator for a fine-tuning job: time, dollars and energy per device, to the job's end and to
a target validation accuracy, from the run records (measured) and the study's figures (published).

    python -m helpers.study.decide --epochs 3 --rows 16000 --target-accuracy 0.94 [--runs-sharing-cache 4]
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from helpers.calc import job_cost, prices
from helpers.calc.facts import cuda_device_key
from helpers.run.args import PRESETS
from helpers.run.paths import repo_path
from helpers.study import plot_style
from helpers.study.decide import page
from helpers.study.frame import STUDY_MODEL
from helpers.study.notation import DASH, fmt, short_device
from helpers.study.published import PUBLISHED_DIR, study_price
from helpers.study.sweep.graphs import architecture

FULL_ROWS = 16_000  # dair-ai/emotion train split: the study's task
CORES_PER_TRN1_CHIP = 2  # facts/device_peaks.csv: trn1-chip is 2 NeuronCore-v2
CPU_STANDIN, CPU_STANDIN_VCPUS = "cpu-2vcpu", 2  # facts key of the 2-vCPU instance priced for CPU runs
# the study's optimized run (report 5.8; helpers.run.args.PRESETS["optimized"]), which its cost figures time,
# in bf16
STUDY_SETUP = (STUDY_MODEL, PRESETS["optimized"]["batch"], PRESETS["optimized"]["max_length"], "bf16", FULL_ROWS)
# which record stands for a device, first match wins; within a tier: a validation curve, the fastest, the latest
TIERS = (
    "speedup suite, optimized preset, all rows",
    "a run over all rows",
    "speedup suite, optimized preset, subset (quick)",
    "a run on a subset: not the study's task",
)
# (compiled family, eager family) for break-even epochs: its panel title
PAIRS = {("trn1", "gpu"): "trn1 against GPUs", ("xla-cpu", "cpu"): "XLA on this CPU against eager on it"}


@dataclass(frozen=True)
class Job:
    """A user's fine-tuning job: epochs over rows, a target validation accuracy, runs sharing a cache."""

    epochs: float = 3
    rows: int = FULL_ROWS
    target_accuracy: float | None = 0.94
    runs_sharing_cache: int = 1
    warm_cache: bool = False
    shared_instance: bool = False  # False: the user pays the whole instance; True: one accelerator's share
    model: str | None = None  # None: any model's records; else this hub id (or its -random configuration)
    lora_r: int | None = None  # None or 0: full fine-tuning; else LoRA of this rank


def setup_key(model: object, batch: object, max_length: object, precision: object, rows: int) -> str:
    """Return what makes two rows the same configuration, for marks and break-even."""
    return f"{model}, b{batch}, L{max_length}, {precision}, {int(rows):,} rows"


def matches(df: pd.DataFrame, job: Job) -> pd.Series:
    """Return which records ran the job's model and fine-tuning (full, or LoRA of the job's rank)."""
    keep = pd.Series(True, index=df.index)
    if job.model:
        keep &= df["model_name"].isin([job.model, architecture(job.model)])
    rank = pd.to_numeric(df["lora_r"], errors="coerce").fillna(0)
    return keep & (rank == (job.lora_r or 0))


def _count(value, default: int = 1) -> int:
    return default if pd.isna(value) else int(value)


def representative(df: pd.DataFrame, job: Job | None = None) -> pd.DataFrame:
    """Return one finished, non-fixture record of the job's model and fine-tuning per device key (TIERS, in order)."""
    if df.empty or "samples_per_s" not in df:
        return df.iloc[0:0].assign(rule=[])
    d = df[(df["status"] == "finished") & df["samples_per_s"].gt(0) & ~df["fixture"] & matches(df, job or Job())].copy()
    full = d["train_subset"].isna()
    optimized = (d["suite"] == "speedup") & (d["preset"] == "optimized")
    d["tier"] = np.select([optimized & full, full, optimized], [0, 1, 2], 3)
    d["rule"] = [TIERS[t] for t in d["tier"]]
    d["has_curve"] = d["curve"].map(lambda c: isinstance(c, list) and len(c) > 0)
    d = d.sort_values(
        ["tier", "has_curve", "samples_per_s", "finished_at"], ascending=[True, False, False, False], kind="stable"
    )
    return d.drop_duplicates("device_key").reset_index(drop=True)


def measured_price(row) -> tuple[str | None, float, str, float]:
    """Return (instance, $/h of the accelerators used, note, $/h of the whole instances holding them)."""
    family, devices = row["cls"], _count(row.get("num_devices"))
    if family == "gpu":
        key, units = cuda_device_key(row["device"]), int(devices)
    elif family == "trn1":
        key, units = "trn1-chip", math.ceil(devices / CORES_PER_TRN1_CHIP)
    else:  # m6i prices scale with size: 2k vCPUs cost k x the 2-vCPU instance
        key, units = CPU_STANDIN, math.ceil(_count(row.get("threads"), CPU_STANDIN_VCPUS) / CPU_STANDIN_VCPUS)
    listed = row.get("instance") if family in ("gpu", "trn1") else None  # XLA on the CPU is priced as the CPU
    listed = listed if isinstance(listed, str) else None  # a record without one: None, never NaN
    instance, usd_h, note = prices.accelerator_price(listed, key, units)
    return instance, usd_h, note, prices.whole_instances_price(instance, units)


def _target(job: Job, curve, run_rows: int, scale: float, epoch_s: float, share_s: float) -> tuple[float, str]:
    """Return (seconds to the target, in words) from a run's validation curve."""
    if job.target_accuracy is None:
        return math.nan, DASH
    if not isinstance(curve, list) or not curve:
        return math.nan, "no curve recorded (run with eval_every)"
    epochs = job_cost.epochs_to_target(curve, job.target_accuracy, run_rows, scale)
    if epochs is None:
        best = max(p["val_accuracy"] for p in curve)
        covered = job_cost.epochs_covered(curve, run_rows, scale)
        return math.nan, f"not reached in {covered:.3g} epoch{'s' * (covered != 1)} (best {best:.1%})"
    if epochs > job.epochs:
        return math.nan, f"not reached in the job's {job.epochs:g} epochs (needs {epochs:.2f})"
    seconds = job_cost.wall_s(share_s, epoch_s, epochs)
    scaled = ", scaled" if run_rows != job.rows else ""
    return seconds, f"{fmt(seconds)} s ({epochs:.2f} epochs" + scaled + ")"


def _measured(row, job: Job, trn1_one_off: list) -> dict:
    cacheable = row["device_type"] == "xla"
    one_off = job_cost.one_off_s(row.get("compile_s"), row.get("first_step_s"), row.get("step_ms", math.nan) / 1000)
    if row["cls"] == "trn1" and row.get("model_name") == STUDY_MODEL and not math.isnan(one_off):
        trn1_one_off.append(one_off)  # compile time depends on the model and shapes: only the study's model
    share = job_cost.one_off_share_s(one_off, job.runs_sharing_cache, cacheable, job.warm_cache)
    epoch_s = job_cost.per_epoch_s(job.rows, row["samples_per_s"])
    run_rows = int(row["train_subset"]) if not pd.isna(row.get("train_subset")) else FULL_ROWS
    scale = _count(row.get("num_devices"))  # the curve counts rank 0's samples; ranks step in lockstep
    target_s, target = _target(job, row.get("curve"), run_rows, scale, epoch_s, share)
    instance, usd_share, note, usd_whole = measured_price(row)
    energy = _energy(row, job)
    random_weights = str(row.get("model_name")).endswith("-random")
    weights = " (random weights: speed, never accuracy)" if random_weights else ""
    lora = f", LoRA r={int(row['lora_r'])}" if not pd.isna(row.get("lora_r")) and row.get("lora_r") else ""
    model = f"{row.get('model_name')}{lora}"
    shape = (row.get("batch"), row.get("max_length"), row.get("precision"), run_rows)
    return {
        "device": short_device(row["device"]),
        "source": "proxy" if row["proxy"] else "measured",
        "family": row["cls"],
        "colour_family": plot_style.family(row),
        "configuration": f"{setup_key(model + weights, *shape)}; {row['rule']}",
        "setup": setup_key(model, *shape),
        "instance": instance,
        "usd_share_h": usd_share,
        "usd_whole_h": usd_whole,
        "price_note": note,
        "one_off_s": share,
        "epoch_s": epoch_s,
        "target_s": target_s,
        "target": target,
        "energy": energy,
    }


def _energy(row, job: Job) -> str:
    """Return the job's training energy in words: its samples over the run's steady samples per joule."""
    method, per_joule = row.get("energy_method"), row.get("samples_per_j")
    if method not in ("measured", "estimated") or pd.isna(per_joule) or not per_joule > 0:
        return "not measured"
    return f"{job_cost.energy_j(job.epochs * job.rows, per_joule) / 1e3:.3g} kJ ({method})"


def _published(job: Job, published_dir, trn1_one_off: list) -> list[dict]:
    study = pd.read_csv(repo_path(published_dir) / "cost.csv")
    rows = []
    for _, r in study.iterrows():
        instance, usd_share, note = study_price(r["device"], r["instance_as_printed"])
        compiled = r["device"] == "trn1"
        one_off = trn1_one_off[0] if compiled and trn1_one_off else (math.nan if compiled else 0.0)
        share = job_cost.one_off_share_s(one_off, job.runs_sharing_cache, True, job.warm_cache)
        rows.append(
            {
                "device": r["device"],
                "source": "published",
                "family": "trn1" if compiled else "gpu",
                "configuration": f"study's optimized run: {setup_key(*STUDY_SETUP)}"
                + ("; compile from the measured trn1 record" if compiled and trn1_one_off else ""),
                "setup": setup_key(*STUDY_SETUP),
                "instance": instance,
                "usd_share_h": usd_share,
                "usd_whole_h": prices.whole_instances_price(instance, 1),
                "price_note": note,
                "published_usd_per_h": r["cost_per_hour_usd"],
                "published_instance": r["instance_as_printed"],
                "one_off_s": share,
                "epoch_s": r["sec_per_epoch"] * job.rows / FULL_ROWS,
                "target_s": math.nan,
                "target": "no curve published",
                "energy": "not published",
            }
        )
    return rows


def decision(df: pd.DataFrame, job: Job, published_dir=PUBLISHED_DIR) -> pd.DataFrame:
    """Return one row per device (measured records, then published figures): seconds, USD, energy, marks."""
    trn1_one_off: list[float] = []
    rows = [_measured(r, job, trn1_one_off) for _, r in representative(df, job).iterrows()]
    study_job = job.model in (None, STUDY_MODEL) and not job.lora_r  # the study published full bert-base only
    t = pd.DataFrame(rows + (_published(job, published_dir, trn1_one_off) if study_job else []))
    if t.empty:
        return t
    # the price a single user pays: the whole instance, unless the job says it shares one
    t["usd_per_h"] = t["usd_share_h"] if job.shared_instance else t["usd_whole_h"]
    # one-off dollars, dollars per epoch, then the job and the target at this instance price
    t["one_off_usd"] = job_cost.usd(t["one_off_s"], t["usd_per_h"])
    t["epoch_usd"] = job_cost.usd(t["epoch_s"], t["usd_per_h"])
    t["job_s"] = job_cost.wall_s(t["one_off_s"].fillna(0), t["epoch_s"], job.epochs)
    t["job_usd"] = job_cost.usd(t["job_s"], t["usd_per_h"])
    # the other basis, shown beside: a single user's bill against one accelerator's share (the study's)
    t["job_usd_other"] = job_cost.usd(t["job_s"], t["usd_whole_h"] if job.shared_instance else t["usd_share_h"])
    t["target_usd"] = job_cost.usd(t["target_s"], t["usd_per_h"])
    t["lower_bound"] = t["one_off_s"].isna()  # a compiled device whose compile time is unknown
    marks = {i: [] for i in t.index}
    # marks only among rows of one configuration, and at least two of them
    for _, group in t.groupby("setup"):
        for column, word in (("job_usd", "cheapest"), ("job_s", "fastest")):
            if group[column].notna().sum() < 2:
                continue
            best = group[column].idxmin()
            marks[best].append(
                f"{word} of {group[column].notna().sum()} ({t.loc[best, 'source']}"
                f"{', before compile' if t.loc[best, 'lower_bound'] else ''})"
            )
    t["mark"] = ["; ".join(m) for m in marks.values()]
    return t


def break_even(table: pd.DataFrame, job: Job) -> pd.DataFrame:
    """Return, per (compiled, eager) pair of one source and one configuration, the epochs where their costs meet."""
    out = []
    for compiled, eager in PAIRS if len(table) else ():  # keys: (compiled family, eager family)
        for _, a in table[table["family"] == compiled].iterrows():
            alike = table[
                (table["family"] == eager) & (table["source"] == a["source"]) & (table["setup"] == a["setup"])
            ]
            if alike.empty and (table["family"] == eager).any():
                out.append(
                    {
                        "device": f"{a['device']} ({a['source']})",
                        "against": f"no eager {eager.upper()} run of {a['setup']}",
                        "$/epoch": page.money(a["epoch_usd"]),
                        "against $/epoch": DASH,
                        "one-off $": DASH,
                        "reading": "not compared: no eager run of the same configuration",
                        "family": compiled,
                        "epochs": math.nan,
                        "usd_at": math.nan,
                    }
                )
            for _, b in alike.iterrows():
                epochs = job_cost.break_even_epochs(a["one_off_usd"], a["epoch_usd"], b["one_off_usd"], b["epoch_usd"])
                out.append(
                    {
                        "device": f"{a['device']} ({a['source']})",
                        "against": f"{b['device']} ({b['source']})",
                        "$/epoch": page.money(a["epoch_usd"]),
                        "against $/epoch": page.money(b["epoch_usd"]),
                        "one-off $": "not measured" if a["lower_bound"] else page.money(a["one_off_usd"]),
                        "reading": page.reading(a, b, epochs, job),
                        "family": compiled,
                        "epochs": math.nan if epochs is None else epochs,
                        "usd_at": a["one_off_usd"] + (epochs or math.nan) * a["epoch_usd"],
                    }
                )
    return pd.DataFrame(
        out,
        columns=[
            "device",
            "against",
            "$/epoch",
            "against $/epoch",
            "one-off $",
            "reading",
            "family",
            "epochs",
            "usd_at",
        ],
    )


markdown = page.markdown  # the decision page: question, table, break-even, rules, prices, conclusion
