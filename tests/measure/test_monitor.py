"""helpers/measure/monitor.py and sources.py: NVML and psutil backends, the steady window, "not measured"."""

import sys
import time

import pytest

from helpers.measure.monitor import Monitor, start_monitor
from helpers.measure.utilization_sources import Source
from helpers.run import schema


def _assert_not_measured(out: schema.Utilization, fields: tuple[str, ...]) -> None:
    for field in fields:
        assert getattr(out, f"{field}_mean") is None and getattr(out, f"{field}_p90") is None
    assert out.reason


# ----------------------------------------------------------------------------- NVML
def test_nvml_init_failure_is_not_measured(monkeypatch):
    import pynvml

    def fail():
        raise pynvml.NVMLError(pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)

    # Forced, so the test means the same on a machine that has a GPU.
    monkeypatch.setattr(pynvml, "nvmlInit", fail)
    mon = start_monitor("cuda", interval_s=0.01)
    mon.mark_steady()
    out = mon.stop()
    assert out.backend == "nvml"
    _assert_not_measured(out, ("sm_util_pct", "mem_util_pct", "mem_used_gib"))
    assert "NVML" in out.reason


def test_nvml_not_installed_is_not_measured(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)
    mon = start_monitor("cuda")
    mon.mark_steady()
    out = mon.stop()
    _assert_not_measured(out, ("sm_util_pct", "mem_util_pct", "mem_used_gib"))
    assert "not installed" in out.reason


def test_nvml_on_this_machine_never_reports_zero():
    out = start_monitor("cuda", interval_s=0.01)
    out.mark_steady()
    time.sleep(0.05)
    result = out.stop()
    # On a GPU machine it measures; without one it says so. Never a made-up 0.
    if result.reason is not None:
        assert result.sm_util_pct_mean is None
    else:
        assert isinstance(result.mem_used_gib_mean, float) and result.mem_used_gib_mean > 0


# ----------------------------------------------------------------------------- CPU / steady window
def test_cpu_monitor_around_busy_loop():
    mon = start_monitor("cpu", interval_s=0.05)
    mon.mark_steady()
    end = time.perf_counter() + 0.6
    x = 0
    while time.perf_counter() < end:
        x += 1
    out = mon.stop()
    assert out.backend == "psutil" and out.samples >= 3
    for key in ("cpu_util_pct_mean", "cpu_util_pct_p90", "rss_gib_mean", "rss_gib_p90"):
        assert isinstance(getattr(out, key), float), key
    assert out.rss_gib_mean > 0
    assert out.proc_cpu_util_pct_mean > 0
    assert isinstance(out, schema.Utilization)  # the record's section, typed where it is made


class _FakeSource(Source):
    """Returns whatever the test last set, so the steady window is tested without timing."""

    backend, fields = "fake", ("rss_gib",)

    def __init__(self):
        self.next_value = 0.0

    def sample(self):
        return {"rss_gib": self.next_value}


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
    assert out.samples == 3
    assert out.rss_gib_mean == pytest.approx(20.0)
    assert out.rss_gib_p90 == pytest.approx(28.0)
    assert mon.stop() is out  # idempotent


def test_samples_between_the_timers_windows_are_excluded():
    """Periodic evaluation runs between two timed windows: the monitor leaves it out, as timing and energy
    do."""
    from helpers.measure.timing import StepTimer

    source = _FakeSource()
    mon = Monitor(source, interval_s=1.0, start_thread=False)
    timer = StepTimer(warmup_steps=1, window_steps=10, watchers=(mon,))
    for step, value in enumerate((1000.0, 10.0, 30.0)):  # the warm-up step, then two steady ones
        timer.start_step()
        source.next_value = value
        mon.poll()
        timer.end_step(samples=1, tokens=1)
        if step == 0:
            mon.mark_steady()
    timer.close_window()  # evaluation: the GPU idles
    source.next_value = 0.0
    mon.poll()
    mon.poll()
    timer.start_step()
    source.next_value = 20.0
    mon.poll()
    timer.end_step(samples=1, tokens=1)
    out = mon.stop()
    assert out.samples == 3 and out.rss_gib_mean == pytest.approx(20.0)


def test_no_steady_samples_is_not_measured():
    source = _FakeSource()
    mon = Monitor(source, start_thread=False)
    mon.poll()  # warm-up only
    out = mon.stop()
    _assert_not_measured(out, ("rss_gib",))
    assert "mark_steady" in out.reason


def test_unknown_device_type_rejected():
    with pytest.raises(ValueError, match="device_type"):
        start_monitor("tpu")
