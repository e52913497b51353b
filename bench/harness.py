"""The benchmark's harness: configurations prepared as a run prepares them, timed in rotated, paired rounds."""

from __future__ import annotations

import itertools
import math
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from helpers import steps
from helpers.calc.flops import model_flops
from helpers.measure import monitor, peaks
from helpers.measure.timing import StepTimer
from helpers.run import train
from helpers.run.args import build_args
from helpers.run.device import synchronize
from helpers.run.precision import autocast, grad_scaler


def other_cpu_cores(interval_s: float = 1.0) -> float:
    """Return how many cores processes other than this one kept busy over the next `interval_s`."""
    mark = peaks.cpu_mark()
    time.sleep(interval_s)
    return peaks.others_cores(mark)


def wait_quiet(max_cores: float, timeout_s: float) -> float:
    """Wait until other processes use < `max_cores` cores (or `timeout_s` passes); return their last use."""
    deadline = time.perf_counter() + timeout_s
    while (busy := other_cpu_cores()) >= max_cores and time.perf_counter() < deadline:
        time.sleep(4.0)
    return busy


def alternate(
    workloads: dict[str, Callable[[], dict]],
    windows: int = 5,
    warmup: int = 1,
    sync: Callable[[], None] = lambda: None,
    clock: Callable[[], float] = time.perf_counter,
    gate: Callable[[], float] | None = None,
) -> dict[str, list[dict]]:
    """Return each workload's per-window rates (count/s), one window a round, the order rotated each round."""
    names, rates = list(workloads), {name: [] for name in workloads}
    for r in range(warmup + windows):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            other = gate() if gate else None
            sync()
            t0 = clock()
            counts = workloads[name]()  # what the window did ({"samples": n, "flops": f}), maybe its own "seconds"
            sync()
            seconds = counts.pop("seconds", clock() - t0)
            if r >= warmup:
                rates[name].append(
                    {k: v / seconds for k, v in counts.items()} | {"seconds": seconds, "other_cores": other}
                )
    return rates


def median_rate(rates: dict[str, list[dict]], name: str, key: str = "samples") -> float:
    """Return the median over windows of `name`'s rate of `key` (per second)."""
    return statistics.median(w[key] for w in rates[name])


def paired_ratios(rates: dict[str, list[dict]], num: str, den: str, key: str = "samples") -> list[float]:
    """Return `num` / `den` rate per round (one round's windows ran back to back: the machine's drift cancels)."""
    return [a[key] / b[key] for a, b in zip(rates[num], rates[den])]


def paired_text(rates: dict[str, list[dict]], num: str, den: str, key: str = "samples") -> tuple[float, str]:
    """Return the median per-round ratio and a line giving it with its range and the ratio of medians."""
    per_round = paired_ratios(rates, num, den, key)
    med = statistics.median(per_round)
    return med, (
        f"{med:.3f}x (median of {len(per_round)} per-round ratios, range {min(per_round):.3f} .. "
        f"{max(per_round):.3f}; ratio of medians {ratio(rates, num, den, key):.3f}x)"
    )


def ratio(rates: dict[str, list[dict]], num: str, den: str, key: str = "samples") -> float:
    """Return median rate of `num` / median rate of `den` (>1: `num` is faster)."""
    return median_rate(rates, num, key) / median_rate(rates, den, key)


class TimedLoader:
    """A loader wrapper that records the seconds each `next()` blocks the training loop."""

    def __init__(self, loader):
        self.loader, self.wait_s = loader, []

    def __len__(self) -> int:
        return len(self.loader)

    def __iter__(self):
        it = iter(self.loader)
        while True:
            t0 = time.perf_counter()
            if (batch := next(it, None)) is None:
                return
            self.wait_s.append(time.perf_counter() - t0)
            yield batch


def bare_loop(
    model: torch.nn.Module,
    batches: list[dict],
    optimizer,
    scheduler,
    precision: str,
    device_type: str,
    max_grad_norm: float | None,
    scaler=None,
    update=None,
) -> None:
    """Train on `batches` (already on the device) with nothing but the step, as `fit` steps: the reference loop."""
    for batch in batches:
        if update is not None and device_type == "cuda":
            torch.compiler.cudagraph_mark_step_begin()
        with autocast(precision, device_type):
            loss = model(**batch).loss
        (scaler.scale(loss) if scaler else loss).backward()
        if update is not None:
            update()
            scheduler.step()
            optimizer.zero_grad(set_to_none=True)
            continue
        if scaler:
            scaler.unscale_(optimizer)
        if max_grad_norm:
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
        skipped = False
        if scaler:
            scale = scaler.get_scale()
            scaler.step(optimizer)
            scaler.update()
            skipped = scaler.get_scale() < scale
        else:
            optimizer.step()
        if not skipped:  # as fit and Trainer: the schedule waits on a step fp16's scaler skipped
            scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        if device_type == "xla":
            import torch_xla

            torch_xla.sync()


@dataclass
class Setup:
    """One configuration ready to train: its run, model (compiled if asked), loader and optimizer."""

    run: steps.Run
    model: torch.nn.Module
    splits: object
    loader: TimedLoader
    optimizer: torch.optim.Optimizer
    scheduler: object
    fits: list = field(default_factory=list)  # (FitResult, StepTimer) of every window

    def flops(self, shapes) -> float:
        """Return the model FLOPs (forward + backward: MFU's definition) of micro-batches by shape."""
        t = self.run.args.task
        return sum(
            n * model_flops(self.run.model_config, b, length, t.lora_r, t.lora_targets)
            for (b, length), n in shapes.items()
        )


def prepare(data_dir: str | None, device: str, n_steps: int, attn: str | None = None, **overrides) -> Setup:
    """Return a configuration built as a run builds it, on `n_steps` batches of shuffled rows (a window: one epoch)."""
    # a folder of this process's own: two benches (or test runs) at once never claim the same name
    results = os.path.join(tempfile.gettempdir(), f"accelbench-bench-{os.getpid()}")
    values = {
        "data_dir": data_dir,
        "device": device,
        "shuffle_subset": True,
        "eval_subset": 1,
        "progress": False,
        "results_path": results,
        **overrides,
    }
    args = build_args(values)
    args = args.with_values(
        train_subset=n_steps * args.train.batch * args.train.gradient_accumulation_steps, max_steps=10_000
    )
    run = steps.start(args)
    splits = steps.tokenize(run, steps.load_data(run))
    model = steps.build_model(run)
    if attn:
        model.set_attn_implementation(attn)
    t = steps.prepare_training(run, model, splits)
    return Setup(run, t.step_model, splits, TimedLoader(t.loader), t.optimizer, t.scheduler)


def synced_now(dev) -> float:
    """Return perf_counter seconds once the work queued on `dev` is done."""
    synchronize(dev)
    return time.perf_counter()


def fit_window(s: Setup, n_steps: int) -> Callable[[], dict]:
    """Return a window: `n_steps` optimizer steps of `fit` as a run calls it, timed to its last step's end."""

    def window() -> dict:
        mon = monitor.start_monitor(s.run.dev.type)
        step_ends: list[float] = []
        a = s.run.args
        timer = StepTimer(lambda: synchronize(s.run.dev), a.measure.timing_warmup_steps, a.measure.log_every)
        t0 = time.perf_counter()
        try:
            result = train.fit(
                s.model,
                s.loader,
                s.optimizer,
                s.scheduler,
                s.run.dev,
                s.run.precision,
                epochs=n_steps,
                timer=timer,
                max_steps=n_steps,
                grad_accum=a.train.gradient_accumulation_steps,
                max_grad_norm=a.train.max_grad_norm,
                log_every=a.measure.log_every,
                progress=False,
                callbacks=(lambda step: step_ends.append(synced_now(s.run.dev)),),
                step_mode=a.train.step_mode,
            )
        finally:
            mon.stop()
        s.fits.append((result, timer))
        return {"samples": sum(timer.samples), "flops": s.flops(result.shapes), "seconds": step_ends[-1] - t0}

    return window


def bare_window(s: Setup, n_steps: int) -> Callable[[], dict]:
    """Return a window: `n_steps` of `bare_loop` over batches moved to the device beforehand."""
    dev = s.run.dev
    batches = [
        {k: v.to(dev.torch_device) for k, v in b.items()} for b in itertools.islice(iter(s.loader.loader), n_steps)
    ]
    shapes = {tuple(b["input_ids"].shape): 1 for b in batches}
    flops = s.flops(shapes) * n_steps / len(shapes)
    scaler = grad_scaler(s.run.precision, dev.type)
    tr = s.run.args.train
    update = (
        train.compiled_update(s.model, s.optimizer, tr.max_grad_norm, tr.step_mode) if tr.step_mode != "eager" else None
    )

    def window() -> dict:
        bare_loop(
            s.model, batches, s.optimizer, s.scheduler, s.run.precision, dev.type, tr.max_grad_norm, scaler, update
        )
        return {"samples": sum(len(b["labels"]) for b in batches), "flops": flops}

    return window


def trainer_args(run: steps.Run, output_dir: str, **overrides):
    """Return Trainer's `TrainingArguments` for `run`'s batch, optimizer, precision and seed; no saving or logging."""
    from transformers import TrainingArguments

    t = run.args.train
    return TrainingArguments(
        output_dir=output_dir,
        per_device_train_batch_size=t.batch,
        learning_rate=t.lr,
        weight_decay=t.weight_decay,
        max_grad_norm=t.max_grad_norm,
        optim=t.optim,
        # the same precision as the project's run: bf16 autocast, or fp16 with loss scaling (a T4)
        bf16=run.precision == "bf16",
        fp16=run.precision == "fp16",
        save_strategy="no",
        logging_strategy="no",
        report_to="none",
        disable_tqdm=True,
        dataloader_num_workers=0,
        use_cpu=run.dev.type == "cpu",
        seed=t.seed,
        **overrides,
    )


def trainer_window(s: Setup, n_steps: int, output_dir: str, step_mode: str = "eager") -> Callable[[], dict]:
    """Return a window: `Trainer.train()` for `n_steps` on the same split, compiled unless `step_mode` is eager."""
    from transformers import Trainer, TrainerCallback, default_data_collator

    class LoopClock(TrainerCallback):  # after Trainer's per-call setup, which a real run pays once
        def on_train_begin(self, *a, **k):
            self.t0 = synced_now(s.run.dev)

        def on_step_end(self, *a, **k):
            self.t1 = synced_now(s.run.dev)

    a = s.run.args
    args = trainer_args(
        s.run,
        output_dir,
        max_steps=n_steps,
        eval_strategy="no",
        # the peer a GPU user would pick for a compiled step: Trainer's own torch.compile of the model
        torch_compile=step_mode != "eager",
        torch_compile_mode=train.compile_mode(step_mode),
    )
    loop = LoopClock()
    trainer = Trainer(
        model=s.model, args=args, train_dataset=s.splits["train"], data_collator=default_data_collator, callbacks=[loop]
    )
    flops = s.flops({(a.train.batch, a.task.max_length): n_steps})

    def window() -> dict:
        trainer.train()
        # accelerate wraps model.forward in autocast on every train(); unwrap so windows don't nest
        s.model.__dict__.pop("forward", None)
        return {"samples": n_steps * a.train.batch, "flops": flops, "seconds": loop.t1 - loop.t0}

    return window


def matmul_window(shape: tuple, dtype: torch.dtype, reps: int) -> Callable[[], dict]:
    """Return a window of `reps` matmuls of `shape`, the Timer's warm-up calls outside its seconds."""
    timer = peaks.matmul_timer(*shape, dtype)
    return lambda: {"flops": 2 * math.prod(shape) * reps, "seconds": timer.timeit(reps).raw_times[0]}
