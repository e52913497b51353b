"""The study's claims about throughput, padding and utilization across device classes."""

from __future__ import annotations

import pandas as pd

from helpers.study.claims.verdict import (
    PROXY,
    Evidence,
    Finding,
    band,
    cells,
    claim,
    compare,
    device,
    listing,
    who,
)
from helpers.study.notation import fmt
from helpers.study.published import published
from helpers.study.sweep.graphs import architecture


@claim
def batch_scaling(df: pd.DataFrame, published_dir: str) -> Finding:
    """Return whether samples/s at the largest batch exceed those at the smallest (the study's 12 -> 24 TFLOP/s)."""
    pub = published("roofline.csv", published_dir)
    lo, hi = pub.iloc[0], pub.iloc[-1]
    text = (
        f"trn1, batch {lo['batch']} → {hi['batch']}: {lo['achieved_tflops']} → {hi['achieved_tflops']} "
        f"TFLOP/s, {lo['arithmetic_intensity_flop_per_byte']} → "
        f"{hi['arithmetic_intensity_flop_per_byte']} FLOP/byte (profiled bytes)"
    )
    rule = (
        "at fixed shapes samples/s is TFLOP/s over a constant, so the study's TFLOP/s rise is a "
        f"samples/s rise ({float(hi['achieved_tflops']) / float(lo['achieved_tflops']):.1f}x on its "
        "figures). Holds if on every device samples/s at the largest batch exceeds the smallest batch's "
        "beyond their spread (the range between interleaved runs, ≥ 3 each; else the timing windows, "
        "and the drift between suites); does not hold if it falls beyond it on any; inconclusive "
        "otherwise. MFU is samples/s times a constant here and is not a second test. FLOP/byte: the "
        "study profiled bytes; here it is a model (calc.roofline, from shapes: it rises with batch by "
        "construction) and decides nothing. " + PROXY
    )
    groups = [g for g in cells(df, ("batch_scaling",), timed=True) if g["batch"].nunique() >= 2]
    evidence = Evidence(df, groups)
    for g in groups:
        small, large = g[g["batch"] == g["batch"].min()], g[g["batch"] == g["batch"].max()]
        a, b = band(large, "samples_per_s"), band(small, "samples_per_s")
        evidence.signs.append(evidence.compare(g, small, large, a, b))
        evidence.heads.append(f"{device(g)}: {a.mid / b.mid:.2f}x the samples/s")
        evidence.parts.append(
            f"{who(g)}: samples/s {b} at batch {fmt(small['batch'].iloc[0])} → {a} at batch "
            f"{fmt(large['batch'].iloc[0])} ({a.mid / b.mid:.2f}x); FLOP/byte "
            f"{fmt(small['ai'].median())} → "
            f"{fmt(large['ai'].median())} (model, decides nothing)"
        )
    unresolved = f"differences under {fmt(max(evidence.resolvable, default=0))}% are within the spread"
    return evidence.finding(
        "A larger batch trains more samples per second",
        text,
        listing(cells(df, ("batch_scaling",))),
        rule,
        evidence.unresolved(unresolved),
        "needs batch_scaling runs at ≥ 2 batches on one device",
    )


def flop_ratio(model_name: str, batch: float, long: int = 128, short: int = 32) -> float:
    """Return the model FLOPs of a step at L=long over L=short for the model and batch (calc.flops: a model)."""
    from helpers.calc.flops import model_flops
    from helpers.run import models

    # the architecture only; offline for bert-base-uncased and MiniLM
    cfg = models.load_config(architecture(model_name))
    b = int(batch) if batch == batch else 1  # noqa: PLR0124 - NaN batch: the ratio barely depends on it
    return model_flops(cfg, b, long) / model_flops(cfg, b, short)


@claim
def seq_len(df: pd.DataFrame, published_dir: str) -> Finding:
    """Return whether L=32 trains more samples per second than L=128 at one batch (the study's conclusion)."""
    pub = published("seq_len_profile.csv", published_dir).set_index("max_length")
    t32, t128 = float(pub.at["32", "step_time_ms"]), float(pub.at["128", "step_time_ms"])
    text = (
        f"trn1: step {pub.at['32', 'step_time_ms']} ms at L=32 vs {pub.at['128', 'step_time_ms']} ms at "
        f"L=128: L=32 {t128 / t32:.2f}x the samples/s. Its figures and its text part ways on the "
        f"mechanism: L=128 did {flop_ratio('bert-base-uncased', 8):.2f}x the FLOPs (model; the study: "
        f"4x) in {t128 / t32:.2f}x the time at the higher MFU ({pub.at['128', 'mfu_pct']}% vs "
        f"{pub.at['32', 'mfu_pct']}%), so time grew slower than FLOPs: no 'spilling cliff' shows in the "
        "step times"
    )
    rule = (
        "at one batch, per device: holds if samples/s at L=32 exceeds L=128's beyond their spread (the "
        "range between interleaved runs, ≥ 3 each; else the timing windows, and the drift between "
        "suites); does not hold if below it on any; inconclusive otherwise. The spilling the study "
        "gives as the cause is a trn1 internal (HBM spill traffic from the Neuron profiler) and is not "
        "tested; the FLOP ratio (a model) is shown beside. " + PROXY
    )
    groups = [g for g in cells(df, ("seq_len", "profile_memory"), timed=True) if {32, 128} <= set(g["max_length"])]
    evidence = Evidence(df, groups)
    for g in groups:
        long, short = g[g["max_length"] == 128], g[g["max_length"] == 32]
        a, b = band(short, "samples_per_s"), band(long, "samples_per_s")
        evidence.signs.append(evidence.compare(g, short, long, a, b))
        flops = flop_ratio(str(g["model_name"].iloc[0]), float(short["batch"].median()))
        evidence.heads.append(f"{device(g)}, {g['suite'].iloc[0]}: {a.mid / b.mid:.2f}x the samples/s")
        evidence.parts.append(
            f"{who(g)}: samples/s {a} at L=32 vs {b} at L=128 ({a.mid / b.mid:.2f}x); "
            f"{flops:.2f}x the FLOPs at L=128 (model)"
        )
    unresolved = f"differences under {fmt(max(evidence.resolvable, default=0))}% are within the spread"
    return evidence.finding(
        "L=32 maximizes end-to-end throughput (against L=128)",
        text,
        "no records",
        rule,
        evidence.unresolved(unresolved),
        "needs seq_len or profile_memory runs at L=32 and L=128 on one device",
    )


@claim
def padding(df: pd.DataFrame, published_dir: str) -> Finding:
    """Return whether dynamic padding compiles more graphs and trains slower than static padding on XLA."""
    rule = (
        "on each XLA device, per dynamic case: holds if it compiled more graphs than static padding and "
        "its train time exceeds static's beyond their spread (the range between interleaved runs, ≥ 3 "
        "each; else the steps' relative p10–p90, and the drift between suites); does not hold if it "
        "compiled no more, or trained faster beyond that spread; inconclusive otherwise. GPU and CPU "
        "records cannot stand in. " + PROXY
    )
    groups = [
        g
        for g in cells(df, ("padding",), ("trn1", "xla-cpu"), timed=True)
        if (g["padding"] == "static").any() and (g["padding"] == "dynamic").any()
    ]
    evidence = Evidence(df, groups)
    for g in groups:
        static = g[g["padding"] == "static"]
        a = band(static, "train_s")
        dynamic = g[g["padding"] == "dynamic"]
        for multiple, dyn in dynamic.groupby(dynamic["pad_to_multiple_of"].fillna(0)):
            b = band(dyn, "train_s")
            more = dyn["compilations"].min() > static["compilations"].max()
            slower = evidence.compare(g, static, dyn, b, a)
            evidence.signs.append(-1 if not more or slower < 0 else slower)
            evidence.heads.append(f"{device(g)}: {b.mid / a.mid:.2f}x static's train time")
            evidence.parts.append(
                f"{who(g)}: static {fmt(static['compilations'].max())} compilation(s), train {a} s; "
                f"dynamic{f' (pad to {int(multiple)})' if multiple else ''} "
                f"{fmt(dyn['compilations'].min())} compilation(s), train {b} s"
            )
    unresolved = f"train times within {fmt(max(evidence.resolvable, default=0))}% are not resolved"
    return evidence.finding(
        "Dynamic padding recompiles and static padding wins on XLA",
        "the study gives no figure beside the 77+ hours (§3.1)",
        listing(cells(df, ("padding",))),
        rule,
        evidence.unresolved(unresolved),
        "needs static and dynamic padding runs on an XLA device (torch-xla; trn1 for the study's "
        "magnitude); a GPU or the CPU does not compile per shape",
    )


@claim
def small_batch_util(df: pd.DataFrame, published_dir: str) -> Finding:
    """Return whether a GPU stays busier than a NeuronCore at batches up to 16."""
    pub = published("small_batch_util.csv", published_dir)
    pub = pub[pub["batch"].astype(int) <= 16]
    text = (
        f"batch {pub['batch'].iloc[0]}–{pub['batch'].iloc[-1]}: A100 SM utilization "
        f"{pub['a100_sm_util_pct'].iloc[0]}–{pub['a100_sm_util_pct'].iloc[-1]}% vs trn1 tensor engine "
        f"{pub['trn_tensor_engine_util_pct'].iloc[0]}–{pub['trn_tensor_engine_util_pct'].iloc[-1]}% (published)"
    )
    rule = (
        "like for like only (ours: the study set A100 SM utilization against trn1 tensor engine "
        "utilization): a GPU's tensor-pipe activity (NVML GPM ANY_TENSOR_UTIL, Hopper and later) "
        "against a NeuronCore's tensor engine active % (the Neuron profiler's summary attached to the "
        "record), both the share of time the matrix units worked. For each such GPU and NeuronCore pair "
        "with small_batch runs of the same variant, at every batch ≤ 16 both measured: holds if the "
        "GPU's exceeds the NeuronCore's beyond their runs' range (one run: its value, no spread); does "
        "not hold if below at any batch; inconclusive if equal within range. SM activity (SMs busy with "
        "any work), NVML utilization.gpu (a kernel ran) and neuron-monitor's busy % are other figures: "
        "with only those, not testable. A CPU or XLA on the CPU cannot stand in."
    )
    found = cells(df, ("small_batch",), ("gpu", "trn1"))
    groups = [g for g in found if g["util_like_study"].fillna(False).astype(bool).all()]
    gpus, cores = [g for g in groups if g["cls"].iloc[0] == "gpu"], [g for g in groups if g["cls"].iloc[0] == "trn1"]
    evidence = Evidence(df)
    for gpu in gpus:
        for core in [c for c in cores if c["variant"].iloc[0] == gpu["variant"].iloc[0]]:
            pairs = [
                (b, band(gpu[gpu["batch"] == b], "util_pct"), band(core[core["batch"] == b], "util_pct"))
                for b in sorted(set(gpu["batch"]) & set(core["batch"]))
                if b <= 16
            ]
            if pairs:
                evidence.signs.extend(compare(a, b) for _, a, b in pairs)
                evidence.groups.extend([gpu, core])
                evidence.heads.extend(
                    f"batch {fmt(b)}: {device(gpu)} {x.mid:.1f}% vs {device(core)} {y.mid:.1f}%" for b, x, y in pairs
                )
                evidence.parts.append(
                    f"{who(gpu)} ({gpu['util_metric'].iloc[0]}) vs {who(core)} "
                    f"({core['util_metric'].iloc[0]}): "
                    + ", ".join(f"batch {fmt(batch)} {a}% vs {b}%" for batch, a, b in pairs)
                )
    other = sorted({g["util_metric"].iloc[0] for g in found if not any(g is h for h in groups)})
    return evidence.finding(
        "GPUs keep higher utilization at small batch",
        text,
        listing(cells(df, ("small_batch",))),
        rule,
        "utilizations equal within their runs' range",
        "needs a trn1 record and a GPU's: small_batch runs at batches ≤ 16 with tensor-unit figures "
        "on both sides: tensor-pipe activity (NVML GPM on a Hopper GPU) and tensor engine active % "
        "(neuron-profile on a trn1)" + (f"; the records here measure {', '.join(other)}, not those" if other else ""),
        tested=bool(evidence.signs),
    )
