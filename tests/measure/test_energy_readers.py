"""Tests for helpers/measure/energy_readers.py: NVML's energy counter read through zeus (its GPUs faked),
RAPL's package counters and their wraparound, the Neuron estimate, and "not measured" with a reason, never 0.
Fakes with known power on a fake clock: no wall time is asserted."""

import sys
import types
from pathlib import Path

import pytest
from zeus_fakes import Clock, zeus_gpus  # noqa: F401 - a fixture

from helpers.calc.job_cost import samples_per_joule
from helpers.measure.energy_meter import NO_STEADY, start_energy
from helpers.measure.energy_readers import NO_PUBLISHED_MAX, parse_power_utilization, published_max_watts
from helpers.run import schema


def steady_window(seconds: float):
    from helpers.measure.timing import Window

    return Window(first_step=1, steps=1, seconds=seconds, samples=8, tokens=128, warmup=False)


# ----------------------------------------------------------------------------- NVML through zeus (cuda)
def test_nvml_energy_counter_gives_measured_joules_and_mean_watts_of_the_whole_run(zeus_gpus):
    gpus = zeus_gpus()
    gpus.run(0.0, 20.0)
    meter = start_energy("cuda", interval_s=10, clock=gpus.clock, start_thread=False)  # a power sample: 20 W
    gpus.run(5.0, 30.0)
    meter.poll()  # 30 W
    gpus.run(5.0, 20.0)
    out = meter.stop()  # 20 W
    whole = out.whole_run
    assert whole.joules == pytest.approx(250.0)  # 5 s x 30 W + 5 s x 20 W, from the counter
    assert whole.mean_watts == pytest.approx(25.0)
    assert whole.seconds == pytest.approx(10.0)
    assert whole.peak_watts == pytest.approx(30.0)
    assert "first step" in whole.window
    assert out.power_samples == 3 and out.power_read_errors == 0
    assert "nvmlDeviceGetTotalEnergyConsumption" in out.source and "zeus" in out.source
    assert out.devices == {"cuda": schema.EnergyDevice(name="Fake GPU 0")}
    # no timer told the meter of a steady window: no steady figure, said so, never the whole run's instead
    assert out.method is None and out.joules is None and out.window == "steady"
    assert out.reason == NO_STEADY
    assert isinstance(out, schema.Energy)  # the record's section, typed where it is made
    assert meter.stop() is out  # a second stop returns the same record


def test_a_gpu_before_volta_is_estimated_from_zeus_power_monitor(zeus_gpus):
    gpus = zeus_gpus(counter=False)
    gpus.run(0.0, 100.0)
    meter = start_energy("cuda", interval_s=10, clock=gpus.clock, start_thread=False)
    gpus.run(10.0, 300.0)
    out = meter.stop()
    assert out.whole_run.joules == pytest.approx(3000.0) and out.whole_run.mean_watts == 300.0
    assert "PowerMonitor" in out.source and "Volta" in out.source


def test_nvml_unavailable_is_not_measured_never_zero(monkeypatch):
    import zeus.device.gpu

    monkeypatch.setattr(zeus.device.gpu, "_gpus", None)
    monkeypatch.setattr(zeus.device.gpu, "nvml_is_available", lambda: False)  # as without a driver
    monkeypatch.setattr(zeus.device.gpu, "amdsmi_is_available", lambda: False)
    out = start_energy("cuda", start_thread=False).stop()
    assert out.method is None
    assert out.joules is None and out.mean_watts is None
    assert out.joules != 0
    assert "NVML unavailable" in out.reason and "NVML" in out.source
    assert samples_per_joule(1000, out.model_dump()) is None


def test_without_zeus_a_gpu_run_imports_and_records_its_energy_as_not_measured():
    """An environment without zeus (an image set up by hand) still runs: its energy says why it is missing."""
    import json
    import subprocess

    code = (
        "import sys\nsys.modules['zeus'] = None  # as if not installed\n"
        "from helpers.measure.energy_meter import start_energy\n"
        "print(start_energy('cuda', start_thread=False).stop().model_dump_json())"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    out = json.loads(done.stdout.splitlines()[-1])
    assert out["joules"] is None and "zeus is not installed" in out["reason"]
    schema.Energy.model_validate(out)


def test_the_current_cuda_device_is_the_gpu_read(zeus_gpus, monkeypatch):
    cuda = types.SimpleNamespace(is_available=lambda: True, current_device=lambda: 1)
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(cuda=cuda))
    gpus = zeus_gpus(n=2)
    meter = start_energy("cuda", clock=gpus.clock, start_thread=False)
    gpus.run(2.0, 100.0, 40.0)
    out = meter.stop()
    assert out.whole_run.joules == pytest.approx(80.0)  # GPU 1's 40 W, not GPU 0's
    assert out.devices == {"cuda": schema.EnergyDevice(name="Fake GPU 1")} and "current CUDA device" in out.covers


def test_a_gpu_the_node_does_not_have_is_not_measured(zeus_gpus):
    zeus_gpus(n=1)
    out = start_energy("cuda", cuda_devices=range(2), start_thread=False).stop()
    assert out.method is None and "NVML unavailable" in out.reason and out.device_count == 2


def test_a_run_zeus_cannot_close_keeps_its_peak_and_says_why(zeus_gpus, monkeypatch):
    gpus = zeus_gpus()
    gpus.run(0.0, 30.0)
    meter = start_energy("cuda", clock=gpus.clock, start_thread=False)
    gpus.run(5.0, 30.0)

    def lost_window(key, sync_execution):
        raise ValueError(f"no window {key!r}")

    monkeypatch.setattr(meter.reader.monitor, "end_window", lost_window)
    whole = meter.stop().whole_run
    assert whole.joules is None and whole.mean_watts is None and whole.peak_watts == pytest.approx(30.0)
    assert meter.stop().reason == "zeus could not read the counters: no window 'whole_run'"


# ----------------------------------------------------------------------------- RAPL (cpu)
def write(path: Path, text) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"{text}\n")


def rapl_tree(root: Path, counters: dict[str, int]) -> None:
    """Fake /sys/class/powercap: two packages, one core subzone, one psys domain; max range 10 J."""
    names = {"intel-rapl:0": "package-0", "intel-rapl:1": "package-1", "intel-rapl:0:0": "core", "intel-rapl:2": "psys"}
    for zone, uj in counters.items():
        write(root / zone / "name", names[zone])
        write(root / zone / "energy_uj", uj)
        write(root / zone / "max_energy_range_uj", 10_000_000)


def test_rapl_two_packages_with_wraparound(tmp_path):
    rapl_tree(tmp_path, {"intel-rapl:0": 1_000, "intel-rapl:1": 9_000_000, "intel-rapl:0:0": 0, "intel-rapl:2": 0})
    clock = Clock()
    meter = start_energy("cpu", interval_s=1, rapl_root=tmp_path, clock=clock, start_thread=False)
    meter.window_opened(0.0)
    rapl_tree(
        tmp_path,
        {"intel-rapl:0": 2_001_000, "intel-rapl:1": 9_500_000, "intel-rapl:0:0": 5_000_000, "intel-rapl:2": 9_000_000},
    )
    clock.t = 1.0
    meter.poll()
    rapl_tree(
        tmp_path,
        {
            "intel-rapl:0": 4_001_000,
            "intel-rapl:1": 500_000,  # package-1 wrapped
            "intel-rapl:0:0": 9_000_000,
            "intel-rapl:2": 1_000,
        },
    )
    clock.t = 2.0
    meter.window_closed(steady_window(2.0), 2.0)
    out = meter.stop()
    assert out.method == "measured"
    assert out.devices["intel-rapl:0"].joules == pytest.approx(4.0)
    assert out.devices["intel-rapl:1"].joules == pytest.approx(0.5 + 1.0)
    assert set(out.devices) == {"intel-rapl:0", "intel-rapl:1"}  # no subzone, no psys
    assert out.joules == pytest.approx(5.5) and out.whole_run.joules == pytest.approx(5.5)
    assert out.mean_watts == pytest.approx(2.75)
    assert out.peak_watts == pytest.approx(3.0)  # second poll: 2 J + 1 J in 1 s
    assert out.device_count == 2 and "CPU package" in out.covers


def test_rapl_unreadable_counter_is_not_measured(tmp_path):
    write(tmp_path / "intel-rapl:0" / "name", "package-0")
    (tmp_path / "intel-rapl:0" / "energy_uj").mkdir(parents=True)  # reading it raises, as root-only files do
    write(tmp_path / "intel-rapl:0" / "max_energy_range_uj", 10)
    out = start_energy("cpu", rapl_root=tmp_path, start_thread=False).stop()
    assert out.method is None and "cannot read" in out.reason


# ----------------------------------------------------------------------------- Neuron sysfs
def neuron_tree(root: Path, lines: dict[str, str]) -> None:
    for device, line in lines.items():
        write(root / device / "stats" / "power" / "utilization", line)


def facts(path: Path, max_watts: str) -> Path:
    path.write_text(
        f'device,key,max_watts,date,source\nTest chip,trn1-chip,{max_watts},2026-01-01,"test datasheet, p. 3"\n'
    )
    return path


def neuron_meter(tmp_path, facts_csv):
    neuron_tree(
        tmp_path,
        {
            "neuron0": "POWER_STATUS_VALID,990,10.00,20.00,15.00",  # before the window
            "neuron1": "POWER_STATUS_VALID,990,10.00,20.00,15.00",
        },
    )
    clock = Clock()
    meter = start_energy(
        "neuron",
        interval_s=5,
        neuron_root=tmp_path,
        facts_csv=facts_csv,
        clock=clock,
        wall_clock=lambda: 1000.0,
        start_thread=False,
    )
    meter.window_opened(30.0)
    neuron_tree(
        tmp_path,
        {"neuron0": "POWER_STATUS_VALID,1030,40.00,60.00,50.00", "neuron1": "POWER_STATUS_NO_DATA,1030,0.00,0.00,0.00"},
    )
    clock.t = 60.0
    meter.poll()
    meter.poll()  # the same record twice counts once
    meter.window_closed(steady_window(60.0), 90.0)
    neuron_tree(
        tmp_path,
        {
            "neuron0": "POWER_STATUS_VALID,1090,60.00,80.00,70.00",
            "neuron1": "POWER_STATUS_VALID,1090,20.00,40.00,30.00",
        },
    )
    clock.t = 120.0
    return meter.stop()


def test_neuron_estimate_from_utilization_and_max_power(tmp_path):
    out = neuron_meter(tmp_path, facts(tmp_path / "power.csv", "200"))
    whole = out.whole_run
    assert out.method == "estimated"
    assert whole.joules == pytest.approx(21_600.0)  # (0.60 + 0.30) x 200 W x 120 s
    assert whole.mean_watts == pytest.approx(180.0)
    # one record a minute cannot resolve the 60 s steady window: the run's mean power x its seconds, said so
    assert out.seconds == pytest.approx(60.0) and out.joules == pytest.approx(180.0 * 60)
    assert out.mean_watts == pytest.approx(180.0) and "could not resolve" in out.window_note
    assert out.devices["neuron0"].mean_power_util_pct == pytest.approx(60.0)
    assert out.devices["neuron0"].joules == pytest.approx(0.60 * 200 * 60)
    assert out.devices["neuron1"].joules == pytest.approx(0.30 * 200 * 60)
    assert out.mean_power_util_pct == pytest.approx(45.0)
    assert out.power_samples == 3 and out.device_count == 2
    assert "200" in out.source and "test datasheet" in out.source and "utilization" in out.source


def test_neuron_without_published_max_power_keeps_utilization(tmp_path):
    out = neuron_meter(tmp_path, facts(tmp_path / "power.csv", ""))
    assert out.method is None and out.joules is None
    assert out.reason == NO_PUBLISHED_MAX
    assert out.mean_power_util_pct == pytest.approx(45.0)


def test_repo_facts_have_no_invented_trainium_figure():
    max_watts, source = published_max_watts("trn1-chip")
    assert max_watts is None and "Not published" in source


def test_neuron_window_without_a_new_record_is_not_measured(tmp_path):
    neuron_tree(tmp_path, {"neuron0": "POWER_STATUS_VALID,990,10.00,20.00,15.00"})
    clock = Clock()
    meter = start_energy(
        "xla",
        neuron_root=tmp_path,
        facts_csv=facts(tmp_path / "p.csv", "200"),
        clock=clock,
        wall_clock=lambda: 1000.0,
        start_thread=False,
    )
    clock.t = 30.0
    out = meter.stop()
    assert out.method is None and "a minute" in out.reason


@pytest.mark.parametrize("text", ["", "POWER_STATUS_VALID,1,2,3", "POWER_STATUS_VALID,x,1.00,2.00,3.00"])
def test_parse_power_utilization_malformed_is_none(text):
    assert parse_power_utilization(text) is None


# ----------------------------------------------------------------------------- nothing there
@pytest.mark.parametrize("device_type", ["cpu", "xla", "neuron"])
def test_missing_everything_is_not_measured(tmp_path, device_type):
    out = start_energy(
        device_type, rapl_root=tmp_path / "none", neuron_root=tmp_path / "none", start_thread=False
    ).stop()
    assert out.method is None
    assert out.joules is None and out.mean_watts is None
    assert out.reason and out.power_samples == 0
