"""Step timing in windows: one device sync where a window closes, none between its steps.

    timer = timing.Timer(sync, warmup_steps=3, window_steps=50, profiler=profiler, watchers=(monitor, meter))
    each optimizer step: timer.start_step(); per micro-batch timer.micro_batch(shape, loss); window = timer.end_step()
    with timer.paused(): evaluate()          # outside every timed window
    timer.finish(rec, watchers)              # the record's timing, shapes, loss curve, utilization, energy, profile

Syncing every step would stop the host from queueing step k+1 while the device runs step k (XLA's main source of
throughput, a few % on CUDA). The steps are timed in three kinds of window: the warm-up steps (compilation, the
allocator), then the profiled steps where a profiler runs (its start, stop and parse inside no other window), then
steady windows of `window_steps`: every steady figure (samples/s, the MFU the report computes, energy, utilization)
covers the steady windows only. Watchers hear each window open and close at the timer's own clock readings.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections import Counter
from dataclasses import dataclass, field

import numpy as np
import torch
from tqdm.auto import tqdm

from helpers import record


@dataclass
class Window:
    """Optimizer steps between two device syncs, and what they did."""

    first_step: int
    kind: str  # warmup | profiled | steady
    steps: int = 0
    seconds: float = 0.0
    samples: int = 0
    tokens: int = 0
    loss: float | None = None  # the mean loss of its steps, read once at its end
    step_times: list[float] = field(default_factory=list)

    @property
    def warmup(self) -> bool:
        """Whether the window is left out of the steady figures (warm-up or profiled steps)."""
        return self.kind != "steady"


class Timer:
    """Times optimizer steps in windows; warm-up and profiled steps are kept apart from the steady ones."""

    def __init__(self, sync, warmup_steps: int, window_steps: int, profiler=None, watchers=(), step_clock="host"):
        self.sync, self.warmup_steps, self.window_steps = sync, warmup_steps, max(1, window_steps)
        # host: each step's wall (a CPU finishes its ops as it goes); events: CUDA events around each step; window:
        # a window's mean (XLA runs a step's graph after the host has traced it, so a host clock per step says nothing)
        self.profiler, self.watchers, self.step_clock = profiler, tuple(watchers), step_clock
        self.cuda_events = step_clock == "events"
        self.profiled = profiler.steps if profiler else 0
        self.windows: list[Window] = []
        self.open: Window | None = None
        self.steps = 0
        self.shapes, self.steady_shapes = Counter(), Counter()
        self.loss_sum, self.micro = None, 0
        self.loop_t0 = self.step_t0 = None
        self.events: list = []

    def kind(self, step: int) -> str:
        """Return the kind of window step `step` (0-based) belongs to."""
        if step < self.warmup_steps:
            return "warmup"
        return "profiled" if step < self.warmup_steps + self.profiled else "steady"

    def start_step(self) -> None:
        """Open a window where none is open (a device sync first, so the clock starts on an idle device)."""
        if self.open is None:
            self.sync()
            t = time.perf_counter()
            self.loop_t0 = self.loop_t0 or t
            self.open = Window(self.steps, self.kind(self.steps))
            self.open_t = t
            if self.open.kind == "profiled":
                self.profiler.start()
            for w in self.watchers:
                w.window_opened(t)
        self.step_t0 = time.perf_counter()
        if self.cuda_events:
            self.events.append([torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)])
            self.events[-1][0].record()

    def micro_batch(self, shape, loss: torch.Tensor) -> None:
        """Count one micro-batch: its (batch, length) shape and its loss, summed on the device."""
        key = f"{shape[0]}x{shape[1]}"
        self.shapes[key] += 1
        if self.open is not None and not self.open.warmup:
            self.steady_shapes[key] += 1
        self.open.samples += int(shape[0])
        self.open.tokens += int(shape[0] * shape[1])
        loss = loss.float()
        self.loss_sum = loss if self.loss_sum is None else self.loss_sum + loss

    def end_step(self) -> Window | None:
        """End an optimizer step; return the window it closed (None while the window runs on)."""
        self.steps += 1
        self.open.steps += 1
        if self.cuda_events:
            self.events[-1][1].record()
        elif self.step_clock == "host":
            self.open.step_times.append(time.perf_counter() - self.step_t0)
        boundary = self.warmup_steps + self.profiled
        steady_end = self.steps > boundary and (self.steps - boundary) % self.window_steps == 0
        if self.steps in (self.warmup_steps, boundary) or steady_end:
            return self.close()
        return None

    def close(self) -> Window | None:
        """Close the open window: sync, read the clock and the mean loss once, tell the watchers; return it."""
        window, self.open = self.open, None
        if window is None or window.steps == 0:
            return None
        self.sync()
        t = time.perf_counter()
        window.seconds = t - self.open_t
        if self.cuda_events:  # complete after the sync: reading them waits for nothing
            window.step_times = [a.elapsed_time(b) / 1000 for a, b in self.events]
            self.events = []
        if self.loss_sum is not None:
            window.loss = float(self.loss_sum) / window.steps  # one host read of one element per window
        self.loss_sum = None
        self.windows.append(window)
        for w in self.watchers:
            w.window_closed(window, t)
        if window.kind == "profiled":
            self.profiler.stop(window.seconds)  # after the sync, before any steady window opens
        return window

    @contextlib.contextmanager
    def paused(self):
        """Close the open window for the block (an evaluation): its seconds are in no window."""
        self.close()
        yield

    @property
    def train_seconds(self) -> float:
        """Return the seconds of every timed window so far (what time-to-accuracy counts)."""
        return sum(w.seconds for w in self.windows)

    def finish(self, rec: record.RunRecord, watchers=(), skipped: int = 0, world: int = 1) -> None:
        """Close the last window; set the record's timing, shapes, loss, utilization, energy and profile."""
        self.close()
        steady = [w for w in self.windows if not w.warmup]
        step_times = [s for w in steady for s in (w.step_times or [w.seconds / w.steps] * w.steps)]
        steady_s, samples = sum(w.seconds for w in steady), sum(w.samples for w in steady)
        rates = [w.samples / w.seconds * world for w in steady if w.seconds > 0]
        first = self.windows[0] if self.windows else None
        rec.timing = record.Timing(
            train_time_s=self.train_seconds,
            samples_per_s=samples * world / steady_s if steady_s else None,
            tokens_per_s=sum(w.tokens for w in steady) * world / steady_s if steady_s else None,
            samples_per_s_per_device=samples / steady_s if steady_s and world > 1 else None,
            first_step_s=(first.step_times or [first.seconds])[0] if first else None,
            step_time_median_s=float(np.median(step_times)) if step_times else None,
            step_time_p10_s=float(np.percentile(step_times, 10)) if step_times else None,
            step_time_p90_s=float(np.percentile(step_times, 90)) if step_times else None,
            steady_time_s=steady_s,
            warmup_time_s=sum(w.seconds for w in self.windows if w.warmup),
            steps=self.steps,
            steady_steps=sum(w.steps for w in steady),
            warmup_steps=sum(w.steps for w in self.windows if w.warmup),
            windows=len(steady),
            steady_samples=samples,
            steady_tokens=sum(w.tokens for w in steady),
            samples_processed=sum(w.samples for w in self.windows),
            skipped_steps=skipped,
            window_samples_per_s={"min": min(rates), "median": float(np.median(rates)), "max": max(rates)}
            if rates
            else None,
            window_series=[(w.first_step + w.steps, w.samples / w.seconds * world) for w in steady if w.seconds],
            step_time_source={"events": "CUDA events per step", "host": "host clock per step"}.get(
                self.step_clock, "each window's mean (one device sync per window)"
            ),
            reason=None if steady else "no steady window closed: give more steps than timing_warmup_steps",
        )
        rec.shapes = record.Shapes(
            distinct=len(self.shapes),
            counts=dict(sorted(self.shapes.items())),
            steady=dict(sorted(self.steady_shapes.items())),
        )
        for w in watchers:
            section = w.stop()
            if isinstance(section, record.Energy) and section.joules:
                section.samples = samples * world
                section.samples_per_joule = samples * world / section.joules
            setattr(rec, "energy" if isinstance(section, record.Energy) else "utilization", section)
        if self.profiler is not None:
            rec.profile = self.profiler.summary()
        phases = rec.phases or record.Phases()
        loop_s = time.perf_counter() - (self.loop_t0 or time.perf_counter())
        other = max(0.0, loop_s - self.train_seconds - (phases.periodic_eval or 0.0))
        rec.phases = phases.model_copy(update={"train": self.train_seconds, "train_other": other})
        print(
            f"training: {self.steps} steps in {self.train_seconds:.1f} s"
            + (f", {rec.timing.samples_per_s:.1f} samples/s steady" if rec.timing.samples_per_s else ""),
            flush=True,
        )


def progress(total: int, enabled: bool):
    """Return the progress bar of `total` optimizer steps (disabled: a line per window instead)."""
    return tqdm(total=total, desc="train", unit="step", disable=not enabled)


def log_window(rec: record.RunRecord, window: Window, bar, diverge_factor: float) -> bool:
    """Add a closed window's loss to the record and show it; return False when the run diverged there."""
    if window.loss is None:
        return True
    metrics = rec.metrics or record.Metrics()
    step = window.first_step + window.steps
    curve = [*metrics.loss_curve, [step, window.loss]]
    rec.metrics = metrics.model_copy(update={"loss_curve": curve, "final_loss": window.loss})
    bar.set_postfix(loss=f"{window.loss:.4f}")
    if bar.disable:
        rate = f", {window.samples / window.seconds:.1f} samples/s" if window.seconds else ""
        print(f"train: step {step}/{bar.total}, loss {window.loss:.4f}{rate} ({window.kind})", flush=True)
    first = curve[0][1]
    if math.isfinite(window.loss) and window.loss <= diverge_factor * first:
        return True
    rec.status, rec.metrics.diverged_at_step = "diverged", step
    rec.error = f"loss {window.loss:.4g} at step {step}" + (
        f" is above {diverge_factor:g} x the first window's {first:.4g}" if math.isfinite(window.loss) else ""
    )
    return False
