"""helpers/run/summary.py: the lines a finished run prints, from its record."""

from helpers.run.summary import headline, wall_line

RECORD = {
    "run_name": "r",
    "status": "finished",
    "device": {"name": "cpu", "cpu_capability": "AVX512"},
    "precision": {"used": "bf16"},
    "timing": {"train_time_s": 100.0, "samples_per_s": 160.0, "step_time_median_s": 0.2},
    "metrics": {"test_accuracy": 0.91, "test_macro_f1": 0.87, "final_loss": 0.2},
}


def test_the_wall_line_adds_the_phases_in_order_and_says_the_multiple_of_training():
    phases = {
        "wall": 130.0,
        "train": 100.0,
        "startup": 4.0,
        "periodic_eval": 20.0,
        "periodic_evals": 10,
        "evaluate": 2.0,
        "other": 4.0,
    }
    line = wall_line(phases)
    assert line == (
        "  wall 130.0 s = start-up 4.0, training 100.0, periodic evaluation 20.0 (10), final "
        "evaluation 2.0, other 4.0; 1.30x the training seconds"
    )
    assert not wall_line({"wall": 3.0, "startup": 3.0}).endswith("training seconds")  # no training: no ratio


def test_the_headline_says_when_90_percent_was_reached_or_why_not():
    ninety = {"train_time_s": 61.2, "step": 300, "test_accuracy": 0.9}
    reached = {**RECORD, "time_to_accuracy": {"0.90": ninety}}
    assert "time to 90% validation accuracy: 61 s of training (step 300)" in headline(reached)
    missed = {**RECORD, "time_to_accuracy": {"0.90": {"train_time_s": None, "reason": "best 88.1%"}}}
    assert headline(missed).endswith("time to 90% validation accuracy: best 88.1%")
    assert "time to 90%" not in headline(RECORD)


def test_an_interrupted_runs_training_is_shown_as_interrupted_not_as_zero_seconds():
    """Ctrl-C while training: the headline said "train 0.0 s" and the wall put training under "other"."""
    stopped = {
        **RECORD,
        "status": "interrupted",
        "timing": None,
        "phases": {"wall": 50.0, "startup": 3.0, "train": 42.0, "other": 5.0},
    }
    text = headline(stopped)
    assert "train interrupted after 42.0 s: no timing window closed" in text and "train 0.0 s" not in text
    assert "training (interrupted) 42.0, other 5.0" in text
    early = headline({**stopped, "status": "failed", "phases": {"wall": 4.0, "startup": 3.0, "other": 1.0}})
    assert "train failed before training" in early
