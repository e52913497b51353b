"""What the energy meter reads, per backend: NVML through zeus (CUDA GPUs), Intel RAPL (CPU), Neuron sysfs.

Every reader has the same small interface, which helpers/measure/energy_meter.py's meter drives:

    reader.start(now); reader.poll(now)    # the whole run's window opens; a power sample every interval_s
    reader.begin(now); reader.end(now)     # a timed window: {device: joules} over it; None: cannot resolve
    reader.stop(now, seconds, interval_s)  # the whole run: joules, mean_watts, method, source, ...
    reader.samples                         # [(seconds, watts of every device covered)]: the peak
    reader.covers, reader.device_count     # which devices the figure covers, in words and as a count

A reader that cannot tell says why (`reason`), never 0. Counters are device- or package-wide: other
processes on the same device count too.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Callable, Sequence
from contextlib import suppress
from pathlib import Path

from helpers.measure.utilization_sources import current_cuda
from helpers.run.schema import Energy

try:  # zeus reads NVML's counter; without it a GPU run records its energy as not measured, and runs
    from zeus.device import get_gpus
    from zeus.exception import ZeusBaseError
except ImportError as err:
    get_gpus, ZeusBaseError = None, RuntimeError  # nothing below calls zeus then: NvmlReader says why
    NO_ZEUS: str | None = f"zeus is not installed ({err}): pip install -r requirements.txt"
else:
    NO_ZEUS = None

NEURON_ROOT = "/sys/devices/virtual/neuron_device"
RAPL_ROOT = "/sys/class/powercap"
FACTS_CSV = Path(__file__).resolve().parents[1] / "facts" / "device_power.csv"
NO_PUBLISHED_MAX = "no published maximum power for this device"
WHOLE_RUN, TIMED = "whole_run", "timed"  # zeus's windows: the meter's whole span; the timed window open now
# what a zeus read raises: its own errors, ValueError for a window it does not hold, KeyError for a window
# before Volta without power samples (zeus 0.16 then looks up a power it did not take)
READ_ERRORS = (ZeusBaseError, KeyError, ValueError)
NVML_COUNTER = (
    "NVML total energy counter (nvmlDeviceGetTotalEnergyConsumption, mJ) of each GPU, read by "
    "zeus (ZeusMonitor windows)"
)
NVML_POWER = (
    "zeus's PowerMonitor: NVML power samples of each GPU integrated over each window (no energy counter before Volta)"
)


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
        return {
            "status": parts[0],
            "timestamp_s": int(parts[1]),
            "min_pct": float(parts[2]),
            "max_pct": float(parts[3]),
            "avg_pct": float(parts[4]),
        }
    except ValueError:
        return None


def result(
    method: str | None,
    source: str,
    seconds: float,
    joules: float | None = None,
    samples: int = 0,
    peak_watts: float | None = None,
    reason: str | None = None,
    **extra,
) -> Energy:
    """Return a reader's figures as the record's energy section; None (with the reason) where not measured."""
    measured = method is not None and joules is not None
    why = {} if measured else {"reason": reason or "no reading"}
    return Energy(
        method=method if measured else None,
        source=source,
        seconds=seconds,
        joules=joules if measured else None,
        mean_watts=joules / seconds if measured and seconds > 0 else None,
        peak_watts=peak_watts,
        power_samples=samples,
        **why,
        **extra,
    )


# ----------------------------------------------------------------------------- NVML through zeus (cuda)
class NvmlReader:
    """zeus's windows over NVML's energy counter (Volta and newer; before, its power samples) of the GPUs given."""

    def __init__(self, cuda_devices: Sequence[int] | None = None) -> None:
        self.samples, self.errors, self.names, self.labels = [], 0, {}, {}
        self.monitor, self.reason, self.failure, self.counter = None, None, None, True
        self.source = "NVML (nvidia-ml-py), read by zeus"
        try:
            if NO_ZEUS:
                raise RuntimeError(NO_ZEUS)
            self.labels = self._gpus(cuda_devices)
            from zeus.monitor import ZeusMonitor  # imports scikit-learn (seconds): only where it reads

            self.monitor = ZeusMonitor(gpu_indices=list(self.labels), cpu_indices=[])
        except (*READ_ERRORS, IndexError, RuntimeError) as err:
            self.reason = f"NVML unavailable: {err}"
        self.device_count = len(self.labels) or len(cuda_devices or [None])
        gpus = ", ".join(self.labels.values() or ["cuda"])
        self.covers = (
            f"{self.device_count} GPU(s) of this node, one NVML handle each: {gpus} (every GPU this node's ranks use)"
            if cuda_devices is not None
            else "the run's GPU (the current CUDA device)"
        )

    def _gpus(self, cuda_devices: Sequence[int] | None) -> dict[int, str]:
        """Return {zeus's GPU index: the record's label} of the GPUs read; their names into self.names."""
        self.gpus = get_gpus()  # zeus's indices are CUDA's: it applies CUDA_VISIBLE_DEVICES
        labels = {i: f"cuda:{i}" for i in cuda_devices} if cuda_devices is not None else {current_cuda()[0]: "cuda"}
        if missing := [i for i in labels if i >= len(self.gpus)]:
            raise IndexError(f"this node's GPUs {missing} are not among the {len(self.gpus)} zeus sees")
        for index, label in labels.items():
            with suppress(ZeusBaseError):
                self.names[label] = str(self.gpus.get_name(index))
        self.counter = all(self.gpus.supports_get_total_energy_consumption(i) for i in labels)
        self.source = NVML_COUNTER if self.counter else NVML_POWER
        return labels

    def start(self, now: float) -> None:
        """Open the whole run's window; take the first power sample."""
        try:
            self.monitor.begin_window(WHOLE_RUN, sync_execution=False)  # the timer syncs the device itself
        except READ_ERRORS as err:
            self.reason = f"zeus could not open a window: {err}"
            return
        self.poll(now)

    def poll(self, now: float) -> None:
        """Take one power sample of every GPU covered (for the peak)."""
        try:
            self.samples.append((now, sum(self.gpus.get_average_power_usage(i) for i in self.labels) / 1000))
        except ZeusBaseError:
            self.errors += 1

    def begin(self, now: float) -> None:
        """Open a timed window (the timer's, after its device sync)."""
        try:
            self.monitor.begin_window(TIMED, sync_execution=False, restart=True)
        except READ_ERRORS as err:
            self.failure = str(err)  # end() then finds no window: None

    def end(self, now: float, key: str = TIMED) -> dict[str, float] | None:
        """Return {GPU: joules} over the window `key`, closed now; None where a read failed."""
        try:
            joules = self.monitor.end_window(key, sync_execution=False).gpu_energy
        except READ_ERRORS as err:
            self.failure = str(err)
            return None
        if min(joules.values(), default=0) < 0:
            self.failure = "the energy counter went backwards (driver reloaded?)"
            return None
        return {self.labels[i]: j for i, j in joules.items()}

    def stop(self, now: float, seconds: float, interval_s: float) -> Energy:
        """Close the whole run's window; return its figures as the record names them."""
        self.poll(now)
        joules, peak = self.end(now, WHOLE_RUN), max((w for _, w in self.samples), default=None)
        peak_source = f"; peak from NVML's power (zeus get_average_power_usage) sampled every {interval_s} s"
        return result(
            None if joules is None else ("measured" if self.counter else "estimated"),
            self.source if joules is None else f"{self.source}{peak_source}, summed over the GPUs",
            seconds,
            None if joules is None else sum(joules.values()),
            len(self.samples),
            peak,
            reason=f"zeus could not read the counters: {self.failure}",
            power_read_errors=self.errors,
            devices={d: {"name": n} for d, n in self.names.items()},
        )

    def close(self) -> None:
        """Stop zeus's power-sampling processes, where it started them (GPUs before Volta)."""
        if self.monitor is not None and self.monitor.power_monitor is not None:
            self.monitor.power_monitor.stop()


# ----------------------------------------------------------------------------- RAPL (cpu)
class RaplReader:
    """Intel RAPL's package counters."""

    # read here, not by zeus: its RAPL reader starts a process per counter file to catch the wraparound, and
    # each re-imports the run's script (torch) beside the CPU it measures

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
        self.covers = (
            f"{self.device_count} CPU package(s) of this node (package-wide: every process on "
            "them counts, every rank on this node included)"
        )
        self.uj: dict[str, float] = {z: 0.0 for z in self.zones}
        self.polls = 0

    def _read(self) -> dict[str, tuple[int, int]] | None:
        try:
            return {
                z: (int((d / "energy_uj").read_text()), int((d / "max_energy_range_uj").read_text()))
                for z, d in self.zones.items()
            }
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

    def begin(self, now: float) -> None:
        """Open a timed window: the microjoules counted up to now."""
        self.poll(now)
        self._opened = dict(self.uj)

    def end(self, now: float) -> dict[str, float] | None:
        """Return {package: joules} since begin(), read now; None where a read failed."""
        self.poll(now)
        if self.reason is not None:
            return None
        return {zone: (uj - self._opened[zone]) / 1e6 for zone, uj in self.uj.items()}

    def stop(self, now: float, seconds: float, interval_s: float) -> Energy:
        self.poll(now)
        if self.reason is not None:
            return result(None, self.source, seconds, reason=self.reason)
        return result(
            "measured",
            f"{self.source}, package domains only (subzones and psys excluded), "
            f"read every {interval_s} s and at each timed window's start and end, wraparound at "
            "max_energy_range_uj",
            seconds,
            sum(self.uj.values()) / 1e6,
            self.polls,
            max((w for _, w in self.samples), default=None),
            devices={z: {"name": n} for z, n in self.names.items()},
        )

    def close(self) -> None:
        pass


# ----------------------------------------------------------------------------- Neuron sysfs (xla, neuron)
class NeuronReader:
    """Per-minute power records (aws-neuron-sdk tools/neuron-sys-tools/neuron-sysfs-user-guide.rst)."""

    def __init__(
        self, root: str | Path, max_watts: float | None, max_source: str, wall_clock: Callable[[], float]
    ) -> None:
        self.reason, self.max_watts, self.max_source, self._wall = None, max_watts, max_source, wall_clock
        self.source, self.samples = f"Neuron driver sysfs {root}/neuronN/stats/power/utilization", []
        devices = sorted(
            (d for d in Path(root).glob("neuron*") if re.fullmatch(r"neuron\d+", d.name)), key=lambda d: int(d.name[6:])
        )
        self.files = {d.name: d / "stats" / "power" / "utilization" for d in devices}
        self.records: dict[str, dict[int, dict]] = {name: {} for name in self.files}
        self.device_count = len(self.files)
        names = ", ".join(self.files) or "none"
        self.covers = (
            f"{self.device_count} Neuron device(s) of this node ({names}): every device on the "
            "node, used by this run or not"
        )
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

    def begin(self, now: float) -> None:
        """A timed window opened: nothing to read (one record a minute resolves no window of seconds)."""

    def end(self, now: float) -> None:
        """A timed window closed: None, it cannot be resolved."""

    def stop(self, now: float, seconds: float, interval_s: float) -> Energy:
        self.poll(now)
        util = {n: sum(r["avg_pct"] for r in rs.values()) / len(rs) for n, rs in self.records.items() if rs}
        n_records = sum(len(recs) for recs in self.records.values())
        devices = {
            n: {
                "mean_power_util_pct": util.get(n),
                "records": len(self.records[n]),
                "utilization_raw_text": self.raw_text[n],
            }
            for n in self.files
        }
        extra = {
            "samples": n_records,
            "devices": devices,
            "mean_power_util_pct": sum(util.values()) / len(util) if len(util) == len(self.files) else None,
        }
        if len(util) < len(self.files):
            lacking = ", ".join(n for n in self.files if n not in util)
            why = (
                f"no POWER_STATUS_VALID record published during the window for {lacking} "
                "(the driver publishes one a minute)"
            )
            return result(None, self.source, seconds, reason=why, **extra)
        if self.max_watts is None:
            return result(
                None, self.source, seconds, reason=NO_PUBLISHED_MAX, max_watts_source=self.max_source, **extra
            )
        for name, pct in util.items():
            devices[name]["joules"] = pct / 100 * self.max_watts * seconds
        return result(
            "estimated",
            f"{self.source} (per-minute mean power as % of maximum, background power "
            f"backed out per the driver source; records overlapping the window, polled every "
            f"{interval_s} s) x {self.max_watts} W per device from {self.max_source} x seconds",
            seconds,
            sum(d["joules"] for d in devices.values()),
            **extra,
        )

    def close(self) -> None:
        pass
