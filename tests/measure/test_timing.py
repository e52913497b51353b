"""Step timing in windows: one device sync per window, warm-up apart, spread over the steady windows."""

import pytest

from helpers.measure.timing import StepTimer


class FakeClock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


def run_steps(timer, clock, durations, samples=8, between=0.0):
    for dt in durations:
        timer.start_step()
        clock.t += dt
        timer.end_step(samples=samples, tokens=samples * 32)
        clock.t += between


def test_the_device_is_synced_once_per_window_not_per_step():
    clock, syncs = FakeClock(), []
    timer = StepTimer(sync=lambda: syncs.append(clock.t), warmup_steps=2, window_steps=4, clock=clock)
    run_steps(timer, clock, [10.0, 5.0] + [1.0] * 8)
    s = timer.summary()
    # windows: [step 0] [step 1] [steps 2-5] [steps 6-9]; each opened and closed with one sync
    assert [(w.first_step, w.steps, w.warmup) for w in timer.windows] == [
        (0, 1, True),
        (1, 1, True),
        (2, 4, False),
        (6, 4, False),
    ]
    assert len(syncs) == 2 * len(timer.windows)
    assert s["first_step_s"] == 10.0 and s["warmup_time_s"] == 15.0
    assert s["samples_per_s"] == pytest.approx(64 / 8.0) and s["windows"] == 2
    assert s["steady_steps"] == 8 and s["samples_processed"] == 80


def test_throughput_counts_host_work_inside_a_window_and_step_times_do_not():
    clock = FakeClock()
    timer = StepTimer(warmup_steps=0, window_steps=5, clock=clock)
    run_steps(timer, clock, [1.0] * 10, samples=1, between=1.0)  # a 1 s batch fetch between steps
    s = timer.summary()
    assert s["step_time_median_s"] == pytest.approx(1.0)  # the host clock per step
    # no warm-up: windows [0] [1-5] [6-9] are all steady; 10 s of steps + 8 s of fetches inside them
    assert s["samples_per_s"] == pytest.approx(10 / 18.0)
    assert s["window_samples_per_s"]["min"] < s["window_samples_per_s"]["max"]


def test_a_data_parallel_summary_gives_every_rate_in_the_jobs_unit():
    """Two ranks: samples_per_s is the job's, so the windows' spread must be too (it lies inside it)."""
    clock = FakeClock()
    timer = StepTimer(warmup_steps=0, window_steps=3, clock=clock)
    run_steps(timer, clock, [1.0, 1.0, 1.0, 2.0, 2.0, 2.0, 1.5], samples=4)
    one, two = timer.summary(), timer.summary(ranks=2)
    assert two["samples_per_s"] == pytest.approx(2 * one["samples_per_s"])
    assert two["samples_per_s"] == 2 * two["samples_per_s_per_device"]
    rates = two["window_samples_per_s"]
    assert rates["min"] < two["samples_per_s"] < rates["max"]  # the check HARDWARE.md asks of a record
    assert [r for _, r in two["window_series"]] == [2 * r for _, r in one["window_series"]]
    assert two["steady_samples"] == one["steady_samples"] and "samples_per_s_per_device" not in one


def test_closing_a_window_keeps_evaluation_out_of_the_training_time():
    clock = FakeClock()
    timer = StepTimer(warmup_steps=0, window_steps=100, clock=clock)
    run_steps(timer, clock, [1.0] * 3)
    timer.close_window()
    clock.t += 50.0  # evaluation between windows
    run_steps(timer, clock, [1.0] * 3)
    assert timer.summary()["train_time_s"] == pytest.approx(6.0)


def test_xla_step_times_are_window_means():
    clock = FakeClock()
    timer = StepTimer(warmup_steps=1, window_steps=3, per_step="window", clock=clock)
    run_steps(timer, clock, [30.0, 0.5, 1.5, 1.0])  # host times on XLA are tracing, not execution
    assert timer.step_times_s == [30.0, 1.0, 1.0, 1.0]
    assert timer.summary()["step_time_median_s"] == pytest.approx(1.0)


def test_cuda_step_times_come_from_events():
    class Event:
        t = 0.0

        def __init__(self):
            self.at = None

        def record(self):
            self.at = Event.t

        def elapsed_time(self, end):
            return (end.at - self.at) * 1e3  # milliseconds, as torch.cuda.Event

    clock = FakeClock()
    timer = StepTimer(warmup_steps=0, window_steps=2, per_step="events", clock=clock, event=Event)
    for device_s in (2.0, 3.0, 4.0):
        timer.start_step()
        Event.t += device_s  # the device's time, not the host's (the host returns at once)
        timer.end_step(1, 1)
    timer.summary()
    assert timer.step_times_s == pytest.approx([2.0, 3.0, 4.0])


def test_unknown_per_step_source_is_refused():
    with pytest.raises(ValueError, match="per_step"):
        StepTimer(per_step="guess")
