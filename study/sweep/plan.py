"""A sweep's plan before it spends (`--plan`): per point its graphs, compile and train seconds and dollars.

A model: every figure says where it comes from; one that cannot be estimated is NaN with the reason in its note.
"""

from __future__ import annotations

import functools
import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from helpers.calc import prices
from helpers.calc.facts import device_column, device_roof, load_instance_prices
from helpers.calc.flops import forward_flops, model_flops
from helpers.run import models
from helpers.run.args import build_args
from helpers.run.device import compute_dtype
from helpers.run.paths import repo_path
from helpers.study.published import STUDY_KEYS
from helpers.study.sweep import graphs
from helpers.study.sweep.suites import TARGETS, Point, Suite, expand, timeout_of

COMPILE_S_PER_GRAPH = 300.0
COMPILE_SOURCE = (
    "assumed 300 s a graph, cold: neuronx-cc takes minutes per bert-base graph "
    "(docs/HARDWARE.md; up to an hour for large models: optimum-neuron #698, #825 in "
    "shared/NEURON.md); a public trn1 BERT training log shows ~5 min between successive "
    "neuronx-cc calls (aws/aws-k8s-tester PR #558)"
)
DEFAULT_INSTANCE = {"trainium": "trn1.2xlarge", "nvidia": "g6.xlarge"}
RANK_DEVICE = device_column("rank_peaks_key")  # one process drives one NeuronCore: a rank's peak is the core's
# Turing: fp16 tensor cores, no bf16 (device_peaks.csv's 16-bit column is fp16 there)
NO_FAST_BF16 = [key for key, fast in device_column("fast_bf16").items() if not fast]
PUBLISHED = "Experiment/published"
STUDY_NAME = {key: name for name, key in STUDY_KEYS.items()}  # device names in the study's speedup.csv
STUDY_EPOCHS, STUDY_BATCH, STUDY_LENGTH = 3, 64, 32  # the optimized configuration speedup.csv times
POINT_FORMATS = {
    "graphs": ".0f",
    "new": ".0f",
    "compile_s": ".0f",
    "train_s": ".0f",
    "eval_s": ".0f",
    "mfu": ".1%",
    "usd": ".2f",
}
TOTAL_FORMATS = {
    "points": "d",
    "distinct graphs": "d",
    "new graphs": ".0f",
    "compile h": ".2f",
    "train h": ".2f",
    "eval h": ".2f",
    "usd": ".2f",
    "not estimated": "d",
    "will time out": "d",
}
WILL_TIME_OUT = "WILL TIME OUT"  # the mark of a point modelled past its timeout


@dataclass(frozen=True)
class Target:
    """Where the plan prices and times the sweep: the instance, the device one rank runs on, its price."""

    name: str  # trainium | nvidia
    instance: str
    device: str | None  # device_peaks.csv key of one rank's device
    price_per_hour_usd: float  # NaN when the facts have no price
    price_note: str


def target_of(name: str, instance: str | None = None, gpus: int | None = None) -> Target:
    """Return the target `name` on `instance` (default: DEFAULT_INSTANCE), priced whole or as `gpus` of it."""
    instance = instance or DEFAULT_INSTANCE[name]
    row = load_instance_prices().set_index("instance")
    if instance not in row.index:
        return Target(name, instance, None, math.nan, f"no price for {instance} in helpers/facts/instance_prices.csv")
    r = row.loc[instance]
    note = f"${prices.instance_price(instance):g}/h on demand ({r['region']}, {r['date']}; {r['source']})"
    device = RANK_DEVICE.get(r["device"], r["device"])
    if gpus:
        price = prices.price_per_accelerator_hour(instance) * gpus
        share = f"{gpus} of its {r['accelerators']} accelerators at their share, ${price:g}/h, of {note}"
        return Target(name, instance, device, price, share)
    return Target(name, instance, device, prices.instance_price(instance), note)


@functools.cache
def assumed_mfu(device: str | None, max_length: int) -> tuple[float, str]:
    """Return the MFU (a fraction) assumed on `device` from the study's published figures, and its source."""
    if device and device.startswith("trn1"):
        prof = pd.read_csv(repo_path(PUBLISHED) / "seq_len_profile.csv")
        # the row of the nearest L (on a log scale; the shorter on a tie)
        row = prof.iloc[int(np.abs(np.log(prof["max_length"] / max_length)).argmin())]
        return (
            float(row["mfu_pct"]) / 100,
            f"the study's trn1 profile at L={int(row['max_length'])}: "
            f"{row['mfu_pct']}% ({PUBLISHED}/seq_len_profile.csv)",
        )
    if device in STUDY_NAME:
        pub = pd.read_csv(repo_path(PUBLISHED) / "speedup.csv").set_index("device").loc[STUDY_NAME[device]]
        seconds = float(pub["optimized_train_time_s"])
        flops_per_batch = model_flops(model_config("bert-base-uncased"), STUDY_BATCH, STUDY_LENGTH)
        flops_per_row = flops_per_batch / STUDY_BATCH
        achieved = graphs.TRAIN_ROWS * STUDY_EPOCHS / seconds * flops_per_row
        peak = device_roof(device, "bf16")["peak_tflops"] * 1e12
        return achieved / peak, (
            f"derived from the study's optimized {STUDY_NAME[device]} run "
            f"({graphs.TRAIN_ROWS:,} rows x {STUDY_EPOCHS} epochs in {seconds:g} s at "
            f"b{STUDY_BATCH} L{STUDY_LENGTH}, {PUBLISHED}/speedup.csv) over the "
            "datasheet 16-bit peak"
        )
    return math.nan, f"no published MFU for {device or 'this device'}"


@functools.cache
def model_config(name: str):
    """Return the architecture's config, read once (offline: hub names through their -random alias)."""
    return models.load_config(graphs.architecture(name))


def seconds(flops: float, mfu: float, peak_tflops: float) -> float:
    """Return the seconds `flops` take at `mfu` of a `peak_tflops` device."""
    return flops / (mfu * peak_tflops * 1e12)


# (model_name, data_dir) -> token lengths by split, or why not
Lengths = Callable[[str, str | None], dict | str]


def estimate(suite: Suite, point: Point, target: Target, lengths_for: Lengths) -> tuple[dict, list]:
    """Return a point's plan row (graphs, seconds per graph, train / evaluation seconds, MFU) and graph keys."""
    row = {
        "suite": suite.name,
        "point": point.run_name,
        "graphs": math.nan,
        "per_graph_s": math.nan,
        "train_s": math.nan,
        "eval_s": math.nan,
        "mfu": math.nan,
        "note": "",
    }
    if suite.kind == "token_stats":
        return {**row, "graphs": 0, "note": "tokenizes on the host, no training: seconds, not estimated"}, []
    if suite.requires == "neuron" and target.name != "trainium":
        return {**row, "note": "needs NeuronCores: the sweep skips it on this target"}, []
    args = build_args(point.params)
    notes = [target.price_note] if math.isnan(target.price_per_hour_usd) else []
    xla = suite.notebook == TARGETS["trainium"][0]
    device = target.device if xla == (target.name == "trainium") else None
    lengths = None if args.task.padding == "static" else lengths_for(args.task.model_name, args.task.data_dir)
    padded = graphs.padded_lengths(args, lengths if isinstance(lengths, dict) else None)
    if padded is None:
        return {**row, "note": "; ".join(notes + [f"dynamic padding: {lengths}"])}, []
    train_len, eval_len = padded
    fast = device not in NO_FAST_BF16
    keys = graphs.graph_keys(args, train_len, eval_len, bf16_fast=fast) if xla else []
    row["graphs"] = len(keys)
    if not xla:  # eager CUDA / CPU compiles nothing, unless torch.compile
        row["per_graph_s"] = math.nan if args.train.compile else 0.0
        notes += ["torch.compile: its compile time is not estimated"] if args.train.compile else []
    elif device is not None:
        row["per_graph_s"] = COMPILE_S_PER_GRAPH
    if device is None:
        return {
            **row,
            "note": "; ".join(notes + ["runs on torch-xla's CPU backend on this target: no published figure"]),
        }, keys
    mfu, source = assumed_mfu(device, args.task.max_length)
    if math.isnan(mfu):
        return {**row, "note": "; ".join(notes + [source])}, keys
    cfg = model_config(args.task.model_name)
    dtype = compute_dtype(graphs.compiled_precision(args, fast), args.neuron.bf16_mode, args.neuron.extra_cc_flags)
    peak = device_roof(device, dtype)["peak_tflops"]
    micro, batches = Counter(train_len.tolist()), Counter(eval_len.tolist())  # padded length -> batches
    # each padded length at the MFU assumed for it (dynamic padding runs mostly far below max_length)
    # forward + backward, a LoRA step where the task trains adapters
    train = {
        L: n * model_flops(cfg, args.train.batch, L, args.task.lora_r, args.task.lora_targets) for L, n in micro.items()
    }
    evaluate = {L: n * forward_flops(cfg, graphs.eval_batch(args), L) for L, n in batches.items()}
    train_s, eval_s = (
        sum(seconds(f, assumed_mfu(device, int(L))[0], peak) for L, f in part.items()) for part in (train, evaluate)
    )
    flops = sum(train.values()) + sum(evaluate.values())
    mfu = flops / ((train_s + eval_s) * peak * 1e12) if flops else mfu  # the MFU these seconds amount to
    return {**row, "train_s": train_s, "eval_s": eval_s, "mfu": mfu, "note": "; ".join(notes)}, keys


def plan_frame(
    suites: list[Suite], variant: str, target: Target, lengths_for: Lengths | None = None
) -> tuple[pd.DataFrame, dict]:
    """Return the plan's rows (one per point, in sweep order) and each point's graph keys."""
    lengths_for = lengths_for or graphs.data_token_lengths
    rows, keys, seen = [], {}, set()
    for suite in suites:
        for point in expand(suite, variant):
            row, keys[point.run_name] = estimate(suite, point, target, lengths_for)
            # one compile cache: a point pays only for the graphs no earlier point compiled
            new = [k for k in dict.fromkeys(keys[point.run_name]) if k not in seen]
            if not math.isnan(row["per_graph_s"]):
                seen.update(new)
            row["new"] = math.nan if math.isnan(row["per_graph_s"]) else len(new)
            row["compile_s"] = row["new"] * row["per_graph_s"]
            modelled_s = row["compile_s"] + row["train_s"] + row["eval_s"]
            row["usd"] = modelled_s / 3600 * target.price_per_hour_usd
            mark = timeout_mark(modelled_s, row["compile_s"], timeout_of(suite, variant))
            row["note"] = "; ".join(filter(None, [mark, row["note"]]))
            rows.append(row)
    columns = ["suite", "point", "graphs", "new", "compile_s", "train_s", "eval_s", "mfu", "usd", "note"]
    return pd.DataFrame(rows, columns=columns), keys


def timeout_mark(modelled_s: float, compile_s: float, limit_s: float) -> str:
    """Return the mark of a point modelled past its timeout ('' within it or not estimated)."""
    if not modelled_s > limit_s:  # NaN: not estimated
        return ""
    if modelled_s - compile_s <= limit_s:
        return (
            f"{WILL_TIME_OUT} unless precompiled: {modelled_s:,.0f} s modelled, {compile_s:,.0f} of them compiling, "
            f"against its {limit_s:,.0f} s timeout (--precompile compiles its graphs before the sweep)"
        )
    return f"{WILL_TIME_OUT}: {modelled_s:,.0f} s modelled against its {limit_s:,.0f} s timeout"


def totals(frame: pd.DataFrame, keys: dict) -> pd.DataFrame:
    """Return the plan's totals per suite and for the whole study (sums of the estimated points)."""

    def one(rows: pd.DataFrame, name: str) -> dict:
        hours = {f"{what} h": rows[f"{what}_s"].sum(min_count=1) / 3600 for what in ("compile", "train", "eval")}
        distinct = len({k for p in rows["point"] for k in keys[p]})
        return {
            "suite": name,
            "points": len(rows),
            "distinct graphs": distinct,
            "new graphs": rows["new"].sum(min_count=1),
            **hours,
            "usd": rows["usd"].sum(min_count=1),
            "not estimated": int(rows["usd"].isna().sum()),
            "will time out": int(rows["note"].str.contains(WILL_TIME_OUT).sum()),
        }

    out = [one(rows, name) for name, rows in frame.groupby("suite", sort=False)]
    return pd.DataFrame(out + [one(frame, "whole study")])


def render(frame: pd.DataFrame, keys: dict, target: Target, command: str) -> str:
    """Return the plan as text: assumptions, one table per suite, then the totals."""
    sources = sorted({assumed_mfu(target.device, int(L))[1] for L in (16, 128)})
    lines = [
        f"Plan of `{command}` on {target.instance} ({target.name}): a model, nothing was run.",
        "- graphs: one per training shape and one per evaluation shape and settings (helpers/study/"
        "sweep/graphs.py; dynamic padding: one per padded length met, from the data in the loader's "
        "order); `new`: not compiled by an earlier point (one compile cache): only those are charged",
        f"- compile: {COMPILE_SOURCE}"
        if target.name == "trainium"
        else "- compile: none; eager CUDA compiles no graphs "
        "(torch.compile's, where a suite sets it, is not estimated)",
        "- train / eval: model FLOPs (helpers/calc/flops.py) / (assumed MFU x datasheet peak of the "
        "matmul dtype, helpers/facts/device_peaks.csv); MFU: " + "; ".join(sources),
        f"- price: {target.price_note}",
        "",
    ]
    for name, rows in frame.groupby("suite", sort=False):
        lines += [f"## {name} ({len(rows)} points)", _table(rows.drop(columns="suite"), POINT_FORMATS), ""]
    lines += [
        "## Totals (estimates; n/a: not estimated, see the rows' notes)",
        _table(totals(frame, keys), TOTAL_FORMATS),
    ]
    return "\n".join(lines)


def _table(frame: pd.DataFrame, formats: dict[str, str]) -> str:
    """Return `frame` as a Markdown table, the columns in `formats` formatted and right-aligned (n/a: NaN)."""
    shown = frame.copy()
    for col, f in formats.items():
        shown[col] = ["n/a" if pd.isna(v) else format(v, f) for v in frame[col]]
    align = ["right" if col in formats else "left" for col in shown.columns]
    return shown.to_markdown(index=False, disable_numparse=True, colalign=align)


def plan_text(
    suites: list[Suite], variant: str, target_name: str, instance: str | None, command: str, gpus: int | None = None
) -> str:
    """Return the rendered plan of `suites`' `variant` on the target, its instance or `gpus` of it."""
    target = target_of(target_name, instance, gpus)
    frame, keys = plan_frame(suites, variant, target)
    return render(frame, keys, target, command)
