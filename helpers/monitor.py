"""Utilization over the steady timing windows, sampled in a thread: psutil (CPU), NVML + GPM (CUDA), neuron-monitor.

    watcher = monitor.start("cuda")    # a watcher of the timer: hears each timed window open and close
    ... the timer's windows ...
    rec.utilization = watcher.stop()   # each figure's mean and p90 over the samples of the steady windows

A sample counts only when taken inside a timed window that is not a warm-up window: compilation, the profiled
steps and the evaluations between windows are left out, as timing and energy leave them out. A source that
cannot measure says why (`reason`); its figures are then None, never 0.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterable
from contextlib import suppress
from pathlib import Path
from typing import Any

import numpy as np
import psutil

from helpers import record

GIB = 2**30
Window = Any  # helpers.timing.Window (.warmup, .steps, .seconds, .samples): a sibling module, so not imported
NEURON_BIN = Path("/opt/aws/neuron/bin")  # where the DLAMI installs the tools; Jupyter kernels often lack it on PATH


def stats(name: str, values: list[float]) -> dict:
    """Return {name}_mean and {name}_p90 over `values` ({} when there are none: the section's None stands)."""
    if not values:
        return {}
    return {f"{name}_mean": round(float(np.mean(values)), 3), f"{name}_p90": round(float(np.percentile(values, 90)), 3)}


def number(x: object) -> float | None:
    """Return `x` as a finite float, None for anything else (bools, text, NaN)."""
    ok = isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)
    return float(x) if ok else None


class Source:
    """What the monitor samples; a pull source is polled by the thread, a push source calls `record` itself."""

    backend, fields, push = "", (), False
    reason: str | None = None  # why it cannot measure at all
    failure: str | None = None  # why a started source produced nothing, when it can tell

    def reset(self) -> None:
        """Start rates (CPU %, GPM) afresh: a window opened, the pause before it is not counted."""

    def sample(self) -> dict | None:
        """Return one sample ({field: value}) now, None when the read failed."""
        return None

    def summarize(self, samples: list) -> dict:
        """Return the Utilization section's fields: each field's mean and p90 over `samples`."""
        out = {"backend": self.backend, "samples": len(samples)}
        for field in self.fields:
            out |= stats(field, [s[field] for s in samples if s.get(field) is not None])
        return out

    def close(self) -> None:
        """Release what the source holds (NVML, the neuron-monitor process)."""


class PsutilSource(Source):
    """System-wide CPU % (all cores = 100), this process's CPU % (one core = 100), its resident set."""

    backend, fields = "psutil", ("cpu_util_pct", "proc_cpu_util_pct", "rss_gib")

    def __init__(self) -> None:
        self.proc = psutil.Process()
        self.reset()

    def reset(self) -> None:
        psutil.cpu_percent(None)  # cpu_percent(None) measures since its previous call
        self.proc.cpu_percent(None)

    def sample(self) -> dict:
        return {
            "cpu_util_pct": psutil.cpu_percent(None),
            "proc_cpu_util_pct": self.proc.cpu_percent(None),
            "rss_gib": self.proc.memory_info().rss / GIB,
        }


def nvml_handle(nvml):
    """Return NVML's handle of this process's CUDA device: by UUID (CUDA_VISIBLE_DEVICES renumbers CUDA's only)."""
    torch = sys.modules.get("torch")  # the training process has imported it
    with suppress(AttributeError, RuntimeError, AssertionError, nvml.NVMLError):
        uuid = str(torch.cuda.get_device_properties(torch.cuda.current_device()).uuid)
        return nvml.nvmlDeviceGetHandleByUUID(uuid if uuid.startswith("GPU-") else f"GPU-{uuid}")
    return nvml.nvmlDeviceGetHandleByIndex(0)


# GPM's rates are taken between two of its samples: % of SMs busy (DCGM's SM activity), % of time the tensor pipes ran
GPM_METRICS = {"sm_active_pct": "NVML_GPM_METRIC_SM_UTIL", "tensor_active_pct": "NVML_GPM_METRIC_ANY_TENSOR_UTIL"}
MIN_GPM_READINGS = 2  # one reading of a short window came out as a measured 0% tensor activity


class NvmlSource(Source):
    """NVML utilization and memory of the current CUDA device; SM and tensor-pipe activity where GPM has them."""

    backend = "nvml"
    # sm_util_pct: NVML's utilization.gpu, the share of a sample period (1/6 s to 1 s) in which any kernel ran: one
    # small kernel reads 100%. sm_active_pct / tensor_active_pct: GPM (Hopper and later). mem_util_pct: memory busy.
    fields = ("sm_util_pct", "sm_active_pct", "tensor_active_pct", "mem_util_pct", "mem_used_gib")

    def __init__(self) -> None:
        self.errors, self.nvml, self.gpm = 0, None, None
        try:
            import pynvml as nvml
        except ImportError:
            self.reason = self.gpm_reason = "pynvml (nvidia-ml-py) is not installed"
            return
        try:
            nvml.nvmlInit()
            self.handle, self.nvml = nvml_handle(nvml), nvml
        except nvml.NVMLError as err:
            self.reason = self.gpm_reason = f"NVML unavailable: {err}"
            return
        try:
            if not nvml.nvmlGpmQueryDeviceSupport(self.handle).isSupportedDevice:
                self.gpm_reason = "NVML GPM (SM and tensor-pipe activity) is not supported on this GPU: Hopper or later"
            else:
                self.gpm, self.gpm_reason = nvml.nvmlGpmSampleGet(self.handle, nvml.nvmlGpmSampleAlloc()), None
        except (nvml.NVMLError, AttributeError) as err:  # an older driver or nvidia-ml-py without GPM
            self.gpm_reason = f"NVML GPM (SM and tensor-pipe activity) unavailable: {err}"

    def reset(self) -> None:
        if self.gpm is not None:
            self.gpm = self.nvml.nvmlGpmSampleGet(self.handle, self.gpm)

    def sample(self) -> dict | None:
        try:
            util = self.nvml.nvmlDeviceGetUtilizationRates(self.handle)
            used = self.nvml.nvmlDeviceGetMemoryInfo(self.handle).used
        except self.nvml.NVMLError:
            self.errors += 1
            return None
        out = {"sm_util_pct": float(util.gpu), "mem_util_pct": float(util.memory), "mem_used_gib": used / GIB}
        return out | self.gpm_activity()

    def gpm_activity(self) -> dict[str, float]:
        """Return GPM's SM and tensor-pipe activity (%) since the previous GPM sample ({} without GPM)."""
        if self.gpm is None:
            return {}
        nvml = self.nvml
        try:
            newer = nvml.nvmlGpmSampleGet(self.handle, nvml.nvmlGpmSampleAlloc())
            query = nvml.c_nvmlGpmMetricsGet_t()
            query.version, query.numMetrics = nvml.NVML_GPM_METRICS_GET_VERSION, len(GPM_METRICS)
            query.sample1, query.sample2 = self.gpm, newer
            for i, constant in enumerate(GPM_METRICS.values()):
                query.metrics[i].metricId = getattr(nvml, constant)
            metrics = nvml.nvmlGpmMetricsGet(query).metrics
            if failed := [m.nvmlReturn for m in metrics[: len(GPM_METRICS)] if m.nvmlReturn != nvml.NVML_SUCCESS]:
                raise nvml.NVMLError(failed[0])
        except nvml.NVMLError as err:
            self.gpm_reason, self.gpm = f"NVML GPM failed during the run: {err}", None
            return {}
        nvml.nvmlGpmSampleFree(self.gpm)
        self.gpm = newer
        return {field: float(metrics[i].value) for i, field in enumerate(GPM_METRICS)}

    def summarize(self, samples: list[dict]) -> dict:
        reason, readings = self.gpm_reason, sum(s.get("sm_active_pct") is not None for s in samples)
        if 0 < readings < MIN_GPM_READINGS:
            samples = [{k: v for k, v in s.items() if k not in GPM_METRICS} for s in samples]
            reason = (
                f"{readings} NVML GPM reading in the steady windows, fewer than {MIN_GPM_READINGS}: GPM metrics are "
                "rates between samples, and one reading of a window this short is not a measured activity"
            )
        out = super().summarize(samples) | {"nvml_errors": self.errors}
        return out if "sm_active_pct_mean" in out else out | {"gpm_reason": reason}

    def close(self) -> None:
        if self.nvml is not None:
            with suppress(self.nvml.NVMLError):
                if self.gpm is not None:
                    self.nvml.nvmlGpmSampleFree(self.gpm)
                self.nvml.nvmlShutdown()
            self.nvml = self.gpm = None


# ----------------------------------------------------------------------------- neuron-monitor
def find_binary() -> str | None:
    """Return the path of neuron-monitor: on PATH, else in the Neuron tools folder, else None."""
    return shutil.which("neuron-monitor") or shutil.which("neuron-monitor", path=NEURON_BIN)


def run_pids() -> set[int]:
    """Return this process and its torchrun siblings (same parent): the runtimes that are this run's."""
    if "LOCAL_RANK" not in os.environ:
        return {os.getpid()}
    return {os.getpid()} | {p.pid for p in psutil.Process(os.getppid()).children()}


def parse_line(line: str, only_pids: set[int] | None = None) -> dict | None:
    """Return one neuron-monitor report as per-core utilization (%), FLOP/s and memory bytes; None if malformed."""
    try:
        doc = json.loads(line)
    except ValueError:
        return None
    if not isinstance(doc, dict) or not ("neuron_runtime_data" in doc or "system_data" in doc):
        return None
    out = {"util": {}, "flops": {}, "device_bytes": None, "host_bytes": None, "errors": 0, "flops_fields": set()}
    try:
        for runtime in doc.get("neuron_runtime_data") or []:
            if only_pids is not None and runtime.get("pid") not in only_pids:
                continue  # another job's runtime on the same instance
            out["errors"] += bool(runtime.get("error"))
            report = runtime.get("report") or {}
            cores = (report.get("neuroncore_counters") or {}).get("neuroncores_in_use") or {}
            for core, counters in cores.items():
                # One runtime per torchrun rank, each listing every core of the device with zeros for the cores it
                # does not use: a core is one runtime's, so the busiest report of it is its owner's, never the last.
                util = number(counters.get("neuroncore_utilization"))
                if util is not None:
                    out["util"][str(core)] = max(util, out["util"].get(str(core), util))
                # the user guide names the field `flops`; recent runtime captures show `effective_flops`
                name = next((n for n in ("effective_flops", "flops") if number(counters.get(n)) is not None), None)
                if name:
                    out["flops"][str(core)] = max(number(counters[name]), out["flops"].get(str(core), 0.0))
                    out["flops_fields"].add(name)
            used = (report.get("memory_used") or {}).get("neuron_runtime_used_bytes") or {}
            for key, field in (("device_bytes", "neuron_device"), ("host_bytes", "host")):
                if number(used.get(field)) is not None:  # each runtime's own memory: they add up
                    out[key] = (out[key] or 0) + used[field]
        system = doc.get("system_data") or {}
        vcpu = (system.get("vcpu_usage") or {}).get("average_usage") or {}
        busy = [number(vcpu.get(k)) for k in ("user", "nice", "system", "irq", "soft_irq")]
        out["host_vcpu_util_pct"] = sum(b for b in busy if b is not None) if any(b is not None for b in busy) else None
        out["host_mem_bytes"] = number((system.get("memory_info") or {}).get("memory_used_bytes"))
    except (AttributeError, TypeError):
        return None
    return out


def summarize_lines(lines: Iterable[str], only_pids: set[int] | None = None) -> dict:
    """Return mean/p90 over neuron-monitor reports of NeuronCore utilization (%), TFLOP/s and memory (GiB)."""
    reports, malformed = [], 0
    for line in filter(str.strip, lines):
        report = parse_line(line, only_pids)
        malformed += report is None
        reports += [report] if report is not None else []
    cores = sorted({c for r in reports for c in r["util"]}, key=lambda c: (len(c), c))
    fields = sorted({f for r in reports for f in r["flops_fields"]})
    out = {
        "backend": "neuron-monitor",
        "samples": len(reports),
        "malformed_lines": malformed,
        "neuroncores_seen": len(cores),
        "runtime_errors": sum(r["errors"] for r in reports),
        "flops_field": ", ".join(fields) or "none in the reports",
        # per report the mean over the cores, then mean and p90 over the reports
        **stats("neuroncore_util_pct", [float(np.mean(list(r["util"].values()))) for r in reports if r["util"]]),
        **stats("achieved_tflops", [sum(r["flops"].values()) / 1e12 for r in reports if r["flops"]]),
        "neuroncore_util_pct_mean_per_core": {
            c: round(float(np.mean([r["util"][c] for r in reports if c in r["util"]])), 3) for c in cores
        },
    }
    for key, field, unit in (
        ("device_bytes", "device_mem_used_gib", GIB),
        ("host_bytes", "runtime_host_mem_used_gib", GIB),
        ("host_mem_bytes", "host_mem_used_gib", GIB),
        ("host_vcpu_util_pct", "host_vcpu_util_pct", 1),
    ):
        out |= stats(field, [r[key] / unit for r in reports if r[key] is not None])
    return out if reports else out | {"reason": "no parseable neuron-monitor report in the steady windows"}


class NeuronMonitorSource(Source):
    """A `neuron-monitor` subprocess whose JSON lines are pushed to the monitor as they arrive."""

    backend, push = "neuron-monitor", True

    def __init__(self, interval_s: float) -> None:
        self.proc = self.thread = self.config = None
        self.binary, self.only_pids = find_binary(), run_pids()
        if self.binary is None:
            self.reason = f"neuron-monitor is neither on PATH nor in {NEURON_BIN}"
        self.period = f"{max(1, round(interval_s))}s"  # a duration string; whole seconds are the documented form

    def start(self, record_line: Callable[[str], None]) -> None:
        """Start neuron-monitor and a thread handing each line it prints to `record_line`."""
        groups = [{"type": "neuroncore_counters"}, {"type": "memory_used"}, {"type": "execution_stats"}]
        config = {
            "period": self.period,
            "neuron_runtimes": [{"tag_filter": ".*", "metrics": groups}],
            "system_metrics": [{"type": "vcpu_usage"}, {"type": "memory_info"}],
        }
        fd, self.config = tempfile.mkstemp(prefix="neuron-monitor-", suffix=".json")
        with os.fdopen(fd, "w") as f:
            json.dump(config, f)
        try:
            self.proc = subprocess.Popen(
                [self.binary, "-c", self.config], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
            )
        except OSError as err:
            self.reason = f"neuron-monitor failed to start: {err}"
            return

        def read() -> None:
            for line in self.proc.stdout:
                record_line(line)

        self.thread = threading.Thread(target=read, name="neuron-monitor-reader", daemon=True)
        self.thread.start()

    def summarize(self, lines: list[str]) -> dict:
        return summarize_lines(lines, self.only_pids)

    def close(self) -> None:
        if self.proc is not None:
            if self.proc.poll() not in (None, 0):
                self.failure = f"neuron-monitor exited with code {self.proc.returncode}"
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.thread is not None:
            self.thread.join(timeout=5)
        if self.config:
            Path(self.config).unlink(missing_ok=True)
            self.config = None


# ----------------------------------------------------------------------------- the watcher
class Monitor:
    """Keeps what its source reports inside the timer's steady windows; stop() summarizes it."""

    def __init__(self, source: Source, interval_s: float = 0.5, start_thread: bool = True) -> None:
        self.source, self.interval_s = source, interval_s
        self.lock, self.stopped = threading.Lock(), threading.Event()
        self.open, self.current, self.steady, self.windows = False, [], [], 0
        self.thread, self.result = None, None
        if source.reason is None and source.push:
            source.start(self.keep)
        elif source.reason is None and start_thread:
            self.thread = threading.Thread(target=self.run, name="monitor", daemon=True)
            self.thread.start()

    def run(self) -> None:
        """Sample every interval_s until stopped (the thread's body)."""
        while not self.stopped.wait(self.interval_s):
            self.poll()

    def poll(self) -> None:
        """Take one sample now (the thread calls this every interval_s)."""
        payload = self.source.sample()
        if payload is not None:
            self.keep(payload)

    def keep(self, payload: object) -> None:
        """Keep a sample (a dict, or a neuron-monitor line) when a timed window is open."""
        with self.lock:
            if self.open:
                self.current.append(payload)

    def window_opened(self, t: float) -> None:
        """A timed window opened: sample from a fresh baseline (GPM, CPU %) that skips the pause before it."""
        with self.lock:
            if self.source.reason is None:
                self.source.reset()
            self.open, self.current = True, []

    def window_closed(self, window: Window | None, t: float) -> None:
        """A timed window closed: keep its samples when it was a steady one (None: it ended without a step)."""
        with self.lock:
            if window is not None and not window.warmup:
                self.steady += self.current
                self.windows += 1
            self.open, self.current = False, []

    def stop(self) -> record.Utilization:
        """Stop sampling; return mean/p90 over the steady windows' samples (None + reason if none)."""
        if self.result is not None:
            return self.result
        self.stopped.set()
        if self.thread is not None:
            self.thread.join()
        self.source.close()
        with self.lock:
            steady = list(self.steady)
        source = self.source
        if source.reason or not steady:
            why = source.reason or source.failure or "no steady timing window reached the monitor"
            if self.windows and not (source.reason or source.failure):
                why = f"no sample in the {self.windows} steady window(s): shorter than the {self.interval_s} s interval"
            out = {"backend": source.backend, "samples": 0, "reason": why}
        else:
            out = source.summarize(steady)
        self.result = record.Utilization(**out, interval_s=self.interval_s)
        return self.result


def start(device_type: str, interval_s: float = 0.5) -> Monitor:
    """Return a watcher sampling device_type's backend ("cuda", "xla" or "cpu") every interval_s."""
    sources = {"cpu": PsutilSource, "cuda": NvmlSource, "xla": lambda: NeuronMonitorSource(interval_s)}
    if device_type not in sources:
        raise ValueError(f"device_type must be one of cuda, xla, cpu; got {device_type!r}")
    return Monitor(sources[device_type](), interval_s)
