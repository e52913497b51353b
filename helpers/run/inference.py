"""How evaluation runs its forward passes: the weights' precision, the attention implementation and the torch
threads, set around one evaluation and put back after it."""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

import torch

from helpers.run.precision import mechanism

BF16_WEIGHTS = "bf16-pure"  # the precision a bf16 copy runs in: its weights are bf16, no autocast around it


@dataclass(frozen=True)
class EvalSettings:
    """How an evaluation runs: its weights, attention implementation and torch threads, and why."""

    # bf16: a bf16 copy of the weights, no autocast casts per forward (runs under bf16 autocast only)
    weights: Literal["as trained", "bf16"] = "as trained"
    attention: str | None = None  # 'sdpa', 'eager'; None: the model's
    threads: int | None = None  # None: as training
    reason: str = "as trained: the training weights, precision, attention and threads"


# CPU kinds (DeviceInfo.cpu_capability) where eager attention evaluates faster than SDPA, timed paired by
# `python -m bench --sections eval` (BENCHMARKS.md, bench:eval): what it measured there
EAGER_ATTENTION_CPUS = {
    "AVX512+avx512_bf16": "1.125x SDPA's rows/s (5 rounds, 1.05 .. 1.15) on a quiet Zen 5 EPYC, no prediction changed",
}


def choose(precision: str, device_type: str, cpu_capability: str = "") -> EvalSettings:
    """Return how a run evaluates: eager attention on a CPU kind where it was measured to pay, else as it trains."""
    # a bf16 copy of the weights stays a bench lever: 1.03x (1.01 .. 1.09) on the same Zen 5, one row of 2,000
    # predicted otherwise, and 0.996x on a loaded EPYC before: not worth the copy
    if device_type == "cpu" and cpu_capability in EAGER_ATTENTION_CPUS:
        return EvalSettings(attention="eager", reason=f"eager attention: {EAGER_ATTENTION_CPUS[cpu_capability]}")
    return EvalSettings()


@contextlib.contextmanager
def applied(model: torch.nn.Module, settings: EvalSettings, precision: str) -> Iterator[tuple[torch.nn.Module, str]]:
    """Yield (the model to evaluate, the precision to run it in) under `settings`, put back when the block ends."""
    if settings.weights == "bf16" and precision != "bf16":
        raise ValueError(f"bf16 evaluation weights need a run under bf16 autocast, not precision={precision!r}")
    threads = torch.get_num_threads()
    attention = model.config._attn_implementation if settings.attention else None
    try:
        if settings.threads:
            torch.set_num_threads(settings.threads)
        if attention and settings.attention != attention:
            model.set_attn_implementation(settings.attention)
        if settings.weights == "bf16":
            yield copy.deepcopy(model).to(torch.bfloat16), BF16_WEIGHTS
        else:
            yield model, precision
    finally:
        if settings.threads:
            torch.set_num_threads(threads)
        if attention and model.config._attn_implementation != attention:
            model.set_attn_implementation(attention)


def describe(
    model: torch.nn.Module, settings: EvalSettings, precision: str, device_type: str, rows_per_batch: int | None
) -> dict:
    """Return the record's `evaluation` section: how evaluation runs under `settings` and why."""
    return {
        "precision": "bf16 weights (a copy), no autocast"
        if settings.weights == "bf16"
        else mechanism(precision, device_type),
        "attention": settings.attention or model.config._attn_implementation,
        "threads": settings.threads or torch.get_num_threads(),
        "rows_per_batch": rows_per_batch,
        "reason": settings.reason,
    }
