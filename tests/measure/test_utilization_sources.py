"""NVML's SM activity (GPM, Hopper and later) beside utilization.gpu, on a fake NVML: the two are different
figures, and without GPM the summary says why instead of copying utilization.gpu; the GPU sampled is the
current CUDA device, found by its UUID."""

from __future__ import annotations

import sys
import types

import pytest

from helpers.measure.utilization_sources import NvmlSource, open_nvml
from helpers.run import schema


class FakeNvml(types.ModuleType):
    """pynvml's functions NvmlSource calls: utilization.gpu 100%, and GPM counters of a known SM activity."""

    NVML_SUCCESS, NVML_GPM_METRICS_GET_VERSION = 0, 1
    NVML_GPM_METRIC_SM_UTIL, NVML_GPM_METRIC_ANY_TENSOR_UTIL = 2, 5

    class NVMLError(Exception):
        pass

    def __init__(self, gpm: bool, sm_active: list[float], tensor_active: list[float] = ()) -> None:
        super().__init__("pynvml")
        self.gpm, self.counter, self.freed, self.uuids = gpm, 0, 0, []
        self.values = {
            self.NVML_GPM_METRIC_SM_UTIL: list(sm_active),
            self.NVML_GPM_METRIC_ANY_TENSOR_UTIL: list(tensor_active) or [0.0] * len(sm_active),
        }

    def nvmlInit(self):
        pass

    def nvmlShutdown(self):
        pass

    def nvmlDeviceGetHandleByIndex(self, index):
        return f"gpu{index}"

    def nvmlDeviceGetHandleByUUID(self, uuid):
        return self.uuids.append(uuid) or f"gpu {uuid}"

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
        self.counter += 1
        sample.at = self.counter
        return sample

    def c_nvmlGpmMetricsGet_t(self):
        return types.SimpleNamespace(
            metrics=[types.SimpleNamespace(metricId=None, nvmlReturn=0, value=None) for _ in range(8)]
        )

    def nvmlGpmMetricsGet(self, query):
        assert query.sample2.at > query.sample1.at  # an interval between two samples, oldest first
        for metric in query.metrics[: query.numMetrics]:
            metric.value = self.values[metric.metricId].pop(0)
        return query


@pytest.fixture
def nvml(monkeypatch, request):
    fake = FakeNvml(*request.param)
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    return fake


@pytest.mark.parametrize("nvml", [(True, [20.0, 40.0, 60.0])], indirect=True)
def test_gpm_sm_activity_is_recorded_apart_from_utilization_gpu(nvml):
    source = NvmlSource()
    source.reset()
    samples = [source.sample() for _ in range(3)]
    out = source.summarize(samples)
    source.close()
    assert out["sm_util_pct_mean"] == 100.0  # a kernel ran all the time...
    assert out["sm_active_pct_mean"] == 40.0  # ...while the SMs were 40% busy on average
    assert "gpm_reason" not in out
    assert nvml.freed == 4  # every sample but none twice: three replaced, the last at close


@pytest.mark.parametrize("nvml", [(True, [90.0, 80.0], [10.0, 20.0])], indirect=True)
def test_tensor_pipe_activity_is_recorded_apart_from_sm_activity(nvml):
    """The counterpart of a NeuronCore's tensor engine active %: SMs can be busy while the tensor pipes
    idle."""
    source = NvmlSource()
    out = source.summarize([source.sample() for _ in range(2)])
    source.close()
    assert out["sm_active_pct_mean"] == 85.0 and out["tensor_active_pct_mean"] == 15.0


@pytest.mark.parametrize("nvml", [(True, [35.0, 45.0], [0.0, 4.0])], indirect=True)
def test_one_gpm_reading_in_a_window_is_none_with_the_reason_two_are_measured(nvml):
    source = NvmlSource()
    one = source.summarize([source.sample()])  # several short windows recorded tensor activity 0.0 so
    assert one["sm_active_pct_mean"] is None and one["tensor_active_pct_mean"] is None
    assert "1 NVML GPM reading in this window, fewer than 2" in one["gpm_reason"]
    assert one["sm_util_pct_mean"] == 100.0  # utilization.gpu is a reading of its own: kept
    schema.Utilization.model_validate(one)
    two = source.summarize([{"sm_active_pct": 35.0, "tensor_active_pct": 0.0}, source.sample()])
    source.close()
    assert two["sm_active_pct_mean"] == 40.0 and two["tensor_active_pct_mean"] == 2.0 and "gpm_reason" not in two


@pytest.mark.parametrize("nvml", [(False, [])], indirect=True)
def test_without_gpm_sm_activity_is_none_with_the_reason(nvml):
    source = NvmlSource()
    out = source.summarize([source.sample(), source.sample()])
    assert out["sm_util_pct_mean"] == 100.0
    assert out["sm_active_pct_mean"] is None and out["tensor_active_pct_mean"] is None
    assert "Hopper" in out["gpm_reason"]
    schema.Utilization.model_validate(out)  # the record's section: every key typed


@pytest.mark.parametrize("nvml", [(False, [])], indirect=True)
def test_the_current_cuda_device_is_looked_up_by_its_uuid(nvml, monkeypatch):
    """CUDA_VISIBLE_DEVICES renumbers CUDA's devices, not NVML's: CUDA device 1 is found by its UUID."""
    cuda = types.SimpleNamespace(
        is_available=lambda: True,
        current_device=lambda: 1,
        get_device_properties=lambda i: types.SimpleNamespace(uuid=f"abc-{i}"),
    )
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(cuda=cuda))
    _, handle, reason = open_nvml()
    assert reason is None and handle == "gpu GPU-abc-1" and nvml.uuids == ["GPU-abc-1"]
    monkeypatch.setitem(sys.modules, "torch", None)  # no torch imported: CUDA's device 0, by index
    assert open_nvml()[1] == "gpu0"
