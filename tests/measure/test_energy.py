"""Tests for helpers/energy.py: NVML counter and fallback, RAPL wraparound, Neuron estimate, not measured."""

import sys
import types
from pathlib import Path

import pytest

from helpers.calc.job import samples_per_joule
from helpers.measure.energy import (NO_PUBLISHED_MAX, NOT_MEASURED, parse_power_utilization, published_max_watts,
                                    start_energy)


class FakeClock:
    """Returns the queued times in order, then keeps returning the last one."""

    def __init__(self, *times: float) -> None:
        self.times = list(times)

    def __call__(self) -> float:
        return self.times.pop(0) if len(self.times) > 1 else self.times[0]


# ----------------------------------------------------------------------------- fake pynvml
class NVMLError(Exception):
    pass


class NVMLError_NotSupported(NVMLError):
    def __str__(self) -> str:
        return "Not Supported"


def fake_nvml(energy_mj=(), power_mw=(), init_error=None, energy_error=None):
    """A pynvml stand-in returning queued energy counters (mJ) and power readings (mW; the last repeats)."""
    energy, power, calls = list(energy_mj), list(power_mw), []

    def init():
        if init_error is not None:
            raise init_error

    def total_energy(handle):
        if energy_error is not None:
            raise energy_error
        return energy.pop(0)

    def by_index(index):
        calls.append(("index", index))
        return f"handle-{index}"

    def by_uuid(uuid):
        calls.append(("uuid", uuid))
        return f"handle-{uuid}"

    return types.SimpleNamespace(
        NVMLError=NVMLError, calls=calls, nvmlInit=init, nvmlShutdown=lambda: None,
        nvmlDeviceGetHandleByIndex=by_index, nvmlDeviceGetHandleByUUID=by_uuid,
        nvmlDeviceGetName=lambda handle: "Fake GPU", nvmlDeviceGetTotalEnergyConsumption=total_energy,
        nvmlDeviceGetPowerUsage=lambda handle: power.pop(0) if len(power) > 1 else power[0])


def cuda_meter(nvml, *times):
    return start_energy("cuda", interval_s=10, nvml=nvml, clock=FakeClock(*times), start_thread=False)


def test_nvml_energy_counter_gives_measured_joules_and_mean_watts():
    nvml = fake_nvml(energy_mj=[1_000_000, 1_250_000], power_mw=[20_000, 30_000, 25_000])
    meter = cuda_meter(nvml, 0.0, 5.0, 10.0)  # start, one poll, stop
    meter.poll()
    out = meter.stop()
    assert out["method"] == "measured"
    assert out["joules"] == pytest.approx(250.0)
    assert out["mean_watts"] == pytest.approx(25.0)
    assert out["seconds"] == pytest.approx(10.0)
    assert out["peak_watts"] == pytest.approx(30.0)
    assert out["power_samples"] == 3
    assert "nvmlDeviceGetTotalEnergyConsumption" in out["source"]
    assert "reason" not in out
    assert meter.stop() is out  # a second stop returns the same record


def test_nvml_not_supported_falls_back_to_integrating_power():
    nvml = fake_nvml(power_mw=[100_000, 200_000, 300_000], energy_error=NVMLError_NotSupported())
    meter = cuda_meter(nvml, 0.0, 10.0, 20.0)
    meter.poll()
    out = meter.stop()
    assert out["method"] == "estimated"
    assert out["joules"] == pytest.approx(150 * 10 + 250 * 10)  # trapezoid over 0-10 s and 10-20 s
    assert out["mean_watts"] == pytest.approx(200.0)
    assert out["peak_watts"] == pytest.approx(300.0)
    assert "nvmlDeviceGetPowerUsage" in out["source"] and "Not Supported" in out["source"]


def test_nvml_init_failure_is_not_measured_never_zero():
    out = cuda_meter(fake_nvml(init_error=NVMLError("Driver Not Loaded")), 0.0, 3.0).stop()
    assert out["method"] == NOT_MEASURED
    assert out["joules"] == NOT_MEASURED and out["mean_watts"] == NOT_MEASURED
    assert out["joules"] != 0
    assert "NVML unavailable" in out["reason"] and "Driver Not Loaded" in out["reason"]
    assert samples_per_joule(1000, out) is None


def test_pynvml_missing_is_not_measured(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # makes `import pynvml` raise ImportError
    out = start_energy("cuda", start_thread=False).stop()
    assert out["method"] == NOT_MEASURED and "not installed" in out["reason"]


def test_nvml_handle_is_looked_up_by_cuda_uuid(monkeypatch):
    cuda = types.SimpleNamespace(is_available=lambda: True, current_device=lambda: 1,
                                 get_device_properties=lambda i: types.SimpleNamespace(uuid="abc-123"))
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(cuda=cuda))
    nvml = fake_nvml(energy_mj=[0, 1000], power_mw=[1000, 1000])
    cuda_meter(nvml, 0.0, 1.0).stop()
    assert nvml.calls == [("uuid", "GPU-abc-123")]


def test_background_thread_reads_the_counter():
    nvml = fake_nvml(energy_mj=[5_000, 9_000], power_mw=[7_000])
    meter = start_energy("cuda", interval_s=0.001, nvml=nvml)
    out = meter.stop()
    assert out["method"] == "measured" and out["joules"] == pytest.approx(4.0)


def test_samples_per_joule():
    assert samples_per_joule(1000, {"method": "measured", "joules": 250.0}) == pytest.approx(4.0)
    assert samples_per_joule(1000, {"method": NOT_MEASURED, "joules": NOT_MEASURED}) is None


# ----------------------------------------------------------------------------- RAPL
def write(path: Path, text) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"{text}\n")


def rapl_tree(root: Path, counters: dict[str, int]) -> None:
    """Fake /sys/class/powercap: two packages, one core subzone, one psys domain; max range 10 J."""
    names = {"intel-rapl:0": "package-0", "intel-rapl:1": "package-1", "intel-rapl:0:0": "core",
             "intel-rapl:2": "psys"}
    for zone, uj in counters.items():
        write(root / zone / "name", names[zone])
        write(root / zone / "energy_uj", uj)
        write(root / zone / "max_energy_range_uj", 10_000_000)


def test_rapl_two_packages_with_wraparound(tmp_path):
    rapl_tree(tmp_path, {"intel-rapl:0": 1_000, "intel-rapl:1": 9_000_000,
                         "intel-rapl:0:0": 0, "intel-rapl:2": 0})
    meter = start_energy("cpu", interval_s=1, rapl_root=tmp_path, clock=FakeClock(0.0, 1.0, 2.0),
                         start_thread=False)
    rapl_tree(tmp_path, {"intel-rapl:0": 2_001_000, "intel-rapl:1": 9_500_000,
                         "intel-rapl:0:0": 5_000_000, "intel-rapl:2": 9_000_000})
    meter.poll()
    rapl_tree(tmp_path, {"intel-rapl:0": 4_001_000, "intel-rapl:1": 500_000,  # package-1 wrapped
                         "intel-rapl:0:0": 9_000_000, "intel-rapl:2": 1_000})
    out = meter.stop()
    assert out["method"] == "measured"
    assert out["devices"]["intel-rapl:0"]["joules"] == pytest.approx(4.0)
    assert out["devices"]["intel-rapl:1"]["joules"] == pytest.approx(0.5 + 1.0)
    assert set(out["devices"]) == {"intel-rapl:0", "intel-rapl:1"}  # no subzone, no psys
    assert out["joules"] == pytest.approx(5.5)
    assert out["mean_watts"] == pytest.approx(2.75)
    assert out["peak_watts"] == pytest.approx(3.0)  # second poll: 2 J + 1 J in 1 s


def test_rapl_unreadable_counter_is_not_measured(tmp_path):
    write(tmp_path / "intel-rapl:0" / "name", "package-0")
    (tmp_path / "intel-rapl:0" / "energy_uj").mkdir(parents=True)  # reading it raises, as root-only files do
    write(tmp_path / "intel-rapl:0" / "max_energy_range_uj", 10)
    out = start_energy("cpu", rapl_root=tmp_path, start_thread=False).stop()
    assert out["method"] == NOT_MEASURED and "cannot read" in out["reason"]


# ----------------------------------------------------------------------------- Neuron sysfs
def neuron_tree(root: Path, lines: dict[str, str]) -> None:
    for device, line in lines.items():
        write(root / device / "stats" / "power" / "utilization", line)


def facts(path: Path, max_watts: str) -> Path:
    path.write_text("device,key,max_watts,date,source\n"
                    f'Test chip,trn1-chip,{max_watts},2026-01-01,"test datasheet, p. 3"\n')
    return path


def neuron_meter(tmp_path, facts_csv):
    neuron_tree(tmp_path, {"neuron0": "POWER_STATUS_VALID,990,10.00,20.00,15.00",  # before the window
                           "neuron1": "POWER_STATUS_VALID,990,10.00,20.00,15.00"})
    meter = start_energy("neuron", interval_s=5, neuron_root=tmp_path, facts_csv=facts_csv,
                         clock=FakeClock(0.0, 60.0, 120.0), wall_clock=lambda: 1000.0, start_thread=False)
    neuron_tree(tmp_path, {"neuron0": "POWER_STATUS_VALID,1030,40.00,60.00,50.00",
                           "neuron1": "POWER_STATUS_NO_DATA,1030,0.00,0.00,0.00"})
    meter.poll()
    meter.poll()  # the same record twice counts once
    neuron_tree(tmp_path, {"neuron0": "POWER_STATUS_VALID,1090,60.00,80.00,70.00",
                           "neuron1": "POWER_STATUS_VALID,1090,20.00,40.00,30.00"})
    return meter.stop()


def test_neuron_estimate_from_utilization_and_max_power(tmp_path):
    out = neuron_meter(tmp_path, facts(tmp_path / "power.csv", "200"))
    assert out["method"] == "estimated"
    assert out["devices"]["neuron0"]["mean_power_util_pct"] == pytest.approx(60.0)
    assert out["devices"]["neuron0"]["joules"] == pytest.approx(0.60 * 200 * 120)
    assert out["devices"]["neuron1"]["joules"] == pytest.approx(0.30 * 200 * 120)
    assert out["joules"] == pytest.approx(21_600.0)
    assert out["mean_watts"] == pytest.approx(180.0)
    assert out["mean_power_util_pct"] == pytest.approx(45.0)
    assert out["power_samples"] == 3
    assert "200" in out["source"] and "test datasheet" in out["source"] and "utilization" in out["source"]


def test_neuron_without_published_max_power_keeps_utilization(tmp_path):
    out = neuron_meter(tmp_path, facts(tmp_path / "power.csv", ""))
    assert out["method"] == NOT_MEASURED and out["joules"] == NOT_MEASURED
    assert out["reason"] == NO_PUBLISHED_MAX
    assert out["mean_power_util_pct"] == pytest.approx(45.0)


def test_repo_facts_have_no_invented_trainium_figure():
    max_watts, source = published_max_watts("trn1-chip")
    assert max_watts is None and "Not published" in source


def test_neuron_window_without_a_new_record_is_not_measured(tmp_path):
    neuron_tree(tmp_path, {"neuron0": "POWER_STATUS_VALID,990,10.00,20.00,15.00"})
    out = start_energy("xla", neuron_root=tmp_path, facts_csv=facts(tmp_path / "p.csv", "200"),
                       clock=FakeClock(0.0, 30.0), wall_clock=lambda: 1000.0, start_thread=False).stop()
    assert out["method"] == NOT_MEASURED and "a minute" in out["reason"]


@pytest.mark.parametrize("text", ["", "POWER_STATUS_VALID,1,2,3", "POWER_STATUS_VALID,x,1.00,2.00,3.00"])
def test_parse_power_utilization_malformed_is_none(text):
    assert parse_power_utilization(text) is None


# ----------------------------------------------------------------------------- nothing there
@pytest.mark.parametrize("device_type", ["cpu", "xla", "neuron"])
def test_missing_everything_is_not_measured(tmp_path, device_type):
    out = start_energy(device_type, rapl_root=tmp_path / "none", neuron_root=tmp_path / "none",
                       start_thread=False).stop()
    assert out["method"] == NOT_MEASURED
    assert out["joules"] == NOT_MEASURED and out["mean_watts"] == NOT_MEASURED
    assert out["reason"] and out["power_samples"] == 0


def test_unknown_device_type_is_an_error():
    with pytest.raises(ValueError):
        start_energy("tpu")
