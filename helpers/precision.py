"""Precision: what `auto` resolves to on a device, why, and the autocast context a forward pass runs in.

| mode          | weights | matmuls | optimizer states | update rounding                               |
|---------------|---------|---------|------------------|-----------------------------------------------|
| fp32          | fp32    | fp32    | fp32             | -                                             |
| bf16 / fp16   | fp32    | 16-bit  | fp32             | - (fp16 adds GradScaler)                      |
| bf16-pure     | bf16    | bf16    | bf16             | round to nearest even                         |
| bf16-pure-sr  | bf16    | bf16    | bf16             | stochastic (torchao; the Neuron runtime on trn1) |
"""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass

import torch

from helpers import devices, record

AUTOCAST = {"bf16": torch.bfloat16, "fp16": torch.float16}
# bf16 autocast against fp32 on CPUs with bf16 units, measured paired (the retired probe's records): 1.51x on a
# Xeon with AMX, 1.51x-2.00x on EPYCs with avx512_bf16 (BENCHMARKS.md, README.md); emulated elsewhere (~20x slower)
CPU_RULE = "bf16 autocast on a CPU with AMX or AVX512-BF16 (1.51x-2.00x fp32 on every such CPU measured), else fp32"


@dataclass(frozen=True)
class Choice:
    """The precision a run uses, the dtype its matmuls run in, and why."""

    requested: str
    used: str
    compute_dtype: str  # bf16 | fp16 | fp32: the peak MFU is taken against
    mechanism: str
    auto_reason: str | None = None

    def section(self) -> record.Precision:
        """Return the record's `precision` section."""
        return record.Precision(**self.__dict__)


def choose(requested: str, dev: devices.Device, bf16_mode: str = "autocast", cc_flags: str = "") -> Choice:
    """Return the precision for `requested` on `dev` (`auto`: bf16 where the device has bf16 units, else fp16 on a
    GPU and fp32 elsewhere); on XLA, bf16_mode xla_use_bf16 / fp32 keep torch in fp32."""
    reason = None
    if dev.type == "xla" and bf16_mode != "autocast":
        used = "fp32"
    elif requested == "auto":
        used = "bf16" if dev.bf16_fast else "fp16" if dev.type == "cuda" else "fp32"
        reason = (
            CPU_RULE if dev.type == "cpu" else f"{used}: {dev.name} " + ("has" if dev.bf16_fast else "lacks") + " bf16"
        )
    else:
        used = requested
    bf16 = (
        used.startswith("bf16") or bf16_mode == "xla_use_bf16" or re.search(r"--auto-cast[= ](matmult|all)", cc_flags)
    )
    dtype = "bf16" if bf16 else "fp16" if used == "fp16" else "fp32"
    return Choice(requested, used, dtype, mechanism(used, dev, bf16_mode), reason)


def mechanism(precision: str, dev: devices.Device, bf16_mode: str = "autocast") -> str:
    """Return how `precision` is realised on this device, in words, for the record."""
    if dev.type == "xla" and bf16_mode == "xla_use_bf16":
        return "XLA_USE_BF16=1: every float tensor bf16 (weights, gradients, optimizer state): not AdamW"
    if precision in AUTOCAST:
        return f"torch.autocast({dev.type}, {AUTOCAST[precision]}) over fp32 weights"
    if precision == "bf16-pure-sr":
        if dev.type != "xla":
            return "torchao.optim._AdamW(bf16_stochastic_round=True)"
        return "Neuron runtime stochastic rounding" if dev.neuron else "none on XLA's CPU backend: round to nearest"
    return "model.to(bfloat16), round to nearest even" if precision == "bf16-pure" else "fp32"


def autocast(precision: str, device_type: str):
    """Return the autocast context of a forward pass in `precision` (none for fp32 and the pure modes)."""
    if precision not in AUTOCAST:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device_type, dtype=AUTOCAST[precision])
