"""Every record as one row of a pandas DataFrame (`pandas.json_normalize`, the latest per suite point and device):
the frame the report's tables and plots, the claims and the decision are made from."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pydantic

from helpers import devices, record
from helpers.arguments import ADMITTED

TARGETS = (0.88, 0.90, 0.92)  # not-mine: helpers.evaluation.TARGETS once the lead lands it
VARIANTS = ("quick", "full")  # not-mine: study.sweep.suites.VARIANTS once the sweep imports


def number(value) -> float:
    """Return `value` as a float, NaN when it is None, text, a boolean or not finite."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return np.nan
    return float(value) if np.isfinite(value) else np.nan


# named column: (record paths tried in order, scale)
METRICS = {
    "step_ms": (("timing.step_time_median_s",), 1000),
    "step_ms_p10": (("timing.step_time_p10_s",), 1000),
    "step_ms_p90": (("timing.step_time_p90_s",), 1000),
    "samples_per_s": (("timing.samples_per_s",), 1),
    "window_min": (("timing.window_samples_per_s.min",), 1),
    "window_max": (("timing.window_samples_per_s.max",), 1),
    "tokens_per_s": (("timing.tokens_per_s",), 1),
    "train_s": (("timing.train_time_s",), 1),
    "first_step_s": (("timing.first_step_s",), 1),
    "steady_steps": (("timing.steady_steps",), 1),
    "steps": (("timing.steps",), 1),
    "tflops": (("systems.achieved_tflops",), 1),
    "ai": (("systems.arithmetic_intensity",), 1),
    "flops_per_step": (("systems.flops_per_step",), 1),
    "mem_gib": (("memory.cuda_max_allocated_gib", "memory.host_peak_rss_gib"), 1),
    "compilations": (("xla.graph_compilations",), 1),
    "compile_s": (("xla.compile_time_s",), 1),
    "train_compile_s": (("xla.train.compile_time_s",), 1),  # inside the train time
    "compilations_after_warmup": (("xla.compilations_after_warmup",), 1),
    "shapes": (("shapes.distinct",), 1),
    "test_acc": (("metrics.test_accuracy",), 1),
    "val_acc": (("metrics.val_accuracy",), 1),
    "test_f1": (("metrics.test_macro_f1",), 1),
    "final_loss": (("metrics.final_loss",), 1),
    "majority": (("data.majority_share.test",), 1),
    "test_rows": (("metrics.test_rows",), 1),
    "energy_j": (("energy.joules",), 1),
    "watts": (("energy.mean_watts",), 1),
    "samples_per_j": (("energy.samples_per_joule",), 1),
    "eval_s": (("phases.evaluate",), 1),
    "record_peak": (("systems.peak_tflops",), 1),  # the peak the run itself was measured against
    "mem_bw_gbps": (("systems.mem_bw_gbps",), 1),
    "trainable": (("model.trainable_parameters",), 1),
    "optimizer_mib": (("model.optimizer_state_bytes",), 1 / 2**20),
    "allreduce_s": (("distributed.allreduce.comm_s",), 1),  # a step's gradient all-reduce (the claims)
    "host_mem_gib": (("utilization.host_mem_used_gib_p90",), 1),  # the whole host's, neuron-monitor (the claims)
    "dma_pct": (("neuron_profile.dma_active_pct",), 1),  # DMA engines active, Neuron profiler (the claims)
}
SHARES = ("matmul", "attention", "elementwise_norm_act", "optimizer", "copy_data_movement", "other", "host_gap")
# what each device's utilization column measures, in words, best first; True: a figure of the tensor units,
# comparable across devices (a GPU's tensor pipes, a NeuronCore's tensor engine), which the small-batch claim
# needs on both sides; SM activity counts SMs busy with any work, so it is not the tensor engine's counterpart
UTILIZATION = {
    "cuda": (
        ("utilization.tensor_active_pct_mean", "tensor pipes active % (NVML GPM ANY_TENSOR_UTIL)", True),
        ("utilization.sm_active_pct_mean", "SM activity: % of SMs busy (NVML GPM)", False),
        ("utilization.sm_util_pct_mean", "NVML utilization.gpu: % of time a kernel ran", False),
    ),
    "xla": (
        ("neuron_profile.tensor_engine_active_pct", "tensor engine active % (Neuron profiler)", True),
        ("utilization.neuroncore_util_pct_mean", "NeuronCore utilization (neuron-monitor)", False),
    ),
    "cpu": (("utilization.proc_cpu_util_pct_mean", "process CPU % of the run's threads (psutil)", False),),
}
PARAMS = (
    "model_name",
    "batch",
    "max_length",
    "lr",
    "llrd_decay",
    "seed",
    "padding",
    "pad_to_multiple_of",
    "preset",
    "num_devices",
    "precision",
    "optlevel",
    "model_type",
    "distribution_strategy",
    "epochs",
    "train_subset",
    "eval_subset",
    "gradient_accumulation_steps",
    "gradient_checkpointing",
    "group_by_length",
    "eval_every",
    "lora_r",
    "lora_targets",
)
NEAR_MAJORITY = 0.05  # a run within 5 points of always answering the commonest label learned ~nothing
MIN_RUNS = 3  # independent runs a cell needs before its spread is called an interval between runs
# a record of the study's own kind: its model on a GPU or a trn1 NeuronCore; any other only stands in (a proxy)
STUDY_MODEL, STUDY_CLASSES = "bert-base-uncased", ("gpu", "trn1")


def utilization(row: pd.Series, device_type: str) -> tuple[float, str, bool]:
    """Return (the best utilization figure a record has, what it measures, whether it is the study's kind)."""
    choices = UTILIZATION.get(device_type, ())
    for path, words, like_study in choices:
        value = number(row[path]) if path in row.index else np.nan
        if pd.notna(value):
            return value, words, like_study
    return np.nan, choices[-1][1] if choices else "not measured", False


def device_class(df: pd.DataFrame) -> pd.Series:
    """Return each record's device class from devices.csv (helpers.devices.device_class)."""
    sections = [
        {"type": t, "name": n, "neuron": bool(x)}
        for t, n, x in zip(df["device_type"], df["device"], df["device.neuron"])
    ]
    return pd.Series([devices.device_class(s) for s in sections], index=df.index)


def _column(raw: pd.DataFrame, paths: tuple[str, ...], scale: float) -> pd.Series:
    """Return the first of `paths` that holds a number, per row, times `scale`."""
    out = pd.Series(np.nan, index=raw.index)
    for path in paths:
        if path in raw:
            out = out.fillna(raw[path].map(number) * scale)
    return out


def profiled(df: pd.DataFrame) -> pd.Series:
    """Return, per row, whether torch.profiler ran (it slows the steps it watches: never a claim's timing)."""
    shares = [c for c in (f"share_{s}" for s in SHARES) if c in df]
    return df[shares].notna().any(axis=1) if shares else pd.Series(False, index=df.index)


def variant_of(suite, run_name: str) -> str | None:
    """Return the suite variant a run name says it belongs to (`<suite>-<variant>-...`)."""
    for variant in VARIANTS:
        if isinstance(suite, str) and run_name.startswith(f"{suite}-{variant}-"):
            return variant
    return None


def frame(found: list[dict]) -> pd.DataFrame:
    """Return one row per record with the named columns (the latest record per suite point and device)."""
    if not found:  # the columns of a frame of records, none of them filled
        return frame([{"run_name": ""}]).iloc[:0]
    raw = pd.json_normalize(found, sep=".")
    df = pd.DataFrame(index=raw.index)
    df["suite"] = raw.get("suite", pd.Series(None, index=raw.index)).fillna("adhoc")
    df["run_name"] = raw["run_name"]
    df["variant"] = [variant_of(s, n) for s, n in zip(df["suite"], df["run_name"])]
    df["status"] = raw.get("status")
    df["fixture"] = raw.get("fixture", pd.Series(False, index=raw.index)).fillna(False).astype(bool)
    df["device_type"] = raw.get("device.type")
    df["device"] = raw.get("device.name", pd.Series(None, index=raw.index))
    df["device_key"] = raw.get("device.key", df["device"]).fillna(df["device"].fillna("unknown"))
    for column in ("device", "device_type"):  # a failure the sweep recorded names only its device's key
        known = df.dropna(subset=[column]).drop_duplicates("device_key").set_index("device_key")[column]
        df[column] = df[column].fillna(df["device_key"].map(known))
    df["device"] = df["device"].fillna("unknown")
    df["device.neuron"] = raw.get("device.neuron", pd.Series(False, index=raw.index)).fillna(False)
    df["cls"] = device_class(df)
    df["instance"] = raw.get("device.instance")
    df["threads"] = raw.get("device.torch_threads")
    df["compute_dtype"] = raw.get("precision.compute_dtype")
    # torchao's AdamW for bf16-pure-sr off XLA: an arm's optimizer
    df["optimizer"] = raw.get("optimizer.class")
    df["finished_at"] = raw.get("finished_at", raw.get("started_at"))
    for name in PARAMS:  # from the records themselves: a column with a gap would turn 64 into 64.0
        df[name] = pd.Series([(rec.get("params") or {}).get(name) for rec in found], index=raw.index, dtype=object)
    df["precision"] = raw.get("precision.used", df["precision"])
    df["proxy"] = (df["model_name"] != STUDY_MODEL) | ~df["cls"].isin(STUDY_CLASSES)
    df["llrd_decay"] = df["llrd_decay"].map(lambda v: "none" if v is None else v)
    for name, (paths, scale) in METRICS.items():
        df[name] = _column(raw, paths, scale)
    for name in (c for c in raw if c.startswith("token_stats.")):  # the token_lengths suite's statistics
        df[name] = raw[name]
    for share in SHARES:
        df[f"share_{share}"] = _column(raw, (f"profile.class_share.{share}",), 100)
    util = [utilization(raw.loc[i], t) for i, t in zip(raw.index, df["device_type"])]
    df["util_pct"] = pd.Series([u[0] for u in util], index=raw.index) / np.where(
        df["device_type"] == "cpu", df["threads"].fillna(1).astype(float), 1.0
    )
    df["util_metric"] = [u[1] for u in util]
    df["util_like_study"] = [u[2] for u in util]
    df["near_majority"] = (df["test_acc"] - df["majority"]) < NEAR_MAJORITY
    df["curve"] = raw.get("curve", pd.Series([[]] * len(raw), index=raw.index))
    for target in TARGETS:  # time to accuracy: the record's own crossings (calc.accuracy_time)
        df[f"tta_{target:.2f}"] = _column(raw, (f"time_to_accuracy.{target:.2f}.train_time_s",), 1)
    df["tta_test_acc"] = _column(raw, ("time_to_accuracy.0.90.test_accuracy",), 1)
    # steps to 90%: the machine's load aside
    df["tta_steps"] = _column(raw, ("time_to_accuracy.0.90.step",), 1)
    unmeasured = pd.Series("not measured", index=raw.index)
    df["energy_method"] = raw.get("energy.method", unmeasured).fillna("not measured")
    df["source"] = raw.get("_source")
    # the one MFU and its peak: computed where the record was made (calc.roofline.systems_section)
    df["peak_tflops"] = _column(raw, ("systems.peak_tflops",), 1)
    missing = pd.Series(None, index=raw.index)
    df["peak_source"] = [
        peak_label(s, d)
        for s, d in zip(raw.get("systems.peak_source", missing), raw.get("systems.peak_measured_at", missing))
    ]
    # a CPU's measured copy bandwidth (the CPU, and XLA on it); GPUs' and NeuronCores' come from the facts
    host = (df["device_type"] == "cpu") | ((df["device_type"] == "xla") & ~df["device.neuron"].astype(bool))
    df["peak_bw_gbps"] = _column(raw, ("systems.mem_bw_gbps",), 1).where(host)
    df["mfu_pct"] = _column(raw, ("systems.mfu",), 100)
    df = _latest(df)
    return df.reset_index(drop=True)


def peak_label(source: object, measured_at: object = None) -> object:
    """Return a record's peak source short enough for a table: 'measured (shape, date)' or the document."""
    if not isinstance(source, str):
        return source
    if not source.startswith("measured on this machine"):  # a published one: the document, not its figures
        return source.split(": ", 1)[0]
    shape = re.search(r"\(([^()]*tokens[^()]*)\)", source)
    date = f", {measured_at[:10]}" if isinstance(measured_at, str) else ""
    return f"measured ({shape.group(1) if shape else 'matmul'}{date})"


def _latest(df: pd.DataFrame) -> pd.DataFrame:
    """Keep one row per (suite, run name, device): the latest finished one, else the latest."""
    df = df.assign(_done=(df["status"] == "finished").astype(int))
    df = df.sort_values(["_done", "finished_at"], na_position="first", kind="stable")
    return df.drop_duplicates(["suite", "run_name", "device_key"], keep="last").drop(columns="_done")


# the type a record must hold in each parameter a table groups by (text, a flag or a number, as the arguments
# type it; a foreign record may hold anything)
GROUPABLE = pydantic.create_model(
    "GroupableParams",
    __config__=pydantic.ConfigDict(strict=True, allow_inf_nan=False),
    **{name: (next((t for t in (str, bool) if t in ADMITTED[name]), float) | None, None) for name in PARAMS},
)


def params_problem(record: dict) -> str | None:
    """Return why a record's parameters cannot be grouped by in a table (None when they can)."""
    try:
        GROUPABLE.model_validate(record.get("params") or {})
    except pydantic.ValidationError as err:
        first = err.errors(include_url=False)[0]
        value = first["input"]
        return f"params.{first['loc'][0]}: {first['msg']}, not {type(value).__name__} {str(value)[:40]!r}"
    return None


def load(root: str | Path, include_fixtures: bool = False) -> tuple[pd.DataFrame, dict]:
    """Return the frame of every record below `root` and what was skipped ('<file>: <why>': count)."""
    found, skipped = record.read(root)
    usable = []
    for rec in found:  # valid records whose parameters a table cannot group by: named, then left out
        why = params_problem(rec)
        if why:
            where = Path(rec["_source"])
            skipped[f"{where.relative_to(root) if where.is_relative_to(root) else where}: {why}"] += 1
        else:
            usable.append(rec)
    df = frame(usable)
    if not include_fixtures and len(df):
        df = df[~df["fixture"]].reset_index(drop=True)
    return df, dict(skipped)


def current_names(found: list) -> dict[str, set[str]]:
    """Return, per suite, the run names its file expands to today (either target, either variant)."""
    from study.sweep import suites

    return {
        s.name: {
            p.run_name for t in suites.TARGETS for v in suites.VARIANTS for p in suites.expand(suites.retarget(s, t), v)
        }
        for s in found
        if s.kind != "derived"
    }


def current_points(df: pd.DataFrame, found: list) -> pd.DataFrame:
    """Return the records that are a current point of a suite in `found` (an edited suite's old points left out)."""
    names = current_names(found)
    return df[[n in names.get(s, ()) for s, n in zip(df["suite"], df["run_name"])]] if len(df) else df
