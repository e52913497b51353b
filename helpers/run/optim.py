"""Optimizer parameter groups (flat or layer-wise LR decay), the AdamW builder and the LR schedule."""
from __future__ import annotations

import re

import torch
from transformers import get_linear_schedule_with_warmup

NO_DECAY = ("bias", "LayerNorm.weight", "LayerNorm.bias", "layer_norm.weight", "layer_norm.bias")
_LAYER = re.compile(r"\.encoder\.layer\.(\d+)\.")


def _depth(name: str, num_layers: int) -> int:
    """Return how many decay steps below the head a parameter sits: head 0, layer i N-i, embeddings N+1."""
    match = _LAYER.search("." + name)
    if match:
        return num_layers - int(match.group(1))
    if ".embeddings." in "." + name:
        return num_layers + 1
    return 0  # pooler, classifier: the task head trains at the full rate


def llrd_param_groups(model: torch.nn.Module, lr: float, decay: float | None,
                      weight_decay: float) -> list[dict]:
    """Return AdamW groups: head at lr, layer i at lr*decay**(N-i), embeddings at lr*decay**(N+1)."""
    num_layers = model.config.num_hidden_layers
    groups: dict[tuple[int, bool], dict] = {}
    for name, param in model.named_parameters():
        if not param.requires_grad:
            continue
        depth = _depth(name, num_layers) if decay is not None else 0
        no_decay = any(name.endswith(nd) for nd in NO_DECAY)
        key = (depth, no_decay)
        if key not in groups:
            groups[key] = {"params": [], "names": [],
                           "lr": lr * (decay ** depth if decay is not None else 1.0),
                           "weight_decay": 0.0 if no_decay else weight_decay}
        groups[key]["params"].append(param)
        groups[key]["names"].append(name)
    return [groups[k] for k in sorted(groups)]


def build_optimizer(model: torch.nn.Module, lr: float, llrd_decay: float | None, weight_decay: float,
                    optim: str = "adamw_torch", device_type: str = "cpu",
                    precision: str = "fp32") -> torch.optim.Optimizer:
    """Return AdamW over the LLRD groups; `precision='bf16-pure-sr'` rounds the update stochastically:
    torchao's AdamW on CPU/CUDA, plain AdamW on XLA (the Neuron runtime rounds, NEURON_RT_STOCHASTIC_ROUNDING_EN)."""
    groups = llrd_param_groups(model, lr, llrd_decay, weight_decay)
    for g in groups:
        g.pop("names")
    if device_type == "xla":
        # fused/foreach AdamW fails on XLA (NEURON.md); bf16-pure-sr: the Neuron runtime rounds
        return xla_adamw(groups, lr)
    if precision == "bf16-pure-sr":
        from helpers.run.precision import sr_adamw

        return sr_adamw(groups, lr)  # its step is inductor-compiled: it cannot run on XLA tensors
    kwargs: dict = {}
    if optim == "adamw_torch_fused" and device_type in ("cuda", "cpu"):
        kwargs["fused"] = True
    elif optim == "adamw_torch_foreach":
        kwargs["foreach"] = True
    return torch.optim.AdamW(groups, lr=lr, **kwargs)


def xla_adamw(groups: list[dict], lr: float) -> torch.optim.Optimizer:
    """Return torch_xla's AdamW (torch_xla.amp.syncfree), the same update as torch's (decoupled decay).

    torch.optim.AdamW (per-tensor loop) hands each step's lr-dependent values to the graph as Python
    scalars, and torch_xla bakes a scalar that rounds to 0 or 1 in fp32 into the graph as a constant:
    `param.mul_(1 - lr * weight_decay)` is 1.0 once lr * wd < 2**-25 (lr < 3e-6 at wd 0.01, the last
    ~15% of a linear decay from 2e-5), and that step compiles a new graph (once per LLRD group).
    torch_xla's AdamW is one update op per parameter that keeps the step count and bias corrections on
    the device and gets lr as an input: the step graph stays the same for every lr > 0. Measured on
    MiniLM (XLA-CPU, O2): same compile time, steady step 0.73 s vs 0.91 s; weights after 10 steps equal
    torch's CPU AdamW to 4e-8.
    """
    import torch_xla.amp.syncfree as syncfree

    class XlaAdamW(syncfree.AdamW):
        def step(self, closure=None, found_inf: torch.Tensor | None = None):
            if found_inf is None:  # no GradScaler on XLA: never skip (a constant 0 in the graph)
                found_inf = torch.zeros((), device=self.param_groups[0]["params"][0].device)
            return super().step(closure, found_inf=found_inf)

    return XlaAdamW(groups, lr=lr)


def build_scheduler(optimizer: torch.optim.Optimizer, total_steps: int,
                    warmup_ratio: float) -> torch.optim.lr_scheduler.LambdaLR:
    """Return the linear warm-up then linear decay-to-zero schedule over `total_steps`."""
    return get_linear_schedule_with_warmup(optimizer, int(warmup_ratio * total_steps), total_steps)
