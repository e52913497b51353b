"""What a utilization monitor samples: psutil (the CPU) and NVML (CUDA GPUs), behind one small interface.

A source that cannot measure says why (`reason`); its summary then carries None for each value, never 0.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from contextlib import suppress

import numpy as np
import psutil

GIB = 2**30


def stats(name: str, values: list[float]) -> dict:
    """{name}_mean and {name}_p90 over values, or None for both when empty."""
    if not values:
        return {f"{name}_mean": None, f"{name}_p90": None}
    return {
        f"{name}_mean": round(float(np.mean(values)), 3),
        f"{name}_p90": round(float(np.percentile(values, 90)), 3),
    }


def not_measured(backend: str, fields: Iterable[str], reason: str) -> dict:
    out = {"backend": backend}
    for field in fields:
        out.update(stats(field, []))
    out.update(samples=0, reason=reason)
    return out


class Source:
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
            out.update(stats(field, [s[field] for s in samples if s.get(field) is not None]))
        out["samples"] = len(samples)
        return out

    def close(self) -> None:
        pass


class PsutilSource(Source):
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
        return {
            "cpu_util_pct": psutil.cpu_percent(None),
            "proc_cpu_util_pct": self._proc.cpu_percent(None),
            "rss_gib": self._proc.memory_info().rss / GIB,
        }


def current_cuda() -> tuple[int, str | None]:
    """Return the index and UUID of the CUDA device this process trains on ((0, None) where torch has none)."""
    index, uuid = 0, None
    torch = sys.modules.get("torch")  # the training process has imported it; not worth importing here
    with suppress(RuntimeError, AttributeError):
        if torch is not None and torch.cuda.is_available():
            index = torch.cuda.current_device()
            uuid = str(torch.cuda.get_device_properties(index).uuid)
    return index, uuid


def current_cuda_handle(nvml):
    """Return the NVML handle of the current CUDA device: by UUID (CUDA_VISIBLE_DEVICES renumbers), else index."""
    index, uuid = current_cuda()
    if uuid:
        with suppress(nvml.NVMLError, TypeError):
            return nvml.nvmlDeviceGetHandleByUUID(uuid if uuid.startswith("GPU-") else f"GPU-{uuid}")
    return nvml.nvmlDeviceGetHandleByIndex(index)


def open_nvml() -> tuple[object, object, str | None]:
    """Return (pynvml, the current device's handle, None), or (None, None, why NVML cannot measure)."""
    try:
        import pynvml as nvml
    except ImportError:
        return None, None, "pynvml (nvidia-ml-py) is not installed"
    try:
        nvml.nvmlInit()
    except nvml.NVMLError as err:
        return None, None, f"NVML unavailable: {err}"
    try:
        return nvml, current_cuda_handle(nvml), None
    except nvml.NVMLError as err:
        close_nvml(nvml)
        return None, None, f"NVML has no handle for the current device: {err}"


def close_nvml(nvml) -> None:
    """Shut NVML down (errors ignored: it may already be)."""
    with suppress(nvml.NVMLError):
        nvml.nvmlShutdown()


def open_gpm(nvml, handle) -> tuple[object, str | None]:
    """Return (a first GPM sample, None) where the device supports GPM, else (None, why not)."""
    try:
        if not nvml.nvmlGpmQueryDeviceSupport(handle).isSupportedDevice:
            return None, ("NVML GPM (SM and tensor-pipe activity) is not supported on this GPU: Hopper or later")
        return nvml.nvmlGpmSampleGet(handle, nvml.nvmlGpmSampleAlloc()), None
    except (nvml.NVMLError, AttributeError) as err:  # an older driver or nvidia-ml-py without GPM
        return None, f"NVML GPM (SM and tensor-pipe activity) unavailable: {err}"


GPM_METRICS = {"sm_active_pct": "NVML_GPM_METRIC_SM_UTIL", "tensor_active_pct": "NVML_GPM_METRIC_ANY_TENSOR_UTIL"}
# GPM metrics are rates between two GPM samples: a window read fewer times than this gives None, with why (one
# reading of a short window came out as a measured 0% tensor activity)
MIN_GPM_READINGS = 2


def gpm_metrics(nvml, older, newer) -> dict[str, float]:
    """Return GPM_METRICS (% of SMs busy, % of tensor-pipe activity) between two GPM samples."""
    query = nvml.c_nvmlGpmMetricsGet_t()
    query.version, query.numMetrics = nvml.NVML_GPM_METRICS_GET_VERSION, len(GPM_METRICS)
    query.sample1, query.sample2 = older, newer
    for i, constant in enumerate(GPM_METRICS.values()):
        query.metrics[i].metricId = getattr(nvml, constant)
    metrics = nvml.nvmlGpmMetricsGet(query).metrics
    out = {}
    for i, field in enumerate(GPM_METRICS):
        if metrics[i].nvmlReturn != nvml.NVML_SUCCESS:
            raise nvml.NVMLError(metrics[i].nvmlReturn)
        out[field] = float(metrics[i].value)
    return out


class NvmlSource(Source):
    """NVML utilization and memory of the current CUDA device, and SM and tensor-pipe activity where GPM has it."""

    backend = "nvml"
    # sm_util_pct: NVML utilization.gpu, the share of a sample period (1/6 s to 1 s by product) in which any kernel
    # ran: one small kernel reads 100%. sm_active_pct: GPM's SM_UTIL, the share of SMs busy (DCGM's SM activity).
    # tensor_active_pct: GPM's ANY_TENSOR_UTIL, the share of time the tensor pipes were active (a NeuronCore's
    # tensor engine active % counterpart). GPM: Hopper and later. mem_util_pct: the share of time memory was used.
    fields = ("sm_util_pct", "sm_active_pct", "tensor_active_pct", "mem_util_pct", "mem_used_gib")

    def __init__(self) -> None:
        self.errors = 0
        self._nvml, self._handle, self.reason = open_nvml()
        self._gpm, self.gpm_reason = (None, self.reason) if self._nvml is None else open_gpm(self._nvml, self._handle)

    def reset(self) -> None:
        if self._gpm is not None:
            self._gpm = self._nvml.nvmlGpmSampleGet(self._handle, self._gpm)

    def sample(self) -> dict | None:
        try:
            util = self._nvml.nvmlDeviceGetUtilizationRates(self._handle)
            mem = self._nvml.nvmlDeviceGetMemoryInfo(self._handle)
        except self._nvml.NVMLError:
            self.errors += 1
            return None
        return {
            "sm_util_pct": float(util.gpu),
            **self._gpm_activity(),
            "mem_util_pct": float(util.memory),
            "mem_used_gib": mem.used / GIB,
        }

    def _gpm_activity(self) -> dict[str, float | None]:
        """GPM SM and tensor-pipe activity (%) since the previous sample, None each without GPM."""
        if self._gpm is None:
            return dict.fromkeys(GPM_METRICS)
        try:
            newer = self._nvml.nvmlGpmSampleGet(self._handle, self._nvml.nvmlGpmSampleAlloc())
            values = gpm_metrics(self._nvml, self._gpm, newer)
        except self._nvml.NVMLError as err:
            self.gpm_reason, self._gpm = f"NVML GPM failed during the run: {err}", None
            return dict.fromkeys(GPM_METRICS)
        self._nvml.nvmlGpmSampleFree(self._gpm)
        self._gpm = newer
        return values

    def summarize(self, samples: list[dict]) -> dict:
        readings = sum(s.get("sm_active_pct") is not None for s in samples)
        reason = self.gpm_reason
        if 0 < readings < MIN_GPM_READINGS:
            samples = [{**s, **dict.fromkeys(GPM_METRICS)} for s in samples]
            reason = (
                f"{readings} NVML GPM reading in this window, fewer than {MIN_GPM_READINGS}: GPM metrics are rates "
                "between samples, and one reading of a window this short is not a measured activity"
            )
        out = {**super().summarize(samples), "nvml_errors": self.errors}
        return out if out.get("sm_active_pct_mean") is not None else {**out, "gpm_reason": reason}

    def close(self) -> None:
        if self._nvml is not None:
            if self._gpm is not None:
                self._nvml.nvmlGpmSampleFree(self._gpm)
                self._gpm = None
            close_nvml(self._nvml)
            self._nvml = None
