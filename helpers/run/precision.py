"""Precision modes: fp32, bf16/fp16 autocast over fp32 master weights, and pure bf16 with or without
stochastic rounding of the weight update.

| mode          | weights | matmuls | optimizer states | update rounding           |
|---------------|---------|---------|------------------|---------------------------|
| fp32          | fp32    | fp32    | fp32             | -                         |
| bf16 / fp16   | fp32    | 16-bit  | fp32             | - (fp16 adds grad scaling) |
| bf16-pure     | bf16    | bf16    | bf16             | round to nearest even     |
| bf16-pure-sr  | bf16    | bf16    | bf16             | stochastic (torchao; Neuron runtime on trn1) |
"""

from __future__ import annotations

import contextlib

import torch

AUTOCAST_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


def autocast(precision: str, device_type: str):
    """Return the autocast context for a forward pass in `precision` (a no-op for fp32 and pure modes)."""
    if precision not in AUTOCAST_DTYPES:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device_type, dtype=AUTOCAST_DTYPES[precision])


def prepare_model(model: torch.nn.Module, precision: str) -> torch.nn.Module:
    """Cast the weights for pure-bf16 modes; autocast modes keep fp32 master weights."""
    if precision.startswith("bf16-pure"):
        return model.to(torch.bfloat16)
    return model


def grad_scaler(precision: str, device_type: str) -> torch.amp.GradScaler:
    """Return a GradScaler enabled for fp16 (which underflows without one); disabled, its calls pass through."""
    return torch.amp.GradScaler(device_type, enabled=precision == "fp16")


def sr_adamw(param_groups: list[dict], lr: float) -> torch.optim.Optimizer:
    """Return torchao's AdamW that rounds the bf16 weight update stochastically."""
    from torchao.optim import _AdamW

    return _AdamW(param_groups, lr=lr, bf16_stochastic_round=True)


# XLA_USE_BF16=1 makes every float tensor bf16 on the device (fp64 too): there is no fp32 left to hold the
# optimizer in, so the mode is labelled as what it is rather than called AdamW
XLA_USE_BF16 = (
    "XLA_USE_BF16=1: every float tensor is bf16 on the device (weights, gradients, optimizer "
    "state) and not AdamW: beta2 = 0.999 and the decay factor 1 - lr * wd round to 1.0 in bf16, "
    "and a bf16 state cannot hold a 0.1% change, so the second moment never decays and weight "
    "decay does nothing"
)


def mechanism(precision: str, device_type: str, neuron: bool = False, bf16_mode: str = "autocast") -> str:
    """Return a short description of how `precision` is realised on this device, for the record."""
    if device_type == "xla" and bf16_mode == "xla_use_bf16":
        return XLA_USE_BF16
    adamw = "optim.XlaAdamW (update in fp32, written back in bf16)" if device_type == "xla" else "torch AdamW"
    if precision == "bf16-pure-sr":
        if device_type == "xla":
            return (
                f"Neuron runtime stochastic rounding (NEURON_RT_STOCHASTIC_ROUNDING_EN=1), {adamw}"
                if neuron
                else f"none on XLA's CPU backend: {adamw}, round-to-nearest-even (the "
                "Neuron runtime's rounding exists only on NeuronCores)"
            )
        return "torchao.optim._AdamW(bf16_stochastic_round=True)"
    if precision == "bf16-pure":
        return f"model.to(bfloat16), {adamw}, round-to-nearest-even"
    if precision in AUTOCAST_DTYPES:
        return f"torch.autocast({device_type}, {AUTOCAST_DTYPES[precision]}) over fp32 weights"
    return "fp32"
