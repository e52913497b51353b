"""The notebooks' inline curves, drawn from a record: each panel has its line, or says it was not recorded."""

import matplotlib

matplotlib.use("Agg")

from record_fixtures import record  # noqa: E402

from study.report import run_curves  # noqa: E402


def _texts(ax):
    return [t.get_text() for t in ax.texts]


def test_each_curve_of_a_record_is_a_line_in_its_panel():
    rec = record("cpu", None, {"batch": 8}, run_name="curves")
    rec["timing"]["window_series"] = [[10, 95.0], [20, 101.0], [30, 99.0]]
    rec["curve"] = [
        {"step": 10, "train_time_s": 5.0, "val_accuracy": 0.5},
        {"step": 20, "train_time_s": 10.0, "val_accuracy": 0.8},
    ]
    loss, accuracy, rate = run_curves.draw(rec).axes
    assert list(loss.lines[0].get_xdata()) == [50, 500] and list(loss.lines[0].get_ydata()) == [1.2, 0.3]
    assert list(accuracy.lines[0].get_ydata()) == [50.0, 80.0]
    assert list(rate.lines[0].get_ydata()) == [95.0, 101.0, 99.0] and rate.lines[1].get_ydata()[0] == 99.0


def test_a_curve_that_was_not_recorded_says_how_to_get_it():
    rec = record("cpu", None, {"batch": 8}, run_name="bare")
    loss, accuracy, rate = run_curves.draw(rec).axes
    assert loss.lines and not accuracy.lines and not rate.lines
    assert _texts(accuracy) == ["not recorded: set eval_every to record it"]
    assert _texts(rate) == ["not recorded: no steady window recorded"]


def test_drawing_the_curves_leaves_the_notebooks_matplotlib_settings_alone():
    with matplotlib.rc_context():  # a notebook's settings: matplotlib's own
        matplotlib.rcdefaults()
        before = dict(matplotlib.rcParams)
        run_curves.draw(record("cpu", None, {"batch": 8}, run_name="bare"))
        assert dict(matplotlib.rcParams) == before
