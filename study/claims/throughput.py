"""The study's claims about throughput, padding and utilization across device classes."""

from __future__ import annotations

import pandas as pd

from study.claims.verdict import ONE_RUN, PROXY, SPREAD, Evidence, Finding, cells, device, listing, versus, who
from study.notation import fmt
from study.published import published


def batch_scaling(df: pd.DataFrame, published_dir: str) -> Finding:
    """Return whether samples/s at the largest batch exceed those at the smallest (the study's 12 -> 24 TFLOP/s)."""
    pub = published("roofline.csv", published_dir)
    lo, hi = pub.iloc[0], pub.iloc[-1]
    text = (
        f"trn1, batch {lo['batch']} → {hi['batch']}: {lo['achieved_tflops']} → {hi['achieved_tflops']} TFLOP/s "
        f"({float(hi['achieved_tflops']) / float(lo['achieved_tflops']):.1f}x), "
        f"{lo['arithmetic_intensity_flop_per_byte']} → {hi['arithmetic_intensity_flop_per_byte']} FLOP/byte "
        f"(profiled bytes); {ONE_RUN}"
    )
    rule = (
        "at fixed shapes samples/s is TFLOP/s over a constant, so the study's TFLOP/s rise is a samples/s rise. "
        f"Per device, samples/s at the largest batch against the smallest, with {SPREAD}: holds if above on every "
        "device judged; does not hold if below on any; inconclusive otherwise. " + PROXY
    )
    evidence = Evidence()
    for g in (g for g in cells(df, ("batch_scaling",), timed=True) if g["batch"].nunique() >= 2):
        small, large = g[g["batch"] == g["batch"].min()], g[g["batch"] == g["batch"].max()]
        a, b, sign = versus(large, small, "samples_per_s")
        evidence.add(
            g,
            sign,
            f"{device(g)}: {a.mid / b.mid:.2f}x the samples/s",
            f"{who(g)}: samples/s {b} at batch {fmt(small['batch'].iloc[0])} → {a} at batch "
            f"{fmt(large['batch'].iloc[0])} ({a.mid / b.mid:.2f}x)",
        )
    return evidence.finding(
        "A larger batch trains more samples per second",
        text,
        rule,
        listing(cells(df, ("batch_scaling",))),
        "needs batch_scaling runs at ≥ 2 batches on one device",
    )


def seq_len(df: pd.DataFrame, published_dir: str) -> Finding:
    """Return whether L=32 trains more samples per second than L=128 at one batch (the study's conclusion)."""
    pub = published("seq_len_profile.csv", published_dir).set_index("max_length").astype(float)
    t32, t128 = pub.at["32", "step_time_ms"], pub.at["128", "step_time_ms"]
    flops = pub.at["128", "mfu_pct"] * t128 / (pub.at["32", "mfu_pct"] * t32)  # MFU x time is FLOPs over a peak
    text = (
        f"trn1: step {t32:g} ms at L=32 vs {t128:g} ms at L=128: L=32 {t128 / t32:.2f}x the samples/s; {ONE_RUN}. "
        f"Its figures and its text part ways on the mechanism: its MFU and step times give L=128 {flops:.2f}x the "
        f"FLOPs (the study: 4x) in {t128 / t32:.2f}x the time, so time grew slower than FLOPs: no 'spilling cliff' "
        "shows in the step times"
    )
    rule = (
        f"at one batch, per device: samples/s at L=32 against L=128, with {SPREAD}: holds if above on every "
        "device judged; does not hold if below on any; inconclusive otherwise. The spilling the study gives as the "
        "cause is a trn1 internal (HBM spill traffic from the Neuron profiler) and is not tested. " + PROXY
    )
    evidence = Evidence()
    for g in cells(df, ("seq_len", "profile_memory"), timed=True):
        short, long = g[g["max_length"] == 32], g[g["max_length"] == 128]
        if len(short) and len(long):
            a, b, sign = versus(short, long, "samples_per_s")
            evidence.add(
                g,
                sign,
                f"{device(g)}, {g['suite'].iloc[0]}: {a.mid / b.mid:.2f}x the samples/s",
                f"{who(g)}: samples/s {a} at L=32 vs {b} at L=128 ({a.mid / b.mid:.2f}x)",
            )
    return evidence.finding(
        "L=32 maximizes end-to-end throughput (against L=128)",
        text,
        rule,
        "no records",
        "needs seq_len or profile_memory runs at L=32 and L=128 on one device",
    )


def padding(df: pd.DataFrame, published_dir: str) -> Finding:
    """Return whether dynamic padding compiles more graphs and trains slower than static padding on XLA."""
    rule = (
        "on each XLA device, per dynamic case against static padding: does not hold if it compiled no more graphs "
        f"(a count); else its train time, with {SPREAD}: holds if longer on every case judged; does not hold if "
        "shorter on any; inconclusive otherwise. GPU and CPU records cannot stand in. " + PROXY
    )
    evidence = Evidence()
    for g in cells(df, ("padding",), ("trn1", "trn2", "inf2", "xla-cpu"), timed=True):
        static, dynamic = g[g["padding"] == "static"], g[g["padding"] == "dynamic"]
        for multiple, dyn in dynamic.groupby(dynamic["pad_to_multiple_of"].fillna(0)) if len(static) else ():
            b, a, slower = versus(dyn, static, "train_s")
            more = dyn["compilations"].min() > static["compilations"].max()
            evidence.add(
                g,
                slower if more else -1,
                f"{device(g)}: {b.mid / a.mid:.2f}x static's train time",
                f"{who(g)}: static {fmt(static['compilations'].max())} compilation(s), train {a} s; dynamic"
                f"{f' (pad to {int(multiple)})' if multiple else ''} {fmt(dyn['compilations'].min())} "
                f"compilation(s), train {b} s",
            )
    return evidence.finding(
        "Dynamic padding recompiles and static padding wins on XLA",
        "the study gives no figure beside the 77+ hours (§3.1)",
        rule,
        listing(cells(df, ("padding",))),
        "needs static and dynamic padding runs on an XLA device (torch-xla; trn1 for the study's magnitude); a GPU "
        "or the CPU does not compile per shape",
    )


def small_batch_util(df: pd.DataFrame, published_dir: str) -> Finding:
    """Return whether a GPU's tensor units stay busier than a NeuronCore's at batches up to 16."""
    pub = published("small_batch_util.csv", published_dir)
    pub = pub[pub["batch"].astype(int) <= 16]
    text = (
        f"batch {pub['batch'].iloc[0]}–{pub['batch'].iloc[-1]}: A100 SM utilization "
        f"{pub['a100_sm_util_pct'].iloc[0]}–{pub['a100_sm_util_pct'].iloc[-1]}% vs trn1 tensor engine "
        f"{pub['trn_tensor_engine_util_pct'].iloc[0]}–{pub['trn_tensor_engine_util_pct'].iloc[-1]}%; {ONE_RUN}, "
        "and it set SM utilization against the tensor engine's, unlike figures"
    )
    rule = (
        "like for like only (ours: the study set A100 SM utilization against trn1 tensor engine utilization): a "
        "GPU's tensor-pipe activity (NVML GPM ANY_TENSOR_UTIL, Hopper and later) against a NeuronCore's tensor "
        "engine active % (the Neuron profiler), both the share of time the matrix units worked. For each such GPU "
        f"and NeuronCore with small_batch runs of one variant, at every batch ≤ 16 both measured, with {SPREAD}: "
        "holds if the GPU's is higher at every batch judged; does not hold if lower at any; inconclusive otherwise. "
        "SM activity, NVML utilization.gpu and neuron-monitor's busy % are other figures: with only those, not "
        "testable. A CPU or XLA on the CPU cannot stand in."
    )
    found = cells(df, ("small_batch",), ("gpu", "trn1"))
    like = [g for g in found if g["util_like_study"].fillna(False).astype(bool).all()]
    evidence = Evidence()
    for gpu in (g for g in like if g["cls"].iloc[0] == "gpu"):
        for core in (c for c in like if c["cls"].iloc[0] == "trn1" and c["variant"].iloc[0] == gpu["variant"].iloc[0]):
            for b in [b for b in sorted(set(gpu["batch"]) & set(core["batch"])) if b <= 16]:
                x, y, sign = versus(gpu[gpu["batch"] == b], core[core["batch"] == b], "util_pct")
                evidence.add(
                    pd.concat([gpu, core]),
                    sign,
                    f"batch {fmt(b)}: {device(gpu)} {x.mid:.1f}% vs {device(core)} {y.mid:.1f}%",
                    f"{who(gpu)} vs {who(core)}, batch {fmt(b)}: {x}% vs {y}%",
                )
    other = sorted({g["util_metric"].iloc[0] for g in found if not any(g is h for h in like)})
    return evidence.finding(
        "GPUs keep higher utilization at small batch",
        text,
        rule,
        listing(found),
        "needs a trn1 record and a GPU's: small_batch runs at batches ≤ 16 with tensor-unit figures on both sides: "
        "tensor-pipe activity (NVML GPM on a Hopper GPU) and tensor engine active % (neuron-profile on a trn1)"
        + (f"; the records here measure {', '.join(other)}, not those" if other else ""),
    )
