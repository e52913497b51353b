"""Device and host utilization, sampled in a background thread around the training loop.

    mon = start_monitor("cuda")      # "cuda" | "xla" | "neuron" | "cpu"
    ... warm-up steps ...
    mon.mark_steady()                # only samples taken after this count
    ... timed steps ...
    record.update(mon.stop())        # flat, JSON-serializable

Backends: psutil (cpu), NVML through pynvml from nvidia-ml-py (cuda), a `neuron-monitor`
subprocess (neuron, and xla: in this project XLA means Trainium). A backend that cannot measure
reports the string "not measured" (never 0) for each value, with a "reason".
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import tempfile
import threading
from typing import Callable, Iterable

import numpy as np
import psutil

NOT_MEASURED = "not measured"
GIB = 2**30


def _stats(name: str, values: list[float]) -> dict:
    """{name}_mean and {name}_p90 over values, or "not measured" for both when empty."""
    if not values:
        return {f"{name}_mean": NOT_MEASURED, f"{name}_p90": NOT_MEASURED}
    return {
        f"{name}_mean": round(float(np.mean(values)), 3),
        f"{name}_p90": round(float(np.percentile(values, 90)), 3),
    }


def _not_measured(backend: str, fields: Iterable[str], reason: str) -> dict:
    out = {"backend": backend}
    for field in fields:
        out.update(_stats(field, []))
    out.update(samples=0, reason=reason)
    return out


# ----------------------------------------------------------------------------- neuron-monitor
# One report per period, one JSON document per line (aws-neuron-sdk
# tools/neuron-sys-tools/neuron-monitor-user-guide.rst, "The JSON output format").
# The monitor has no per-engine figures; those come from the Neuron profiler (helpers/profile.py).

def _number(x) -> float | None:
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x):
        return None
    return float(x)


def parse_neuron_monitor_line(line: str) -> dict | None:
    """One neuron-monitor report as per-core utilization (%), flops/s and memory bytes; None if malformed."""
    try:
        doc = json.loads(line)
    except ValueError:
        return None
    if not isinstance(doc, dict) or not ("neuron_runtime_data" in doc or "system_data" in doc):
        return None
    try:
        util, flops, pids, errors = {}, {}, [], 0
        device_bytes = host_bytes = None
        for runtime in doc.get("neuron_runtime_data") or []:
            pids.append(runtime.get("pid"))
            errors += bool(runtime.get("error"))
            report = runtime.get("report") or {}
            cores = (report.get("neuroncore_counters") or {}).get("neuroncores_in_use") or {}
            for core, counters in cores.items():
                if _number(counters.get("neuroncore_utilization")) is not None:
                    util[str(core)] = _number(counters["neuroncore_utilization"])
                if _number(counters.get("flops")) is not None:
                    flops[str(core)] = _number(counters["flops"])
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
    }


_NEURON_FIELDS = ("neuroncore_util_pct", "achieved_tflops", "device_mem_used_gib",
                  "runtime_host_mem_used_gib", "host_vcpu_util_pct", "host_mem_used_gib")


def summarize_neuron_monitor(lines: Iterable[str]) -> dict:
    """Mean/p90 over reports of NeuronCore utilization (%), TFLOP/s and memory (GiB); flat dict."""
    reports, malformed = [], 0
    for line in lines:
        if not line.strip():
            continue
        report = parse_neuron_monitor_line(line)
        if report is None:
            malformed += 1
        else:
            reports.append(report)
    cores = sorted({c for r in reports for c in r["neuroncore_util_pct"]}, key=lambda c: (len(c), c))
    out = {"backend": "neuron-monitor"}
    # Per report: mean over the cores in use, then mean/p90 over reports.
    out.update(_stats("neuroncore_util_pct", [float(np.mean(list(r["neuroncore_util_pct"].values())))
                                              for r in reports if r["neuroncore_util_pct"]]))
    for core in cores:
        values = [r["neuroncore_util_pct"][core] for r in reports if core in r["neuroncore_util_pct"]]
        out[f"nc{core}_util_pct_mean"] = round(float(np.mean(values)), 3)
    out.update(_stats("achieved_tflops", [sum(r["neuroncore_flops_per_s"].values()) / 1e12
                                          for r in reports if r["neuroncore_flops_per_s"]]))
    for key, field in (("device_mem_used_bytes", "device_mem_used_gib"),
                       ("runtime_host_mem_used_bytes", "runtime_host_mem_used_gib"),
                       ("host_mem_used_bytes", "host_mem_used_gib")):
        out.update(_stats(field, [r[key] / GIB for r in reports if r[key] is not None]))
    out.update(_stats("host_vcpu_util_pct",
                      [r["host_vcpu_util_pct"] for r in reports if r["host_vcpu_util_pct"] is not None]))
    out.update(neuroncores_seen=len(cores), runtime_errors=sum(r["errors"] for r in reports),
               samples=len(reports), malformed_lines=malformed)
    if not reports:
        out["reason"] = "no parseable neuron-monitor report in the steady window"
    return out


# ----------------------------------------------------------------------------- sources
class _Source:
    """What Monitor needs of a backend; pull sources are polled, push sources call record()."""

    backend, fields, reason, push = "", (), None, False
    failure = None  # why a started backend produced nothing, when it can tell

    def reset(self) -> None:
        pass

    def sample(self) -> dict | None:
        return None

    def summarize(self, samples: list) -> dict:
        out = {"backend": self.backend}
        for field in self.fields:
            out.update(_stats(field, [s[field] for s in samples if s.get(field) is not None]))
        out["samples"] = len(samples)
        return out

    def close(self) -> None:
        pass


class _PsutilSource(_Source):
    """System-wide CPU % (all cores = 100), this process's CPU % (one core = 100), its RSS."""

    backend, fields = "psutil", ("cpu_util_pct", "proc_cpu_util_pct", "rss_gib")

    def __init__(self) -> None:
        self._proc = psutil.Process()
        self.reset()

    def reset(self) -> None:
        # cpu_percent(None) measures since its previous call: start the count afresh.
        psutil.cpu_percent(None)
        self._proc.cpu_percent(None)

    def sample(self) -> dict | None:
        return {"cpu_util_pct": psutil.cpu_percent(None),
                "proc_cpu_util_pct": self._proc.cpu_percent(None),
                "rss_gib": self._proc.memory_info().rss / GIB}


class _NvmlSource(_Source):
    """NVML utilization and memory of the current CUDA device.

    sm_util_pct is NVML utilization.gpu: the share of the last sample period (1/6 s to 1 s by
    product) in which at least one kernel ran. It is not SM occupancy (that needs DCGM profiling).
    mem_util_pct is NVML utilization.memory: the share of time device memory was read or written.
    """

    backend, fields = "nvml", ("sm_util_pct", "mem_util_pct", "mem_used_gib")

    def __init__(self) -> None:
        self.reason, self.errors, self._nvml = None, 0, None
        try:
            import pynvml
        except ImportError:
            self.reason = "pynvml (nvidia-ml-py) is not installed"
            return
        try:
            pynvml.nvmlInit()
        except pynvml.NVMLError as err:
            self.reason = f"NVML unavailable: {err}"
            return
        self._nvml = pynvml
        try:
            self._handle = self._current_device_handle()
        except pynvml.NVMLError as err:
            self.reason = f"NVML has no handle for the current device: {err}"
            self.close()

    def _current_device_handle(self):
        index, uuid = 0, None
        try:
            import torch
            if torch.cuda.is_available():
                index = torch.cuda.current_device()
                uuid = str(torch.cuda.get_device_properties(index).uuid)
        except (ImportError, RuntimeError, AttributeError):
            pass
        if uuid:
            # With CUDA_VISIBLE_DEVICES the CUDA index is not the NVML index; the UUID is shared.
            try:
                return self._nvml.nvmlDeviceGetHandleByUUID(uuid if uuid.startswith("GPU-") else f"GPU-{uuid}")
            except (self._nvml.NVMLError, TypeError):
                pass
        return self._nvml.nvmlDeviceGetHandleByIndex(index)

    def sample(self) -> dict | None:
        try:
            util = self._nvml.nvmlDeviceGetUtilizationRates(self._handle)
            mem = self._nvml.nvmlDeviceGetMemoryInfo(self._handle)
        except self._nvml.NVMLError:
            self.errors += 1
            return None
        return {"sm_util_pct": float(util.gpu), "mem_util_pct": float(util.memory),
                "mem_used_gib": mem.used / GIB}

    def summarize(self, samples: list[dict]) -> dict:
        return {**super().summarize(samples), "nvml_errors": self.errors}

    def close(self) -> None:
        if self._nvml is not None:
            try:
                self._nvml.nvmlShutdown()
            except self._nvml.NVMLError:
                pass
            self._nvml = None


class _NeuronMonitorSource(_Source):
    """A `neuron-monitor` subprocess whose JSON lines are pushed to the Monitor as they arrive."""

    backend, fields, push = "neuron-monitor", _NEURON_FIELDS, True

    def __init__(self, interval_s: float) -> None:
        self._proc, self._thread, self._config = None, None, None
        self._binary = shutil.which("neuron-monitor")
        if self._binary is None:
            self.reason = "neuron-monitor is not on PATH"
        # The monitor's period is a duration string; whole seconds are the documented form.
        self._period = f"{max(1, round(interval_s))}s"

    def start(self, record: Callable[[str], None]) -> None:
        config = {
            "period": self._period,
            "neuron_runtimes": [{"tag_filter": ".*", "metrics": [
                {"type": "neuroncore_counters"}, {"type": "memory_used"}, {"type": "execution_stats"}]}],
            "system_metrics": [{"type": "vcpu_usage"}, {"type": "memory_info"}],
        }
        fd, self._config = tempfile.mkstemp(prefix="neuron-monitor-", suffix=".json")
        with os.fdopen(fd, "w") as f:
            json.dump(config, f)
        try:
            self._proc = subprocess.Popen([self._binary, "-c", self._config], stdout=subprocess.PIPE,
                                          stderr=subprocess.DEVNULL, text=True, bufsize=1)
        except OSError as err:
            self.reason = f"neuron-monitor failed to start: {err}"
            return

        def read() -> None:
            for line in self._proc.stdout:
                record(line)

        self._thread = threading.Thread(target=read, name="neuron-monitor-reader", daemon=True)
        self._thread.start()

    def summarize(self, lines: list[str]) -> dict:
        return summarize_neuron_monitor(lines)

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
        if self._config and os.path.exists(self._config):
            os.unlink(self._config)
            self._config = None


# ----------------------------------------------------------------------------- monitor
class Monitor:
    """Collects samples from a source; stop() returns mean/p90 over those taken after mark_steady()."""

    def __init__(self, source, interval_s: float = 0.5, start_thread: bool = True) -> None:
        self.source, self.interval_s = source, interval_s
        self._records: list[tuple[bool, object]] = []
        self._lock = threading.Lock()
        self._steady = False
        self._stopped = threading.Event()
        self._thread = None
        self._result: dict | None = None
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
            self._records.append((self._steady, payload))

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

    def stop(self) -> dict:
        """Stop sampling; flat dict of mean/p90 over the steady window ("not measured" + reason if none)."""
        if self._result is not None:
            return self._result
        self._stopped.set()
        if self._thread is not None:
            self._thread.join()
        self.source.close()
        with self._lock:
            steady = [payload for is_steady, payload in self._records if is_steady]
        if self.source.reason is not None:
            result = _not_measured(self.source.backend, self.source.fields, self.source.reason)
        elif not steady:
            reason = ("mark_steady() was never called" if not self._steady
                      else self.source.failure or "no samples in the steady window")
            result = _not_measured(self.source.backend, self.source.fields, reason)
        else:
            result = self.source.summarize(steady)
        result["interval_s"] = self.interval_s
        self._result = result
        return result


def start_monitor(device_type: str, interval_s: float = 0.5) -> Monitor:
    """Start sampling the backend of device_type ("cuda", "xla", "neuron" or "cpu") every interval_s."""
    if device_type == "cpu":
        source = _PsutilSource()
    elif device_type == "cuda":
        source = _NvmlSource()
    elif device_type in ("xla", "neuron"):
        source = _NeuronMonitorSource(interval_s)
    else:
        raise ValueError(f"device_type must be one of cuda, xla, neuron, cpu; got {device_type!r}")
    return Monitor(source, interval_s)
