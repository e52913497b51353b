"""Step timing in windows: one device sync at each window's end, none between its steps.

    timer = StepTimer(sync, warmup_steps=3, window_steps=50, per_step="host", watchers=(meter,))
    for each optimizer step: timer.start_step(); ...; timer.end_step(samples, tokens)
    timer.close_window()       # before work that must stay outside the timed windows (evaluation)
    timer.summary()

Syncing every step would stop the host from tracing step k+1 while the device runs step k (XLA's main
source of throughput, a few % on CUDA). Watchers (the energy meter, the monitor) hear of each window's
opening and closing at the timer's own instants, so what they measure covers the same windows.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np

PER_STEP = ("host", "events", "window")


@dataclass
class Window:
    """Steps between two device syncs."""

    first_step: int
    steps: int
    seconds: float
    samples: int
    tokens: int
    warmup: bool


class WindowWatcher(Protocol):
    """What is told of the timed windows, at the timer's clock readings (after the device sync)."""

    def window_opened(self, t: float) -> None: ...

    def window_closed(self, window: Window | None, t: float) -> None: ...  # None: no step ended in it


class StepTimer:
    """Times optimizer steps in windows; the first `warmup_steps` are kept apart from the steady state."""

    def __init__(
        self,
        sync: Callable[[], None] = lambda: None,
        warmup_steps: int = 3,
        window_steps: int = 50,
        per_step: str = "host",
        clock: Callable[[], float] = time.perf_counter,
        event: Callable[[], object] | None = None,
        watchers: tuple[WindowWatcher, ...] = (),
    ):
        if per_step not in PER_STEP:
            raise ValueError(f"per_step={per_step!r}: expected one of {', '.join(PER_STEP)}")
        self.sync, self.warmup_steps, self.window_steps = sync, warmup_steps, max(1, window_steps)
        self.per_step, self.clock, self.event, self.watchers = per_step, clock, event, watchers
        self.windows: list[Window] = []
        self.step_times_s: list[float] = []
        self.samples: list[int] = []
        self._open: dict | None = None  # the window being timed: start time, counts, per-step marks
        self._step_t0: float | None = None

    @property
    def steps(self) -> int:
        """Number of steps timed so far."""
        return len(self.samples)

    @property
    def in_warmup(self) -> bool:
        """True while the steps timed so far are all warm-up."""
        return self.steps < self.warmup_steps

    def start_step(self) -> None:
        """Mark the start of an optimizer step (its first micro-batch); opens a window when none is open."""
        if self._open is None:
            self.sync()  # work queued before the window (evaluation, set-up) is not billed to it
            self._open = {
                "t0": self.clock(),
                "first": self.steps,
                "samples": 0,
                "tokens": 0,
                "marks": [],
                "warmup": self.in_warmup,
            }
            for watcher in self.watchers:
                watcher.window_opened(self._open["t0"])
        self._step_t0 = self.clock()
        if self.event is not None:
            self._open["marks"].append([self._record_event(), None])

    def end_step(self, samples: int, tokens: int) -> None:
        """Mark the end of an optimizer step that processed `samples` rows and `tokens` tokens."""
        w = self._open
        w["samples"] += samples
        w["tokens"] += tokens
        self.samples.append(samples)
        if self.per_step == "host":
            self.step_times_s.append(self.clock() - self._step_t0)
        if self.event is not None:
            w["marks"][-1][1] = self._record_event()
        done = self.steps
        # the first step (its compilation) alone, then the rest of the warm-up, then every window_steps
        if done == 1 or done == self.warmup_steps or done - w["first"] >= self.window_steps:
            self.close_window()

    def close_window(self) -> None:
        """Sync the device and close the open window (a no-op when none is open)."""
        w, self._open = self._open, None
        if w is None:
            return
        if self.steps == w["first"]:
            for watcher in self.watchers:
                watcher.window_closed(None, self.clock())
            return
        self.sync()
        t1 = self.clock()
        seconds, steps = t1 - w["t0"], self.steps - w["first"]
        self.windows.append(Window(w["first"], steps, seconds, w["samples"], w["tokens"], w["warmup"]))
        for watcher in self.watchers:
            watcher.window_closed(self.windows[-1], t1)
        if self.per_step == "events":
            self.step_times_s += [start.elapsed_time(end) / 1e3 for start, end in w["marks"]]
        elif self.per_step == "window":
            self.step_times_s += [seconds / steps] * steps

    def _record_event(self):
        event = self.event()
        event.record()
        return event

    def summary(self, ranks: int = 1) -> dict:
        """Return first-step, warm-up and steady-state times (s), samples/s and tokens/s, and their spread."""
        # rates are the job's: `ranks` data-parallel ranks step in lockstep (sample counts stay this rank's)
        self.close_window()
        steady = [w for w in self.windows if not w.warmup]
        times = np.array(self.step_times_s)
        steady_times = times[self.warmup_steps :] if len(times) > self.warmup_steps else times
        steady_s = sum(w.seconds for w in steady)
        rates = [ranks * w.samples / w.seconds for w in steady if w.seconds > 0]
        out = {
            "steps": self.steps,
            "warmup_steps": min(self.warmup_steps, self.steps),
            # the timed windows, warm-up included; work between windows (evaluation) is not in it
            "train_time_s": sum(w.seconds for w in self.windows),
            "first_step_s": self.windows[0].seconds if self.windows else None,
            "warmup_time_s": sum(w.seconds for w in self.windows if w.warmup),
            "steady_time_s": steady_s,
            "steady_steps": sum(w.steps for w in steady),
            # wall time between two syncs: data loading included
            "samples_per_s": ranks * sum(w.samples for w in steady) / steady_s if steady_s > 0 else None,
            "tokens_per_s": ranks * sum(w.tokens for w in steady) / steady_s if steady_s > 0 else None,
            "steady_samples": sum(w.samples for w in steady),
            "samples_processed": int(sum(self.samples)),
            "windows": len(steady),
            "window_samples_per_s": {"min": min(rates), "median": float(np.median(rates)), "max": max(rates)}
            if rates
            else None,
            # each steady window: [optimizer steps done at its end, its samples/s] (the notebook draws them)
            "window_series": [
                [int(np.sum([v.steps for v in self.windows[: i + 1]])), ranks * w.samples / w.seconds]
                for i, w in enumerate(self.windows)
                if not w.warmup and w.seconds > 0
            ],
            "step_time_source": {
                "host": "host clock per step (the CPU finishes its ops before they return)",
                "events": "CUDA events per step",
                "window": "window time / steps (XLA: host times are tracing)",
            }[self.per_step],
            "step_time_median_s": float(np.median(steady_times)) if len(steady_times) else None,
            "step_time_p10_s": float(np.percentile(steady_times, 10)) if len(steady_times) else None,
            "step_time_p90_s": float(np.percentile(steady_times, 90)) if len(steady_times) else None,
        }
        if ranks > 1:
            out["samples_per_s_per_device"] = out["samples_per_s"] / ranks if out["samples_per_s"] else None
        return out
