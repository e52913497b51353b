"""Hand-made schema-6 records of the suites the claims read (each validated by helpers.record.validate), and
the frame a claim judges them on: shared by the claims' tests."""

from __future__ import annotations

import itertools

from helpers import record
from study.claims.verdict import Finding, prepare
from study.frame import frame

PUB = "Experiment/published"
MODEL = {"quick": "minilm", "full": "bert-base-uncased"}
DEVICES = {
    "a100": {"type": "cuda", "name": "NVIDIA A100-SXM4-40GB", "instance": "p4d.24xlarge"},
    "t4": {"type": "cuda", "name": "Tesla T4", "instance": "g4dn.xlarge"},
    "l4": {"type": "cuda", "name": "NVIDIA L4", "instance": "g6.xlarge"},
    "h200": {"type": "cuda", "name": "NVIDIA H200"},
    "trn1": {"type": "xla", "name": "AWS Trainium (trn1.2xlarge)", "neuron": True, "instance": "trn1.2xlarge"},
    "cpu": {"type": "cpu", "name": "Intel(R) Xeon(R) Processor @ 2.80GHz"},
    "xla-cpu": {"type": "xla", "name": "XLA CPU (Intel(R) Xeon(R) Processor @ 2.80GHz)"},
}
# a figure's name here -> its place in the record
FIGURES = {
    "samples_per_s": ("timing", "samples_per_s"),
    "train_s": ("timing", "train_time_s"),
    "test_acc": ("metrics", "test_accuracy"),
    "val_acc": ("metrics", "val_accuracy"),
    "compilations": ("xla", "graph_compilations"),
    "gpu_tensor_pct": ("utilization", "tensor_active_pct_mean"),
    "gpu_sm_pct": ("utilization", "sm_active_pct_mean"),
    "core_busy_pct": ("utilization", "neuroncore_util_pct_mean"),
    "host_mem_gib": ("utilization", "host_mem_used_gib_p90"),
    "te_pct": ("neuron_profile", "tensor_engine_active_pct"),
    "dma_pct": ("neuron_profile", "dma_active_pct"),
    "optimizer": ("optimizer", "class"),
    "matmul_share": ("profile", "class_share"),
}
CLOCK = itertools.count()  # runs finish in the order they are made


def rec(
    device: str, suite: str, params: dict, variant: str = "full", rep: int = 1, status: str = "finished", **figures
) -> dict:
    """Return a valid record of one run (repeat `rep` of its suite point) of `variant` on `device`."""
    params = {"model_name": MODEL[variant], **params}
    point = ",".join(f"{k}={v}" for k, v in params.items() if k != "model_name")
    dev = {**DEVICES[device], "key": record.slug(f"{device}-{DEVICES[device]['name']}")}
    data = {
        "schema_version": 6,
        "run_name": f"{suite}-{variant}-{point}" + (f"-rep{rep}" if rep > 1 else ""),
        "suite": suite,
        "status": status,
        "fixture": True,
        "finished_at": f"2026-01-01T00:00:{next(CLOCK) % 60:02d}+00:00",
        "params": params,
        "device": dev,
        "data": {"majority_share": {"test": 0.35}},
        "metrics": {"test_rows": 2000},
    }
    for name, value in figures.items():
        if name == "allreduce_s":
            data["distributed"] = {"world_size": 2, "allreduce": {"comm_s": value}}
            continue
        section, field = FIGURES[name]
        value = {"matmul": value, "copy_data_movement": 1 - value} if name == "matmul_share" else value
        data.setdefault(section, {})[field] = value
    valid, why = record.validate(data)
    assert why is None, why
    return valid


def arm(device: str, suite: str, params: dict, values: list[float], metric: str, variant: str = "full", **kw):
    """Return one run per value, repeats 1, 2, ... of one suite point (interleaved, as a suite's repeats run)."""
    return [rec(device, suite, params, variant, rep, **{metric: v}, **kw) for rep, v in enumerate(values, 1)]


def seeds(device: str, suite: str, params: dict, accs: list[float], variant: str = "full", **kw) -> list[dict]:
    """Return one run per seed (1, 2, ...) of one cell with these test accuracies."""
    return [
        rec(device, suite, {**params, "seed": s}, variant, test_acc=a, val_acc=a, **kw) for s, a in enumerate(accs, 1)
    ]


def judge(claim, recs: list[dict]) -> Finding:
    """Return a claim's finding on the frame of these records."""
    return claim(prepare(frame(recs)), PUB)


def check(found: Finding, verdict: str, *named: str) -> None:
    """Assert the verdict, and that the measured text names each of `named`."""
    assert found.verdict == verdict, (found.verdict, found.reason, found.measured)
    for word in named:
        assert word in found.measured, (word, found.measured)
