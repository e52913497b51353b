"""Energy over the same window as the throughput: the timed steady windows of helpers/measure/timing.py.

    meter = start_energy("cuda", cuda_devices=[0, 1])   # before the first step: the whole run is kept too
    timer = StepTimer(sync, ..., watchers=(meter,))     # the meter reads its counters at each window's ends
    ... fit ...
    section = meter.stop()    # joules, seconds, mean_watts of the steady windows; whole_run beside

The reader (helpers/measure/energy_readers.py) opens a window where the timer opens one and closes it where
the timer closes it, and the steady windows' seconds are the timer's own, so `seconds` equals
timing.steady_time_s; the window notes below say what each figure covers.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from helpers.measure.energy_readers import (
    FACTS_CSV,
    NEURON_ROOT,
    RAPL_ROOT,
    NeuronReader,
    NvmlReader,
    RaplReader,
    published_max_watts,
    result,
)
from helpers.run.schema import Energy, EnergyDevice, EnergyWholeRun

STEADY = (
    "the timed steady windows of `timing` (after the warm-up steps; evaluation pauses excluded): the "
    "counters read at each window's start and end, the seconds the windows' own"
)
STEADY_SCALED = (
    "the timed steady windows of `timing`, which this reader could not resolve (Neuron: one "
    "power record a minute; or a read failed): the whole run's mean power x the steady windows' "
    "seconds"
)
WHOLE_RUN = (
    "the whole run: from the meter's start before the first step to its stop after the last (first "
    "step, compilation, warm-up steps and evaluation pauses included)"
)
NO_STEADY = (
    "no steady timing window reached the meter (the run ended within its warm-up steps, or no timer "
    "reported its windows)"
)


@dataclass
class MeteredWindow:
    """One timed window as the meter saw it: its ends on the timer's clock, the joules of each device."""

    warmup: bool
    t0: float
    t1: float
    joules: dict[str, float] | None  # None: the reader cannot resolve it, or a read failed


class EnergyMeter:
    """Drives a reader: the whole run from start to stop(), a window with each timed window, power every interval_s."""

    def __init__(
        self,
        reader,
        device_type: str,
        interval_s: float = 1.0,
        clock: Callable[[], float] = time.perf_counter,
        start_thread: bool = True,
    ) -> None:
        # the timer's default clock: window ends (the timer's) and power samples (the meter's) on one line
        self.reader, self.device_type = reader, device_type
        self.interval_s, self._clock = interval_s, clock
        self._lock, self._stopped = threading.Lock(), threading.Event()
        self._thread, self._result, self._open = None, None, None
        self.windows: list[MeteredWindow] = []
        self._start_s = clock()
        if reader.reason is None:
            reader.start(self._start_s)
        # a thread beside the timer's windows: Neuron's sysfs keeps only the latest per-minute record and RAPL's
        # counters wrap, so both are read on a clock of their own; zeus's windows give joules, not the power the
        # peak comes from (its PowerMonitor would spawn a process per power domain and drop failed reads)
        if reader.reason is None and start_thread:
            self._thread = threading.Thread(target=self._run, name="energy-meter", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while not self._stopped.wait(self.interval_s):
            self.poll()

    def poll(self) -> None:
        """Read the reader now (the thread calls this every interval_s)."""
        with self._lock:
            if self.reader.reason is None and not self._stopped.is_set():
                self.reader.poll(self._clock())

    def window_opened(self, t: float) -> None:
        """The timer opened a window at `t` (its clock, after the device sync): the reader opens one too."""
        with self._lock:
            if not self._stopped.is_set():
                self._open = t
                if self.reader.reason is None:
                    self.reader.begin(self._clock())

    def window_closed(self, window, t: float) -> None:
        """The timer closed `window` at `t` (None: it ended with no step and is not counted)."""
        with self._lock:
            opened, self._open = self._open, None
            if opened is None or self._stopped.is_set():
                return
            joules = self.reader.end(self._clock()) if self.reader.reason is None else None
            if window is not None:
                self.windows.append(MeteredWindow(window.warmup, opened, t, joules))

    def stop(self) -> Energy:
        """Stop; return the record's energy section: the steady windows' figures, the whole run beside."""
        if self._result is not None:
            return self._result
        self._stopped.set()
        if self._thread is not None:
            self._thread.join()
        with self._lock:
            now = self._clock()
            seconds = now - self._start_s
            if self.reader.reason is None:
                whole = self.reader.stop(now, seconds, self.interval_s)
            else:
                whole = result(None, self.reader.source, seconds, reason=self.reader.reason)
            self.reader.close()
        section = steady_section(whole, self.windows, self.reader)
        self._result = section.model_copy(update={"device_type": self.device_type, "interval_s": self.interval_s})
        return self._result


def steady_section(whole: Energy, windows: list[MeteredWindow], reader) -> Energy:
    """Return the energy section over the steady windows, from the reader's whole-run section and windows."""
    steady = [w for w in windows if not w.warmup]
    seconds = sum(w.t1 - w.t0 for w in steady)
    devices = {d: info.model_copy() for d, info in (whole.devices or {}).items()}
    note, reason, joules = STEADY, whole.reason, None
    if whole.joules is None:
        pass  # the reader's reason stands
    elif not steady:
        reason = NO_STEADY
    elif all(w.joules is not None for w in steady):
        per_device = {d: sum(w.joules[d] for w in steady) for d in steady[0].joules}
        for d, j in per_device.items():
            devices.setdefault(d, EnergyDevice()).joules = j
        joules = sum(per_device.values())
    elif whole.seconds > 0:
        note, scale = STEADY_SCALED, seconds / whole.seconds
        joules = whole.joules * scale
        for info in devices.values():
            if info.joules is not None:
                info.joules *= scale
    # a sample at a window's start belongs to what came before it (RAPL's: the mean since the last read)
    peaks = [w for t, w in reader.samples if any(s.t0 < t <= s.t1 for s in steady)]
    figures = result(
        whole.method if joules is not None else None,
        whole.source,
        seconds,
        joules,
        whole.power_samples,
        max(peaks, default=None),
        reason,
    )
    # the reader's own keys (errors, Neuron's utilization) stay; the steady figures replace its whole run's
    return whole.model_copy(
        update={
            **figures.model_dump(exclude_unset=True),
            "window": "steady",
            "window_note": note,
            "windows": len(steady),
            "covers": reader.covers,
            "device_count": reader.device_count,
            "devices": devices or None,
            "whole_run": EnergyWholeRun(
                window=WHOLE_RUN,
                seconds=whole.seconds,
                joules=whole.joules,
                mean_watts=whole.mean_watts,
                peak_watts=whole.peak_watts,
            ),
        }
    )


def node_totals(section: Energy) -> list[float]:
    """Return [steady joules, whole-run joules, 1] of a node lead's measured section, zeros otherwise."""
    if section.joules is None or section.method is None:
        return [0.0, 0.0, 0.0]
    return [float(section.joules), float((section.whole_run and section.whole_run.joules) or 0.0), 1.0]


def sum_nodes(section: Energy, totals: Sequence[float], nodes: int) -> Energy:
    """Return rank 0's section with the joules of every node (`totals`: node_totals summed over the ranks)."""
    joules, whole_joules, measured = totals
    out = section.model_copy(
        update={
            "covers": f"{nodes} nodes, each: {section.covers}",
            "device_count": (section.device_count or 0) * nodes,
            "nodes": nodes,
            "devices": None,
            "peak_watts": None,
            "peak_watts_note": "a node's peaks fall at other times: not summed",
        }
    )
    if round(measured) < nodes:
        why = f"energy measured on {round(measured)} of {nodes} nodes: no job figure"
        return out.model_copy(update={"method": None, "joules": None, "mean_watts": None, "reason": why})
    whole = out.whole_run or EnergyWholeRun()
    whole = whole.model_copy(
        update={
            "joules": whole_joules,
            "peak_watts": None,
            "mean_watts": whole_joules / whole.seconds if whole.seconds else None,
        }
    )
    mean_watts = joules / out.seconds if out.seconds else None
    return out.model_copy(update={"joules": joules, "mean_watts": mean_watts, "whole_run": whole})


def start_energy(
    device_type: str,
    interval_s: float = 1.0,
    *,
    cuda_devices: Sequence[int] | None = None,
    rapl_root: str | Path = RAPL_ROOT,
    neuron_root: str | Path = NEURON_ROOT,
    facts_csv: str | Path = FACTS_CSV,
    clock: Callable[[], float] = time.perf_counter,
    wall_clock: Callable[[], float] = time.time,
    start_thread: bool = True,
) -> EnergyMeter:
    """Start metering energy of device_type ("cuda", "xla", "neuron" or "cpu"), polling every interval_s."""
    if device_type == "cuda":
        reader = NvmlReader(cuda_devices)  # the GPU indices the figure covers (None: the current device)
    elif device_type == "cpu":
        reader = RaplReader(rapl_root)
    elif device_type in ("xla", "neuron"):
        reader = NeuronReader(neuron_root, *published_max_watts("trn1-chip", facts_csv), wall_clock)
    else:
        raise ValueError(f"device_type must be one of cuda, xla, neuron, cpu; got {device_type!r}")
    return EnergyMeter(reader, device_type, interval_s, clock, start_thread)
