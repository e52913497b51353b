"""helpers/energy.py: joules over the steady windows only (NVML faked on a test clock), RAPL's wraparound, the
Neuron estimate, and "not measured" with its reason, never 0. No wall time is asserted."""

import types
from pathlib import Path

import pytest
from measure_fakes import Clock, Window, fake_nvml  # noqa: F401 - a fixture

from helpers import energy, record


def window(meter: energy.Meter, nvml, seconds: float, *watts: float, warmup: bool = False) -> None:
    """One timed window of `seconds` at `watts`, with a power sample inside it."""
    meter.window_opened(nvml.clock.t)
    nvml.run(seconds, *watts)
    meter.poll()
    meter.window_closed(Window(seconds=seconds, warmup=warmup), nvml.clock.t)


def nvml_meter(nvml, gpus=(0,)) -> energy.Meter:
    return energy.Meter(energy.NvmlReader(list(gpus)), "cuda", clock=nvml.clock, start_thread=False)


def test_the_steady_windows_energy_leaves_out_set_up_warm_up_and_evaluation(fake_nvml):
    nvml = fake_nvml()
    meter = nvml_meter(nvml)
    nvml.run(3.0, 250.0)  # model set-up before the first step
    window(meter, nvml, 5.0, 300.0, warmup=True)  # compilation
    for _ in range(2):
        window(meter, nvml, 2.0, 100.0)
    nvml.run(10.0, 300.0)  # an evaluation between two windows
    window(meter, nvml, 2.0, 100.0)
    out = meter.stop()
    assert out.method == "measured" and out.window == "steady" and out.windows == 3
    assert out.seconds == 6.0 and out.joules == pytest.approx(600.0) and out.mean_watts == pytest.approx(100.0)
    assert out.peak_watts == pytest.approx(100.0)  # the steady windows' samples only
    assert out.devices["cuda:0"].joules == pytest.approx(600.0) and out.devices["cuda:0"].name == "Fake GPU 0"
    # the whole run is kept beside, labelled: 3 s x 250 + 5 s x 300 + 6 s x 100 + 10 s x 300
    assert out.whole_run.joules == pytest.approx(750 + 1500 + 600 + 3000) and out.whole_run.seconds == 24.0
    assert out.whole_run.peak_watts == pytest.approx(300.0) and "whole run" in out.whole_run.window
    assert isinstance(out, record.Energy) and meter.stop() is out and out.reason is None


def test_a_node_lead_reads_every_gpu_of_its_node(fake_nvml):
    nvml = fake_nvml(n=2)
    lead = energy.start("cuda", types.SimpleNamespace(world_size=2, local_rank=0, nodes=1))
    assert sorted(lead.reader.handles) == ["cuda:0", "cuda:1"]
    lead.stop()
    meter = nvml_meter(nvml, gpus=(0, 1))
    window(meter, nvml, 4.0, 100.0, 50.0)
    out = meter.stop()
    assert out.joules == pytest.approx(600.0) and out.mean_watts == pytest.approx(150.0) and out.device_count == 2
    assert out.devices["cuda:0"].joules == pytest.approx(400.0) and out.devices["cuda:1"].joules == pytest.approx(200.0)
    other = energy.start("cuda", types.SimpleNamespace(world_size=2, local_rank=1, nodes=1)).stop()
    assert other.joules is None and other.reason == "measured by local rank 0 of this node"


def test_a_window_that_ended_without_a_step_is_not_counted(fake_nvml):
    nvml = fake_nvml()
    meter = nvml_meter(nvml)
    window(meter, nvml, 1.0, 100.0)
    meter.window_opened(nvml.clock.t)
    nvml.run(5.0, 400.0)  # the step raised before it ended
    meter.window_closed(None, nvml.clock.t)
    out = meter.stop()
    assert out.windows == 1 and out.mean_watts == pytest.approx(100.0)


def test_no_steady_window_gives_no_figure_never_the_whole_runs(fake_nvml):
    nvml = fake_nvml()
    meter = nvml_meter(nvml)
    window(meter, nvml, 5.0, 300.0, warmup=True)
    out = meter.stop()
    assert out.joules is None and out.method is None and out.reason == energy.NO_STEADY
    assert out.whole_run.joules == pytest.approx(1500.0)


def test_a_gpu_nvml_does_not_have_is_not_measured(fake_nvml):
    fake_nvml(n=1)
    out = energy.Meter(energy.NvmlReader([0, 1]), "cuda", start_thread=False).stop()
    assert out.joules is None and out.method is None and "NVML unavailable" in out.reason and out.device_count == 2


def test_a_counter_that_went_backwards_is_not_a_figure(fake_nvml):
    nvml = fake_nvml()
    meter = nvml_meter(nvml)
    meter.window_opened(0.0)
    nvml.mj = [0.0]  # the driver reloaded
    meter.window_closed(Window(seconds=1.0), 1.0)
    out = meter.stop()
    assert out.joules is None and "backwards" in out.reason


# ----------------------------------------------------------------------------- RAPL
def rapl_tree(root: Path, counters: dict[str, int]) -> None:
    """A fake /sys/class/powercap: two packages, a core subzone, a psys domain; counters wrap at 10 J."""
    names = {"intel-rapl:0": "package-0", "intel-rapl:1": "package-1", "intel-rapl:0:0": "core", "intel-rapl:2": "psys"}
    for zone, uj in counters.items():
        (root / zone).mkdir(parents=True, exist_ok=True)
        for name, text in (("name", names[zone]), ("energy_uj", uj), ("max_energy_range_uj", 10_000_000)):
            (root / zone / name).write_text(f"{text}\n")


def test_rapl_sums_two_packages_through_a_wraparound(tmp_path):
    rapl_tree(tmp_path, {"intel-rapl:0": 1_000, "intel-rapl:1": 9_000_000, "intel-rapl:0:0": 0, "intel-rapl:2": 0})
    clock = Clock()
    meter = energy.Meter(energy.RaplReader(tmp_path), "cpu", clock=clock, start_thread=False)
    meter.poll()
    meter.window_opened(0.0)
    rapl_tree(tmp_path, {"intel-rapl:0": 2_001_000, "intel-rapl:1": 9_500_000, "intel-rapl:0:0": 5, "intel-rapl:2": 9})
    clock.t = 1.0
    meter.poll()
    rapl_tree(tmp_path, {"intel-rapl:0": 4_001_000, "intel-rapl:1": 500_000, "intel-rapl:0:0": 9, "intel-rapl:2": 1})
    clock.t = 2.0
    meter.window_closed(Window(seconds=2.0), 2.0)  # package-1 wrapped
    out = meter.stop()
    assert out.method == "measured" and set(out.devices) == {"intel-rapl:0", "intel-rapl:1"}  # no subzone, no psys
    assert out.devices["intel-rapl:0"].joules == pytest.approx(4.0) and out.devices["intel-rapl:0"].name == "package-0"
    assert out.devices["intel-rapl:1"].joules == pytest.approx(0.5 + 1.0)
    assert out.joules == pytest.approx(5.5) and out.mean_watts == pytest.approx(2.75)
    assert out.peak_watts == pytest.approx(3.0)  # the last poll, at 2 s: 2 J + 1 J over the second second
    assert out.device_count == 2 and "CPU package" in out.covers


def test_an_unreadable_rapl_counter_is_not_measured(tmp_path):
    (tmp_path / "intel-rapl:0" / "energy_uj").mkdir(parents=True)  # reading it raises, as a root-only file does
    (tmp_path / "intel-rapl:0" / "name").write_text("package-0\n")
    out = energy.Meter(energy.RaplReader(tmp_path), "cpu", start_thread=False).stop()
    assert out.method is None and out.joules is None and "cannot read" in out.reason


# ----------------------------------------------------------------------------- Neuron sysfs
def neuron_tree(root: Path, lines: dict[str, str]) -> None:
    for device, line in lines.items():
        (root / device / "stats" / "power").mkdir(parents=True, exist_ok=True)
        (root / device / "stats" / "power" / "utilization").write_text(f"{line}\n")


def power_csv(path: Path, max_watts: str) -> Path:
    path.write_text(f'device,key,max_watts,date,source\nTest chip,trn1-chip,{max_watts},2026-01-01,"datasheet, p. 3"\n')
    return path


def neuron_run(tmp_path: Path, max_watts: str) -> record.Energy:
    """A 120 s run with a 60 s steady window; the driver publishes a record a minute, one of them NO_DATA."""
    neuron_tree(tmp_path, {d: "POWER_STATUS_VALID,990,10.00,20.00,15.00" for d in ("neuron0", "neuron1")})  # before
    reader = energy.NeuronReader(tmp_path, power_csv(tmp_path / "power.csv", max_watts), wall=lambda: 1000.0)
    clock = Clock()
    meter = energy.Meter(reader, "xla", interval_s=5, clock=clock, start_thread=False)
    meter.window_opened(30.0)
    neuron_tree(
        tmp_path, {"neuron0": "POWER_STATUS_VALID,1030,40,60,50.00", "neuron1": "POWER_STATUS_NO_DATA,1030,0,0,0"}
    )
    clock.t = 60.0
    meter.poll()
    meter.poll()  # the same record twice counts once
    meter.window_closed(Window(seconds=60.0), 90.0)
    neuron_tree(
        tmp_path, {"neuron0": "POWER_STATUS_VALID,1090,60,80,70.00", "neuron1": "POWER_STATUS_VALID,1090,2,4,30"}
    )
    clock.t = 120.0
    return meter.stop()


def test_neuron_energy_is_estimated_from_power_utilization_and_a_published_maximum(tmp_path):
    out = neuron_run(tmp_path, "200")
    assert out.method == "estimated" and "cannot resolve" in out.window_note
    assert out.whole_run.mean_watts == pytest.approx((0.60 + 0.30) * 200) and out.whole_run.joules == pytest.approx(
        21_600
    )
    assert out.seconds == 60.0 and out.joules == pytest.approx(180.0 * 60)  # the run's mean power x the steady seconds
    assert out.devices["neuron0"].mean_power_util_pct == pytest.approx(60.0) and out.devices["neuron0"].records == 2
    assert out.mean_power_util_pct == pytest.approx(45.0) and "datasheet" in out.max_watts_source


def test_without_a_published_maximum_neuron_energy_keeps_the_utilization(tmp_path):
    out = neuron_run(tmp_path, "")
    assert out.method is None and out.joules is None and "no published maximum power" in out.reason
    assert out.mean_power_util_pct == pytest.approx(45.0)


def test_the_repository_has_no_invented_trainium_power():
    max_watts, source = energy.published_max_watts("trn1-chip")
    assert max_watts is None and "Not published" in source


@pytest.mark.parametrize("device_type", ["cpu", "xla"])
def test_nothing_to_read_is_not_measured(tmp_path, device_type):
    reader = energy.RaplReader(tmp_path) if device_type == "cpu" else energy.NeuronReader(tmp_path)
    out = energy.Meter(reader, device_type, start_thread=False).stop()
    assert out.method is None and out.joules is None and out.mean_watts is None and out.reason
    assert out.power_samples == 0


def test_an_unknown_device_type_is_refused():
    with pytest.raises(ValueError, match="device_type"):
        energy.start("tpu", None)
