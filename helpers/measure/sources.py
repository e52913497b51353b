"""What a utilization monitor samples: psutil (the CPU) and NVML (CUDA GPUs), behind one small interface.

A source that cannot measure says why (`reason`); its summary then carries None
for each value, never 0.
"""
from __future__ import annotations

import sys
from typing import Iterable

import numpy as np
import psutil

NOT_MEASURED = None  # no figure: the reason says why (a number field never holds text)
GIB = 2**30


def stats(name: str, values: list[float]) -> dict:
    """{name}_mean and {name}_p90 over values, or None for both when empty."""
    if not values:
        return {f"{name}_mean": NOT_MEASURED, f"{name}_p90": NOT_MEASURED}
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
        return {"cpu_util_pct": psutil.cpu_percent(None),
                "proc_cpu_util_pct": self._proc.cpu_percent(None),
                "rss_gib": self._proc.memory_info().rss / GIB}


def current_cuda_handle(nvml, index: int | None = None):
    """Return the NVML handle of CUDA device `index` (None: the current device): by UUID (CUDA_VISIBLE_DEVICES
    renumbers), else by index."""
    asked, index, uuid = index, index or 0, None
    torch = sys.modules.get("torch")  # the training process has imported it; not worth importing here
    try:
        if torch is not None and torch.cuda.is_available():
            index = torch.cuda.current_device() if asked is None else asked
            uuid = str(torch.cuda.get_device_properties(index).uuid)
    except (RuntimeError, AttributeError):
        pass
    if uuid:
        try:
            return nvml.nvmlDeviceGetHandleByUUID(uuid if uuid.startswith("GPU-") else f"GPU-{uuid}")
        except (nvml.NVMLError, TypeError):
            pass
    return nvml.nvmlDeviceGetHandleByIndex(index)


def open_nvml(nvml=None) -> tuple[object, object, str | None]:
    """Return (pynvml, the current device's handle, None), or (None, None, why NVML cannot measure)."""
    if nvml is None:
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
    try:
        nvml.nvmlShutdown()
    except nvml.NVMLError:
        pass


class NvmlSource(Source):
    """NVML utilization and memory of the current CUDA device.

    sm_util_pct is NVML utilization.gpu: the share of the last sample period (1/6 s to 1 s by
    product) in which at least one kernel ran. It is not SM occupancy (that needs DCGM profiling).
    mem_util_pct is NVML utilization.memory: the share of time device memory was read or written.
    """

    backend, fields = "nvml", ("sm_util_pct", "mem_util_pct", "mem_used_gib")

    def __init__(self) -> None:
        self.errors = 0
        self._nvml, self._handle, self.reason = open_nvml()

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
            close_nvml(self._nvml)
            self._nvml = None


