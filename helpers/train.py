"""The training step and evaluation loop, shared by both notebooks and the scripts.

The whole step is `fit`'s inner loop: move the batch, forward under the precision's autocast,
backward, (on XLA) all-reduce the gradients across replicas (`xm.reduce_gradients`, the first half
of `xm.optimizer_step`), clip, optimizer step, schedule, and (on XLA) cut the graph. The loss stays
on the device and is read every `log_every` steps, which is also when a NaN/inf loss stops the run.
"""
from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field

import torch
from tqdm.auto import tqdm

from helpers import precision as prec
from helpers.device import DeviceInfo, synchronize
from helpers.timing import StepTimer


class Diverged(RuntimeError):
    """The training loss became NaN or infinite."""


@dataclass
class FitResult:
    """What a training run measured."""

    status: str  # "finished" | "diverged"
    timer: StepTimer
    steps: int
    final_loss: float | None
    loss_curve: list[tuple[int, float]] = field(default_factory=list)
    shapes: Counter = field(default_factory=Counter)  # (batch, seq_len) -> micro-batches, all steps
    steady_shapes: Counter = field(default_factory=Counter)  # the same over steady-state steps only
    diverged_at_step: int | None = None


def _xla_reduce_gradients(optimizer: torch.optim.Optimizer) -> None:
    import torch_xla.core.xla_model as xm

    # xm.optimizer_step = reduce_gradients + step; split so clipping sees the replica-mean gradient
    xm.reduce_gradients(optimizer)  # all-reduces (mean) across replicas; a no-op with one


def fit(model: torch.nn.Module, train_loader, optimizer: torch.optim.Optimizer, scheduler,
        dev: DeviceInfo, precision: str, epochs: int, *, max_steps: int | None = None,
        grad_accum: int = 1, max_grad_norm: float | None = 1.0, log_every: int = 50,
        timing_warmup_steps: int = 3, progress: bool = True, monitor=None, profiler=None,
        sampler=None) -> FitResult:
    """Train `model` for `epochs` (or `max_steps` optimizer steps); return timings, loss and shapes."""
    xla = dev.type == "xla"
    scaler = prec.grad_scaler(precision, dev.type)
    timer = StepTimer(lambda: synchronize(dev), timing_warmup_steps)
    steps_per_epoch = len(train_loader) // grad_accum
    total = min(max_steps or math.inf, steps_per_epoch * epochs)
    bar = tqdm(total=total, desc="train", unit="step", disable=not progress)
    result = FitResult("finished", timer, 0, None)
    loss_sum, loss_n = torch.zeros((), device=dev.torch_device), 0
    samples = tokens = micro = 0
    model.train()
    for epoch in range(epochs):
        if sampler is not None and hasattr(sampler, "set_epoch"):
            sampler.set_epoch(epoch)  # distributed: a new disjoint shard order each epoch
        for batch in train_loader:
            if micro == 0:
                timer.start()
            batch = {k: v.to(dev.torch_device, non_blocking=True) for k, v in batch.items()}
            with prec.autocast(precision, dev.type):
                loss = model(**batch).loss / grad_accum
            (scaler.scale(loss) if scaler else loss).backward()
            shape = tuple(batch["input_ids"].shape)
            result.shapes[shape] += 1
            if not timer.in_warmup:
                result.steady_shapes[shape] += 1
            samples += shape[0]
            tokens += int(shape[0] * shape[1])
            loss_sum += loss.detach().float()
            micro += 1
            if micro < grad_accum:
                continue
            if scaler:
                scaler.unscale_(optimizer)
            if xla:
                _xla_reduce_gradients(optimizer)
            if max_grad_norm:
                torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
            if scaler:
                scaler.step(optimizer)
                scaler.update()
            else:
                optimizer.step()
            scheduler.step()
            optimizer.zero_grad(set_to_none=True)
            if xla:
                import torch_xla

                torch_xla.sync()  # cut the graph here: one compiled graph per step shape
            timer.stop(samples, tokens)
            samples = tokens = micro = 0
            loss_n += 1
            result.steps += 1
            bar.update(1)
            if timer.steps == timing_warmup_steps and monitor is not None:
                monitor.mark_steady()
            if profiler is not None:
                profiler.step()
            if result.steps % log_every == 0 or result.steps == total:
                if not _log(result, loss_sum, loss_n, bar):
                    break
                loss_sum, loss_n = torch.zeros((), device=dev.torch_device), 0
            if result.steps >= total:
                break
        if result.status != "finished" or result.steps >= total:
            break
    if loss_n and result.status == "finished":
        _log(result, loss_sum, loss_n, bar)
    bar.close()
    return result


def _log(result: FitResult, loss_sum: torch.Tensor, loss_n: int, bar) -> bool:
    """Read the mean loss of the last window (one host sync); mark divergence; return True to go on."""
    value = float(loss_sum) / loss_n
    result.loss_curve.append((result.steps, value))
    result.final_loss = value
    bar.set_postfix(loss=f"{value:.4f}")
    if not math.isfinite(value):
        result.status, result.diverged_at_step = "diverged", result.steps
        return False
    return True


@torch.no_grad()
def evaluate(model: torch.nn.Module, loader, dev: DeviceInfo, precision: str,
             num_labels: int = 6, progress: bool = False, reduce=None) -> dict:
    """Return accuracy, macro-F1 and mean loss of `model` on `loader`; `reduce` sums tensors across ranks."""
    model.eval()
    confusion = torch.zeros(num_labels, num_labels, dtype=torch.long, device=dev.torch_device)
    loss_sum = torch.zeros((), device=dev.torch_device)
    batches = 0
    for batch in tqdm(loader, desc="eval", unit="batch", disable=not progress):
        batch = {k: v.to(dev.torch_device, non_blocking=True) for k, v in batch.items()}
        with prec.autocast(precision, dev.type):
            out = model(**batch)
        pred = out.logits.argmax(-1)
        # confusion[true, pred] += 1, as one index_add so nothing leaves the device per batch
        confusion.view(-1).index_add_(0, batch["labels"] * num_labels + pred,
                                      torch.ones_like(pred, dtype=torch.long))
        loss_sum += out.loss.detach().float()
        batches += 1
    model.train()
    if reduce is not None:
        confusion, loss_sum = reduce(confusion), reduce(loss_sum)
        batches = int(reduce(torch.tensor(batches, device=dev.torch_device)))  # the mean is over all ranks
    return {**metrics_from_confusion(confusion.cpu()), "loss": float(loss_sum) / max(batches, 1)}


def metrics_from_confusion(confusion: torch.Tensor) -> dict:
    """Return accuracy and macro-F1 from a confusion matrix indexed [true, predicted]."""
    cm = confusion.double()
    total = cm.sum()
    tp = cm.diag()
    precision = tp / cm.sum(0).clamp(min=1)
    recall = tp / cm.sum(1).clamp(min=1)
    f1 = torch.where(precision + recall > 0, 2 * precision * recall / (precision + recall),
                     torch.zeros_like(tp))
    return {"accuracy": float(tp.sum() / total) if total else float("nan"),
            "macro_f1": float(f1.mean()), "rows": int(total)}
