"""What the energy meter reads, per backend: NVML (CUDA GPUs), Intel RAPL (the CPU), Neuron sysfs (Trainium).

Every reader has the same small interface, which helpers/measure/energy_meter.py's meter drives:

    reader.start(now); reader.poll(now)        # the first reading; the meter's thread, every interval_s
    reader.joules(now)                         # {device: joules since start}, read now; None: cannot resolve
    reader.stop(now, seconds, interval_s)      # the whole run: joules, mean_watts, method, source, ...
    reader.samples                             # [(seconds, watts of every device covered)]: the peak
    reader.covers, reader.device_count         # which devices the figure covers, in words and as a count

cuda: NVML's energy counter (mJ, Volta and newer) of every GPU the reader was given, "measured"; else the
integral of NVML power samples, "estimated". cpu: RAPL package counters, "measured". xla / neuron: the
driver's per-minute power utilization (% of maximum) x a published maximum power per device, "estimated";
with no published maximum, None with the utilization kept. A reader that cannot tell says why (`reason`),
never 0. Counters are device- or package-wide: other processes on the same device count too.
"""
from __future__ import annotations

import csv
import re
from pathlib import Path
from typing import Callable, Sequence

from helpers.measure.utilization_sources import close_nvml, current_cuda_handle, open_nvml

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


def integral_joules(samples: list[tuple[float, float]]) -> float:
    """Trapezoid integral of (seconds, watts) samples, in joules."""
    return sum((t1 - t0) * (w0 + w1) / 2 for (t0, w0), (t1, w1) in zip(samples, samples[1:]))


def result(method: str | None, source: str, seconds: float, joules: float | None = None, samples: int = 0,
           peak_watts: float | None = None, reason: str | None = None, **extra) -> dict:
    """Return a reader's figures as the record names them; None (with the reason) where not measured."""
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
class NvmlReader:
    """Every GPU in `cuda_devices` (indices as this process sees them; None: the current device only)."""

    source = "NVML (nvidia-ml-py)"

    def __init__(self, nvml=None, cuda_devices: Sequence[int] | None = None) -> None:
        self.errors, self.samples, self.handles, self.names = 0, [], {}, {}
        self._nvml, handle, self.reason = open_nvml(nvml)
        if self.reason is None:
            try:  # NVML reads one GPU per handle: a node's figure needs a handle for each of its GPUs
                self.handles = ({"cuda": handle} if cuda_devices is None
                                else {f"cuda:{i}": current_cuda_handle(self._nvml, i) for i in cuda_devices})
            except self._nvml.NVMLError as err:
                self.reason = f"NVML has no handle for a GPU of this node: {err}"
            for label, h in self.handles.items():
                try:
                    self.names[label] = str(self._nvml.nvmlDeviceGetName(h))
                except (self._nvml.NVMLError, AttributeError):
                    pass
        self.device_count = len(self.handles) or len(cuda_devices or [None])
        self.covers = (f"{self.device_count} GPU(s) of this node, one NVML handle each: "
                       + ", ".join(self.handles or ["cuda"]) + " (every GPU this node's ranks use)"
                       if cuda_devices is not None else "the run's GPU (the current CUDA device)")
        self.watts: dict[str, list[tuple[float, float]]] = {label: [] for label in self.handles}

    def _counters_mj(self) -> tuple[dict[str, int] | None, str | None]:
        try:
            return {label: int(self._nvml.nvmlDeviceGetTotalEnergyConsumption(h))
                    for label, h in self.handles.items()}, None
        except self._nvml.NVMLError as err:  # NotSupported before Volta
            return None, str(err)

    def start(self, now: float) -> None:
        self._start_mj, self._energy_error = self._counters_mj()
        self.poll(now)

    def poll(self, now: float) -> None:
        total = 0.0
        for label, h in self.handles.items():
            try:
                watts = self._nvml.nvmlDeviceGetPowerUsage(h) / 1000
            except self._nvml.NVMLError:
                self.errors, total = self.errors + 1, None
                continue
            self.watts[label].append((now, watts))
            total = None if total is None else total + watts
        if total is not None:
            self.samples.append((now, total))

    def joules(self, now: float) -> dict[str, float] | None:
        if self._start_mj is not None:
            mj, _ = self._counters_mj()
            if mj is None or any(mj[d] < self._start_mj[d] for d in mj):
                return None
            return {d: (mj[d] - self._start_mj[d]) / 1000 for d in mj}
        self.poll(now)  # no counter: the power integral up to a sample taken now
        if any(len(w) < 2 for w in self.watts.values()):
            return None
        return {d: integral_joules(w) for d, w in self.watts.items()}

    def stop(self, now: float, seconds: float, interval_s: float) -> dict:
        self.poll(now)
        end_mj, error = self._counters_mj() if self._start_mj is not None else (None, self._energy_error)
        peak = max((w for _, w in self.samples), default=None)
        extra = {"power_read_errors": self.errors, "devices": {d: {"name": n} for d, n in self.names.items()}}
        sampled = f"nvmlDeviceGetPowerUsage sampled every {interval_s} s"
        if end_mj is not None and all(end_mj[d] >= self._start_mj[d] for d in end_mj):
            return result("measured", f"NVML total energy counter (nvmlDeviceGetTotalEnergyConsumption, mJ) of "
                          f"each GPU; peak from {sampled}, summed over the GPUs", seconds,
                          sum(end_mj[d] - self._start_mj[d] for d in end_mj) / 1000, len(self.samples), peak, **extra)
        why = error or "the energy counter went backwards (driver reloaded?)"
        if any(len(w) < 2 for w in self.watts.values()):
            return result(NOT_MEASURED, self.source, seconds, samples=len(self.samples), peak_watts=peak,
                          reason=f"no energy counter ({why}) and fewer than 2 power samples", **extra)
        return result("estimated", f"trapezoid integral of {sampled} of each GPU, start and stop included; "
                      f"no energy counter: {why}", seconds, sum(integral_joules(w) for w in self.watts.values()),
                      len(self.samples), peak, **extra)

    def close(self) -> None:
        if self._nvml is not None:
            close_nvml(self._nvml)
            self._nvml = None


# ----------------------------------------------------------------------------- RAPL (cpu)
class RaplReader:
    def __init__(self, root: str | Path = RAPL_ROOT) -> None:
        self.reason, self.source = None, f"Intel RAPL package energy counters ({root}/intel-rapl:N/energy_uj)"
        self.zones, self.names, self.samples = {}, {}, []
        # Package domains only: the core/uncore subzones intel-rapl:N:M are inside their package (dram,
        # also a subzone, is left out), and psys (platform, on some machines) contains the packages.
        for zone in sorted(Path(root).glob("intel-rapl:*")):
            name = (zone / "name").read_text().strip() if (zone / "name").is_file() else zone.name
            if re.fullmatch(r"intel-rapl:\d+", zone.name) and not name.startswith("psys"):
                self.zones[zone.name], self.names[zone.name] = zone, name
        if not self.zones:
            self.reason = f"no RAPL package domain under {root} (no intel-rapl:N/energy_uj)"
        self.device_count = len(self.zones)
        self.covers = (f"{self.device_count} CPU package(s) of this node (package-wide: every process on them "
                       "counts, every rank on this node included)")
        self.uj: dict[str, float] = {z: 0.0 for z in self.zones}
        self.polls = 0

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
        if now > self._last_s:  # the mean power since the last read, stamped at this read
            self.samples.append((now, step_uj / 1e6 / (now - self._last_s)))
        self._last, self._last_s, self.polls = current, now, self.polls + 1

    def joules(self, now: float) -> dict[str, float] | None:
        self.poll(now)
        return None if self.reason is not None else {z: uj / 1e6 for z, uj in self.uj.items()}

    def stop(self, now: float, seconds: float, interval_s: float) -> dict:
        self.poll(now)
        if self.reason is not None:
            return result(NOT_MEASURED, self.source, seconds, reason=self.reason)
        return result("measured", f"{self.source}, package domains only (subzones and psys excluded), "
                      f"read every {interval_s} s and at each timed window's start and end, wraparound at "
                      "max_energy_range_uj", seconds, sum(self.uj.values()) / 1e6, self.polls,
                      max((w for _, w in self.samples), default=None),
                      devices={z: {"name": n} for z, n in self.names.items()})

    def close(self) -> None:
        pass


# ----------------------------------------------------------------------------- Neuron sysfs (xla, neuron)
class NeuronReader:
    """Per-minute power records (aws-neuron-sdk tools/neuron-sys-tools/neuron-sysfs-user-guide.rst)."""

    def __init__(self, root: str | Path, max_watts: float | None, max_source: str,
                 wall_clock: Callable[[], float]) -> None:
        self.reason, self.max_watts, self.max_source, self._wall = None, max_watts, max_source, wall_clock
        self.source, self.samples = f"Neuron driver sysfs {root}/neuronN/stats/power/utilization", []
        devices = sorted((d for d in Path(root).glob("neuron*") if re.fullmatch(r"neuron\d+", d.name)),
                         key=lambda d: int(d.name[6:]))
        self.files = {d.name: d / "stats" / "power" / "utilization" for d in devices}
        self.records: dict[str, dict[int, dict]] = {name: {} for name in self.files}
        self.device_count = len(self.files)
        self.covers = (f"{self.device_count} Neuron device(s) of this node ({', '.join(self.files) or 'none'}): "
                       "every device on the node, used by this run or not")
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

    def joules(self, now: float) -> None:
        return None  # one record a minute: no reading resolves a window of seconds

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
            return result(NOT_MEASURED, self.source, seconds, samples=n_records, **extra,
                          reason=f"no POWER_STATUS_VALID record published during the window for {lacking} "
                                 "(the driver publishes one a minute)")
        if self.max_watts is None:
            return result(NOT_MEASURED, self.source, seconds, samples=n_records, reason=NO_PUBLISHED_MAX,
                          max_watts_source=self.max_source, **extra)
        for name, pct in util.items():
            devices[name]["joules"] = pct / 100 * self.max_watts * seconds
        return result("estimated", f"{self.source} (per-minute mean power as % of maximum, background power "
                      f"backed out per the driver source; records overlapping the window, polled every "
                      f"{interval_s} s) x {self.max_watts} W per device from {self.max_source} x seconds",
                      seconds, sum(d["joules"] for d in devices.values()), n_records, **extra)

    def close(self) -> None:
        pass
