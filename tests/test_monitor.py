"""Tests for helpers/monitor.py: neuron-monitor parsing, backends that cannot measure, steady window."""

import json
import os
import stat
import sys
import time
from pathlib import Path

import pytest

from helpers import monitor
from helpers.monitor import (NOT_MEASURED, Monitor, parse_neuron_monitor_line, start_monitor,
                             summarize_neuron_monitor)

FIXTURES = Path(__file__).parent / "fixtures" / "neuron_monitor"


def _lines(name: str) -> list[str]:
    return (FIXTURES / name).read_text().splitlines()


# ----------------------------------------------------------------------------- neuron-monitor parser
def test_parse_line_reads_documented_fields():
    report = parse_neuron_monitor_line(_lines("two_cores.jsonl")[0])
    assert report["neuroncore_util_pct"] == {"0": 80.0, "1": 40.0}
    assert report["neuroncore_flops_per_s"] == {"0": 1e13, "1": 5e12}
    assert report["device_mem_used_bytes"] == 10 * 2**30
    assert report["host_vcpu_util_pct"] == 25.0
    assert report["pids"] == [4242]


@pytest.mark.parametrize("line", ["", "not json", "[1, 2]", '{"other": 1}',
                                  '{"neuron_runtime_data": [{"report": {"neuroncore_counters": '
                                  '{"neuroncores_in_use": [1, 2]}}}]}'])
def test_parse_line_malformed_is_none(line):
    assert parse_neuron_monitor_line(line) is None


def test_summarize_two_cores():
    out = summarize_neuron_monitor(_lines("two_cores.jsonl"))
    # Per period, mean over cores: 60, 70, 50, 40 %.
    assert out["neuroncore_util_pct_mean"] == pytest.approx(55.0)
    assert out["neuroncore_util_pct_p90"] == pytest.approx(67.0)
    assert out["nc0_util_pct_mean"] == pytest.approx(75.0)
    assert out["nc1_util_pct_mean"] == pytest.approx(35.0)
    assert out["achieved_tflops_mean"] == pytest.approx(15.0)
    assert out["device_mem_used_gib_mean"] == pytest.approx(10.5)
    assert out["device_mem_used_gib_p90"] == pytest.approx(11.0)
    assert out["runtime_host_mem_used_gib_mean"] == pytest.approx(6.0)
    assert out["host_vcpu_util_pct_mean"] == pytest.approx(25.5)
    assert out["host_mem_used_gib_mean"] == pytest.approx(16.0)
    assert out["samples"] == 4 and out["malformed_lines"] == 0 and out["neuroncores_seen"] == 2
    assert "reason" not in out
    assert not any("engine" in key for key in out), "neuron-monitor has no per-engine figures"
    json.dumps(out)


def test_summarize_counts_malformed_line():
    out = summarize_neuron_monitor(_lines("one_malformed.jsonl"))
    assert out["malformed_lines"] == 1
    assert out["samples"] == 3
    assert out["neuroncore_util_pct_mean"] == pytest.approx((60 + 70 + 40) / 3, abs=1e-3)


def test_summarize_nothing_parseable_is_not_measured():
    out = summarize_neuron_monitor(["garbage", "{"])
    assert out["neuroncore_util_pct_mean"] == NOT_MEASURED
    assert out["malformed_lines"] == 2 and out["samples"] == 0 and out["reason"]


# ----------------------------------------------------------------------------- NVML
def _assert_not_measured(out: dict, fields: tuple[str, ...]) -> None:
    for field in fields:
        assert out[f"{field}_mean"] == NOT_MEASURED and out[f"{field}_p90"] == NOT_MEASURED
    assert out["reason"]
    json.dumps(out)


def test_nvml_init_failure_is_not_measured(monkeypatch):
    import pynvml

    def fail():
        raise pynvml.NVMLError(pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)

    # Forced, so the test means the same on a machine that has a GPU.
    monkeypatch.setattr(pynvml, "nvmlInit", fail)
    mon = start_monitor("cuda", interval_s=0.01)
    mon.mark_steady()
    out = mon.stop()
    assert out["backend"] == "nvml"
    _assert_not_measured(out, ("sm_util_pct", "mem_util_pct", "mem_used_gib"))
    assert "NVML" in out["reason"]


def test_nvml_not_installed_is_not_measured(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)
    mon = start_monitor("cuda")
    mon.mark_steady()
    out = mon.stop()
    _assert_not_measured(out, ("sm_util_pct", "mem_util_pct", "mem_used_gib"))
    assert "not installed" in out["reason"]


def test_nvml_on_this_machine_never_reports_zero():
    out = start_monitor("cuda", interval_s=0.01)
    out.mark_steady()
    time.sleep(0.05)
    result = out.stop()
    # On a GPU machine it measures; without one it says so. Never a made-up 0.
    if "reason" in result:
        assert result["sm_util_pct_mean"] == NOT_MEASURED
    else:
        assert isinstance(result["mem_used_gib_mean"], float) and result["mem_used_gib_mean"] > 0


# ----------------------------------------------------------------------------- CPU / steady window
def test_cpu_monitor_around_busy_loop():
    mon = start_monitor("cpu", interval_s=0.05)
    mon.mark_steady()
    end = time.perf_counter() + 0.6
    x = 0
    while time.perf_counter() < end:
        x += 1
    out = mon.stop()
    assert out["backend"] == "psutil" and out["samples"] >= 3
    for key in ("cpu_util_pct_mean", "cpu_util_pct_p90", "rss_gib_mean", "rss_gib_p90"):
        assert isinstance(out[key], float), key
    assert out["rss_gib_mean"] > 0
    assert out["proc_cpu_util_pct_mean"] > 0
    json.dumps(out)


class _FakeSource(monitor._Source):
    """Returns whatever the test last set, so the steady window is tested without timing."""

    backend, fields = "fake", ("value",)

    def __init__(self):
        self.next_value = 0.0

    def sample(self):
        return {"value": self.next_value}


def test_samples_before_mark_steady_are_excluded():
    source = _FakeSource()
    mon = Monitor(source, interval_s=1.0, start_thread=False)
    for warmup_value in (1000.0, 2000.0):
        source.next_value = warmup_value
        mon.poll()
    mon.mark_steady()
    for value in (10.0, 20.0, 30.0):
        source.next_value = value
        mon.poll()
    out = mon.stop()
    assert out["samples"] == 3
    assert out["value_mean"] == pytest.approx(20.0)
    assert out["value_p90"] == pytest.approx(28.0)
    assert mon.stop() is out  # idempotent


def test_no_steady_samples_is_not_measured():
    source = _FakeSource()
    mon = Monitor(source, start_thread=False)
    mon.poll()  # warm-up only
    out = mon.stop()
    _assert_not_measured(out, ("value",))
    assert "mark_steady" in out["reason"]


# ----------------------------------------------------------------------------- neuron-monitor process
def test_neuron_without_binary_is_not_measured(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    for device_type in ("neuron", "xla"):
        mon = start_monitor(device_type)
        mon.mark_steady()
        out = mon.stop()
        assert out["backend"] == "neuron-monitor"
        _assert_not_measured(out, ("neuroncore_util_pct", "device_mem_used_gib"))
        assert "not on PATH" in out["reason"]


def test_neuron_monitor_stream_from_fake_binary(monkeypatch, tmp_path):
    # A stand-in neuron-monitor: waits for the test's go-file, then streams the fixture.
    go = tmp_path / "go"
    fake = tmp_path / "neuron-monitor"
    fake.write_text(f"#!/bin/sh\nwhile [ ! -f '{go}' ]; do sleep 0.02; done\n"
                    f"cat '{FIXTURES / 'one_malformed.jsonl'}'\nexec sleep 30\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    mon = start_monitor("neuron", interval_s=1.0)
    mon.mark_steady()
    go.touch()
    deadline = time.monotonic() + 10
    while len(mon._records) < 4 and time.monotonic() < deadline:
        time.sleep(0.02)
    out = mon.stop()
    assert out["samples"] == 3 and out["malformed_lines"] == 1
    assert out["neuroncore_util_pct_mean"] == pytest.approx((60 + 70 + 40) / 3, abs=1e-3)


def test_unknown_device_type_rejected():
    with pytest.raises(ValueError, match="device_type"):
        start_monitor("tpu")
