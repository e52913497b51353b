import pytest

from helpers.timing import StepTimer


class FakeClock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


def test_warmup_steps_are_excluded_from_steady_state():
    clock, syncs = FakeClock(), []
    timer = StepTimer(sync=lambda: syncs.append(1), warmup_steps=2, clock=clock)
    for dt in (10.0, 5.0, 1.0, 1.0, 3.0):  # two slow warm-up steps (compilation), then steady
        timer.start(); clock.t += dt; timer.stop(samples=8, tokens=8 * 32)
    s = timer.summary()
    assert s["first_step_s"] == 10.0 and s["warmup_time_s"] == 15.0
    assert s["step_time_median_s"] == 1.0
    assert s["samples_per_s"] == pytest.approx(24 / 5.0)
    assert s["tokens_per_s"] == pytest.approx(24 * 32 / 5.0)
    assert s["train_time_s"] == 20.0 and s["samples_processed"] == 40
    assert len(syncs) == 10  # the device is synced before every clock read


def test_p90_and_host_time_between_steps():
    clock = FakeClock()
    timer = StepTimer(warmup_steps=0, clock=clock)
    for dt in range(1, 11):
        timer.start(); clock.t += dt; timer.stop(1, 1)
        clock.t += 100  # host work between steps counts in train_time_s only
    s = timer.summary()
    assert s["step_time_p90_s"] == pytest.approx(9.1)
    assert s["train_time_s"] == pytest.approx(55 + 900)
