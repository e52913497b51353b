"""The timer: warm-up, profiled and steady windows, one sync each, and what the record gets from them."""

from __future__ import annotations

import torch

from helpers import record, timing


class Profiler:
    """Notes when it is started and stopped, against the timer's windows."""

    steps = 2

    def __init__(self, log):
        self.log = log

    def start(self):
        self.log.append("profile start")

    def stop(self, wall_s, steps):
        self.log.append(f"profile stop {steps}")

    def summary(self):
        return record.Profile(window_steps=2)


class Watcher:
    def __init__(self, log):
        self.log = log

    def window_opened(self, t):
        self.log.append("open")

    def window_closed(self, window, t):
        self.log.append(f"close {window.kind} {window.steps}")

    def stop(self):
        return record.Utilization(samples=1)


def train(timer, steps, pause_at=None):
    for step in range(steps):
        timer.start_step()
        timer.micro_batch((4, 8), torch.tensor(1.0))
        timer.end_step()
        if step + 1 == pause_at:
            with timer.paused():
                pass


def test_profiled_steps_run_in_a_window_of_their_own_between_warm_up_and_steady():
    log, syncs = [], []
    timer = timing.Timer(lambda: syncs.append(1), 2, 3, Profiler(log), (Watcher(log),))
    train(timer, 10)
    rec = record.start("t", {}, [], {"key": "k"})
    timer.finish(rec, (Watcher(log),))
    assert log[:8] == [
        "open",
        "close warmup 2",
        "profile start",
        "open",
        "close profiled 2",
        "profile stop 2",
        "open",
        "close steady 3",
    ]
    assert rec.timing.steady_steps == 6 and rec.timing.warmup_steps == 4 and rec.timing.windows == 2
    assert rec.shapes.steady == {"4x8": 6} and rec.shapes.counts == {"4x8": 10}
    assert rec.timing.steady_samples == 24 and rec.profile.window_steps == 2 and rec.utilization.samples == 1
    assert len(syncs) == 2 * len(timer.windows)  # one at each window's start and end, none between steps


def test_a_pause_closes_the_window_and_its_seconds_are_in_none():
    timer = timing.Timer(lambda: None, 1, 4)
    train(timer, 6, pause_at=3)
    timer.close()
    assert [(w.kind, w.steps) for w in timer.windows] == [("warmup", 1), ("steady", 2), ("steady", 3)]


def test_a_loss_that_explodes_marks_the_run_diverged_and_every_window_is_on_the_curve():
    rec = record.start("t", {}, [], {"key": "k"})
    timer = timing.Timer(lambda: None, 0, 1, total=3, show="lines")
    for loss in (2.0, 1.5, 30.0):
        timer.start_step()
        timer.micro_batch((4, 8), torch.tensor(loss))
        window = timer.end_step()
        ok = timer.check(rec, window, 10.0)
    assert not ok and rec.status == "diverged" and rec.metrics.diverged_at_step == 3 and "above 10 x" in rec.error
    timer.finish(rec)
    assert rec.metrics.loss_curve == [[1, 2.0], [2, 1.5], [3, 30.0]] and rec.metrics.final_loss == 30.0
    assert rec.metrics.diverged_at_step == 3
