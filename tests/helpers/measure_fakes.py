"""Fakes of the measurement tests: the timer's window as a watcher reads it, a test clock, and NVML on that clock.

A test module takes the NVML fixture by importing it: `from measure_fakes import fake_nvml`.
"""

from __future__ import annotations

import sys
import types
from dataclasses import dataclass
from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


@dataclass
class Window:
    """The fields of helpers.timing.Window a watcher reads."""

    seconds: float
    warmup: bool = False
    steps: int = 1
    samples: int = 8


class Clock:
    """A clock the test advances; the watcher and the fake devices share it."""

    def __init__(self, t: float = 0.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


class FakeNvml(types.ModuleType):
    """pynvml for `n` GPUs: utilization.gpu 100%, GPM's activities as queued, energy counters integrating power."""

    NVML_SUCCESS, NVML_GPM_METRICS_GET_VERSION = 0, 1
    NVML_GPM_METRIC_SM_UTIL, NVML_GPM_METRIC_ANY_TENSOR_UTIL = 2, 5

    class NVMLError(Exception):
        pass

    def __init__(self, n: int = 1, gpm: bool = True, sm_active=(), tensor_active=()) -> None:
        super().__init__("pynvml")
        self.clock, self.gpm, self.freed, self.gpm_samples, self.uuids = Clock(), gpm, 0, 0, []
        self.watts, self.mj = [0.0] * n, [5e6] * n
        self.values = {
            self.NVML_GPM_METRIC_SM_UTIL: list(sm_active),
            self.NVML_GPM_METRIC_ANY_TENSOR_UTIL: list(tensor_active) or [0.0] * len(sm_active),
        }

    def run(self, seconds: float, *watts: float) -> None:
        """Hold the GPUs at `watts` (one figure: all of them) for `seconds` of the clock."""
        self.watts = list(watts * len(self.watts) if len(watts) == 1 else watts)
        self.mj = [mj + w * seconds * 1000 for mj, w in zip(self.mj, self.watts)]
        self.clock.t += seconds

    def nvmlInit(self):
        pass

    def nvmlShutdown(self):
        pass

    def nvmlDeviceGetHandleByIndex(self, index):
        if index >= len(self.watts):
            raise self.NVMLError(f"no GPU {index}")
        return index

    def nvmlDeviceGetHandleByUUID(self, uuid):
        self.uuids.append(uuid)
        if not uuid.startswith("GPU-fake-"):  # a real GPU's UUID, on a machine that has one
            raise self.NVMLError("not found")
        return int(uuid.rsplit("-", 1)[1])

    def nvmlDeviceGetName(self, handle):
        return f"Fake GPU {handle}"

    def nvmlDeviceGetTotalEnergyConsumption(self, handle):
        return int(self.mj[handle])

    def nvmlDeviceGetPowerUsage(self, handle):
        return int(self.watts[handle] * 1000)

    def nvmlDeviceGetUtilizationRates(self, handle):
        return types.SimpleNamespace(gpu=100, memory=40)

    def nvmlDeviceGetMemoryInfo(self, handle):
        return types.SimpleNamespace(used=2**30)

    def nvmlGpmQueryDeviceSupport(self, handle):
        return types.SimpleNamespace(isSupportedDevice=int(self.gpm))

    def nvmlGpmSampleAlloc(self):
        return types.SimpleNamespace(at=None)

    def nvmlGpmSampleFree(self, sample):
        self.freed += 1

    def nvmlGpmSampleGet(self, handle, sample):
        self.gpm_samples += 1
        sample.at = self.gpm_samples
        return sample

    def c_nvmlGpmMetricsGet_t(self):
        metrics = [types.SimpleNamespace(metricId=None, nvmlReturn=0, value=None) for _ in range(8)]
        return types.SimpleNamespace(metrics=metrics)

    def nvmlGpmMetricsGet(self, query):
        assert query.sample2.at > query.sample1.at  # a rate between two samples, the older first
        for metric in query.metrics[: query.numMetrics]:
            metric.value = self.values[metric.metricId].pop(0)
        return query


@pytest.fixture
def fake_nvml(monkeypatch):
    """Return a maker of a FakeNvml that `import pynvml` finds."""

    def make(**kwargs) -> FakeNvml:
        fake = FakeNvml(**kwargs)
        monkeypatch.setitem(sys.modules, "pynvml", fake)
        return fake

    return make
