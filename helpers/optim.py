"""AdamW over layer-wise LR decay (LLRD) groups, the linear warm-up schedule, and the compiled update.

groups = optim.llrd_groups(model, args)       # head at lr, layer i at lr*d^(N-i), embeddings at lr*d^(N+1)
opt = optim.adamw(model, args, "cuda", "bf16")   # fused / foreach / torchao's stochastic rounding
opt = optim.XlaAdamW(groups, lr=args.lr)      # XLA: no fused kernels, no host scalars baked into graphs
"""

from __future__ import annotations

import math
import re

import torch

LAYER = re.compile(r"\.encoder\.layer\.(\d+)\.|\.transformer\.layer\.(\d+)\.")


def depth(name: str, layers: int) -> int:
    """Return how many decay steps below the head a parameter sits: head 0, layer i N-i, embeddings N+1."""
    if match := LAYER.search("." + name):
        return layers - int(match.group(1) or match.group(2))
    return layers + 1 if ".embeddings." in "." + name else 0  # pooler, classifier: the full rate


def llrd_groups(model: torch.nn.Module, args, rate_on_device: bool = False) -> list[dict]:
    """Return AdamW groups by depth (one flat rate without llrd_decay); biases and norms without weight decay."""
    from transformers import Trainer  # its decay rule reads nothing of a Trainer

    decayed = set(Trainer.get_decay_parameter_names(None, model))
    layers, d = model.config.num_hidden_layers, args.llrd_decay
    groups: dict[tuple[int, bool], dict] = {}
    for name, param in model.named_parameters():
        if param.requires_grad:
            key = (depth(name, layers) if d else 0, name not in decayed)
            rate = args.lr * (d ** key[0] if d else 1.0)
            group = groups.setdefault(
                key, {"params": [], "lr": rate, "weight_decay": 0.0 if key[1] else args.weight_decay}
            )
            group["params"].append(param)
    where = next(model.parameters()).device
    out = [groups[k] for k in sorted(groups)]
    for g in out if rate_on_device else []:
        # a compiled update reads each rate from a device tensor the schedule fills in place: no recompile, no host read
        g["lr"] = torch.tensor(g["lr"], device=where)
    return out


def adamw(model: torch.nn.Module, args, device_type: str, precision: str) -> torch.optim.Optimizer:
    """Return AdamW for CUDA or the CPU: fused or foreach as asked, torchao's stochastic rounding for bf16-pure-sr."""
    compiled = getattr(args, "step_mode", "eager") != "eager"
    groups = llrd_groups(model, args, rate_on_device=compiled)
    if precision == "bf16-pure-sr":
        from torchao.optim import _AdamW

        return _AdamW(groups, lr=args.lr, bf16_stochastic_round=True)
    if compiled:  # torch.compile fuses the foreach update itself; a rate tensor needs capturable
        return torch.optim.AdamW(groups, lr=torch.tensor(args.lr), foreach=True, capturable=True)
    fused = args.optim == "adamw_torch_fused" and device_type in ("cuda", "cpu")
    return torch.optim.AdamW(
        groups, lr=args.lr, fused=fused or None, foreach=args.optim == "adamw_torch_foreach" or None
    )


def total_steps(args, batches_per_epoch: int) -> int:
    """Return the optimizer steps a run makes: whole steps of each epoch, capped by max_steps."""
    return min(args.max_steps or math.inf, batches_per_epoch // args.gradient_accumulation_steps * args.epochs)


def schedule(opt: torch.optim.Optimizer, steps: int, warmup_ratio: float):
    """Return the linear warm-up (rounded up, as Trainer rounds it) then linear decay to zero over `steps`."""
    from transformers import get_linear_schedule_with_warmup

    return get_linear_schedule_with_warmup(opt, math.ceil(steps * warmup_ratio), steps)


def steps_taken(opt: torch.optim.Optimizer) -> int:
    """Return the updates AdamW applied (GradScaler skips an update whose gradients overflowed)."""
    if hasattr(opt, "steps_done"):
        return opt.steps_done
    state = next((s for s in opt.state.values() if "step" in s), None)
    return int(state["step"]) if state else 0


def compiled_step(model: torch.nn.Module, opt: torch.optim.Optimizer, max_grad_norm: float | None, step_mode: str):
    """Return (the model with its forward and backward compiled, the clip + AdamW update compiled) for a step mode."""
    mode = "reduce-overhead" if step_mode == "cudagraphs" else None  # reduce-overhead: CUDA graphs
    config = getattr(model, "config", None)
    if config is not None and config.problem_type is None:  # else set by the first forward: a recompile
        config.problem_type = "single_label_classification"
    params, step = [p for p in model.parameters() if p.requires_grad], type(opt).step

    def update() -> None:
        if max_grad_norm:
            torch.nn.utils.clip_grad_norm_(params, max_grad_norm)
        step(opt)  # the class's step: the schedule's counter around the instance's is not traced

    compiled = torch.compile(update, mode=mode, dynamic=False)

    def counted() -> None:
        compiled()
        opt._opt_called = True  # what the schedule's wrapper would note: the update ran

    return torch.compile(model, mode=mode, dynamic=False), counted


class XlaAdamW(torch.optim.Optimizer):
    """AdamW (torch's update, decoupled weight decay) built for XLA graphs.

    torch_xla bakes a Python scalar that rounds to 0 or 1 into the graph as a constant, so torch's AdamW compiles a
    new step graph at the warm-up's lr 0 and again once 1 - lr * wd rounds to 1.0; under XLA_USE_BF16 beta2 = 0.999
    is 1.0 and the bias correction divides by zero. Here the step count lives on the host, each group's step size,
    bias correction and decay reach the device as one small tensor per step (data, never a constant), the moments
    exist before the first step (step 0 runs the steady graph), and the update runs in fp32, written back as stored.
    """

    def __init__(self, params, lr: float, betas=(0.9, 0.999), eps: float = 1e-8, weight_decay: float = 0.01):
        super().__init__(params, {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay})
        self.steps_done = 0
        for group in self.param_groups:
            for p in group["params"]:  # built on the host and copied: data, not ops inside the first step's graph
                self.state[p] = {k: torch.zeros(p.shape, dtype=p.dtype).to(p.device) for k in ("exp_avg", "exp_avg_sq")}

    @torch.no_grad()
    def step(self, closure=None):
        """Apply one AdamW update to every parameter that has a gradient."""
        self.steps_done += 1
        t = self.steps_done
        for group in self.param_groups:
            params = [p for p in group["params"] if p.grad is not None]
            if not params:
                continue
            beta1, beta2 = group["betas"]
            host = [group["lr"] / (1 - beta1**t), math.sqrt(1 - beta2**t), 1 - group["lr"] * group["weight_decay"]]
            size, root, decay = torch.tensor(host, dtype=torch.float32).to(params[0].device).unbind()
            for p in params:
                state, grad = self.state[p], p.grad.float()
                exp_avg = state["exp_avg"].float().mul(beta1).add(grad, alpha=1 - beta1)
                exp_avg_sq = state["exp_avg_sq"].float().mul(beta2).addcmul(grad, grad, value=1 - beta2)
                p.copy_(p.float() * decay - size * exp_avg / (exp_avg_sq.sqrt() / root + group["eps"]))
                state["exp_avg"].copy_(exp_avg)
                state["exp_avg_sq"].copy_(exp_avg_sq)
