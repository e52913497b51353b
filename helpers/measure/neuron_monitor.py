"""neuron-monitor: per-NeuronCore utilization, FLOP/s and memory, read from its JSON stream.

One report per period, one JSON document per line (aws-neuron-sdk
tools/neuron-sys-tools/neuron-monitor-user-guide.rst, "The JSON output format"). The monitor has no
per-engine figures and no power; those come from the Neuron profiler (helpers/measure/neuron_profile.py)
and the driver's sysfs (helpers/measure/energy_readers.py).
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Callable, Iterable
from pathlib import Path

import numpy as np
import psutil

from helpers.measure.utilization_sources import GIB, Source, stats

# where the DLAMI installs the tools; Jupyter kernels often lack it on PATH
NEURON_BIN = Path("/opt/aws/neuron/bin")


def find_binary() -> str | None:
    """Return the path of neuron-monitor: on PATH, else in the Neuron tools folder, else None."""
    return shutil.which("neuron-monitor") or shutil.which("neuron-monitor", path=NEURON_BIN)


def run_pids() -> set[int]:
    """Return this process and its torchrun siblings (same parent): the runtimes that are this run's."""
    if "LOCAL_RANK" not in os.environ:
        return {os.getpid()}
    return {os.getpid()} | {p.pid for p in psutil.Process(os.getppid()).children()}


def _number(x) -> float | None:
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x):
        return None
    return float(x)


def parse_neuron_monitor_line(line: str, only_pids: set | None = None) -> dict | None:
    """One neuron-monitor report as per-core utilization (%), flops/s and memory bytes; None if malformed."""
    try:
        doc = json.loads(line)
    except ValueError:
        return None
    if not isinstance(doc, dict) or not ("neuron_runtime_data" in doc or "system_data" in doc):
        return None
    try:
        util, flops, pids, errors, flops_fields = {}, {}, [], 0, set()
        device_bytes = host_bytes = None
        for runtime in doc.get("neuron_runtime_data") or []:
            if only_pids is not None and runtime.get("pid") not in only_pids:
                continue  # another job's runtime on the same instance
            pids.append(runtime.get("pid"))
            errors += bool(runtime.get("error"))
            report = runtime.get("report") or {}
            cores = (report.get("neuroncore_counters") or {}).get("neuroncores_in_use") or {}
            for core, counters in cores.items():
                if _number(counters.get("neuroncore_utilization")) is not None:
                    util[str(core)] = _number(counters["neuroncore_utilization"])
                # the user guide names the field `flops`; recent runtime captures show `effective_flops`
                for name in ("effective_flops", "flops"):
                    if _number(counters.get(name)) is not None:
                        flops[str(core)] = _number(counters[name])
                        flops_fields.add(name)
                        break
            used = (report.get("memory_used") or {}).get("neuron_runtime_used_bytes") or {}
            # Several runtimes (torchrun ranks) share the instance: their memory adds up.
            if _number(used.get("neuron_device")) is not None:
                device_bytes = (device_bytes or 0) + used["neuron_device"]
            if _number(used.get("host")) is not None:
                host_bytes = (host_bytes or 0) + used["host"]
        system = doc.get("system_data") or {}
        vcpu = (system.get("vcpu_usage") or {}).get("average_usage") or {}
        busy = [_number(vcpu.get(k)) for k in ("user", "nice", "system", "irq", "soft_irq")]
        host_vcpu = sum(b for b in busy if b is not None) if any(b is not None for b in busy) else None
        host_mem = _number((system.get("memory_info") or {}).get("memory_used_bytes"))
    except (AttributeError, TypeError):
        return None
    return {
        "pids": pids,
        "neuroncore_util_pct": util,
        "neuroncore_flops_per_s": flops,
        "device_mem_used_bytes": device_bytes,
        "runtime_host_mem_used_bytes": host_bytes,
        "host_vcpu_util_pct": host_vcpu,
        "host_mem_used_bytes": host_mem,
        "errors": errors,
        "flops_fields": sorted(flops_fields),
    }


_NEURON_FIELDS = (
    "neuroncore_util_pct",
    "achieved_tflops",
    "device_mem_used_gib",
    "runtime_host_mem_used_gib",
    "host_vcpu_util_pct",
    "host_mem_used_gib",
)


def summarize_neuron_monitor(lines: Iterable[str], only_pids: set | None = None) -> dict:
    """Mean/p90 over reports of NeuronCore utilization (%), TFLOP/s and memory (GiB); flat dict."""
    reports, malformed = [], 0
    for line in lines:
        if not line.strip():
            continue
        report = parse_neuron_monitor_line(line, only_pids)
        if report is None:
            malformed += 1
        else:
            reports.append(report)
    cores = sorted({c for r in reports for c in r["neuroncore_util_pct"]}, key=lambda c: (len(c), c))
    out = {"backend": "neuron-monitor"}
    # Per report: mean over the cores in use, then mean/p90 over reports.
    out.update(
        stats(
            "neuroncore_util_pct",
            [float(np.mean(list(r["neuroncore_util_pct"].values()))) for r in reports if r["neuroncore_util_pct"]],
        )
    )
    per_core = {
        core: [r["neuroncore_util_pct"][core] for r in reports if core in r["neuroncore_util_pct"]] for core in cores
    }
    out["neuroncore_util_pct_mean_per_core"] = {
        core: round(float(np.mean(values)), 3) for core, values in per_core.items()
    }
    out.update(
        stats(
            "achieved_tflops",
            [sum(r["neuroncore_flops_per_s"].values()) / 1e12 for r in reports if r["neuroncore_flops_per_s"]],
        )
    )
    for key, field, unit in (
        ("device_mem_used_bytes", "device_mem_used_gib", GIB),
        ("runtime_host_mem_used_bytes", "runtime_host_mem_used_gib", GIB),
        ("host_mem_used_bytes", "host_mem_used_gib", GIB),
        ("host_vcpu_util_pct", "host_vcpu_util_pct", 1),
    ):
        out.update(stats(field, [r[key] / unit for r in reports if r[key] is not None]))
    found = sorted({f for r in reports for f in r["flops_fields"]})
    out["flops_field"] = ", ".join(found) if found else "none in the reports"
    out.update(
        neuroncores_seen=len(cores),
        runtime_errors=sum(r["errors"] for r in reports),
        samples=len(reports),
        malformed_lines=malformed,
    )
    if not reports:
        out["reason"] = "no parseable neuron-monitor report in the steady window"
    return out


class NeuronMonitorSource(Source):
    """A `neuron-monitor` subprocess whose JSON lines are pushed to the Monitor as they arrive."""

    backend, fields, push = "neuron-monitor", _NEURON_FIELDS, True

    def __init__(self, interval_s: float) -> None:
        self._proc, self._thread, self._config = None, None, None
        self._binary = find_binary()
        if self._binary is None:
            self.reason = f"neuron-monitor is neither on PATH nor in {NEURON_BIN}"
        self.only_pids = run_pids()
        # The monitor's period is a duration string; whole seconds are the documented form.
        self._period = f"{max(1, round(interval_s))}s"

    def start(self, record: Callable[[str], None]) -> None:
        config = {
            "period": self._period,
            "neuron_runtimes": [
                {
                    "tag_filter": ".*",
                    "metrics": [{"type": "neuroncore_counters"}, {"type": "memory_used"}, {"type": "execution_stats"}],
                }
            ],
            "system_metrics": [{"type": "vcpu_usage"}, {"type": "memory_info"}],
        }
        fd, self._config = tempfile.mkstemp(prefix="neuron-monitor-", suffix=".json")
        with os.fdopen(fd, "w") as f:
            json.dump(config, f)
        try:
            self._proc = subprocess.Popen(
                [self._binary, "-c", self._config],
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
                bufsize=1,
            )
        except OSError as err:
            self.reason = f"neuron-monitor failed to start: {err}"
            return

        def read() -> None:
            for line in self._proc.stdout:
                record(line)

        self._thread = threading.Thread(target=read, name="neuron-monitor-reader", daemon=True)
        self._thread.start()

    def summarize(self, lines: list[str]) -> dict:
        return summarize_neuron_monitor(lines, self.only_pids)

    def close(self) -> None:
        if self._proc is not None and self._proc.poll() not in (None, 0):
            self.failure = f"neuron-monitor exited with code {self._proc.returncode}"
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self._config:
            Path(self._config).unlink(missing_ok=True)
            self._config = None
