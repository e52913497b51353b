"""The study's claims about trn1's internals (neuronx-cc flags, the 77-hour dynamic-padding run, the profiler's
DMA and AllReduce figures, gradient checkpointing, host memory): they wait for a trn1 record and are never
proxied; without one the verdict is "not testable here" and the reason starts "needs a trn1 record".
"""

from __future__ import annotations

import pandas as pd

from study.claims.verdict import (
    ONE_RUN,
    SPREAD,
    Evidence,
    Finding,
    cells,
    device,
    interleaved,
    listing,
    profiled,
    versus,
    who,
)
from study.frame import estimate, ratio
from study.notation import fmt
from study.published import published

HOST_GIB = 32  # trn1.2xlarge host memory (the study's "32 GB RAM", §3.3)
ROOM = 0.9  # a host whose memory in use stayed under 90% of its RAM did not need swap
NEEDS = "needs a trn1 record"  # how every reason here starts when no NeuronCore record is in the frame
HOURS_77 = (
    'more than 77 hours (§3.1 "77+ hours", §5.3 ">77-hour running time": a lower bound) against minutes of '
    f"static-padding training; {ONE_RUN}"
)


def trn1_rows(df: pd.DataFrame, suite: str | None = None) -> pd.DataFrame:
    """Return the finished bert-base rows on a trn1 NeuronCore (of `suite`, if named)."""
    rows = df[(df["cls"] == "trn1") & ~df["proxy"] & (df["status"] == "finished")]
    return rows[rows["suite"] == suite] if suite else rows


def padding_77h(df: pd.DataFrame, published_dir: str) -> Finding:
    """Return whether a full dynamic-padding run on trn1 takes an order of magnitude longer than static."""
    rule = (
        "a full-variant dynamic-padding run without rounding on a NeuronCore against its static runs, train time, "
        f"with {SPREAD}: holds if the ratio's whole range is ≥ 10x (77 h is hundreds of times the study's minutes-"
        "long static runs); does not hold if wholly below 10x; inconclusive otherwise (a magnitude: no proxy)."
    )
    g = trn1_rows(df, "padding")
    g = g[(g["variant"] == "full") & ~profiled(g)]
    static, dyn = g[g["padding"] == "static"], g[(g["padding"] == "dynamic") & g["pad_to_multiple_of"].isna()]
    evidence = Evidence()
    if len(static) and len(dyn):
        times = ratio(estimate(dyn, "train_s"), estimate(static, "train_s"))
        sign = (1 if times.lo >= 10 else (-1 if times.hi < 10 else 0)) if interleaved(dyn, static) else None
        evidence.add(
            g,
            sign,
            f"dynamic {fmt(dyn['train_s'].median() / 3600)} h, {times.mid:.1f}x static",
            f"{who(g)}: dynamic {fmt(dyn['train_s'].median() / 3600)} h vs static "
            f"{fmt(static['train_s'].median() / 3600)} h ({times}x)",
        )
    return evidence.finding(
        "A dynamic-padding run took more than 77 h on trn1",
        HOURS_77,
        rule,
        listing(cells(df, ("padding",))),
        f"{NEEDS}: full static and dynamic padding runs of bert-base on a NeuronCore",
    )


def optlevel(df: pd.DataFrame, published_dir: str) -> Finding:
    """Return whether neuronx-cc --optlevel 2 and 3 train faster than --optlevel 1."""
    pub = published("compiler_flags.csv", published_dir)
    pub = pub[pub["distribution_strategy"] == "llm-training"]
    text = (
        "trn1, transformer + llm-training, one run each: "
        + ", ".join(f"optlevel {r.optlevel} {r.train_time_s} s" for r in pub.itertuples())
        + f"; {ONE_RUN}"
    )
    rule = (
        "on each NeuronCore and flag combination with optlevel 1: the train time of optlevel 2 and 3 against 1, "
        f"with {SPREAD}: holds if both are faster; does not hold if either is slower; inconclusive otherwise. "
        "Needs neuronx-cc: XLA on the CPU ignores the flag (no proxy)."
    )
    evidence = Evidence()
    for g in cells(df, ("compiler_flags",), ("trn1",), timed=True):
        for (model_type, strategy), combo in g.groupby(["model_type", "distribution_strategy"], dropna=False):
            one = combo[combo["optlevel"] == 1]
            for level, other in combo[combo["optlevel"].isin([2, 3])].groupby("optlevel") if len(one) else ():
                a, b, sign = versus(one, other, "train_s")
                evidence.add(
                    g,
                    sign,
                    f"{device(g)}: optlevel 1 {a.mid:.0f} s vs {level:g} {b.mid:.0f} s",
                    f"{who(g)}, {model_type} + {strategy}: optlevel 1 {a} s vs {level:g} {b} s",
                )
    return evidence.finding(
        "--optlevel 2/3 train faster than --optlevel 1",
        text,
        rule,
        listing(cells(df, ("compiler_flags",))),
        f"{NEEDS}: compiler_flags runs on a NeuronCore (neuronx-cc) at optlevel 1 and 2 or 3",
    )


def dma_bound(df: pd.DataFrame, published_dir: str) -> Finding:
    """Return whether a NeuronCore's profile at a small batch shows its DMA engines busier than its tensor engine."""
    pub = published("roofline.csv", published_dir).iloc[0]
    text = (
        f"trn1 baseline profile: DMA active > 80%, tensor engine active ~18–25% (§3.2); "
        f"{pub['tensor_engine_active_pct']}% at batch {pub['batch']} (§5.1)"
    )
    rule = (
        "on each NeuronCore with a Neuron profile (neuron_profile: DMA active %, tensor engine active %) at batch "
        "≤ 16, at its smallest such batch, the median over its runs: holds if DMA is active longer than the tensor "
        "engine on every NeuronCore; does not hold if shorter on any. Both shares come from one profile of the "
        "same steps: no arms to interleave. neuron-monitor has no DMA figure; XLA on the CPU has no DMA engines: "
        "no proxy."
    )
    evidence = Evidence()
    rows = trn1_rows(df)
    rows = rows[(rows["batch"] <= 16) & rows["dma_pct"].notna() & rows["util_like_study"].fillna(False).astype(bool)]
    for _, g in rows.groupby(["device_key", "variant"]):
        r = g[g["batch"] == g["batch"].min()]
        dma, te = r["dma_pct"].median(), r["util_pct"].median()
        said = f"at batch {fmt(r['batch'].iloc[0])} DMA active {fmt(dma)}% vs tensor engine {fmt(te)}%"
        evidence.add(g, 1 if dma > te else -1, f"{device(g)}: {said}", f"{who(r)}: {said}")
    return evidence.finding(
        "trn1 is DMA/memory-bound at small batch",
        text,
        rule,
        "no trn1 profile",
        f"{NEEDS}: a Neuron profiler (neuron-profile) summary of a trn1 run at batch ≤ 16",
    )


def allreduce(df: pd.DataFrame, published_dir: str) -> Finding:
    """Return whether the gradient all-reduce of 2-core trn1 runs is faster at L=32 than at L=128."""
    pub = published("seq_len_profile.csv", published_dir)
    text = "trn1, 2 NeuronCores: " + ", ".join(f"{r.allreduce_gbps} GB/s at L={r.max_length}" for r in pub.itertuples())
    text += f"; {ONE_RUN}"
    rule = (
        "on each trn1 with 2-core runs at L=32 and L=128 that recorded their all-reduce time per step "
        "(distributed.allreduce.comm_s): the gradients are the same bytes at both lengths, so the effective "
        "bandwidth's ratio L=32 / L=128 is the time's L=128 / L=32. With "
        f"{SPREAD}: holds if the all-reduce is faster at L=32; does not hold if slower; inconclusive otherwise."
    )
    evidence = Evidence()
    rows = trn1_rows(df)
    rows = rows[(rows["num_devices"] == 2) & rows["allreduce_s"].notna()]
    for _, g in rows.groupby(["device_key", "variant", "suite"]):
        long, short = g[g["max_length"] == 128], g[g["max_length"] == 32]
        if len(long) and len(short):
            a, b, sign = versus(long, short, "allreduce_s")
            evidence.add(
                g,
                sign,
                f"{device(g)}: {ratio(a, b).mid:.2f}x the bandwidth at L=32",
                f"{who(g)}: all-reduce {fmt(1000 * b.mid)} ms a step at L=32 vs {fmt(1000 * a.mid)} ms at L=128: "
                f"{ratio(a, b)}x the bandwidth at L=32",
            )
    return evidence.finding(
        "AllReduce bandwidth rises 50% from L=128 to L=32",
        text,
        rule,
        listing(cells(df, ("scaling",), ("trn1",))),
        f"{NEEDS}: 2-core trn1 runs at L=32 and L=128 with their all-reduce time (distributed.allreduce)",
    )


def gradient_checkpointing(df: pd.DataFrame, published_dir: str) -> Finding:
    """Return whether gradient checkpointing fails on a NeuronCore."""
    rule = (
        "holds if every trn1 run with gradient_checkpointing=True failed; does not hold if any finished. A GPU or "
        "the CPU runs it fine and cannot stand in."
    )
    runs = df[(df["gradient_checkpointing"] == True) & (df["cls"] == "trn1")]  # noqa: E712 - object column
    evidence = Evidence()
    if len(runs):
        finished = int((runs["status"] == "finished").sum())
        statuses = ", ".join(f"{k} {v}" for k, v in runs["status"].value_counts().items())
        evidence.add(
            runs, -1 if finished else 1, f"{finished} of {len(runs)} trn1 runs finished", f"{who(runs)}: {statuses}"
        )
    elsewhere = df[df["gradient_checkpointing"] == True]  # noqa: E712
    return evidence.finding(
        "Gradient checkpointing fails on Trainium",
        "no figure: the study's attempts failed (§3.4; §5.4: also through optimum-neuron)",
        rule,
        "trn1: none; elsewhere: " + listing([g for _, g in elsewhere.groupby("device_key")]),
        f"{NEEDS}: a trn1 run with gradient_checkpointing=True (it runs like any other; a failure is recorded with "
        "its own error)",
    )


def host_memory(df: pd.DataFrame, published_dir: str) -> Finding:
    """Return whether trn1.2xlarge runs of bert-base above batch 48 ran out of host memory."""
    rule = (
        "on trn1.2xlarge records of bert-base at batch > 48: holds if any ran out of memory (status oom); does not "
        f"hold if none did and one finished with the host's memory in use under {ROOM:.0%} of its {HOST_GIB} GiB "
        "(neuron-monitor's host memory used, p90 over the steady windows): it trained without swap (the compile "
        "before those windows is not covered). A run that finished without that figure decides nothing: the "
        "study's own batch 64 finished too, on 90 GB of swap. Host memory is a trn1 internal: no proxy."
    )
    runs = df[(df["cls"] == "trn1") & (df["instance"] == "trn1.2xlarge") & (df["batch"] > 48) & ~df["proxy"]]
    oom, fit = runs[runs["status"] == "oom"], runs[runs["status"] == "finished"]
    fit = fit[fit["host_mem_gib"] < ROOM * HOST_GIB]
    evidence = Evidence()
    if len(oom) or len(fit):
        evidence.add(
            runs,
            1 if len(oom) else -1,
            f"{len(oom)} of {len(runs)} runs at batch > 48 out of memory, {len(fit)} fit",
            f"{who(runs)}: "
            + ", ".join(
                f"batch {fmt(r.batch)} {r.status} (host memory {fmt(r.host_mem_gib)} GiB)" for r in runs.itertuples()
            ),
        )
    return evidence.finding(
        "Batch sizes above 48 cause OOM on trn1.2xlarge",
        "batch 64 ran only with 90 GB of swap (§3.3, §5.2.2)",
        rule,
        listing([runs]) if len(runs) else "no records",
        f"{NEEDS}: bert-base on a trn1.2xlarge at batch > 48 out of memory, or finished with the host's memory in use "
        "recorded",
    )
