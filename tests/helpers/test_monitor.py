"""helpers/monitor.py: only the steady windows' samples count; NVML and GPM apart; neuron-monitor's runtimes merged."""

import json
import os
import stat
import sys
import time
import types

import pytest
from measure_fakes import FIXTURES, Window, fake_nvml  # noqa: F401 - a fixture

from helpers import monitor, record

NEURON = FIXTURES / "neuron_monitor"


class Values(monitor.Source):
    """A pull source that returns the value the test last set, so the windows are tested without a clock."""

    backend, fields = "values", ("rss_gib",)
    value = 0.0

    def sample(self):
        return {"rss_gib": self.value}


def sampled(mon: monitor.Monitor, source: Values, *values: float) -> None:
    for value in values:
        source.value = value
        mon.poll()


def test_only_samples_inside_steady_windows_count():
    source = Values()
    mon = monitor.Monitor(source, start_thread=False)
    sampled(mon, source, 500.0)  # set-up, before any window
    mon.window_opened(0.0)
    sampled(mon, source, 1000.0, 2000.0)  # the warm-up window: compilation
    mon.window_closed(Window(seconds=1.0, warmup=True), 1.0)
    mon.window_opened(1.0)
    sampled(mon, source, 10.0, 30.0)
    mon.window_closed(Window(seconds=1.0), 2.0)
    sampled(mon, source, 0.0, 0.0)  # an evaluation between two windows: the device idles
    mon.window_opened(3.0)
    sampled(mon, source, 20.0)
    mon.window_closed(None, 3.5)  # a window that ended without a step: not counted
    mon.window_opened(4.0)
    sampled(mon, source, 20.0)
    mon.window_closed(Window(seconds=1.0), 5.0)
    out = mon.stop()
    assert out.samples == 3 and out.rss_gib_mean == pytest.approx(20.0) and out.rss_gib_p90 == pytest.approx(28.0)
    assert isinstance(out, record.Utilization) and mon.stop() is out


def test_no_steady_window_is_not_measured_and_says_why():
    source = Values()
    mon = monitor.Monitor(source, start_thread=False)
    mon.window_opened(0.0)
    sampled(mon, source, 5.0)
    mon.window_closed(Window(seconds=1.0, warmup=True), 1.0)
    out = mon.stop()
    assert out.rss_gib_mean is None and out.samples == 0 and "no steady timing window" in out.reason
    short = monitor.Monitor(Values(), interval_s=2.0, start_thread=False)
    short.window_opened(0.0)
    short.window_closed(Window(seconds=0.1), 0.1)
    assert "shorter than the 2.0 s interval" in short.stop().reason


def test_the_cpu_monitor_samples_a_busy_window_in_its_thread():
    mon = monitor.start("cpu", interval_s=0.02)
    mon.window_opened(0.0)
    end = time.perf_counter() + 0.3
    while time.perf_counter() < end:
        pass
    mon.window_closed(Window(seconds=0.3), 0.3)
    out = mon.stop()
    assert out.backend == "psutil" and out.samples >= 2
    assert out.rss_gib_mean > 0 and out.proc_cpu_util_pct_mean > 0 and out.cpu_util_pct_p90 is not None


def test_an_unknown_device_type_is_refused():
    with pytest.raises(ValueError, match="device_type"):
        monitor.start("tpu")


# ----------------------------------------------------------------------------- NVML
def nvml_window(mon: monitor.Monitor, polls: int) -> record.Utilization:
    mon.window_opened(0.0)
    for _ in range(polls):
        mon.poll()
    mon.window_closed(Window(seconds=1.0), 1.0)
    return mon.stop()


def test_gpm_activity_is_recorded_apart_from_utilization_gpu(fake_nvml):
    nvml = fake_nvml(sm_active=[20.0, 40.0, 60.0], tensor_active=[10.0, 20.0, 0.0])
    out = nvml_window(monitor.Monitor(monitor.NvmlSource(), start_thread=False), 3)
    assert out.sm_util_pct_mean == 100.0  # a kernel ran all the time...
    assert out.sm_active_pct_mean == 40.0  # ...while the SMs were 40% busy on average
    assert out.tensor_active_pct_mean == 10.0 and out.gpm_reason is None and out.mem_used_gib_mean == 1.0
    assert nvml.freed == 4  # every GPM sample freed once: three replaced, the last at close


def test_one_gpm_reading_is_none_with_the_reason(fake_nvml):
    fake_nvml(sm_active=[35.0], tensor_active=[0.0])
    out = nvml_window(monitor.Monitor(monitor.NvmlSource(), start_thread=False), 1)
    assert out.sm_active_pct_mean is None and out.tensor_active_pct_mean is None
    assert "1 NVML GPM reading in the steady windows, fewer than 2" in out.gpm_reason
    assert out.sm_util_pct_mean == 100.0  # utilization.gpu is a reading of its own: kept


def test_without_gpm_activity_is_none_with_the_reason(fake_nvml):
    fake_nvml(gpm=False)
    out = nvml_window(monitor.Monitor(monitor.NvmlSource(), start_thread=False), 2)
    assert out.sm_util_pct_mean == 100.0 and out.sm_active_pct_mean is None and "Hopper" in out.gpm_reason


def test_without_nvml_the_figures_are_none_never_zero(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)
    out = nvml_window(monitor.start("cuda"), 0)
    assert out.sm_util_pct_mean is None and out.samples == 0 and "not installed" in out.reason


def test_the_current_cuda_device_is_found_by_its_uuid(fake_nvml, monkeypatch):
    """CUDA_VISIBLE_DEVICES renumbers CUDA's devices, not NVML's: CUDA device 1 is looked up by its UUID."""
    nvml = fake_nvml(n=3)
    cuda = types.SimpleNamespace(
        is_available=lambda: True,
        current_device=lambda: 1,
        get_device_properties=lambda i: types.SimpleNamespace(uuid=f"fake-{i + 1}"),
    )
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(cuda=cuda))
    assert monitor.NvmlSource().handle == 2 and nvml.uuids == ["GPU-fake-2"]


# ----------------------------------------------------------------------------- neuron-monitor
def lines(name: str) -> list[str]:
    return (NEURON / name).read_text().splitlines()


def test_a_report_is_read_from_the_documented_fields():
    out = monitor.summarize_lines(lines("two_cores.jsonl"))
    assert out["neuroncore_util_pct_mean"] == pytest.approx(55.0)  # per period, the mean of the cores: 60 70 50 40
    assert out["neuroncore_util_pct_mean_per_core"] == {"0": pytest.approx(75.0), "1": pytest.approx(35.0)}
    assert out["achieved_tflops_mean"] == pytest.approx(15.0) and out["flops_field"] == "flops"
    assert out["device_mem_used_gib_p90"] == pytest.approx(11.0) and out["host_vcpu_util_pct_mean"] == 25.5
    assert out["samples"] == 4 and out["malformed_lines"] == 0 and "reason" not in out
    record.Utilization.model_validate(out)


def test_two_runtimes_each_listing_both_cores_keep_each_cores_busy_figure():
    """Two torchrun ranks on a trn1's two cores: each runtime lists both cores, zero on the one it does not use."""
    out = monitor.summarize_lines(lines("two_runtimes.jsonl"))
    assert out["neuroncore_util_pct_mean_per_core"] == {"0": pytest.approx(75.0), "1": pytest.approx(55.0)}
    assert out["neuroncore_util_pct_mean"] == pytest.approx(65.0) and out["neuroncores_seen"] == 2
    assert out["achieved_tflops_mean"] == pytest.approx(18.0)  # 10 + 8, not the last runtime's zeros
    assert out["device_mem_used_gib_mean"] == pytest.approx(10.0)  # each runtime's own 5 GiB, added
    mine = monitor.summarize_lines(lines("two_runtimes.jsonl"), only_pids={5101})  # another job's runtime left out
    assert mine["neuroncore_util_pct_mean_per_core"] == {"0": 0.0, "1": pytest.approx(55.0)}


@pytest.mark.parametrize(
    "line", ["not json", "[1, 2]", '{"other": 1}', '{"neuron_runtime_data": [{"report": {"neuroncore_counters": 1}}]}']
)
def test_a_malformed_line_is_counted_not_read(line):
    out = monitor.summarize_lines([line, *lines("two_cores.jsonl")[:1]])
    assert out["malformed_lines"] == 1 and out["samples"] == 1


def test_nothing_parseable_is_not_measured():
    out = monitor.summarize_lines(["garbage", "{"])
    assert "neuroncore_util_pct_mean" not in out and out["samples"] == 0 and out["reason"]


@pytest.mark.parametrize("field", ["flops", "effective_flops"])
def test_either_flops_field_is_read_and_named(field):
    counters = {"0": {"neuroncore_utilization": 50.0, field: 2e12}}
    line = json.dumps(
        {"neuron_runtime_data": [{"pid": 1, "report": {"neuroncore_counters": {"neuroncores_in_use": counters}}}]}
    )
    out = monitor.summarize_lines([line])
    assert out["achieved_tflops_mean"] == pytest.approx(2.0) and out["flops_field"] == field


def test_without_the_binary_neuron_monitor_is_not_measured(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(monitor, "NEURON_BIN", tmp_path / "absent")
    out = nvml_window(monitor.start("xla"), 0)
    assert out.backend == "neuron-monitor" and out.neuroncore_util_pct_mean is None and "neither on PATH" in out.reason


def test_a_neuron_monitor_stream_is_kept_inside_the_windows(monkeypatch, tmp_path):
    """A stand-in neuron-monitor streams the fixture once the test's window is open."""
    go, fake = tmp_path / "go", tmp_path / "neuron-monitor"
    fake.write_text(
        f"#!/bin/sh\nwhile [ ! -f '{go}' ]; do sleep 0.02; done\ncat '{NEURON / 'one_malformed.jsonl'}'\nexec sleep 30\n"
    )
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(monitor, "run_pids", lambda: {4242})  # the fixture's runtime is this run's
    mon = monitor.start("xla", interval_s=1.0)
    mon.window_opened(0.0)
    go.touch()
    deadline = time.monotonic() + 10
    while len(mon.current) < 4 and time.monotonic() < deadline:
        time.sleep(0.02)
    mon.window_closed(Window(seconds=1.0), 1.0)
    out = mon.stop()
    assert out.samples == 3 and out.malformed_lines == 1
    assert out.neuroncore_util_pct_mean == pytest.approx((60 + 70 + 40) / 3, abs=1e-3)
