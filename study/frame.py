"""Every record as one row of a pandas DataFrame (`pandas.json_normalize`, the latest per suite point and device):
the frame the report's tables and plots, the claims and the cost page are made from.

Derived figures are computed here from each record's raw measurements, so a corrected formula needs no migration:
model FLOPs per step from its shapes (helpers/flops.py), TFLOP/s and MFU over its steady seconds, bytes and
arithmetic intensity from the memory model, the roof from the device's published peak or the CPU's measured one.

One estimator per figure, on every page, plot and claim: `estimate(rows, metric)`, the median of a cell's independent
runs with the lowest and highest run as its band, and `ratio(a, b)` for a ratio of two. A timing figure is estimated
over every finished, unprofiled run of its configuration (the lr and the seed do not change a step); a band is a
spread between runs only with MIN_RUNS of them.
"""

from __future__ import annotations

import math
import numbers
import types
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pandas as pd
import pydantic

from helpers import devices, flops, memory, peaks, record
from helpers.arguments import ADMITTED
from study.notation import fmt, short_device
from study.sweep import suites

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
    "steady_s": (("timing.steady_time_s",), 1),
    "steady_steps": (("timing.steady_steps",), 1),
    "steps": (("timing.steps",), 1),
    "mem_gib": (("memory.cuda_max_allocated_gib", "memory.host_peak_rss_gib"), 1),
    "compilations": (("xla.graph_compilations",), 1),
    "compile_s": (("xla.compile_time_s",), 1),
    "train_compile_s": (("xla.train.compile_time_s",), 1),  # inside the train time
    "compilations_after_warmup": (("xla.compilations_after_warmup",), 1),
    "shapes": (("shapes.distinct",), 1),
    "test_acc": (("metrics.test_accuracy",), 1),
    "val_acc": (("metrics.val_accuracy",), 1),
    "final_loss": (("metrics.final_loss",), 1),
    "majority": (("data.majority_share.test",), 1),
    "test_rows": (("metrics.test_rows",), 1),
    "energy_j": (("energy.joules",), 1),
    "watts": (("energy.mean_watts",), 1),
    "samples_per_j": (("energy.samples_per_joule",), 1),
    "trainable": (("model.trainable_parameters",), 1),
    "optimizer_mib": (("model.optimizer_state_bytes",), 1 / 2**20),
    "busy_pct": (("profile.device_busy_share",), 100),  # CUDA: the share of the wall the device ran anything
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
# an accelerator waited on its host when its step grew less than HOST_BOUND_STEP_GROWTH while its batch grew
# HOST_BOUND_BATCHES-fold, or when the profiler saw it busy under HOST_BOUND_BUSY of the step's wall time
HOST_BOUND_STEP_GROWTH, HOST_BOUND_BATCHES, HOST_BOUND_BUSY = 2.0, 4.0, 50.0
# the architecture fields helpers/memory.py reads that a record's model.config leaves at the model's default
DROPOUT = {"hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1, "classifier_dropout": None}


def number(value) -> float:
    """Return `value` as a float, NaN when it is None, text, a boolean or not finite ("not measured")."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):  # numpy scalars are Real, np.bool_ not
        return math.nan
    return float(value) if math.isfinite(value) else math.nan


class Band(NamedTuple):
    """A figure's estimate and the spread around it (between runs, or within one run's windows)."""

    mid: float
    lo: float
    hi: float

    def __str__(self) -> str:
        return fmt(self.mid) if math.isclose(self.lo, self.hi) else f"{fmt(self.mid)} ({fmt(self.lo)}–{fmt(self.hi)})"


def estimate(rows: pd.DataFrame, metric: str) -> Band:
    """Return the one estimate of `metric` over a cell's independent runs: their median, and the lowest and highest
    run (the claims', the tables' and the figures'; one run: no spread)."""
    values = rows[metric].astype(float).dropna()
    return Band(float(values.median()), float(values.min()), float(values.max()))


def ratio(a: Band, b: Band) -> Band:
    """Return a / b with the band of the extreme ratios."""
    return Band(a.mid / b.mid, a.lo / b.hi, a.hi / b.lo)


def utilization(row: pd.Series, device_type: str) -> tuple[float, str, bool]:
    """Return (the best utilization figure a record has, what it measures, whether it is the study's kind)."""
    choices = UTILIZATION.get(device_type, ())
    for path, words, like_study in choices:
        value = number(row[path]) if path in row.index else np.nan
        if pd.notna(value):
            return value, words, like_study
    return np.nan, choices[-1][1] if choices else "not measured", False


def derived(rec: dict, peaks_dir: Path | None) -> dict:
    """Return a record's model FLOPs and bytes per step, TFLOP/s, MFU %, intensity, bound and roof (NaN unknown)."""
    timing, shapes, dev = rec.get("timing") or {}, rec.get("shapes") or {}, rec.get("device") or {}
    config, params = (rec.get("model") or {}).get("config") or {}, rec.get("params") or {}
    dtype = (rec.get("precision") or {}).get("compute_dtype") or "fp32"
    out = {"peak_tflops": np.nan, "peak_bw_gbps": np.nan, "peak_source": "no device"}
    if dev.get("type") and devices.kind(dev) in ("cpu", "xla-cpu"):  # a CPU's roof: measured on it, at its threads
        found = peaks.cpu_roof(dev["key"], dtype, dev.get("torch_threads") or 1, peaks_dir) if peaks_dir else None
        said = f"measured ({found['shape']}, {str(found.get('measured_at'))[:10]})" if found else None
        found = {**found, "source": said} if found else {"source": f"no trusted {dtype} roof kept for this CPU"}
    else:
        found = flops.roof(dev, dtype) if dev.get("type") else {"source": "no device"}
    out |= {"peak_source": found["source"].split(": ")[0]}
    out |= {k: number(found.get(f)) for k, f in (("peak_tflops", "peak_tflops"), ("peak_bw_gbps", "mem_bw_gbps"))}
    # the steady windows' micro-batches; a record from before they were kept counts every step's (the warm-up too)
    micro, steps = (shapes.get("steady"), timing.get("steady_steps")) if shapes.get("steady") else (None, None)
    micro, steps = micro or shapes.get("counts"), steps or timing.get("steps")
    seconds = number(timing.get("steady_time_s")) / number(timing.get("steady_steps"))
    if rec.get("profile") and not shapes.get("steady"):  # its steady windows held the profiled, slowed steps
        seconds = number(timing.get("step_time_median_s"))
    if not (micro and steps and config.get("hidden_size") and seconds > 0 and dev.get("type")):
        return out
    lora = (params.get("lora_r") or 0, params.get("lora_targets") or "query,value")
    per_step = flops.step_flops(config, micro, *lora) / steps
    cfg = types.SimpleNamespace(**{**DROPOUT, **config, "intermediate_size": flops.intermediate(config)})
    precision = (rec.get("precision") or {}).get("used") or "fp32"
    fused = dev.get("type") == "cuda" and (rec.get("model") or {}).get("attention") == "sdpa"  # SDPA's flash kernel
    saved = {
        (b, length): memory.saved_activation_bytes(
            cfg, b, length, precision, device_type=dev["type"], fused_attention=fused
        )
        for b, length, _ in flops.micro_batches(micro)
    }
    per_step_bytes = sum(
        n * flops.step_bytes(config, b, length, precision, saved[b, length])
        for b, length, n in flops.micro_batches(micro)
    )
    out |= {"flops_per_step": per_step, "bytes_per_step": per_step_bytes / steps, "tflops": per_step / seconds / 1e12}
    out["ai"] = per_step / out["bytes_per_step"]
    if out["peak_tflops"] > 0:
        out["mfu_pct"] = 100 * flops.mfu(per_step, seconds, out["peak_tflops"])
        ridge = out["peak_tflops"] * 1e12 / (out["peak_bw_gbps"] * 1e9)  # the intensity where the two roofs meet
        out["bound"] = "memory" if out["ai"] < ridge else "compute"
    return out


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
    for variant in suites.VARIANTS:
        if isinstance(suite, str) and run_name.startswith(f"{suite}-{variant}-"):
            return variant
    return None


def host_bound(df: pd.DataFrame) -> dict[str, str]:
    """Return, per accelerator's device key that waited on its host, its status: 'host-bound' (a step flat across
    batches), or its profiled device busy share where one is recorded (which decides)."""
    out = {}
    for key, g in df[df["device_type"] != "cpu"].groupby("device_key"):  # a CPU is its own host
        busy = g["busy_pct"].median()
        steps = g[(g["suite"] == "batch_scaling") & (g["status"] == "finished")].groupby("batch")["step_ms"].median()
        steps = steps.dropna().sort_index()
        flat = len(steps) > 1 and steps.index[-1] / steps.index[0] >= HOST_BOUND_BATCHES
        if pd.notna(busy) and busy < HOST_BOUND_BUSY:
            out[key] = f"host-bound, device busy {busy:.0f}%"
        elif pd.isna(busy) and flat and steps.iloc[-1] / steps.iloc[0] < HOST_BOUND_STEP_GROWTH:
            out[key] = "host-bound"
    return out


def frame(found: list[dict], peaks_dir: Path | None = None) -> pd.DataFrame:
    """Return one row per record with the named columns (the latest record per suite point and device)."""
    if not found:  # the columns of a frame of records, none of them filled
        return frame([{"run_name": ""}]).iloc[:0]
    raw = pd.json_normalize(found, sep=".")
    empty = pd.Series(None, index=raw.index)
    df = pd.DataFrame(index=raw.index)
    df["suite"] = raw.get("suite", empty).fillna("adhoc")
    df["run_name"] = raw["run_name"]
    df["variant"] = [variant_of(s, n) for s, n in zip(df["suite"], df["run_name"])]
    df["status"] = raw.get("status")
    df["fixture"] = raw.get("fixture", pd.Series(False, index=raw.index)).fillna(False).astype(bool)
    df["device_type"] = raw.get("device.type", empty)
    df["device"] = raw.get("device.name", empty)
    df["device_key"] = raw.get("device.key", df["device"]).fillna(df["device"].fillna("unknown"))
    for column in ("device", "device_type"):  # a failure the sweep recorded names only its device's key
        known = df.dropna(subset=[column]).drop_duplicates("device_key").set_index("device_key")[column]
        df[column] = df[column].fillna(df["device_key"].map(known))
    # a name is a table cell on every page: a "|" in it (a foreign record's device) would split the Markdown row
    df["device"] = df["device"].fillna("unknown").astype(str).str.replace("|", "/", regex=False)
    df["device.neuron"] = raw.get("device.neuron", pd.Series(False, index=raw.index)).fillna(False).astype(bool)
    sections = [
        {"type": t, "name": n, "neuron": x} for t, n, x in zip(df["device_type"], df["device"], df["device.neuron"])
    ]
    df["kind"] = [devices.kind(s) for s in sections]  # the device's row of helpers/facts/devices.csv
    df["cls"] = [devices.device_class(s) for s in sections]
    df["instance"] = raw.get("device.instance", empty)
    host = (
        raw.get("device.cpu_family", empty).fillna("family not recorded")
        + ", "
        + raw.get("device.cpu_capability", empty).fillna("?")
    )
    df["host_cpu"] = host.where((df["device_type"] == "cuda") | df["device.neuron"], "the device itself")
    df["threads"] = raw.get("device.torch_threads", empty)
    df["compute_dtype"] = raw.get("precision.compute_dtype", empty)
    df["optimizer"] = raw.get("optimizer.class", empty)  # torchao's AdamW for bf16-pure-sr off XLA: an arm's optimizer
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
    for target in sorted({t for rec in found for t in rec.get("time_to_accuracy") or {}}):  # the records' targets
        df[f"tta_{target}"] = _column(raw, (f"time_to_accuracy.{target}.train_time_s",), 1)
    df["tta_test_acc"] = _column(raw, ("time_to_accuracy.0.90.test_accuracy",), 1)
    df["tta_steps"] = _column(raw, ("time_to_accuracy.0.90.step",), 1)  # steps to 90%: the machine's load aside
    df["energy_method"] = raw.get("energy.method", empty).fillna("not measured")
    df["source"] = raw.get("_source")
    figures = pd.DataFrame([derived(rec, peaks_dir) for rec in found], index=raw.index)
    for name in ("flops_per_step", "bytes_per_step", "tflops", "ai", "mfu_pct", "bound"):
        df[name] = figures.get(name, empty if name == "bound" else np.nan)
    df[["peak_tflops", "peak_source", "peak_bw_gbps"]] = figures[["peak_tflops", "peak_source", "peak_bw_gbps"]]
    df = _latest(df)
    bound = host_bound(df)
    df["host_bound"] = df["device_key"].map(bound).fillna("")
    df["label"] = [short_device(d) + (f" ({b})" if b else "") for d, b in zip(df["device"], df["host_bound"])]
    return df.reset_index(drop=True)


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


def params_problem(rec: dict) -> str | None:
    """Return why a record's parameters cannot be grouped by in a table (None when they can)."""
    try:
        GROUPABLE.model_validate(rec.get("params") or {})
    except pydantic.ValidationError as err:
        first = err.errors(include_url=False)[0]
        value = first["input"]
        return f"params.{first['loc'][0]}: {first['msg']}, not {type(value).__name__} {str(value)[:40]!r}"
    return None


def load(root: str | Path, include_fixtures: bool = False) -> tuple[pd.DataFrame, dict]:
    """Return the frame of every record below `root` and what was skipped ('<file>: <why>': count)."""
    root = record.repo_path(root)
    found, skipped = record.read(root)
    usable = []
    for rec in found:  # valid records whose parameters a table cannot group by: named, then left out
        why = params_problem(rec)
        if why:
            where = Path(rec["_source"])
            skipped[f"{where.relative_to(root) if where.is_relative_to(root) else where}: {why}"] += 1
        else:
            usable.append(rec)
    df = frame(usable, root / record.PEAKS)
    if not include_fixtures and len(df):
        df = df[~df["fixture"]].reset_index(drop=True)
    return df, dict(skipped)


def current_names(found: list) -> dict[str, set[str]]:
    """Return, per suite, the run names its file expands to today (either target, either variant)."""
    return {
        s.name: {
            p.run_name for t in suites.TARGETS for v in suites.VARIANTS for p in suites.expand(suites.retarget(s, t), v)
        }
        for s in found
        if s.kind != "derived"
    }


def current_points(df: pd.DataFrame, found: list) -> pd.DataFrame:
    """Return the records that are a current point of a suite in `found` (an edited suite's old points left out),
    and the smoke runs (cloud/smoke.toml: each device's first run, no report suite)."""
    names = current_names(found)
    return df[[n in names.get(s, ()) or s == "smoke" for s, n in zip(df["suite"], df["run_name"])]] if len(df) else df
