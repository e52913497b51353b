"""Tests for helpers/measure/energy_meter.py: energy over the timing's steady windows (not the warm-up, not
the evaluation pauses), every GPU of a node summed, nodes summed. zeus's GPUs faked with known power on a
fake clock (tests/measure/zeus_fakes.py): no wall time is asserted."""

import pytest
from zeus_fakes import FakeGpus, zeus_gpus  # noqa: F401 - a fixture

from helpers.calc.job_cost import samples_per_joule
from helpers.measure import energy_meter
from helpers.measure.energy_meter import start_energy
from helpers.measure.timing import StepTimer
from helpers.run import schema


def test_the_background_thread_samples_until_stop(zeus_gpus):
    gpus = zeus_gpus()
    meter = start_energy("cuda", interval_s=0.001, clock=gpus.clock)
    gpus.run(2.0, 100.0)
    out = meter.stop()
    assert out.whole_run.joules == pytest.approx(200.0)


def test_samples_per_joule():
    assert samples_per_joule(1000, {"method": "measured", "joules": 250.0}) == pytest.approx(4.0)
    assert samples_per_joule(1000, {"method": None, "joules": None}) is None


def test_unknown_device_type_is_an_error():
    with pytest.raises(ValueError):
        start_energy("tpu")


# ----------------------------------------------------------------------------- the steady windows
def train_like_fit(
    gpus: FakeGpus,
    warmup_watts: float,
    steady_watts: float,
    eval_watts: float,
    interval_s: float | None = None,
    meter=None,
):
    """One warm-up step (its compilation: 5 s at warmup_watts), 4 steady steps of 1 s, an evaluation pause of
    10 s at eval_watts (outside the windows, as the curve callback makes it), 2 more steady steps; return the
    meter's section and the timer's summary."""
    timer = StepTimer(clock=gpus.clock, warmup_steps=1, window_steps=2, watchers=(meter,))

    def step(seconds: float, watts: float) -> None:
        gpus.run(0.0, watts)  # the step's power from its first instant: what a reading at its start sees
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


def test_warmup_at_300_w_and_steady_at_100_w_gives_100_w_over_the_steady_seconds(zeus_gpus):
    gpus = zeus_gpus()
    meter = start_energy("cuda", clock=gpus.clock, start_thread=False)
    gpus.run(3.0, 250.0)  # model set-up between the meter's start and the first step
    out, timing = train_like_fit(gpus, warmup_watts=300.0, steady_watts=100.0, eval_watts=300.0, meter=meter)
    assert out.method == "measured" and out.window == "steady"
    assert out.mean_watts == pytest.approx(100.0)  # not the warm-up's, set-up's or evaluation's 300 W
    assert out.seconds == pytest.approx(timing["steady_time_s"]) == pytest.approx(6.0)
    assert out.joules == pytest.approx(600.0) and out.windows == timing["windows"] == 3
    # the whole run is kept, labelled: 3 s x 250 + 5 s x 300 + 6 s x 100 + 10 s x 300
    assert out.whole_run.joules == pytest.approx(750 + 1500 + 600 + 3000)
    assert out.whole_run.seconds == pytest.approx(24.0) and "whole run" in out.whole_run.window
    # the same window's samples: 6 steady steps x 8 rows
    assert timing["steady_samples"] == 48
    assert samples_per_joule(timing["steady_samples"], out.model_dump()) == pytest.approx(48 / 600)
    assert isinstance(out, schema.Energy)  # the record's section, typed where it is made
    written = out.model_dump(exclude_unset=True)  # what the record file holds: a measured section has no reason
    assert "reason" not in written and set(written["whole_run"]) == {
        "window",
        "seconds",
        "joules",
        "mean_watts",
        "peak_watts",
    }


def test_power_integral_without_a_counter_covers_the_same_windows(zeus_gpus):
    gpus = zeus_gpus(counter=False)
    meter = start_energy("cuda", clock=gpus.clock, start_thread=False)
    out, timing = train_like_fit(gpus, 300.0, 100.0, 300.0, interval_s=1.0, meter=meter)
    assert out.method == "estimated" and out.mean_watts == pytest.approx(100.0)
    assert out.seconds == pytest.approx(timing["steady_time_s"])
    assert out.peak_watts == pytest.approx(100.0)
    assert out.whole_run.peak_watts == pytest.approx(300.0)


def test_a_node_lead_reads_every_gpu_of_its_node_and_sums_them(zeus_gpus):
    gpus = zeus_gpus(n=2)
    meter = start_energy("cuda", cuda_devices=range(2), clock=gpus.clock, start_thread=False)
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
    assert out.joules == pytest.approx(4 * (100 + 50)) and out.mean_watts == pytest.approx(150.0)
    assert out.devices["cuda:0"].joules == pytest.approx(400.0)
    assert out.devices["cuda:1"].joules == pytest.approx(200.0)
    assert out.devices["cuda:1"].name == "Fake GPU 1"
    assert out.device_count == 2 and "cuda:0, cuda:1" in out.covers


def test_a_window_that_ended_without_a_step_is_not_counted(zeus_gpus):
    gpus = zeus_gpus()
    meter = start_energy("cuda", clock=gpus.clock, start_thread=False)
    timer = StepTimer(clock=gpus.clock, warmup_steps=0, window_steps=10, watchers=(meter,))
    timer.start_step()
    gpus.run(1.0, 100.0)
    timer.end_step(8, 128)
    timer.close_window()
    timer.start_step()  # the step raised before it ended: the timer drops the window, so does the meter
    gpus.run(5.0, 400.0)
    timer.close_window()
    out = meter.stop()
    assert out.windows == 1 and out.mean_watts == pytest.approx(100.0)


def test_nodes_are_summed_into_the_job_figure():
    node = schema.Energy(
        method="measured",
        joules=600.0,
        seconds=6.0,
        mean_watts=100.0,
        peak_watts=120.0,
        covers="2 GPU(s) of this node",
        device_count=2,
        devices={"cuda:0": {"joules": 300.0}},
        whole_run={"joules": 1000.0, "seconds": 20.0, "mean_watts": 50.0, "peak_watts": 300.0},
    )
    # two node leads measured 600 J and 900 J in the same steady windows
    totals = [a + b for a, b in zip(energy_meter.node_totals(node), [900.0, 1500.0, 1.0])]
    out = energy_meter.sum_nodes(node, totals, 2)
    assert out.joules == pytest.approx(1500.0) and out.mean_watts == pytest.approx(250.0)
    assert out.whole_run.joules == pytest.approx(2500.0) and out.device_count == 4
    assert out.nodes == 2 and out.covers.startswith("2 nodes") and out.peak_watts is None
    # the other node could not measure
    missing = energy_meter.sum_nodes(node, energy_meter.node_totals(node), 2)
    assert missing.joules is None and missing.method is None and "1 of 2 nodes" in missing.reason
    assert energy_meter.node_totals(schema.Energy(method=None, joules=None, reason="no RAPL")) == [0.0, 0.0, 0.0]
