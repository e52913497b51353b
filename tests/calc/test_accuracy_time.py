"""Time to accuracy from a validation curve: the first crossing of each target, or why it was never reached."""

from helpers.calc.accuracy_time import crossings
from helpers.run.schema import CurvePoint

CURVE = [
    CurvePoint(step=100, train_time_s=50.0, val_accuracy=0.85, rows=2000),
    CurvePoint(step=200, train_time_s=100.0, val_accuracy=0.895, rows=2000),
    CurvePoint(step=300, train_time_s=150.0, val_accuracy=0.905, rows=2000, test_accuracy=0.9, wall_s=260.0),
    CurvePoint(step=400, train_time_s=200.0, val_accuracy=0.89, rows=2000),
]


def _written(crossing) -> dict:
    return crossing.model_dump(exclude_unset=True)


def test_the_first_evaluation_at_or_above_a_target_is_its_crossing():
    out = crossings(CURVE)
    assert out["0.88"].train_time_s == 100.0 and out["0.88"].step == 200
    assert _written(out["0.90"]) == {
        "train_time_s": 150.0,
        "wall_s": 260.0,
        "step": 300,
        "rows": 2000,
        "val_accuracy": 0.905,
        "test_accuracy": 0.9,
        "compile_s_before": None,
    }


def test_a_target_never_reached_says_so_with_the_best_seen():
    out = crossings(CURVE)
    assert _written(out["0.92"]) == {"train_time_s": None, "reason": "not reached (best 90.50% in 4 evaluations)"}
    assert crossings([])["0.88"].reason == "not reached (no evaluation)"
