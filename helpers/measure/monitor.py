"""Device and host utilization, sampled in a background thread around the training loop.

    mon = start_monitor("cuda")      # "cuda" | "xla" | "neuron" | "cpu"
    ... warm-up steps ...
    mon.mark_steady()                # only samples taken after this count
    ... timed steps ...
    run.record.utilization = mon.stop()  # the record's section: each figure's mean and p90

Given to the step timer as a watcher (StepTimer(watchers=(mon,))), the monitor also leaves out what it
samples between the timed windows (periodic evaluation), so its figures cover the windows that the
timing and the energy cover.
"""

from __future__ import annotations

import threading

from helpers.measure.neuron_monitor import NeuronMonitorSource
from helpers.measure.utilization_sources import NvmlSource, PsutilSource, not_measured
from helpers.run.schema import Utilization


class Monitor:
    """Collects samples from a source; stop() returns mean/p90 over those taken after mark_steady()."""

    def __init__(self, source, interval_s: float = 0.5, start_thread: bool = True) -> None:
        self.source, self.interval_s = source, interval_s
        self._records: list[tuple[bool, object]] = []
        self._lock = threading.Lock()
        self._steady = False
        self._between_windows = False  # a timer closed its window: evaluation or set-up, not training
        self._stopped = threading.Event()
        self._thread = None
        self._result: Utilization | None = None
        if source.reason is not None:
            return
        if source.push:
            source.start(self._record)
        elif start_thread:
            self._thread = threading.Thread(target=self._run, name="monitor-sampler", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while not self._stopped.wait(self.interval_s):
            self.poll()

    def _record(self, payload) -> None:
        with self._lock:
            self._records.append((self._steady and not self._between_windows, payload))

    def poll(self) -> None:
        """Take one sample now (the background thread calls this every interval_s)."""
        payload = self.source.sample()
        if payload is not None:
            self._record(payload)

    def mark_steady(self) -> None:
        """Warm-up is over: samples from now on are the ones summarized."""
        with self._lock:
            self.source.reset()
            self._steady = True

    def window_opened(self, t: float) -> None:
        """A timed window opened: sample again, from a fresh baseline (GPM, CPU %) that skips the pause."""
        with self._lock:
            self.source.reset()
            self._between_windows = False

    def window_closed(self, window, t: float) -> None:
        """A timed window closed: what runs until the next one (evaluation) is not training."""
        with self._lock:
            self._between_windows = True

    def stop(self) -> Utilization:
        """Stop sampling; return mean/p90 over the steady window (None + reason if none)."""
        if self._result is not None:
            return self._result
        self._stopped.set()
        if self._thread is not None:
            self._thread.join()
        self.source.close()
        with self._lock:
            steady = [payload for is_steady, payload in self._records if is_steady]
        if self.source.reason is not None:
            result = not_measured(self.source.backend, self.source.fields, self.source.reason)
        elif not steady:
            reason = (
                "mark_steady() was never called"
                if not self._steady
                else self.source.failure or "no samples in the steady window"
            )
            result = not_measured(self.source.backend, self.source.fields, reason)
        else:
            result = self.source.summarize(steady)
        self._result = Utilization(**result, interval_s=self.interval_s)
        return self._result


def start_monitor(device_type: str, interval_s: float = 0.5) -> Monitor:
    """Start sampling the backend of device_type ("cuda", "xla", "neuron" or "cpu") every interval_s."""
    if device_type == "cpu":
        source = PsutilSource()
    elif device_type == "cuda":
        source = NvmlSource()
    elif device_type in ("xla", "neuron"):  # in this project XLA means Trainium
        source = NeuronMonitorSource(interval_s)
    else:
        raise ValueError(f"device_type must be one of cuda, xla, neuron, cpu; got {device_type!r}")
    return Monitor(source, interval_s)
