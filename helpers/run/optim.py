"""Optimizer parameter groups (flat or layer-wise LR decay), the AdamW builder and the LR schedule."""

from __future__ import annotations

import math
import re

import torch

_LAYER = re.compile(r"\.encoder\.layer\.(\d+)\.")


def _depth(name: str, num_layers: int) -> int:
    """Return how many decay steps below the head a parameter sits: head 0, layer i N-i, embeddings N+1."""
    match = _LAYER.search("." + name)
    if match:
        return num_layers - int(match.group(1))
    if ".embeddings." in "." + name:
        return num_layers + 1
    return 0  # pooler, classifier: the task head trains at the full rate


def llrd_param_groups(model: torch.nn.Module, lr: float, decay: float | None, weight_decay: float) -> list[dict]:
    """Return AdamW groups: head at lr, layer i at lr*decay**(N-i), embeddings at lr*decay**(N+1); biases and
    normalization weights without weight decay (Trainer's rule)."""
    # imported here, as build_scheduler's transformers import; the method reads nothing of the Trainer
    from transformers import Trainer

    num_layers = model.config.num_hidden_layers
    decayed = set(Trainer.get_decay_parameter_names(None, model))
    groups: dict[tuple[int, bool], dict] = {}
    for name, param in model.named_parameters():
        if not param.requires_grad:
            continue
        depth = _depth(name, num_layers) if decay is not None else 0
        no_decay = name not in decayed
        key = (depth, no_decay)
        if key not in groups:
            groups[key] = {
                "params": [],
                "names": [],
                "lr": lr * (decay**depth if decay is not None else 1.0),
                "weight_decay": 0.0 if no_decay else weight_decay,
            }
        groups[key]["params"].append(param)
        groups[key]["names"].append(name)
    return [groups[k] for k in sorted(groups)]


def build_optimizer(
    model: torch.nn.Module,
    lr: float,
    llrd_decay: float | None,
    weight_decay: float,
    optim: str = "adamw_torch",
    device_type: str = "cpu",
    precision: str = "fp32",
    lr_on_device: bool = False,
) -> torch.optim.Optimizer:
    """Return AdamW over the LLRD groups (bf16-pure-sr: torchao's stochastic rounding off XLA)."""
    # lr_on_device: each rate a device tensor the schedule fills in place, so a compiled update (step_mode compile,
    # cudagraphs) neither recompiles nor reads the host when it changes
    groups = llrd_param_groups(model, lr, llrd_decay, weight_decay)
    where = next(model.parameters()).device
    for g in groups:
        g.pop("names")
        if lr_on_device:
            g["lr"] = torch.tensor(g["lr"], device=where)
    if device_type == "xla":
        # fused/foreach AdamW fails on XLA (NEURON.md); bf16-pure-sr: the Neuron runtime rounds
        return XlaAdamW(groups, lr=lr)
    if precision == "bf16-pure-sr":
        from helpers.run.precision import sr_adamw

        return sr_adamw(groups, lr)  # its step is inductor-compiled: it cannot run on XLA tensors
    kwargs: dict = {}
    if lr_on_device:
        # compiled: torch.compile fuses the foreach update itself (it does not trace into fused AdamW); a rate
        # tensor needs capturable (its step count on the device too), which only a compiled step allows on a CPU
        kwargs.update(foreach=True, capturable=True)
    elif optim == "adamw_torch_fused" and device_type in ("cuda", "cpu"):
        kwargs["fused"] = True
    elif optim == "adamw_torch_foreach":
        kwargs["foreach"] = True
    return torch.optim.AdamW(groups, lr=torch.tensor(lr, device=where) if lr_on_device else lr, **kwargs)


class XlaAdamW(torch.optim.Optimizer):
    """AdamW (decoupled weight decay, torch's update) built for XLA graphs.

    torch_xla bakes a Python scalar that rounds to 0 or 1 into the graph as a constant, so torch's AdamW
    compiles a new step graph at the warm-up's lr 0 and again once 1 - lr * wd rounds to 1.0; torch_xla's
    syncfree AdamW keeps its step count in found_inf's dtype (bf16 under bf16-pure: it stops at 256) and
    fails HLO verification when found_inf and the weights differ in dtype; and under XLA_USE_BF16 every
    fp32 scalar becomes bf16, so beta2 = 0.999 is 1.0 and the bias correction 1 - beta2**t is 0 (NaN).
    Here the step count lives on the host (a Python int), each group's step size, bias correction and
    decay factor reach the device as one small tensor per step (data, never a constant), the moments are
    created before the first step (so step 0 runs the steady graph) and the update is computed in fp32 and
    written back in the weights' dtype.
    """

    def __init__(
        self,
        params,
        lr: float,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.01,
    ):
        super().__init__(params, {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay})
        self.steps_done = 0  # on the host: never rounds, never a device constant
        for group in self.param_groups:
            for p in group["params"]:
                # built on the host and copied: device data, not a zeros op inside the first step's graph
                self.state[p] = {
                    "exp_avg": torch.zeros(p.shape, dtype=p.dtype).to(p.device),
                    "exp_avg_sq": torch.zeros(p.shape, dtype=p.dtype).to(p.device),
                }

    @torch.no_grad()
    def step(self, closure=None):
        """Apply one AdamW update to every parameter that has a gradient."""
        loss = closure() if closure is not None else None
        self.steps_done += 1
        t = self.steps_done
        for group in self.param_groups:
            params = [p for p in group["params"] if p.grad is not None]
            if not params:
                continue
            beta1, beta2 = group["betas"]
            # step size (lr / bias correction 1), sqrt(bias correction 2), decay factor: host fp64, sent as data
            scalars = torch.tensor(
                [group["lr"] / (1 - beta1**t), math.sqrt(1 - beta2**t), 1 - group["lr"] * group["weight_decay"]],
                dtype=torch.float32,
            )
            size, root, decay = scalars.to(params[0].device).unbind()
            for p in params:
                state, grad = self.state[p], p.grad.float()
                exp_avg = state["exp_avg"].float().mul(beta1).add(grad, alpha=1 - beta1)
                exp_avg_sq = state["exp_avg_sq"].float().mul(beta2).addcmul(grad, grad, value=1 - beta2)
                update = exp_avg / (exp_avg_sq.sqrt() / root + group["eps"])
                p.copy_(p.float() * decay - size * update)
                state["exp_avg"].copy_(exp_avg)
                state["exp_avg_sq"].copy_(exp_avg_sq)
        return loss


def build_scheduler(
    optimizer: torch.optim.Optimizer, total_steps: int, warmup_ratio: float
) -> torch.optim.lr_scheduler.LambdaLR:
    """Return the linear warm-up then linear decay-to-zero schedule over `total_steps`."""
    # imported here: transformers.optimization imports torch_xla (trainer_pt_utils), which must start after
    # neuron.apply_env has set its environment
    from transformers import get_linear_schedule_with_warmup

    # the warm-up rounded up, as Trainer rounds its ratio (TrainingArguments.get_warmup_steps): 44 of 437 steps
    return get_linear_schedule_with_warmup(optimizer, math.ceil(total_steps * warmup_ratio), total_steps)
