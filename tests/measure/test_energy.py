"""Tests for helpers/measure/energy_meter.py and energy_readers.py: energy over the timing's steady windows (not the
warm-up, not the evaluation pauses), every GPU of a node summed, nodes summed; NVML counter and fallback, RAPL
wraparound, Neuron estimate, not measured. Fakes with known power on a fake clock: no wall time is asserted."""

import sys
import types
from pathlib import Path

import pytest

from helpers.calc.job_cost import samples_per_joule
from helpers.measure import energy_meter as energy
from helpers.measure.energy_meter import (NO_PUBLISHED_MAX, NOT_MEASURED, parse_power_utilization, published_max_watts,
                                    start_energy)
from helpers.measure.timing import StepTimer, Window
from helpers.run import schema


class FakeClock:
    """Returns the queued times in order, then keeps returning the last one."""

    def __init__(self, *times: float) -> None:
        self.times = list(times)

    def __call__(self) -> float:
        return self.times.pop(0) if len(self.times) > 1 else self.times[0]


class Clock:
    """A clock the test sets (`t`) or advances; the timer and the meter share it."""

    def __init__(self, t: float = 0.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def steady_window(seconds: float) -> Window:
    return Window(first_step=1, steps=1, seconds=seconds, samples=8, tokens=128, warmup=False)


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


def test_nvml_energy_counter_gives_measured_joules_and_mean_watts_of_the_whole_run():
    nvml = fake_nvml(energy_mj=[1_000_000, 1_250_000], power_mw=[20_000, 30_000, 25_000])
    meter = cuda_meter(nvml, 0.0, 5.0, 10.0)  # start, one poll, stop
    meter.poll()
    out = meter.stop()
    whole = out["whole_run"]
    assert whole["joules"] == pytest.approx(250.0)
    assert whole["mean_watts"] == pytest.approx(25.0)
    assert whole["seconds"] == pytest.approx(10.0)
    assert whole["peak_watts"] == pytest.approx(30.0)
    assert "first step" in whole["window"]
    assert out["power_samples"] == 3
    assert "nvmlDeviceGetTotalEnergyConsumption" in out["source"]
    # no timer told the meter of a steady window: no steady figure, said so, never the whole run's in its place
    assert out["method"] == NOT_MEASURED and out["joules"] == NOT_MEASURED and out["window"] == "steady"
    assert out["reason"] == energy.NO_STEADY
    assert meter.stop() is out  # a second stop returns the same record


def test_nvml_not_supported_falls_back_to_integrating_power():
    nvml = fake_nvml(power_mw=[100_000, 200_000, 300_000], energy_error=NVMLError_NotSupported())
    meter = cuda_meter(nvml, 0.0, 10.0, 20.0)
    meter.poll()
    out = meter.stop()
    whole = out["whole_run"]
    assert whole["joules"] == pytest.approx(150 * 10 + 250 * 10)  # trapezoid over 0-10 s and 10-20 s
    assert whole["mean_watts"] == pytest.approx(200.0)
    assert whole["peak_watts"] == pytest.approx(300.0)
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
    assert out["whole_run"]["joules"] == pytest.approx(4.0)


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
    clock = Clock()
    meter = start_energy("cpu", interval_s=1, rapl_root=tmp_path, clock=clock, start_thread=False)
    meter.window_opened(0.0)
    rapl_tree(tmp_path, {"intel-rapl:0": 2_001_000, "intel-rapl:1": 9_500_000,
                         "intel-rapl:0:0": 5_000_000, "intel-rapl:2": 9_000_000})
    clock.t = 1.0
    meter.poll()
    rapl_tree(tmp_path, {"intel-rapl:0": 4_001_000, "intel-rapl:1": 500_000,  # package-1 wrapped
                         "intel-rapl:0:0": 9_000_000, "intel-rapl:2": 1_000})
    clock.t = 2.0
    meter.window_closed(steady_window(2.0), 2.0)
    out = meter.stop()
    assert out["method"] == "measured"
    assert out["devices"]["intel-rapl:0"]["joules"] == pytest.approx(4.0)
    assert out["devices"]["intel-rapl:1"]["joules"] == pytest.approx(0.5 + 1.0)
    assert set(out["devices"]) == {"intel-rapl:0", "intel-rapl:1"}  # no subzone, no psys
    assert out["joules"] == pytest.approx(5.5) and out["whole_run"]["joules"] == pytest.approx(5.5)
    assert out["mean_watts"] == pytest.approx(2.75)
    assert out["peak_watts"] == pytest.approx(3.0)  # second poll: 2 J + 1 J in 1 s
    assert out["device_count"] == 2 and "CPU package" in out["covers"]
    schema.Energy.model_validate(out)  # the record's section: every key typed


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
    clock = Clock()
    meter = start_energy("neuron", interval_s=5, neuron_root=tmp_path, facts_csv=facts_csv, clock=clock,
                         wall_clock=lambda: 1000.0, start_thread=False)
    meter.window_opened(30.0)
    neuron_tree(tmp_path, {"neuron0": "POWER_STATUS_VALID,1030,40.00,60.00,50.00",
                           "neuron1": "POWER_STATUS_NO_DATA,1030,0.00,0.00,0.00"})
    clock.t = 60.0
    meter.poll()
    meter.poll()  # the same record twice counts once
    meter.window_closed(steady_window(60.0), 90.0)
    neuron_tree(tmp_path, {"neuron0": "POWER_STATUS_VALID,1090,60.00,80.00,70.00",
                           "neuron1": "POWER_STATUS_VALID,1090,20.00,40.00,30.00"})
    clock.t = 120.0
    return meter.stop()


def test_neuron_estimate_from_utilization_and_max_power(tmp_path):
    out = neuron_meter(tmp_path, facts(tmp_path / "power.csv", "200"))
    whole = out["whole_run"]
    assert out["method"] == "estimated"
    assert whole["joules"] == pytest.approx(21_600.0)  # (0.60 + 0.30) x 200 W x 120 s
    assert whole["mean_watts"] == pytest.approx(180.0)
    # one record a minute cannot resolve the 60 s steady window: the run's mean power x its seconds, said so
    assert out["seconds"] == pytest.approx(60.0) and out["joules"] == pytest.approx(180.0 * 60)
    assert out["mean_watts"] == pytest.approx(180.0) and "could not resolve" in out["window_note"]
    assert out["devices"]["neuron0"]["mean_power_util_pct"] == pytest.approx(60.0)
    assert out["devices"]["neuron0"]["joules"] == pytest.approx(0.60 * 200 * 60)
    assert out["devices"]["neuron1"]["joules"] == pytest.approx(0.30 * 200 * 60)
    assert out["mean_power_util_pct"] == pytest.approx(45.0)
    assert out["power_samples"] == 3 and out["device_count"] == 2
    assert "200" in out["source"] and "test datasheet" in out["source"] and "utilization" in out["source"]
    schema.Energy.model_validate(out)


def test_neuron_without_published_max_power_keeps_utilization(tmp_path):
    out = neuron_meter(tmp_path, facts(tmp_path / "power.csv", ""))
    assert out["method"] == NOT_MEASURED and out["joules"] == NOT_MEASURED
    assert out["reason"] == NO_PUBLISHED_MAX
    assert out["mean_power_util_pct"] == pytest.approx(45.0)
    schema.Energy.model_validate(out)


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


# ----------------------------------------------------------------------------- the steady windows
class FakeGpus:
    """NVML with `n` GPUs whose energy counters integrate the power the test sets, as the clock advances."""

    def __init__(self, clock: Clock, n: int = 1, counter: bool = True) -> None:
        self.clock, self.handles = clock, [f"handle-{i}" for i in range(n)]
        self.watts = dict.fromkeys(self.handles, 0.0)
        self.mj = dict.fromkeys(self.handles, 1_000_000.0)
        self.counter = counter

    def run(self, seconds: float, *watts: float) -> None:
        """Hold each GPU at `watts` (one figure: all of them) for `seconds`."""
        for handle, w in zip(self.handles, watts * len(self.handles) if len(watts) == 1 else watts):
            self.watts[handle] = w
        for handle in self.handles:
            self.mj[handle] += self.watts[handle] * seconds * 1000
        self.clock.t += seconds

    def energy(self, handle):
        if not self.counter:
            raise NVMLError_NotSupported()
        return int(self.mj[handle])

    @property
    def nvml(self):
        return types.SimpleNamespace(
            NVMLError=NVMLError, nvmlInit=lambda: None, nvmlShutdown=lambda: None,
            nvmlDeviceGetHandleByIndex=lambda i: self.handles[i], nvmlDeviceGetHandleByUUID=None,
            nvmlDeviceGetName=lambda h: f"Fake GPU {h}", nvmlDeviceGetTotalEnergyConsumption=self.energy,
            nvmlDeviceGetPowerUsage=lambda h: self.watts[h] * 1000)


def train_like_fit(gpus: FakeGpus, warmup_watts: float, steady_watts: float, eval_watts: float,
                   interval_s: float | None = None, meter=None):
    """One warm-up step (its compilation: 5 s at warmup_watts), 4 steady steps of 1 s, an evaluation pause of
    10 s at eval_watts (outside the windows, as the curve callback makes it), 2 more steady steps; return the
    meter's section and the timer's summary."""
    timer = StepTimer(clock=gpus.clock, warmup_steps=1, window_steps=2, watchers=(meter,))

    def step(seconds: float, watts: float) -> None:
        gpus.run(0.0, watts)  # the step's power from its first instant: what a power reading at its start sees
        timer.start_step()
        gpus.run(seconds, watts)
        if interval_s:
            meter.poll()
        timer.end_step(8, 128)

    step(5.0, warmup_watts)
    for _ in range(4):
        step(1.0, steady_watts)
    timer.close_window()
    gpus.run(10.0, eval_watts)
    for _ in range(2):
        step(1.0, steady_watts)
    return meter.stop(), timer.summary()


def test_warmup_at_300_w_and_steady_at_100_w_gives_100_w_over_the_steady_seconds():
    gpus = FakeGpus(Clock())
    meter = start_energy("cuda", nvml=gpus.nvml, clock=gpus.clock, start_thread=False)
    gpus.run(3.0, 250.0)  # model set-up between the meter's start and the first step
    out, timing = train_like_fit(gpus, warmup_watts=300.0, steady_watts=100.0, eval_watts=300.0, meter=meter)
    assert out["method"] == "measured" and out["window"] == "steady"
    assert out["mean_watts"] == pytest.approx(100.0)  # not the warm-up's, set-up's or evaluation's 300 W
    assert out["seconds"] == pytest.approx(timing["steady_time_s"]) == pytest.approx(6.0)
    assert out["joules"] == pytest.approx(600.0) and out["windows"] == timing["windows"] == 3
    # the whole run is kept, labelled: 3 s x 250 + 5 s x 300 + 6 s x 100 + 10 s x 300
    assert out["whole_run"]["joules"] == pytest.approx(750 + 1500 + 600 + 3000)
    assert out["whole_run"]["seconds"] == pytest.approx(24.0) and "whole run" in out["whole_run"]["window"]
    # the same window's samples: 6 steady steps x 8 rows
    assert timing["steady_samples"] == 48
    assert samples_per_joule(timing["steady_samples"], out) == pytest.approx(48 / 600)


def test_power_integral_without_a_counter_covers_the_same_windows():
    gpus = FakeGpus(Clock(), counter=False)
    meter = start_energy("cuda", nvml=gpus.nvml, clock=gpus.clock, start_thread=False)
    out, timing = train_like_fit(gpus, 300.0, 100.0, 300.0, interval_s=1.0, meter=meter)
    assert out["method"] == "estimated" and out["mean_watts"] == pytest.approx(100.0)
    assert out["seconds"] == pytest.approx(timing["steady_time_s"])
    assert out["peak_watts"] == pytest.approx(100.0) and out["whole_run"]["peak_watts"] == pytest.approx(300.0)


def test_a_node_lead_reads_every_gpu_of_its_node_and_sums_them():
    gpus = FakeGpus(Clock(), n=2)
    meter = start_energy("cuda", nvml=gpus.nvml, cuda_devices=range(2), clock=gpus.clock, start_thread=False)
    timer = StepTimer(clock=gpus.clock, warmup_steps=1, window_steps=10, watchers=(meter,))
    timer.start_step()
    gpus.run(5.0, 300.0, 300.0)
    timer.end_step(8, 128)
    for _ in range(4):
        timer.start_step()
        gpus.run(1.0, 100.0, 50.0)
        timer.end_step(8, 128)
    timer.close_window()
    out = meter.stop()
    assert out["joules"] == pytest.approx(4 * (100 + 50)) and out["mean_watts"] == pytest.approx(150.0)
    assert out["devices"]["cuda:0"]["joules"] == pytest.approx(400.0)
    assert out["devices"]["cuda:1"]["joules"] == pytest.approx(200.0)
    assert out["devices"]["cuda:1"]["name"] == "Fake GPU handle-1"
    assert out["device_count"] == 2 and "cuda:0, cuda:1" in out["covers"]


def test_a_window_that_ended_without_a_step_is_not_counted():
    gpus = FakeGpus(Clock())
    meter = start_energy("cuda", nvml=gpus.nvml, clock=gpus.clock, start_thread=False)
    timer = StepTimer(clock=gpus.clock, warmup_steps=0, window_steps=10, watchers=(meter,))
    timer.start_step()
    gpus.run(1.0, 100.0)
    timer.end_step(8, 128)
    timer.close_window()
    timer.start_step()  # the step raised before it ended: the timer drops the window, so does the meter
    gpus.run(5.0, 400.0)
    timer.close_window()
    out = meter.stop()
    assert out["windows"] == 1 and out["mean_watts"] == pytest.approx(100.0)


def test_nodes_are_summed_into_the_job_figure():
    node = {"method": "measured", "joules": 600.0, "seconds": 6.0, "mean_watts": 100.0, "peak_watts": 120.0,
            "covers": "2 GPU(s) of this node", "device_count": 2, "devices": {"cuda:0": {"joules": 300.0}},
            "whole_run": {"joules": 1000.0, "seconds": 20.0, "mean_watts": 50.0, "peak_watts": 300.0}}
    # two node leads measured 600 J and 900 J in the same steady windows
    out = energy.sum_nodes(node, [a + b for a, b in zip(energy.node_totals(node), [900.0, 1500.0, 1.0])], 2)
    assert out["joules"] == pytest.approx(1500.0) and out["mean_watts"] == pytest.approx(250.0)
    assert out["whole_run"]["joules"] == pytest.approx(2500.0) and out["device_count"] == 4
    assert out["nodes"] == 2 and out["covers"].startswith("2 nodes") and out["peak_watts"] is None
    missing = energy.sum_nodes(node, energy.node_totals(node), 2)  # the other node could not measure
    assert missing["joules"] is None and missing["method"] is None and "1 of 2 nodes" in missing["reason"]
    schema.Energy.model_validate(out), schema.Energy.model_validate(missing)
    assert energy.node_totals({"method": None, "joules": None, "reason": "no RAPL"}) == [0.0, 0.0, 0.0]
