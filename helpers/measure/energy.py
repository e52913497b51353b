"""Energy of the timed training window, in joules, from what each backend can read.

    meter = start_energy("cuda")     # "cuda" | "xla" | "neuron" | "cpu"; start after warm-up
    ... timed steps ...
    record.update(meter.stop())      # joules, mean_watts, seconds, method, source, ...

cuda: NVML's energy counter (mJ, Volta and newer) at start and stop, "measured"; else the integral of
NVML power samples, "estimated". cpu: Intel RAPL package counters, "measured". xla / neuron (Trainium):
the driver's per-minute power utilization (% of maximum) x a published maximum power per device,
"estimated"; with no published maximum, None with the utilization kept. A backend that
cannot tell reports None (never 0) with a "reason". Counters are device- or package-wide:
other processes on the same device count too.
"""

from __future__ import annotations

import csv
import re
import threading
import time
from pathlib import Path
from typing import Callable

from helpers.measure.sources import close_nvml, open_nvml

NOT_MEASURED = None  # no figure: the reason says why (a number field never holds text)
NEURON_ROOT = "/sys/devices/virtual/neuron_device"
RAPL_ROOT = "/sys/class/powercap"
FACTS_CSV = Path(__file__).resolve().parents[1] / "facts" / "device_power.csv"
NO_PUBLISHED_MAX = "no published maximum power for this device"


def published_max_watts(key: str, facts_csv: str | Path = FACTS_CSV) -> tuple[float | None, str]:
    """(maximum power in watts, its source) for key in facts/device_power.csv; (None, why) if none."""
    with open(facts_csv, newline="") as f:
        row = {row["key"]: row for row in csv.DictReader(f)}.get(key)
    if row is None or not (row.get("max_watts") or "").strip():
        return None, (row or {}).get("source") or f"no row for {key!r} in {facts_csv}"
    return float(row["max_watts"]), f"{row['source']} (taken {row.get('date', '?')})"


def parse_power_utilization(text: str) -> dict | None:
    """A Neuron stats/power/utilization line as status, timestamp_s, min/max/avg %; None if malformed."""
    parts = text.strip().split(",")
    if len(parts) != 5:
        return None
    try:
        return {"status": parts[0], "timestamp_s": int(parts[1]), "min_pct": float(parts[2]),
                "max_pct": float(parts[3]), "avg_pct": float(parts[4])}
    except ValueError:
        return None


def _integral_joules(samples: list[tuple[float, float]]) -> float:
    """Trapezoid integral of (seconds, watts) samples, in joules."""
    return sum((t1 - t0) * (w0 + w1) / 2 for (t0, w0), (t1, w1) in zip(samples, samples[1:]))


def _result(method: str, source: str, seconds: float, joules: float | None = None,
            samples: int = 0, peak_watts: float | None = None, reason: str | None = None, **extra) -> dict:
    measured = method is not None and joules is not None
    out = {"method": method if measured else NOT_MEASURED, "source": source, "seconds": seconds,
           "joules": joules if measured else NOT_MEASURED,
           "mean_watts": joules / seconds if measured and seconds > 0 else NOT_MEASURED,
           "peak_watts": peak_watts if peak_watts is not None else NOT_MEASURED,
           "power_samples": samples}
    if not measured:
        out["reason"] = reason or "no reading"
    return {**out, **extra}


# ----------------------------------------------------------------------------- NVML (cuda)
class _NvmlBackend:
    source = "NVML (nvidia-ml-py) of the current CUDA device"

    def __init__(self, nvml=None) -> None:
        self.watts, self.errors = [], 0
        self._nvml, self._handle, self.reason = open_nvml(nvml)

    def _energy_mj(self) -> tuple[int | None, str | None]:
        try:
            return int(self._nvml.nvmlDeviceGetTotalEnergyConsumption(self._handle)), None
        except self._nvml.NVMLError as err:  # NotSupported before Volta
            return None, str(err)

    def start(self, now: float) -> None:
        self._start_mj, self._energy_error = self._energy_mj()
        self.poll(now)

    def poll(self, now: float) -> None:
        try:
            self.watts.append((now, self._nvml.nvmlDeviceGetPowerUsage(self._handle) / 1000))
        except self._nvml.NVMLError:
            self.errors += 1

    def stop(self, now: float, seconds: float, interval_s: float) -> dict:
        self.poll(now)
        end_mj, error = self._energy_mj() if self._start_mj is not None else (None, self._energy_error)
        peak = max((w for _, w in self.watts), default=None)
        extra = {"power_read_errors": self.errors}
        try:
            extra["device"] = str(self._nvml.nvmlDeviceGetName(self._handle))
        except (self._nvml.NVMLError, AttributeError):
            pass
        sampled = f"nvmlDeviceGetPowerUsage sampled every {interval_s} s"
        if end_mj is not None and end_mj >= self._start_mj:
            return _result("measured", f"NVML total energy counter (nvmlDeviceGetTotalEnergyConsumption, mJ) "
                           f"read at start and stop; peak from {sampled}", seconds,
                           (end_mj - self._start_mj) / 1000, len(self.watts), peak, **extra)
        why = error or "the energy counter went backwards (driver reloaded?)"
        if len(self.watts) < 2:
            return _result(NOT_MEASURED, self.source, seconds, samples=len(self.watts), peak_watts=peak,
                           reason=f"no energy counter ({why}) and fewer than 2 power samples", **extra)
        return _result("estimated", f"trapezoid integral of {sampled}, start and stop included; "
                       f"no energy counter: {why}", seconds, _integral_joules(self.watts),
                       len(self.watts), peak, **extra)

    def close(self) -> None:
        if self._nvml is not None:
            close_nvml(self._nvml)
            self._nvml = None


# ----------------------------------------------------------------------------- RAPL (cpu)
class _RaplBackend:
    def __init__(self, root: str | Path = RAPL_ROOT) -> None:
        self.reason, self.source = None, f"Intel RAPL package energy counters ({root}/intel-rapl:N/energy_uj)"
        self.zones, self.names = {}, {}
        # Package domains only: the core/uncore subzones intel-rapl:N:M are inside their package (dram,
        # also a subzone, is left out), and psys (platform, on some machines) contains the packages.
        for zone in sorted(Path(root).glob("intel-rapl:*")):
            name = (zone / "name").read_text().strip() if (zone / "name").is_file() else zone.name
            if re.fullmatch(r"intel-rapl:\d+", zone.name) and not name.startswith("psys"):
                self.zones[zone.name], self.names[zone.name] = zone, name
        if not self.zones:
            self.reason = f"no RAPL package domain under {root} (no intel-rapl:N/energy_uj)"
        self.uj: dict[str, float] = {z: 0.0 for z in self.zones}
        self.peak_watts, self.polls = None, 0

    def _read(self) -> dict[str, tuple[int, int]] | None:
        try:
            return {z: (int((d / "energy_uj").read_text()), int((d / "max_energy_range_uj").read_text()))
                    for z, d in self.zones.items()}
        except (OSError, ValueError) as err:  # energy_uj is root-only on kernels patched for PLATYPUS
            self.reason = f"cannot read RAPL counters under {self.source}: {err}"
            return None

    def start(self, now: float) -> None:
        self._last, self._last_s = self._read(), now

    def poll(self, now: float) -> None:
        current = self._read() if self.reason is None else None
        if current is None:
            return
        step_uj = 0.0
        for zone, (uj, range_uj) in current.items():
            delta = uj - self._last[zone][0]
            if delta < 0:  # the counter wrapped; polling often keeps it to one wrap per poll
                delta += range_uj
            step_uj += delta
            self.uj[zone] += delta
        if now > self._last_s:
            self.peak_watts = max(self.peak_watts or 0.0, step_uj / 1e6 / (now - self._last_s))
        self._last, self._last_s, self.polls = current, now, self.polls + 1

    def stop(self, now: float, seconds: float, interval_s: float) -> dict:
        self.poll(now)
        if self.reason is not None:
            return _result(NOT_MEASURED, self.source, seconds, reason=self.reason)
        return _result("measured", f"{self.source}, package domains only (subzones and psys excluded), "
                       f"read every {interval_s} s, wraparound at max_energy_range_uj", seconds,
                       sum(self.uj.values()) / 1e6, self.polls, self.peak_watts,
                       devices={z: {"name": self.names[z], "joules": uj / 1e6} for z, uj in self.uj.items()})

    def close(self) -> None:
        pass


# ----------------------------------------------------------------------------- Neuron sysfs (xla, neuron)
class _NeuronBackend:
    """Per-minute power records (aws-neuron-sdk tools/neuron-sys-tools/neuron-sysfs-user-guide.rst)."""

    def __init__(self, root: str | Path, max_watts: float | None, max_source: str,
                 wall_clock: Callable[[], float]) -> None:
        self.reason, self.max_watts, self.max_source, self._wall = None, max_watts, max_source, wall_clock
        self.source = f"Neuron driver sysfs {root}/neuronN/stats/power/utilization"
        devices = sorted((d for d in Path(root).glob("neuron*") if re.fullmatch(r"neuron\d+", d.name)),
                         key=lambda d: int(d.name[6:]))
        self.files = {d.name: d / "stats" / "power" / "utilization" for d in devices}
        self.records: dict[str, dict[int, dict]] = {name: {} for name in self.files}
        if not devices:
            self.reason = f"no Neuron device under {root}"
        elif missing := [str(f) for f in self.files.values() if not f.is_file()]:
            # Path as documented up to the Neuron 2.32 docs; the 2.33 docs say Driver 2.31 moved sysfs nodes.
            self.reason = f"no power utilization file (driver without power stats, or moved): {missing[0]}"

    def start(self, now: float) -> None:
        self._wall_start = self._wall()
        # Driver 2.29 adds a live per-die utilization_raw; its format is undocumented: kept as text.
        raw = {n: f.with_name("utilization_raw") for n, f in self.files.items()}
        self.raw_text = {n: f.read_text().strip() if f.is_file() else None for n, f in raw.items()}

    def poll(self, now: float) -> None:
        for name, path in self.files.items():
            try:
                record = parse_power_utilization(path.read_text())
            except OSError:
                continue
            # A record covers the minute before its timestamp: keep those published after the start.
            valid = record and record["status"] == "POWER_STATUS_VALID"
            if valid and record["timestamp_s"] > self._wall_start:
                self.records[name][record["timestamp_s"]] = record

    def stop(self, now: float, seconds: float, interval_s: float) -> dict:
        self.poll(now)
        util = {n: sum(r["avg_pct"] for r in rs.values()) / len(rs) for n, rs in self.records.items() if rs}
        n_records = sum(len(recs) for recs in self.records.values())
        devices = {n: {"mean_power_util_pct": util.get(n, NOT_MEASURED), "records": len(self.records[n]),
                       "utilization_raw_text": self.raw_text[n]} for n in self.files}
        extra = {"devices": devices, "mean_power_util_pct":
                 sum(util.values()) / len(util) if len(util) == len(self.files) else NOT_MEASURED}
        if len(util) < len(self.files):
            lacking = ", ".join(n for n in self.files if n not in util)
            return _result(NOT_MEASURED, self.source, seconds, samples=n_records, **extra,
                           reason=f"no POWER_STATUS_VALID record published during the window for {lacking} "
                                  "(the driver publishes one a minute)")
        if self.max_watts is None:
            return _result(NOT_MEASURED, self.source, seconds, samples=n_records, reason=NO_PUBLISHED_MAX,
                           max_watts_source=self.max_source, **extra)
        for name, pct in util.items():
            devices[name]["joules"] = pct / 100 * self.max_watts * seconds
        return _result("estimated", f"{self.source} (per-minute mean power as % of maximum, background power "
                       f"backed out per the driver source; records overlapping the window, polled every "
                       f"{interval_s} s) x {self.max_watts} W per device from {self.max_source} x seconds",
                       seconds, sum(d["joules"] for d in devices.values()), n_records, **extra)

    def close(self) -> None:
        pass


# ----------------------------------------------------------------------------- meter
class EnergyMeter:
    """Reads a backend at start, every interval_s in a thread, and at stop()."""

    def __init__(self, backend, device_type: str, interval_s: float = 1.0,
                 clock: Callable[[], float] = time.monotonic, start_thread: bool = True) -> None:
        self.backend, self.device_type = backend, device_type
        self.interval_s, self._clock = interval_s, clock
        self._lock, self._stopped = threading.Lock(), threading.Event()
        self._thread, self._result = None, None
        self._start_s = clock()
        if backend.reason is None:
            backend.start(self._start_s)
        if backend.reason is None and start_thread:
            self._thread = threading.Thread(target=self._run, name="energy-meter", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while not self._stopped.wait(self.interval_s):
            self.poll()

    def poll(self) -> None:
        """Read the backend now (the thread calls this every interval_s)."""
        with self._lock:
            if self.backend.reason is None and not self._stopped.is_set():
                self.backend.poll(self._clock())

    def stop(self) -> dict:
        """Stop; flat dict of joules, mean_watts (W), seconds, method, source, reason if not measured."""
        if self._result is not None:
            return self._result
        self._stopped.set()
        if self._thread is not None:
            self._thread.join()
        with self._lock:
            now = self._clock()
            seconds = now - self._start_s
            if self.backend.reason is None:
                result = self.backend.stop(now, seconds, self.interval_s)
            else:
                result = _result(NOT_MEASURED, self.backend.source, seconds, reason=self.backend.reason)
            self.backend.close()
        self._result = {**result, "device_type": self.device_type, "interval_s": self.interval_s}
        return self._result


def start_energy(device_type: str, interval_s: float = 1.0, *, nvml=None, rapl_root: str | Path = RAPL_ROOT,
                 neuron_root: str | Path = NEURON_ROOT, facts_csv: str | Path = FACTS_CSV,
                 device_key: str = "trn1-chip", clock: Callable[[], float] = time.monotonic,
                 wall_clock: Callable[[], float] = time.time, start_thread: bool = True) -> EnergyMeter:
    """Start metering energy of device_type ("cuda", "xla", "neuron" or "cpu"), polling every interval_s."""
    if device_type == "cuda":
        backend = _NvmlBackend(nvml)
    elif device_type == "cpu":
        backend = _RaplBackend(rapl_root)
    elif device_type in ("xla", "neuron"):
        backend = _NeuronBackend(neuron_root, *published_max_watts(device_key, facts_csv), wall_clock)
    else:
        raise ValueError(f"device_type must be one of cuda, xla, neuron, cpu; got {device_type!r}")
    return EnergyMeter(backend, device_type, interval_s, clock, start_thread)
