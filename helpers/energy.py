"""Energy over the steady timing windows: NVML's energy counter (CUDA), Intel RAPL (CPU), Neuron sysfs (Trainium).

    watcher = energy.start("cuda", rank)   # a watcher of the timer: reads its counters where each window opens/closes
    ... the timer's windows ...
    rec.energy = watcher.stop()            # joules, seconds, mean and peak watts of the steady windows

The counters are read at the timer's window ends (after its device sync) and the seconds are the timer's own, so
`seconds` equals timing.steady_time_s. Counters are device- or package-wide: other processes on them count too.
One meter per node (local rank 0) reads every GPU of the node; a multi-node job's record holds its own node's.
A reader that cannot tell says why (`reason`), never 0.
"""

from __future__ import annotations

import csv
import re
import sys
import threading
import time
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path
from typing import Any

from helpers import record

Window = Any  # helpers.timing.Window (.warmup, .steps, .seconds, .samples): a sibling module, so not imported
Rank = Any  # helpers.ddp.Rank (.world_size, .local_rank, .nodes): a sibling module, so not imported
NEURON_ROOT = Path("/sys/devices/virtual/neuron_device")
RAPL_ROOT = Path("/sys/class/powercap")
POWER_CSV = Path(__file__).resolve().parent / "facts" / "device_power.csv"
STEADY = "the timed steady windows of `timing`: the counters read at each window's ends, the seconds the windows' own"
STEADY_SCALED = (
    "the timed steady windows of `timing`, which this reader cannot resolve (Neuron: one power record a minute): "
    "the whole run's mean power x the steady windows' seconds"
)
WHOLE_RUN = (
    "the whole run: from the meter's start before the first step to its stop (compilation, warm-up, evaluations)"
)
NO_STEADY = "no steady timing window reached the meter (the run ended within its warm-up steps)"


def nvml_handle(nvml, cuda_index: int):
    """Return NVML's handle of CUDA device `cuda_index`: by UUID, since CUDA_VISIBLE_DEVICES renumbers CUDA's only."""
    torch = sys.modules.get("torch")  # the training process has imported it
    with suppress(AttributeError, RuntimeError, AssertionError, nvml.NVMLError):
        uuid = str(torch.cuda.get_device_properties(cuda_index).uuid)
        return nvml.nvmlDeviceGetHandleByUUID(uuid if uuid.startswith("GPU-") else f"GPU-{uuid}")
    return nvml.nvmlDeviceGetHandleByIndex(cuda_index)


class Reader:
    """What the meter reads: cumulative joules per device, a power sample; `reason` when it cannot read at all."""

    reason: str | None = None
    failure: str | None = None  # why a read failed during the run
    method, source, covers, device_count = "measured", "", "", 0

    def joules(self) -> dict[str, float] | None:
        """Return each device's joules so far (None: the reader cannot resolve a window, or a read failed)."""
        return None

    def poll(self, now: float) -> float | None:
        """Return the power at `now` in watts over every device covered (None: no sample), for the peak."""
        return None

    def mean_watts(self, seconds: float) -> float | None:
        """Return the whole run's mean power where windows cannot be resolved (Neuron), else None."""
        return None

    def extra(self) -> dict:
        """Return the section's fields only this reader has (devices' names, Neuron's utilization)."""
        return {}


class NvmlReader(Reader):
    """NVML's total energy counter (mJ since the driver loaded; Volta and newer) and power of the GPUs given."""

    source = "NVML total energy counter (nvmlDeviceGetTotalEnergyConsumption, mJ) and power (nvmlDeviceGetPowerUsage)"

    def __init__(self, cuda_indices: list[int]) -> None:
        self.handles, self.names, self.device_count = {}, {}, len(cuda_indices)
        self.covers = f"{self.device_count} GPU(s) of this node, every GPU its ranks use"
        try:
            import pynvml as nvml
        except ImportError:
            self.reason = "pynvml (nvidia-ml-py) is not installed"
            return
        try:
            nvml.nvmlInit()
            for i in cuda_indices:
                self.handles[f"cuda:{i}"] = handle = nvml_handle(nvml, i)
                self.names[f"cuda:{i}"] = str(nvml.nvmlDeviceGetName(handle))
            self.nvml = nvml
            self.start = self.read()
        except nvml.NVMLError as err:
            self.reason = f"NVML unavailable: {err}"

    def read(self) -> dict[str, float]:
        """Return each GPU's counter now, in joules since the driver loaded."""
        return {d: self.nvml.nvmlDeviceGetTotalEnergyConsumption(h) / 1000 for d, h in self.handles.items()}

    def joules(self) -> dict[str, float] | None:
        try:
            now = self.read()
        except self.nvml.NVMLError as err:
            self.failure = f"NVML read failed: {err}"
            return None
        if any(now[d] < self.start[d] for d in now):
            self.failure = "the energy counter went backwards (driver reloaded?)"
            return None
        return {d: now[d] - self.start[d] for d in now}

    def poll(self, now: float) -> float | None:
        with suppress(self.nvml.NVMLError):
            return sum(self.nvml.nvmlDeviceGetPowerUsage(h) for h in self.handles.values()) / 1000
        return None

    def extra(self) -> dict:
        return {"devices": {d: {"name": n} for d, n in self.names.items()}}


class RaplReader(Reader):
    """Intel RAPL's package counters, polled often enough to catch each wraparound."""

    def __init__(self, root: Path = RAPL_ROOT) -> None:
        self.source = (
            f"Intel RAPL package energy counters ({root}/intel-rapl:N/energy_uj), wraparound at max_energy_range_uj"
        )
        # package domains only: intel-rapl:N:M subzones are inside their package; psys (platform) contains them
        self.zones = {
            z.name: z
            for z in sorted(Path(root).glob("intel-rapl:*"))
            if re.fullmatch(r"intel-rapl:\d+", z.name) and not read_text(z / "name", "").startswith("psys")
        }
        self.device_count = len(self.zones)
        self.covers = f"{self.device_count} CPU package(s) of this node, package-wide: every process on them counts"
        self.uj, self.last, self.mark = dict.fromkeys(self.zones, 0.0), None, None
        if not self.zones:
            self.reason = f"no RAPL package domain under {root} (no intel-rapl:N/energy_uj)"
        else:
            self.last = self.counters()

    def counters(self) -> dict[str, tuple[int, int]] | None:
        """Return each package's (energy_uj, max_energy_range_uj) now; None (and the reason) where unreadable."""
        try:
            return {
                z: (int(read_text(d / "energy_uj")), int(read_text(d / "max_energy_range_uj")))
                for z, d in self.zones.items()
            }
        except (OSError, ValueError) as err:  # energy_uj is root-only on kernels patched for PLATYPUS
            self.reason = f"cannot read the RAPL counters: {err}"
            return None

    def accumulate(self) -> bool:
        """Add what each counter counted since the last read; return whether the counters could be read."""
        current = self.counters() if self.reason is None else None
        if current is None:
            return False
        for zone, (uj, range_uj) in current.items():
            delta = uj - self.last[zone][0]
            self.uj[zone] += delta + range_uj * (delta < 0)  # a wrap: polling every interval keeps it to one
        self.last = current
        return True

    def poll(self, now: float) -> float | None:
        """Return the mean power since the previous poll (window reads in between do not shorten its span)."""
        if not self.accumulate():
            return None
        mark, self.mark = self.mark, (now, sum(self.uj.values()))
        return (self.mark[1] - mark[1]) / 1e6 / (now - mark[0]) if mark and now > mark[0] else None

    def joules(self) -> dict[str, float] | None:
        return {z: uj / 1e6 for z, uj in self.uj.items()} if self.accumulate() else None

    def extra(self) -> dict:
        return {"devices": {z: {"name": read_text(d / "name", z)} for z, d in self.zones.items()}}


def read_text(path: Path, default: str | None = None) -> str:
    """Return a sysfs file's text, stripped; `default` where it cannot be read (None: raise)."""
    try:
        return path.read_text().strip()
    except OSError:
        if default is None:
            raise
        return default


def published_max_watts(key: str, power_csv: Path = POWER_CSV) -> tuple[float | None, str]:
    """Return (maximum power in watts, its source) of `key` in device_power.csv; (None, why) where none."""
    with open(power_csv, newline="") as f:
        row = {row["key"]: row for row in csv.DictReader(f)}.get(key) or {}
    if not (row.get("max_watts") or "").strip():
        return None, row.get("source") or f"no row for {key!r} in {power_csv.name}"
    return float(row["max_watts"]), f"{row['source']} (taken {row.get('date', '?')})"


class NeuronReader(Reader):
    """The driver's per-minute power records (% of maximum power) of every Neuron device of the node."""

    method = "estimated"

    def __init__(self, root: Path = NEURON_ROOT, power_csv: Path = POWER_CSV, wall: Callable[[], float] = time.time):
        self.source = f"Neuron driver sysfs {root}/neuronN/stats/power/utilization (a record a minute)"
        devices = sorted(
            (d for d in Path(root).glob("neuron*") if re.fullmatch(r"neuron\d+", d.name)), key=lambda d: int(d.name[6:])
        )
        self.files = {d.name: d / "stats" / "power" / "utilization" for d in devices}
        self.records: dict[str, dict[int, float]] = {n: {} for n in self.files}  # per device: timestamp -> avg %
        self.max_watts, self.max_source = published_max_watts("trn1-chip", power_csv)
        self.device_count, self.wall, self.started = len(self.files), wall, wall()
        self.covers = f"{self.device_count} Neuron device(s) of this node, used by this run or not"
        # driver 2.29 adds a live per-die utilization_raw; its format is undocumented: kept as text
        self.raw = {n: read_text(f.with_name("utilization_raw"), "") or None for n, f in self.files.items()}
        if not devices:
            self.reason = f"no Neuron device under {root}"
        elif missing := [str(f) for f in self.files.values() if not f.is_file()]:
            self.reason = f"no power utilization file (a driver without power stats, or moved): {missing[0]}"

    def poll(self, now: float | None = None) -> None:
        for name, path in self.files.items():
            parts = read_text(path, "").split(",")  # status,timestamp_s,min %,max %,avg %
            with suppress(ValueError, IndexError):
                # a record covers the minute before its timestamp: those published after the start are the run's
                if len(parts) == 5 and parts[0] == "POWER_STATUS_VALID" and int(parts[1]) > self.started:
                    self.records[name][int(parts[1])] = float(parts[4])

    def utilization(self) -> dict[str, float]:
        """Return each device's mean power utilization (%) over the records published during the run."""
        return {n: sum(r.values()) / len(r) for n, r in self.records.items() if r}

    def mean_watts(self, seconds: float) -> float | None:
        self.poll()
        util = self.utilization()
        if len(util) < len(self.files):
            lacking = ", ".join(n for n in self.files if n not in util)
            self.failure = f"no POWER_STATUS_VALID record published during the run for {lacking} (one a minute)"
        elif self.max_watts is None:
            self.failure = "no published maximum power for this device (helpers/facts/device_power.csv)"
        else:
            return sum(util.values()) / 100 * self.max_watts
        return None

    def extra(self) -> dict:
        util = self.utilization()
        devices = {
            n: {
                "mean_power_util_pct": util.get(n),
                "records": len(self.records[n]),
                "utilization_raw_text": self.raw[n],
            }
            for n in self.files
        }
        mean = sum(util.values()) / len(util) if util and len(util) == len(self.files) else None
        return {"devices": devices, "mean_power_util_pct": mean, "max_watts_source": self.max_source}


class Absent(Reader):
    """A reader that does not read, and says why."""

    def __init__(self, reason: str) -> None:
        self.reason = reason


class Meter:
    """Reads its reader at each timed window's ends and polls its power every interval_s; stop() sums the steady."""

    def __init__(
        self,
        reader: Reader,
        device_type: str,
        interval_s: float = 1.0,
        clock: Callable[[], float] = time.perf_counter,
        start_thread: bool = True,
    ) -> None:
        # the timer's default clock: its window ends and the meter's power samples on one line
        self.reader, self.device_type, self.interval_s, self.clock = reader, device_type, interval_s, clock
        self.lock, self.stopped, self.thread, self.result = threading.Lock(), threading.Event(), None, None
        self.opened: tuple[float, dict | None] | None = None
        self.steady: list[tuple[float, float, float, dict | None]] = []  # t0, t1, seconds, joules by device
        self.samples: list[tuple[float, float]] = []  # (t, watts): the peak
        self.start_s = clock()
        if reader.reason is None and start_thread:  # RAPL's counters wrap, Neuron keeps its latest record only
            self.thread = threading.Thread(target=self.run, name="energy-meter", daemon=True)
            self.thread.start()

    def run(self) -> None:
        """Poll every interval_s until stopped (the thread's body)."""
        while not self.stopped.wait(self.interval_s):
            self.poll()

    def poll(self) -> None:
        """Take a power sample now (the thread calls this every interval_s)."""
        with self.lock:
            now = self.clock()
            watts = self.reader.poll(now) if self.reader.reason is None else None
            if watts is not None:
                self.samples.append((now, watts))

    def window_opened(self, t: float) -> None:
        """The timer opened a window at `t` (its clock, after the device sync): read the counters."""
        with self.lock:
            self.opened = (t, self.reader.joules() if self.reader.reason is None else None)

    def window_closed(self, window: Window | None, t: float) -> None:
        """The timer closed `window` at `t` (None: it ended without a step): a steady one's joules are kept."""
        with self.lock:
            opened, self.opened = self.opened, None
            if opened is None or window is None or window.warmup:
                return
            before, after = opened[1], self.reader.joules() if self.reader.reason is None else None
            joules = {d: after[d] - before[d] for d in after} if before is not None and after is not None else None
            self.steady.append((opened[0], t, window.seconds, joules))

    def stop(self) -> record.Energy:
        """Stop; return the record's energy section: the steady windows' figures, the whole run beside."""
        if self.result is not None:
            return self.result
        self.stopped.set()
        if self.thread is not None:
            self.thread.join()
        self.poll()
        reader, whole_s = self.reader, self.clock() - self.start_s
        seconds = sum(w[2] for w in self.steady)
        whole = reader.joules() if reader.reason is None else None
        whole_j = sum(whole.values()) if whole is not None else None
        whole_w = reader.mean_watts(whole_s) if whole is None and reader.reason is None else None
        if whole_w is not None:
            whole_j = whole_w * whole_s
        # a sample at a window's start belongs to what came before it (RAPL's is the mean since the last read)
        steady_w = [w for t, w in self.samples if any(t0 < t <= t1 for t0, t1, _, _ in self.steady)]
        out = dict(
            window="steady",
            window_note=STEADY,
            windows=len(self.steady),
            seconds=seconds,
            source=reader.source,
            covers=reader.covers,
            device_count=reader.device_count,
            device_type=self.device_type,
            interval_s=self.interval_s,
            power_samples=len(self.samples),
            peak_watts=max(steady_w, default=None),
            whole_run=record.EnergyWholeRun(
                window=WHOLE_RUN,
                seconds=whole_s,
                joules=whole_j,
                mean_watts=whole_j / whole_s if whole_j is not None and whole_s > 0 else None,
                peak_watts=max((w for _, w in self.samples), default=None),
            ),
            **(reader.extra() if reader.reason is None else {}),
        )
        joules = None
        if reader.reason is not None:
            out["reason"] = reader.reason
        elif not self.steady:
            out["reason"] = NO_STEADY
        elif all(w[3] is not None for w in self.steady):
            per_device = {d: sum(w[3][d] for w in self.steady) for d in self.steady[0][3]}
            for d, j in per_device.items():
                out.setdefault("devices", {}).setdefault(d, {})["joules"] = j
            joules = sum(per_device.values())
        elif whole_j is not None and whole_s > 0:
            joules, out["window_note"] = whole_j / whole_s * seconds, STEADY_SCALED
        else:
            out["reason"] = reader.failure or "a counter read failed in a steady window"
        if joules is not None:
            out |= dict(joules=joules, method=reader.method, mean_watts=joules / seconds if seconds > 0 else None)
        self.result = record.Energy(**out)
        return self.result


def start(device_type: str, rank: Rank | None, interval_s: float = 1.0) -> Meter:
    """Return a watcher metering device_type's energy ("cuda", "xla" or "cpu") over the steady windows."""
    if rank is not None and rank.local_rank != 0:
        return Meter(Absent("measured by local rank 0 of this node"), device_type, interval_s)
    if device_type == "cuda":
        import torch

        # local rank i trains on cuda:i: the node's lead reads them all
        local = range(rank.world_size // rank.nodes) if rank is not None else [torch.cuda.current_device()]
        reader = NvmlReader(list(local))
    elif device_type == "cpu":
        reader = RaplReader()
    elif device_type == "xla":
        reader = NeuronReader()
    else:
        raise ValueError(f"device_type must be one of cuda, xla, cpu; got {device_type!r}")
    if rank is not None and rank.nodes > 1:  # summing nodes was retired: the job's other nodes are not in the record
        reader.covers += f"; this node only, one of the job's {rank.nodes}"
    return Meter(reader, device_type, interval_s)
