"""The training step (`fit`) and the evaluation loop, shared by both notebooks, the scripts and the benchmark."""

from __future__ import annotations

import contextlib
import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from tqdm.auto import tqdm

from helpers.run import inference, models
from helpers.run.device import DeviceInfo
from helpers.run.precision import autocast, grad_scaler


@dataclass
class FitResult:
    """What a training run did: status, optimizer steps, loss, input shapes."""

    status: str  # "finished" | "diverged" | "failed"
    steps: int = 0
    final_loss: float | None = None
    loss_curve: list[tuple[int, float]] = field(default_factory=list)
    shapes: Counter = field(default_factory=Counter)  # (batch, seq_len) -> micro-batches, all steps
    steady_shapes: Counter = field(default_factory=Counter)  # the same over steady-state steps only
    diverged_at_step: int | None = None
    skipped_steps: int = 0  # fp16: steps GradScaler skipped (inf/NaN gradients); no schedule step on them
    reason: str | None = None  # why the status is not "finished"
    stopped_early: str | None = None  # why a finished run ended before its planned steps (stop_at_accuracy)


class StopTraining(Exception):
    """Raised by a `fit` callback to end training after the current step; its text says why."""


def _xla_reduce_gradients(optimizer: torch.optim.Optimizer) -> None:
    import torch_xla.core.xla_model as xm

    # xm.optimizer_step = reduce_gradients + step; split so clipping sees the replica-mean gradient
    xm.reduce_gradients(optimizer)  # all-reduces (mean) across replicas; a no-op with one


# devices where a host read stalls the step: XLA (the step stops being one graph) and CUDA (a sync per forward)
STATIC_MASK_DEVICES = ("xla", "cuda")


def _to_device(batch: dict, model: torch.nn.Module, dev: DeviceInfo) -> dict:
    """Return the batch on the device, on XLA and CUDA with a 4D attention mask the forward never reads back."""
    batch = {k: v.to(dev.torch_device, non_blocking=True) for k, v in batch.items()}
    if dev.type in STATIC_MASK_DEVICES and "attention_mask" in batch:
        batch["attention_mask"] = models.static_attention_mask(model, batch["attention_mask"])
    return batch


def _zeros(dev: DeviceInfo, *shape: int, dtype=torch.float32) -> torch.Tensor:
    """Return a zeroed accumulator on the device (one element by default)."""
    # torch_xla turns a 0-dim 0 or 1, even torch.zeros(()).to(xla), into a constant that costs one extra graph
    # run when it is read; a one-element tensor built on the host and copied is plain data
    return torch.zeros(*(shape or (1,)), dtype=dtype).to(dev.torch_device)


def _xla_sync() -> None:
    import torch_xla

    torch_xla.sync()  # cut the graph here: one compiled graph per step (or batch) shape


def fit(
    model: torch.nn.Module,
    train_loader,
    optimizer: torch.optim.Optimizer,
    scheduler,
    dev: DeviceInfo,
    precision: str,
    epochs: int,
    *,
    timer,  # helpers.measure.timing.StepTimer
    max_steps: int | None = None,
    grad_accum: int = 1,
    max_grad_norm: float | None = 1.0,
    log_every: int = 50,
    diverge_factor: float = 10.0,
    progress: bool = True,
    log_lines: bool = False,  # without the bar: the loss once per window (papermill's log, torchrun's rank 0)
    callbacks: tuple[Callable[[int], None], ...] = (),  # each gets the steps done; may raise StopTraining
    sampler=None,
    step_mode: str = "eager",  # compile / cudagraphs: the clip + AdamW update compiled too (compiled_update)
) -> FitResult:
    """Train `model` for `epochs` (or `max_steps` optimizer steps); return its status, loss and shapes."""
    xla = dev.type == "xla"
    scaler = grad_scaler(precision, dev.type)
    update = compiled_update(model, optimizer, max_grad_norm, step_mode) if step_mode != "eager" else None
    cudagraphs = step_mode == "cudagraphs"
    total = min(max_steps or math.inf, len(train_loader) // grad_accum * epochs)
    bar = tqdm(total=total, desc="train", unit="step", disable=not progress)
    result = FitResult("finished")
    loss_sum, loss_n, first_loss = _zeros(dev), 0, None
    samples = tokens = micro = 0
    model.train()
    for epoch in range(epochs):
        if sampler is not None and hasattr(sampler, "set_epoch"):
            sampler.set_epoch(epoch)  # distributed: a new disjoint shard order each epoch
        whole = len(train_loader) // grad_accum * grad_accum  # micro-batches of the epoch's whole steps
        for index, batch in enumerate(train_loader):
            if index >= whole:  # a step never spans two epochs: on XLA the loader's end-of-epoch sync
                continue  # would cut its micro-batches into a graph of their own
            if micro == 0:
                timer.start_step()
                if cudagraphs:  # a new iteration: the graphs' outputs of the last one may be overwritten
                    torch.compiler.cudagraph_mark_step_begin()
            batch = _to_device(batch, getattr(model, "module", model), dev)
            last_micro = micro == grad_accum - 1
            # DDP all-reduces in backward: only the last micro-batch of a step needs it
            sync_ctx = contextlib.nullcontext() if last_micro or not hasattr(model, "no_sync") else model.no_sync()
            with sync_ctx:
                with autocast(precision, dev.type):
                    loss = model(**batch).loss / grad_accum
                scaler.scale(loss).backward()
            shape = tuple(batch["input_ids"].shape)
            result.shapes[shape] += 1
            if not timer.in_warmup:
                result.steady_shapes[shape] += 1
            samples += shape[0]
            tokens += int(shape[0] * shape[1])
            loss_sum += loss.detach().float()
            micro += 1
            if not last_micro:
                continue
            scaler.unscale_(optimizer)
            if xla:
                _xla_reduce_gradients(optimizer)
            skipped = False
            if update is not None:
                update()  # clip and AdamW as one compiled graph (fp16's scaler is refused with it)
            else:
                if max_grad_norm:
                    torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
                scale = scaler.get_scale()  # a host read, on fp16 only (T4): no other way to see a skip
                scaler.step(optimizer)
                scaler.update()
                skipped = scaler.get_scale() < scale  # inf/NaN gradients: GradScaler skipped the update
                result.skipped_steps += skipped
            if not skipped:
                scheduler.step()
            optimizer.zero_grad(set_to_none=True)
            if xla:
                _xla_sync()
            timer.end_step(samples, tokens)
            samples = tokens = micro = 0
            loss_n += 1
            result.steps += 1
            bar.update(1)
            if result.steps % log_every == 0 or result.steps == total:
                value = _log(result, loss_sum, loss_n, bar, log_lines)
                first_loss = value if first_loss is None else first_loss
                if not _check_loss(result, value, first_loss, diverge_factor):
                    break
                loss_sum, loss_n = _zeros(dev), 0
            try:
                for callback in callbacks:
                    callback(result.steps)
            except StopTraining as stop:
                result.stopped_early = str(stop)
            if result.steps >= total or result.stopped_early:
                break
        if result.status != "finished" or result.steps >= total or result.stopped_early:
            break
    if loss_n and result.status == "finished":
        _check_loss(result, _log(result, loss_sum, loss_n, bar, log_lines), first_loss, diverge_factor)
    timer.close_window()
    bar.close()
    if result.steps == 0 and result.status == "finished":
        result.status = "failed"
        result.reason = (
            f"no optimizer step: {len(train_loader)} batches per epoch with "
            f"gradient_accumulation_steps={grad_accum} (too few training rows for the batch)"
        )
    return result


def compiled_update(
    model: torch.nn.Module, optimizer: torch.optim.Optimizer, max_grad_norm: float | None, step_mode: str
) -> Callable[[], None]:
    """Return the step's clip + AdamW update compiled by torch.compile (rates on the device: lr_on_device)."""
    params = [p for p in model.parameters() if p.requires_grad]
    # the class's step: the schedule wraps the instance's in a counter that torch.compile does not trace
    step = type(optimizer).step

    def update() -> None:
        if max_grad_norm:
            torch.nn.utils.clip_grad_norm_(params, max_grad_norm)
        step(optimizer)

    compiled = torch.compile(update, mode=compile_mode(step_mode), dynamic=False)

    def counted() -> None:
        compiled()
        optimizer._opt_called = True  # what the wrapper notes, so the schedule knows the update ran

    return counted


def compile_model(model: torch.nn.Module, step_mode: str) -> torch.nn.Module:
    """Return `model`'s forward (and so its backward) compiled for `step_mode`, one graph per input shape."""
    config = getattr(model, "config", None)
    if config is not None and config.problem_type is None:  # set by the first forward otherwise: a recompile
        config.problem_type = "single_label_classification"
    return torch.compile(model, mode=compile_mode(step_mode), dynamic=False)


def compile_mode(step_mode: str) -> str | None:
    """Return torch.compile's mode for a step_mode: reduce-overhead (CUDA graphs) or inductor's default."""
    return "reduce-overhead" if step_mode == "cudagraphs" else None


def _log(result: FitResult, loss_sum: torch.Tensor, loss_n: int, bar, verbose: bool = False) -> float:
    """Read the mean loss of the last window (one host sync) into the curve; return it."""
    value = float(loss_sum) / loss_n  # one host read of a 1-element tensor (a .sum() would add a graph on XLA)
    result.loss_curve.append((result.steps, value))
    result.final_loss = value
    bar.set_postfix(loss=f"{value:.4f}")
    if bar.disable and verbose:  # no bar (papermill's log, scripts): one line per window instead
        print(f"train: step {result.steps}/{bar.total}, loss {value:.4f}", flush=True)
    return value


def _check_loss(result: FitResult, value: float, first: float | None, factor: float) -> bool:
    """Return True to go on; else mark the run diverged (a NaN/inf loss, or above `factor` x the first)."""
    if math.isfinite(value) and (first is None or value <= factor * first):
        return True
    result.status, result.diverged_at_step = "diverged", result.steps
    result.reason = (
        f"loss became {value} at step {result.steps}"
        if not math.isfinite(value)
        else f"loss {value:.4g} at step {result.steps} is above {factor:g} x the first window's {first:.4g}"
    )
    return False


def pad_rows(batch: dict, rows: int) -> dict:
    """Return `batch` padded to `rows` with copies of its first row labelled -100 (ignored by loss and metrics)."""
    n = batch["labels"].shape[0]
    out = {}
    for key, value in batch.items():
        filler = value[:1].expand(rows - n, *value.shape[1:])
        out[key] = torch.cat([value, torch.full_like(filler, -100) if key == "labels" else filler])
    return out


def evaluate(
    model: torch.nn.Module,
    loader,
    dev: DeviceInfo,
    precision: str,
    reduce=None,
    rows_per_batch: int | None = None,
    settings: inference.EvalSettings | None = None,
) -> dict:
    """Return accuracy, macro-F1 and mean loss of `model` on `loader`; `reduce` sums tensors across ranks."""
    # no_grad on XLA: its evaluation graphs stay the ones compiled and counted there
    with inference.applied(model, settings or inference.EvalSettings(), precision) as (eval_model, eval_precision):
        with torch.no_grad() if dev.type == "xla" else torch.inference_mode():
            return evaluate_batches(eval_model, loader, dev, eval_precision, reduce, rows_per_batch)


def evaluate_batches(
    model: torch.nn.Module, loader, dev: DeviceInfo, precision: str, reduce=None, rows_per_batch: int | None = None
) -> dict:
    """Return evaluate()'s figures under the autograd mode the caller set (the bench times no_grad)."""
    xla = dev.type == "xla"
    model.eval()
    num_labels = model.config.num_labels
    confusion = _zeros(dev, num_labels, num_labels, dtype=torch.long)
    loss_sum, rows = _zeros(dev), _zeros(dev, dtype=torch.long)
    for batch in loader:
        if xla and rows_per_batch and batch["labels"].shape[0] < rows_per_batch:  # the same few graphs for any rows
            batch = pad_rows(batch, rows_per_batch)
        batch = _to_device(batch, model, dev)
        with autocast(precision, dev.type):
            out = model(**batch)
        labels = batch["labels"]
        valid = labels >= 0
        # confusion[true, pred] += 1 for the real rows, as one index_add: nothing leaves the device
        index = labels.clamp(min=0) * num_labels + out.logits.argmax(-1)
        confusion.view(-1).index_add_(0, index, valid.long())
        n = valid.sum()
        loss_sum += out.loss.detach().float() * n  # the loss is the mean over the real rows
        rows += n
        if xla:
            _xla_sync()
    model.train()
    if reduce is not None:
        confusion, loss_sum, rows = reduce(confusion), reduce(loss_sum), reduce(rows)
    # float()/int() read a 1-element tensor as it is: a .sum() would be one more graph on XLA
    return {**metrics_from_confusion(confusion.cpu()), "loss": float(loss_sum) / max(int(rows), 1)}


def metrics_from_confusion(confusion: torch.Tensor) -> dict:
    """Return accuracy and macro-F1 from a confusion matrix indexed [true, predicted]."""
    cm = confusion.double()
    total = cm.sum()
    tp = cm.diag()
    precision = tp / cm.sum(0).clamp(min=1)
    recall = tp / cm.sum(1).clamp(min=1)
    f1 = torch.where(precision + recall > 0, 2 * precision * recall / (precision + recall), torch.zeros_like(tp))
    return {
        "accuracy": float(tp.sum() / total) if total else float("nan"),
        "macro_f1": float(f1.mean()),
        "rows": int(total),
    }
