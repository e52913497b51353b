"""Step timing that syncs the device before reading the clock and keeps warm-up apart."""
from __future__ import annotations

import time
from typing import Callable

import numpy as np


class StepTimer:
    """Times training steps; the first `warmup_steps` (compilation, allocator warm-up) are kept apart."""

    def __init__(self, sync: Callable[[], None] = lambda: None, warmup_steps: int = 3,
                 clock: Callable[[], float] = time.perf_counter):
        self.sync, self.warmup_steps, self.clock = sync, warmup_steps, clock
        self.step_times_s: list[float] = []
        self.samples: list[int] = []
        self.tokens: list[int] = []
        self._t0: float | None = None
        self._start: float | None = None
        self._end: float | None = None

    def start(self) -> None:
        """Mark the start of a step (syncing first so earlier queued work is not billed to it)."""
        self.sync()
        self._t0 = self.clock()
        if self._start is None:
            self._start = self._t0

    def stop(self, samples: int, tokens: int) -> float:
        """Mark the end of a step that processed `samples` rows and `tokens` tokens; return its seconds."""
        self.sync()
        self._end = self.clock()
        dt = self._end - self._t0
        self.step_times_s.append(dt)
        self.samples.append(samples)
        self.tokens.append(tokens)
        return dt

    @property
    def steps(self) -> int:
        """Number of steps timed so far."""
        return len(self.step_times_s)

    @property
    def in_warmup(self) -> bool:
        """True while the steps timed so far are all warm-up."""
        return self.steps < self.warmup_steps

    def summary(self) -> dict:
        """Return total/first/steady step times (s), samples/s and tokens/s over the steady state."""
        times = np.array(self.step_times_s)
        steady = slice(self.warmup_steps, None) if len(times) > self.warmup_steps else slice(None)
        steady_time = float(times[steady].sum()) if len(times) else 0.0
        steady_samples = int(np.sum(self.samples[steady])) if len(times) else 0
        steady_tokens = int(np.sum(self.tokens[steady])) if len(times) else 0
        return {
            "steps": len(times),
            "warmup_steps": min(self.warmup_steps, len(times)),
            # wall time from the first step's start to the last step's end: includes the host work
            # between steps (data loading, logging), which the per-step times exclude
            "train_time_s": (self._end - self._start) if self._end is not None else 0.0,
            "first_step_s": float(times[0]) if len(times) else None,
            "warmup_time_s": float(times[: self.warmup_steps].sum()) if len(times) else 0.0,
            "step_time_median_s": float(np.median(times[steady])) if len(times) else None,
            "step_time_p90_s": float(np.percentile(times[steady], 90)) if len(times) else None,
            "samples_per_s": steady_samples / steady_time if steady_time > 0 else None,
            "tokens_per_s": steady_tokens / steady_time if steady_time > 0 else None,
            "samples_processed": int(np.sum(self.samples)),
        }
