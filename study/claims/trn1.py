"""The study's claims about trn1's internals (neuronx-cc flags, the 77-hour dynamic-padding run, the
profiler's DMA and AllReduce figures, gradient checkpointing, host memory): they wait for a trn1 record and
are never proxied; without one the verdict is "not testable here" and the reason starts "needs a trn1 record".
"""

from __future__ import annotations

import pandas as pd

from helpers.study.claims.verdict import (
    Evidence,
    Finding,
    band,
    cells,
    claim,
    device,
    listing,
    ratio,
    who,
)
from helpers.study.frame import profiled
from helpers.study.notation import fmt
from helpers.study.published import published

HOST_GIB = 32  # trn1.2xlarge host memory (helpers/facts/device_peaks.csv, key "host")
TRIED_BATCH = 64  # the batch above 48 the study tried (batch_scaling's grid: 8, 16, 32, 48, 64)
NEEDS = "needs a trn1 record"  # how every reason here starts when no NeuronCore record is in the frame
NO_FIGURE_GC = "no figure: the study's attempts failed (§3.4; §5.4: also through optimum-neuron)"
HOURS_77 = (
    'more than 77 hours (§3.1 "77+ hours", §5.3 ">77-hour running time": a lower bound) against '
    "minutes of static-padding training"
)


@claim
def padding_77h(df: pd.DataFrame, published_dir: str) -> Finding:
    """Return whether a full dynamic-padding run on trn1 takes an order of magnitude longer than static."""
    rule = (
        "holds if a full-variant (bert-base, whole data) dynamic-padding run without rounding on a NeuronCore "
        "took ≥ 10x its static run's train time (77 h is hundreds of times the study's minutes-long static "
        "runs); does not hold below 10x; not testable without that pair (a magnitude: no proxy)."
    )
    g = df[
        (df["suite"] == "padding")
        & (df["cls"] == "trn1")
        & (df["variant"] == "full")
        & ~df["proxy"]
        & (df["status"] == "finished")
        & ~profiled(df)
    ]
    static, dyn = g[g["padding"] == "static"], g[(g["padding"] == "dynamic") & g["pad_to_multiple_of"].isna()]
    if static.empty or dyn.empty:
        return Finding(
            "A dynamic-padding run took more than 77 h on trn1",
            HOURS_77,
            listing(cells(df, ("padding",))),
            "not testable here",
            rule,
            f"{NEEDS}: full static and dynamic padding runs of bert-base on a NeuronCore",
            "none",
        )
    times = ratio(band(dyn, "train_s"), band(static, "train_s"))
    verdict = "holds" if times.mid >= 10 else "does not hold"
    return Finding(
        "A dynamic-padding run took more than 77 h on trn1",
        HOURS_77,
        f"{who(pd.concat([static, dyn]))}: dynamic {fmt(dyn['train_s'].median() / 3600)} h vs static "
        f"{fmt(static['train_s'].median() / 3600)} h ({times.mid:.1f}x)",
        verdict,
        rule,
        f"dynamic took {times.mid:.1f}x the static train time (threshold 10x)",
        headline=f"dynamic {fmt(dyn['train_s'].median() / 3600)} h, {times.mid:.1f}x static",
    )


@claim
def optlevel(df: pd.DataFrame, published_dir: str) -> Finding:
    """Return whether neuronx-cc --optlevel 2 and 3 train faster than --optlevel 1."""
    pub = published("compiler_flags.csv", published_dir)
    pub = pub[pub["distribution_strategy"] == "llm-training"]
    text = (
        "trn1, transformer + llm-training, one run each: "
        + ", ".join(f"optlevel {r.optlevel} {r.train_time_s} s" for r in pub.itertuples())
        + " (published)"
    )
    rule = (
        "on each NeuronCore and flag combination with optlevel 1: holds if optlevel 2 and 3 train "
        "faster than 1 beyond their spread (the range between interleaved runs, ≥ 3 each; else the "
        "steps' relative p10–p90, and the drift between suites); does not hold if either is slower "
        "beyond it; inconclusive otherwise. Needs neuronx-cc: XLA on the CPU ignores the flag (no "
        "proxy)."
    )
    evidence = Evidence(df, cells(df, ("compiler_flags",), ("trn1",), prefer_real=False, timed=True))
    for g in evidence.groups:
        for (model_type, strategy), combo in g.groupby(["model_type", "distribution_strategy"]):
            if not (combo["optlevel"] == 1).any():
                continue
            one, shown = band(combo[combo["optlevel"] == 1], "train_s"), []
            for level in (2, 3):
                other = combo[combo["optlevel"] == level]
                if len(other):
                    b = band(other, "train_s")
                    evidence.signs.append(evidence.compare(g, combo[combo["optlevel"] == 1], other, one, b))
                    shown.append(f"{level} {b} s")
                    evidence.heads.append(f"{device(g)}: optlevel 1 {one.mid:.0f} s vs {level} {b.mid:.0f} s")
            evidence.parts.append(f"{who(g)}, {model_type} + {strategy}: optlevel 1 {one} s vs " + ", ".join(shown))
    return evidence.finding(
        "--optlevel 2/3 train faster than --optlevel 1",
        text,
        listing(cells(df, ("compiler_flags",))),
        rule,
        evidence.unresolved(f"train times within {fmt(max(evidence.resolvable, default=0))}% are not resolved"),
        f"{NEEDS}: compiler_flags runs on a NeuronCore (neuronx-cc) at optlevel 1 and 2 or 3",
        tested=bool(evidence.signs),
    )


@claim
def dma_bound(df: pd.DataFrame, published_dir: str) -> Finding:
    """Return whether a NeuronCore's profile at a small batch is dominated by data movement."""
    pub = published("roofline.csv", published_dir).iloc[0]
    text = (
        f"trn1 baseline profile: DMA active > 80%, tensor engine active ~18–25% (§3.2); "
        f"{pub['tensor_engine_active_pct']}% at batch {pub['batch']} (§5.1)"
    )
    rule = (
        "holds if on every NeuronCore with a profile at batch ≤ 16, the data-movement share of step time "
        "exceeds the matmul share at its smallest profiled batch; does not hold if the matmul share is larger "
        "on any. Needs the Neuron profiler's engine/DMA split (neuron-monitor has none; XLA on the CPU has no "
        "DMA engines): no proxy."
    )
    evidence = Evidence(df)
    for g in cells(df, tuple(df["suite"].dropna().unique()), ("trn1",), prefer_real=False):
        g = g[(g["batch"] <= 16) & g["share_copy_data_movement"].notna() & g["share_matmul"].notna()]
        if len(g):
            r = g[g["batch"] == g["batch"].min()]
            copy, matmul = r["share_copy_data_movement"].median(), r["share_matmul"].median()
            evidence.signs.append(1 if copy > matmul else -1)
            evidence.groups.append(g)
            evidence.parts.append(
                f"{who(g)}: at batch {fmt(r['batch'].iloc[0])} data movement {fmt(copy)}% vs matmul "
                f"{fmt(matmul)}% of step time"
            )
    return evidence.finding(
        "trn1 is DMA/memory-bound at small batch",
        text,
        "no trn1 profile",
        rule,
        "",
        f"{NEEDS}: a Neuron profiler (neuron-profile) trace of a trn1 run at batch ≤ 16",
        tested=bool(evidence.signs),
        headline=evidence.parts[0].split(": ", 1)[-1] if evidence.parts else "",
    )


@claim
def allreduce(df: pd.DataFrame, published_dir: str) -> Finding:
    """Return the AllReduce figure's standing: no record field carries a collective's bandwidth."""
    pub = published("seq_len_profile.csv", published_dir)
    text = "trn1, 2 NeuronCores: " + ", ".join(f"{r.allreduce_gbps} GB/s at L={r.max_length}" for r in pub.itertuples())
    rule = (
        "not testable without the Neuron profiler's collective (AllReduce) bandwidth of a 2-core trn1 run; "
        "a scaling record's samples/s does not measure it."
    )
    found = cells(df, ("scaling",), ("trn1",), prefer_real=False)
    return Finding(
        "AllReduce bandwidth rises 50% from L=128 to L=32",
        text,
        listing(found),
        "not testable here",
        rule,
        "needs AllReduce GB/s of a 2-core trn1 run, a field no record holds yet: the effective bandwidth "
        "from neuron-profile's collectives at L=32 and at L=128; a scaling record's samples/s does not measure it",
        "none",
    )


@claim
def gradient_checkpointing(df: pd.DataFrame, published_dir: str) -> Finding:
    """Return whether gradient checkpointing fails on a NeuronCore."""
    rule = (
        "holds if every trn1 run with gradient_checkpointing=True failed; does not hold if any finished. "
        "A GPU or the CPU runs it fine and cannot stand in."
    )
    runs = df[(df["gradient_checkpointing"] == True) & (df["cls"] == "trn1")]  # noqa: E712 - object column
    if runs.empty:
        elsewhere = df[df["gradient_checkpointing"] == True]  # noqa: E712
        return Finding(
            "Gradient checkpointing fails on Trainium",
            NO_FIGURE_GC,
            "trn1: none; elsewhere: " + listing([g for _, g in elsewhere.groupby("device_key")]),
            "not testable here",
            rule,
            f"{NEEDS}: a trn1 run with gradient_checkpointing=True (it "
            "runs like any other; a failure is recorded with its own error)",
            "none",
        )
    finished = (runs["status"] == "finished").sum()
    return Finding(
        "Gradient checkpointing fails on Trainium",
        NO_FIGURE_GC,
        f"{who(runs)}: statuses " + ", ".join(f"{k} {v}" for k, v in runs["status"].value_counts().items()),
        "does not hold" if finished else "holds",
        rule,
        f"{finished} of {len(runs)} runs finished",
        headline=f"{finished} of {len(runs)} trn1 runs finished",
    )


@claim
def host_memory(df: pd.DataFrame, published_dir: str) -> Finding:
    """Return whether trn1.2xlarge runs of bert-base above batch 48 ran out of memory (the estimate beside)."""
    from transformers import BertConfig

    from helpers.calc.memory import GIB, estimate_train_memory, largest_batch_that_fits

    rule = (
        "on trn1.2xlarge records of bert-base at batch > 48: holds if any ran out of memory (status "
        "oom); a run that finished decides nothing, for the study's own batch 64 finished too, on 90 GB of "
        "swap, and no record field holds the swap a run used: it would not hold on a run that finished "
        "without swapping, once a record holds that figure; not testable until then (host memory is a trn1 "
        "internal: no proxy). The estimate (helpers/calc/memory.py: bert-base, L=128, fp32 training "
        f"state on a {HOST_GIB} GiB host) is a model and decides nothing: what the compiler holds on the "
        "host is not in it."
    )
    runs = df[(df["cls"] == "trn1") & (df["instance"] == "trn1.2xlarge") & (df["batch"] > 48) & ~df["proxy"]]
    cfg = BertConfig(num_labels=6)
    fits = largest_batch_that_fits(cfg, HOST_GIB, 128, "fp32", device_type="cpu")
    at_tried = estimate_train_memory(cfg, TRIED_BATCH, 128, "fp32", device_type="cpu")["total"] / GIB
    estimate = (
        f"model, decides nothing: batch {TRIED_BATCH} holds {at_tried:.1f} GiB of training state; "
        f"the largest batch that fits {HOST_GIB} GiB is {fits}"
    )
    text = "batch 64 ran only with 90 GB of swap (§3.3, §5.2.2)"
    finished, oom = runs[runs["status"] == "finished"], runs[runs["status"] == "oom"]
    if not len(oom):
        why = (
            f"{len(finished)} finished at batch > 48, which decides nothing without the swap they used (no "
            "record field holds it)"
            if len(finished)
            else "needs a trn1.2xlarge run at batch > 48 out of memory, or one with its swap use recorded: bert-base "
            "on a trn1.2xlarge at batch > 48"
        )
        return Finding(
            "Batch sizes above 48 cause OOM on trn1.2xlarge",
            text,
            (f"{listing([runs])}; " if len(runs) else "") + estimate,
            "not testable here",
            rule,
            why + "; a run out of memory there would make it hold, and one that finished without swapping "
            "(a record of the host's swap used, a field no record holds yet) would make it not hold",
            "none",
        )
    measured = (
        f"{who(runs)}: "
        + ", ".join(
            f"batch {fmt(r.batch)} {r.status}" + (f" (host peak {fmt(r.mem_gib)} GiB)" if pd.notna(r.mem_gib) else "")
            for r in runs.itertuples()
        )
        + f"; {estimate}"
    )
    return Finding(
        "Batch sizes above 48 cause OOM on trn1.2xlarge",
        text,
        measured,
        "holds",
        rule,
        f"measured: {len(oom)} out of memory at batch > 48 ({len(finished)} finished: swap not recorded)",
        headline=f"{len(oom)} of {len(runs)} runs at batch > 48 out of memory",
    )
