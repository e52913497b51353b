"""study/report/plots*.py and study/plot_style.py: the report's figures from fixture records of several devices: which
PNGs are written, the same bytes twice, nothing a reader would stumble over, a host-bound device named so in every
figure, the one estimator's band on the speedup bars, and each figure's own fixes (its scales, extents and labels)."""

from __future__ import annotations

import matplotlib
import pandas as pd
import pytest
from plot_checks import overlaps
from plot_records import study_records
from record_fixtures import record

from study import cost, plot_style
from study import frame as frames
from study.frame import frame
from study.report import plots, plots_tuning

PUBLISHED = "Experiment/published"
COMMAND = "python -m study.report"
EXPECTED = {
    "batch_scaling": ["batch_scaling.png"],
    "seq_len": ["seq_len.png"],
    "lr_llrd": ["lr_llrd_heatmap.png"],
    "precision": ["precision_accuracy.png"],
    "speedup": ["speedup.png"],
    "roofline": ["roofline.png"],
    "profile_memory": ["profile_op_classes.png", "memory_vs_batch.png"],
    "small_batch": ["small_batch_utilization.png"],
    "padding": ["padding_compilations.png"],
    "cost": ["decide_cost.png"],
}


@pytest.fixture(scope="module")
def several() -> pd.DataFrame:
    """The frame of every plotted suite on an A100, a host-bound H200, a trn1 NeuronCore and this CPU."""
    return frame(study_records(("a100", "h200", "trn1", "cpu")))


@pytest.fixture(scope="module")
def drawn(several) -> pd.DataFrame:
    return plot_style.with_devices(several)


@pytest.fixture(scope="module")
def one_cpu() -> pd.DataFrame:
    """The frame of every plotted suite on this CPU alone."""
    return plot_style.with_devices(frame(study_records(("cpu",))))


def labels(fig) -> list[str]:
    """Return every text a reader sees on `fig`: titles, tick labels, texts and the legend's entries."""
    texts = [t.get_text() for ax in fig.axes for t in [ax.title, *ax.get_yticklabels(), *ax.texts]]
    return texts + plot_style.handles(fig)[1]


def test_make_all_writes_every_figure_each_read_in_the_theme_leaving_matplotlib_as_it_was(
    several, tmp_path, monkeypatch
):
    """Each figure looked at before it is written: nothing a reader would stumble over, one frameless legend below.
    (The same records give the same bytes: tests/study/report/test_build.py renders twice.)"""
    problems, save, before = {}, plot_style.save, dict(matplotlib.rcParams)

    def checked_save(fig, path):
        problems[path.name] = overlaps(fig) + ["framed legend" for legend in fig.legends if legend.get_frame_on()]
        return save(fig, path)

    monkeypatch.setattr(plot_style, "save", checked_save)
    written = plots.make_all(several, tmp_path, PUBLISHED, COMMAND)
    assert {suite: [p.name for p in paths] for suite, paths in written.items()} == EXPECTED
    assert problems == {name: [] for paths in EXPECTED.values() for name in paths}
    assert dict(matplotlib.rcParams) == before  # the theme is a context, never a global change
    png = written["speedup"][0].read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and b"Software" not in png and b"matplotlib" not in png.lower()


@pytest.mark.parametrize("draw", [plots.batch_scaling, plots.roofline, plots_tuning.speedup, plots.memory])
def test_a_host_bound_device_is_named_so_in_every_figure_that_draws_it(drawn, draw):
    said = [text for text in labels(draw(drawn, PUBLISHED)) if "H200" in text]
    assert said and all("H200 (host-bound)" in text for text in said), said


def test_the_speedup_bars_carry_the_one_estimators_band_on_one_scale(one_cpu):
    runs = one_cpu[one_cpu["suite"] == "speedup"]
    repeats = [runs.assign(run_name=runs["run_name"] + f"-rep{k}", train_s=runs["train_s"] * k) for k in (1.2, 0.9)]
    df = pd.concat([one_cpu[one_cpu["suite"] != "speedup"], runs, *repeats])
    measured, published = plots_tuning.speedup(df, PUBLISHED).axes
    arms = df[df["suite"] == "speedup"]
    band = frames.ratio(*(frames.estimate(arms[arms["preset"] == p], "train_s") for p in ("baseline", "optimized")))
    assert any(t.get_text() == f" {band.mid:.2f}× ({band.lo:.2f}–{band.hi:.2f})" for t in measured.texts)
    assert measured.get_xlim() == published.get_xlim()  # measured and published on one scale
    assert any("3 baseline, 3 optimized runs" in t.get_text() for t in measured.get_yticklabels())


def test_each_heatmap_panel_has_its_own_colour_map_and_range_and_cells_to_two_decimals(one_cpu):
    fig = plots_tuning.lr_llrd(one_cpu, PUBLISHED)
    meshes = [m for ax in fig.axes for m in ax.collections if m.get_array() is not None]
    assert len({m.get_cmap().name for m in meshes}) == len({m.get_clim() for m in meshes}) == 2  # and colour bars
    published = [t.get_text() for t in fig.axes[-2].texts] if len(fig.axes) > 2 else []
    assert "93.85\n±1.05" in [t.get_text() for ax in fig.axes for t in ax.texts], published  # never 93.8
    assert plots_tuning.cell_text(82.1, 6.8) == "82.10\n±6.80" and plots_tuning.cell_text(82.1, float("nan")) == "82.10"


def test_each_small_batch_panel_spans_the_batches_it_has(drawn):
    fig = plots.small_batch(drawn, PUBLISHED)
    for ax in fig.axes:
        ticks = [t for t in ax.get_xticks() if ax.get_xlim()[0] <= t <= ax.get_xlim()[1]]
        xs = {x for line in ax.get_lines() for x in line.get_xdata()}
        assert xs and set(ticks) <= xs | {min(xs)}, (ax.get_title(), ticks, xs)


def test_the_stochastic_rounding_notes_stay_inside_their_axes(drawn):
    renderer = None
    fig = plots_tuning.precision(drawn.assign(learned=False), PUBLISHED)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    notes = [(ax, t) for ax in fig.axes for t in ax.texts if t.get_text().startswith("not an SR effect")]
    assert notes
    for ax, note in notes:
        box, inside = note.get_window_extent(renderer), ax.get_window_extent(renderer)
        assert inside.y0 <= box.y0 and box.y1 <= inside.y1 and inside.x0 <= box.x0 and box.x1 <= inside.x1


def test_the_cost_figure_prices_the_studys_lines_as_it_printed_and_draws_the_measured_devices(drawn):
    fig = plots.cost_figure(drawn, PUBLISHED)
    published, measured = fig.axes
    l4 = next(line for line in published.get_lines() if line.get_label().startswith("L4"))
    xs, ys = l4.get_xdata(), l4.get_ydata()
    assert (ys[-1] - ys[0]) / (xs[-1] - xs[0]) == pytest.approx(17.83 / 3600 * 0.576)  # $0.576/h, g5.xlarge
    drawn_devices = {
        line.get_label().split(" (")[0] for line in measured.get_lines() if not line.get_label().startswith("_")
    }
    assert {"Xeon @ 2.80GHz", "A100-SXM4-40GB"} <= drawn_devices
    assert fig._suptitle.get_text().count("\n") == 0  # one line of title
    assert any(t.startswith("not drawn: H200") for t in plot_style.handles(fig)[1])  # no price for it in the facts


def test_the_padding_figure_names_its_device_and_labels_the_compile_seconds(drawn):
    fig = plots.padding(drawn, PUBLISHED)
    assert any("XLA" in label or "trn1" in label for label in plot_style.handles(fig)[1])
    seconds = [t.get_text() for t in fig.axes[1].texts if t.get_text().endswith(" s")]
    assert seconds and "adds evaluation's" in " ".join(plot_style.handles(fig)[1])


def test_the_host_memory_panel_says_how_far_its_measure_is_above_the_model(drawn):
    fig = plots.memory(drawn, PUBLISHED)
    host = next(ax for ax in fig.axes if ax.get_title().startswith("Host memory"))
    assert "GiB above the model at every batch" in host.get_title() and "tensors only" in host.get_title()


def test_the_same_device_has_the_same_colour_in_every_figure(drawn):
    assert drawn.groupby("device_key")["colour"].nunique().eq(1).all()
    assert drawn.drop_duplicates("device_key")["colour"].is_unique
    trn1 = drawn.loc[drawn["who"] == "trn1 NeuronCore", "colour"].iloc[0]
    assert plot_style.published_colour("trn1") == trn1


def test_a_device_is_labelled_by_its_short_name_from_the_facts():
    rows = [record(d, "s", {}, run_name=d) for d in ("a100", "trn1", "xla-cpu", "cpu", "t4")]
    assert [plot_style.device_label(r) for _, r in frame(rows).iterrows()] == [
        "A100 40GB",
        "trn1 NeuronCore",
        "XLA CPU (Xeon 2.80GHz)",
        "CPU Xeon 2.80GHz",
        "T4",
    ]


def test_a_second_device_of_a_family_never_takes_a_familys_colour():
    styles = plot_style.device_styles({"EPYC": "cpu", "Xeon": "cpu", "Graviton": "arm", "T4": "t4"})
    assert len({colour for colour, _ in styles.values()}) == 4
    assert styles["EPYC"] == plot_style.FAMILIES["cpu"] and styles["T4"] == plot_style.FAMILIES["t4"]


def test_sparse_records_draw_what_they_have_and_none_nothing(tmp_path):
    recs = [
        record("cpu", None, {"batch": 8}, run_name="adhoc-run"),  # no suite: in the roofline only
        record("t4", "seq_len", {"max_length": 32}, run_name="seq_len-full-L32", status="failed"),
    ]
    written = plots.make_all(frame(recs), tmp_path, PUBLISHED, COMMAND)
    assert set(written) == {"roofline", "cost"}
    assert plots.make_all(frame([]), tmp_path / "p", PUBLISHED, COMMAND) == {}


def test_the_cost_tables_device_is_the_frames_label_with_its_status(several):
    table = cost.decision(several, cost.Job())
    assert "H200 (host-bound)" in set(table["device"])
