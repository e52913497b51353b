"""The report's figures from fixture records of several devices: which PNGs are written, that the same frame
gives the same bytes, that no label overlaps another or the data, and that no data draws nothing."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("matplotlib", reason="plots need matplotlib (the main environment, .venv)")
from plot_checks import overlaps  # noqa: E402
from plot_records import study_records  # noqa: E402
from record_fixtures import record  # noqa: E402

from helpers.study import plot_style  # noqa: E402
from helpers.study.claims import accuracy  # noqa: E402
from helpers.study.claims.verdict import prepare  # noqa: E402
from helpers.study.frame import frame  # noqa: E402
from helpers.study.report import plots, plots_tuning

PUBLISHED = "Experiment/published"
COMMAND = "python -m helpers.study.report"
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
}


@pytest.fixture(scope="module")
def several() -> pd.DataFrame:
    """The frame of every plotted suite on an A100, a trn1 NeuronCore and this CPU."""
    return frame(study_records(("a100", "trn1", "cpu")))


@pytest.fixture(scope="module")
def one_cpu() -> pd.DataFrame:
    """The frame of every plotted suite on this CPU alone."""
    return plot_style.with_devices(frame(study_records(("cpu",))))


def test_make_all_writes_every_figure_the_same_twice_and_each_reads(several, tmp_path, monkeypatch):
    first = plots.make_all(several, tmp_path / "one", PUBLISHED, COMMAND)
    assert {suite: [p.name for p in paths] for suite, paths in first.items()} == EXPECTED
    problems = {}
    save = plot_style.save

    def checked_save(fig, path):  # the second run looks at each figure before writing it
        problems[path.name] = overlaps(fig)
        return save(fig, path)

    monkeypatch.setattr(plot_style, "save", checked_save)
    second = plots.make_all(several, tmp_path / "two", PUBLISHED, COMMAND)
    assert problems == {name: [] for paths in EXPECTED.values() for name in paths}
    for suite, paths in first.items():
        for one, two in zip(paths, second[suite]):
            assert one.read_bytes() == two.read_bytes(), f"{one.name} differs between two runs"
            assert one.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
            assert b"Software" not in one.read_bytes() and b"matplotlib" not in one.read_bytes().lower()


@pytest.mark.parametrize("draw", [plots_tuning.speedup, plots_tuning.lr_llrd])
def test_one_cpu_figures_read(draw, one_cpu):
    with plot_style.theme():
        fig = draw(one_cpu, PUBLISHED)
        plot_style.finish(fig, COMMAND)
        assert overlaps(fig) == []
    texts = [t.get_text() for ax in fig.axes for t in [ax.title, *ax.get_yticklabels()]] + plot_style.handles(fig)[1]
    assert any(text.startswith("published (trn1") for text in texts)  # the study's figures say so


def test_published_step_times_never_share_an_axis_with_measured_ones(several, tmp_path):
    # the study's step times, made up so that each can be told apart from any measured one
    (tmp_path / "seq_len_profile.csv").write_text("max_length,step_time_ms\n32,55.5\n64,77.7\n128,122.1\n")
    fig = plots.seq_len(plot_style.with_devices(several), tmp_path)
    published = {
        ax: [
            line
            for line in ax.get_lines()
            if line.get_label().startswith("published") or line.get_marker() == plot_style.PUBLISHED["marker"]
        ]
        for ax in fig.axes
    }
    (ax,) = [ax for ax, lines in published.items() if lines]  # drawn, and on one axis only
    (line,) = published[ax]
    assert "÷" in ax.get_ylabel()  # the axis where every line is over its own L=32 step
    assert list(line.get_xdata()) == [32, 64, 128]
    assert list(line.get_ydata()) == pytest.approx([1.0, 1.4, 2.2])  # over its own L=32 step, never in ms
    drawn_ms = [y for other in fig.axes for each in other.get_lines() for y in each.get_ydata()]
    assert not any(y == pytest.approx(ms) for y in drawn_ms for ms in (55.5, 77.7, 122.1))


def test_the_overlap_check_finds_what_a_reader_would_stumble_over():
    fig, (ax,) = plot_style.figure(1, width=3, height=2)
    ax.plot([0, 1], [0, 1], label="data")
    ax.set_xticks([0, 0.02], ["a long tick label", "another long one"])
    ax.legend(loc="center")
    found = overlaps(fig)
    assert any("x tick" in f and "overlaps" in f for f in found)
    assert any("legend" in f and "lies on the data" in f for f in found)


def test_the_same_device_has_the_same_colour_in_every_figure(several):
    df = plot_style.with_devices(several)
    assert df.groupby("device_key")["colour"].nunique().eq(1).all()
    assert df.drop_duplicates("device_key")["colour"].is_unique
    trn1 = df.loc[df["who"] == "trn1 NeuronCore", "colour"].iloc[0]
    assert plot_style.published_colour("trn1") == trn1


def test_learning_rates_read_as_written():
    assert [plot_style.lr_text(v) for v in (2e-5, 5e-5, 1.5e-4, 3e-4, 1e-3)] == [
        "2e-5",
        "5e-5",
        "1.5e-4",
        "3e-4",
        "1e-3",
    ]


def test_sparse_records_draw_what_they_have(tmp_path):
    from record_fixtures import record

    recs = [
        record("cpu", None, {"batch": 8}, run_name="adhoc-run"),  # no suite: in the roofline only
        record("t4", "seq_len", {"max_length": 32}, run_name="seq_len-full-L32", status="failed"),
        {**record("cpu", "small_batch", {"batch": 4}, run_name="small_batch-quick-b4"), "utilization": {}},
    ]
    written = plots.make_all(frame(recs), tmp_path, PUBLISHED, COMMAND)
    assert {suite: [p.name for p in paths] for suite, paths in written.items()} == {
        "roofline": ["roofline.png"],
        "profile_memory": ["memory_vs_batch.png"],
        "small_batch": ["small_batch_utilization.png"],
    }


def test_no_rows_draw_nothing(tmp_path):
    assert plots.make_all(frame([]), tmp_path / "p", PUBLISHED, COMMAND) == {}
    assert not list((tmp_path / "p").glob("*.png"))


def test_a_cpu_roof_is_its_records_measured_peak_and_copy_bandwidth():
    cpu = study_records(("cpu",))
    for rec in cpu:  # the peak and bandwidth the run measured on its machine, and the MFU against them
        rec["systems"].update(
            peak_tflops=0.25,
            mem_bw_gbps=17.0,
            peak_source="measured on this machine",
            mfu=rec["systems"]["achieved_tflops"] / 0.25,
        )
    df = plot_style.with_devices(frame(cpu))
    row = df[df["tflops"] > 0].iloc[0]
    assert row["peak_tflops"] == 0.25 and row["peak_bw_gbps"] == 17.0 and row["peak_source"].startswith("measured")
    assert row["mfu_pct"] == pytest.approx(100 * row["tflops"] / 0.25)  # the record's MFU, in percent
    roofs = plots._roofs(df[(df["ai"] > 0) & (df["tflops"] > 0)].assign(compute_dtype="fp32"))
    assert [r[:2] for r in roofs.values()] == [(0.25, 17.0)]  # the drawn roof slopes at the measured GB/s


def test_a_measured_roof_is_labelled_by_shape_and_date_never_by_the_checkouts_path():
    from helpers.study.frame import peak_label

    source = (
        "measured on this machine: best fp32 matmul of 4 model shapes (bert-base FFN up, 2048 tokens) at 2 "
        "threads (/home/someone/accelbench-bert/Experiment/results/_peaks/cpu-x.json)"
    )
    assert peak_label(source) == "measured (bert-base FFN up, 2048 tokens)"
    assert peak_label(source, "2026-11-24T08:00:00+00:00") == "measured (bert-base FFN up, 2048 tokens, 2026-11-24)"
    datasheet = (
        "NVIDIA H200 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/h200/): BF16 Tensor 1,979 "
        "TFLOPS with sparsity = 989.4 dense, 67 TFLOPS FP32"
    )
    assert peak_label(datasheet) == "NVIDIA H200 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/h200/)"
    assert peak_label("NVIDIA A100 datasheet") == "NVIDIA A100 datasheet"


def test_each_heatmap_panel_has_its_own_colour_range_as_wide_as_its_intervals(one_cpu):
    """A MiniLM panel of one budget and the study's bert-base of another are not on one scale (one scale would
    saturate the published panel); within a panel, cells whose intervals overlap never read far apart."""
    fig = plots_tuning.lr_llrd(one_cpu, PUBLISHED)
    limits = [m.get_clim() for ax in fig.axes for m in ax.collections if hasattr(m, "get_clim")]
    limits = [c for c in limits if c != (None, None)]
    assert len(set(limits)) == 2, limits  # each panel's mesh and its colour bar: two panels, two ranges
    lo, hi = limits[-1]  # the published panel: 92.5-94.7%, ± about 1 point
    assert hi - lo == pytest.approx(94.65 - 92.5 + 2 * 1.2, abs=0.3)


def test_the_speedup_bars_carry_the_spread_between_runs(one_cpu):
    runs = one_cpu[one_cpu["suite"] == "speedup"]
    repeats = pd.concat(
        [
            runs,
            runs.assign(
                run_name=runs["run_name"] + "-rep2",
                train_s=runs["train_s"] * runs["preset"].map({"baseline": 1.2, "optimized": 0.9}),
            ),
        ]
    )
    fig = plots_tuning.speedup(pd.concat([one_cpu[one_cpu["suite"] != "speedup"], repeats]), PUBLISHED)
    whiskers = [c for ax in fig.axes for c in ax.containers if type(c).__name__ == "ErrorbarContainer"]
    assert len(whiskers) == 1  # the measured bar; the study's single runs have none
    labels = [t.get_text() for ax in fig.axes for t in ax.texts]
    assert any("(" in t and "–" in t for t in labels)


def test_a_cpu_utilization_is_not_drawn_beside_the_published_sm_and_engine_percent(several):
    """A CPU process's % says nothing of GPU against trn1; an accelerator's utilization has a panel of its own."""
    fig = plots.small_batch(plot_style.with_devices(several), PUBLISHED)
    for ax in fig.axes:
        labels = ax.get_legend_handles_labels()[1]
        if any(label.startswith("published") for label in labels):
            assert not any("Xeon" in label or "CPU" in label for label in labels), labels
    assert not any("process CPU %" in ax.get_title() for ax in fig.axes)
    assert any(ax.get_title().startswith("Measured:") for ax in fig.axes)  # the A100's and the trn1's
    cpu_only = several[several["device_type"] == "cpu"]
    titles = [ax.get_title() for ax in plots.small_batch(plot_style.with_devices(cpu_only), PUBLISHED).axes]
    assert not any(t.startswith("Measured:") for t in titles) and "no accelerator's utilization" in titles[0]


def test_graph_counts_are_whole_numbers_on_their_axis(several):
    fig = plots.padding(plot_style.with_devices(several), PUBLISHED)
    fig.canvas.draw()
    ticks = [t for t in fig.axes[0].get_yticks() if fig.axes[0].get_ylim()[0] <= t <= fig.axes[0].get_ylim()[1]]
    assert ticks and all(float(t).is_integer() for t in ticks), ticks


def test_the_roofline_leaves_out_runs_that_compiled_during_their_timed_steps(several):
    df = plot_style.with_devices(several)
    before = plots.roofline(df, PUBLISHED)
    count = lambda fig: sum(len(c.get_offsets()) for ax in fig.axes for c in ax.collections)  # noqa: E731
    dynamic = df.assign(compilations_after_warmup=3.0)  # every run recompiled after warm-up
    after = plots.roofline(dynamic, PUBLISHED)
    assert after is None or count(after) < count(before)


def _runs(speeds: list[float], windows: list[tuple[float, float]]) -> pd.DataFrame:
    """Batch-scaling runs of one point on this CPU: each run's samples/s and its windows' slowest and fastest."""
    recs = []
    for k, (sps, (lo, hi)) in enumerate(zip(speeds, windows)):
        rec = record(
            "cpu",
            "batch_scaling",
            {"batch": 8, "max_length": 32},
            run_name=f"batch_scaling-b8-rep{k}",
            samples_per_s=sps,
        )
        rec["timing"]["window_samples_per_s"].update(min=lo, max=hi)
        recs.append(rec)
    return plot_style.with_devices(frame(recs))


def test_batch_scaling_bars_are_the_range_between_runs_never_the_windows_inside_one():
    import matplotlib.pyplot as plt

    # one disturbed run: its windows span 4.5 to 45 samples/s, the three runs' medians 30 to 35
    df = _runs([30.0, 32.0, 35.0], [(28.0, 31.0), (4.5, 45.0), (33.0, 36.0)])
    fig = plots.batch_scaling(df, PUBLISHED)
    assert list(fig.axes[0].lines[0].get_ydata()) == [32.0]  # the median run
    (bars,) = [c for c in fig.axes[0].containers]
    (segment,) = bars.lines[2][0].get_segments()
    assert [y for _, y in segment] == [30.0, 35.0]
    assert "range" in fig.axes[0].get_title() and "3 runs a point" in fig.axes[0].get_legend_handles_labels()[1][0]
    plt.close("all")


def test_a_legend_shows_bars_only_where_the_figure_draws_some(several):
    from matplotlib.container import ErrorbarContainer

    fig = plots.memory(plot_style.with_devices(several), PUBLISHED)
    handles, labels = plot_style.handles(fig)
    assert labels and not [h for h in handles if isinstance(h, ErrorbarContainer)]
    assert "no bars" in fig._suptitle.get_text()
    # device memory and host memory on axes of their own, each series beside its own model's estimate
    titles = [ax.get_title() for ax in fig.axes if ax.get_title()]
    assert titles == ["Device memory: CUDA max allocated", "Host memory: the process's peak RSS"], titles


def test_the_published_roof_is_the_one_the_study_drew(several):
    roof = plots.published_roof(PUBLISHED)
    assert (roof["peak_tflops"], roof["mem_bw_gbps"]) == (190.0, 820.0)  # one Trainium chip, as report 4.4 used
    fig = plots.roofline(plot_style.with_devices(several), PUBLISHED)
    labels = fig.axes[0].get_legend_handles_labels()[1]
    assert any("published roof" in label and "190 TFLOP/s, 820 GB/s" in label for label in labels), labels
    assert "a model" in fig.axes[0].get_xlabel()


def test_seq_len_draws_the_flop_ratio_and_the_profile_suites_runs_unless_profiled(several):
    """The profile suite's runs of the same configuration are another sweep of it only when the profiler did
    not slow them."""
    fig = plots.seq_len(plot_style.with_devices(several), PUBLISHED)  # its profile_memory runs are profiled
    labels = plot_style.handles(fig)[1]
    assert any(label.startswith("model: ") and "FLOPs per step" in label for label in labels)
    assert not any("profile_memory suite" in label for label in labels)
    unprofiled = several.assign(**{c: float("nan") for c in several.columns if c.startswith("share_")})
    labels = plot_style.handles(plots.seq_len(plot_style.with_devices(unprofiled), PUBLISHED))[1]
    assert any("profile_memory suite, unprofiled runs (same configuration" in label for label in labels)
    assert all("range" in ax.get_title() or "runs" in ax.get_title() for ax in fig.axes)


def test_padding_train_time_is_the_median_run_and_its_whiskers_the_slowest_to_the_fastest(several):
    df = plot_style.with_devices(several)
    runs = df[df["suite"] == "padding"]
    again = [runs.assign(run_name=runs["run_name"] + f"-rep{k}", train_s=runs["train_s"] * k) for k in (1.5, 2)]
    fig = plots.padding(pd.concat([df[df["suite"] != "padding"], runs, *again], ignore_index=True), PUBLISHED)
    heights = sorted(bar.get_height() for bar in fig.axes[1].containers[0])
    assert heights == pytest.approx(sorted(1.5 * runs["train_s"]))
    whiskers = [line.get_ydata() for line in fig.axes[1].lines]
    assert sorted(np.nanmin(w) for w in whiskers) == pytest.approx(sorted(runs["train_s"]))
    assert sorted(np.nanmax(w) for w in whiskers) == pytest.approx(sorted(2 * runs["train_s"]))
    assert "run range" in fig.axes[1].get_title()


def test_published_accuracies_carry_the_test_sets_sampling_error(several):
    assert plots_tuning.sampling_error(0.94) == pytest.approx(100 * 1.959964 * (0.94 * 0.06 / 2000) ** 0.5)
    fig = plots_tuning.precision(plot_style.with_devices(several), PUBLISHED)
    published = [c for ax in fig.axes for c in ax.containers if c.get_label().startswith("published")]
    assert published and all(c.has_yerr for c in published)
    assert "sampling error at n=2,000" in published[0].get_label()


def test_heatmap_cells_show_their_intervals(one_cpu):
    assert plots_tuning.cell_text(82.1, 6.8) == "82.1\n±6.8" and plots_tuning.cell_text(82.1, float("nan")) == "82.1"
    fig = plots_tuning.lr_llrd(one_cpu, PUBLISHED)
    cells = [t.get_text() for ax in fig.axes for t in ax.texts]
    assert cells and all("±" in c for c in cells)


def test_the_speedup_bars_name_the_rows_and_epochs_they_trained_on(one_cpu):
    runs = one_cpu.assign(train_subset=2000, epochs=1)
    fig = plots_tuning.speedup(runs, PUBLISHED)
    ticks = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert any("2,000 rows × 1 epoch)" in t and "published" not in t for t in ticks)
    assert all("16,000 rows × 3 epochs" in t for t in ticks if t.startswith("published"))


def test_every_figure_is_drawn_in_the_theme_and_leaves_matplotlib_as_it_was(several):
    import matplotlib

    before = dict(matplotlib.rcParams)
    for _, name, fig in plots.figures(plot_style.with_devices(several), PUBLISHED, COMMAND):
        titles = {ax.title.get_fontsize() for ax in fig.axes if ax.get_title()}
        assert titles == {plot_style.THEME["axes.titlesize"]}, name
        assert fig.legends and not any(legend.get_frame_on() for legend in fig.legends), name
    assert dict(matplotlib.rcParams) == before  # the theme is a context, never a global change


def test_a_png_is_written_at_the_themes_resolution_wherever_its_figure_was_drawn(one_cpu, tmp_path):
    import struct

    fig = plots.batch_scaling(one_cpu, PUBLISHED)  # outside the theme, as a notebook or a test may draw it
    path = plot_style.save(fig, tmp_path / "b.png")
    width, height = struct.unpack(">II", path.read_bytes()[16:24])  # the PNG header's size, pixels
    dpi = plot_style.THEME["savefig.dpi"]
    assert (width, height) == (round(fig.get_figwidth() * dpi), round(fig.get_figheight() * dpi))


def test_a_second_device_of_a_family_never_takes_a_familys_colour():
    styles = plot_style.device_styles({"EPYC": "cpu", "Xeon": "cpu", "Graviton": "arm", "T4": "t4"})
    assert len({colour for colour, _ in styles.values()}) == 4
    assert styles["EPYC"] == plot_style.FAMILIES["cpu"] and styles["T4"] == plot_style.FAMILIES["t4"]
    owned = {colour for colour, _ in plot_style.FAMILIES.values()}
    assert styles["Xeon"][0] not in owned and styles["Graviton"][0] not in owned


def test_cells_that_did_not_learn_are_hatched_grey_off_the_colour_scale_with_dark_text(one_cpu):
    from matplotlib.colors import to_rgba
    from seaborn.utils import relative_luminance

    low = (one_cpu["suite"] == "lr_llrd") & (one_cpu["lr"].astype(float) < 3e-5)  # the top row: learned nil
    df = one_cpu.assign(test_acc=one_cpu["test_acc"].mask(low, one_cpu["majority"] + 0.01))
    tuned = df[df["suite"] == "lr_llrd"]  # the claims' criterion, as the report sets it, on this suite's cells
    df = df.assign(learned=accuracy.learned(prepare(tuned)).reindex(df.index, fill_value=True))
    ax = plots_tuning.lr_llrd(df, PUBLISHED).axes[0]
    (mesh,) = ax.collections
    columns = round(ax.get_xlim()[1])
    hatched = {(round(p.get_x()), round(p.get_y())) for p in ax.patches if p.get_hatch()}
    top = [t for t in ax.texts if t.get_position()[1] < 1]
    assert top and hatched == {(int(t.get_position()[0]), 0) for t in top}
    for text in ax.texts:
        x, y = text.get_position()
        cell = mesh.get_facecolors()[int(y) * columns + int(x)]
        if y < 1:
            assert tuple(cell) == to_rgba(plots_tuning.NEAR)
        darker = relative_luminance(to_rgba(text.get_color())) < relative_luminance(cell)
        assert darker == (y < 1 or relative_luminance(cell) > 0.408), (text.get_text(), cell)


def test_published_bars_are_hatched_and_measured_ones_are_not_and_each_has_its_own_axis(one_cpu):
    measured, published = plots_tuning.speedup(one_cpu, PUBLISHED).axes  # MiniLM never on bert-base's axis
    for ax, hatch in ((measured, False), (published, True)):
        labels = {round(t.get_position()[1]): t.get_text() for t in ax.get_yticklabels()}
        hatched = {labels[round(bar.get_y() + bar.get_height() / 2)]: bool(bar.get_hatch()) for bar in ax.patches}
        assert set(hatched.values()) == {hatch} and all(k.startswith("published") is hatch for k in hatched)


def test_every_device_marker_reads_apart_hollow_and_filled():
    """fp32 runs are drawn hollow, bf16 filled: a thin marker (plus, cross, star) looks filled either way."""
    thin = {"P", "X", "+", "x", "*", "1", "2", "3", "4", "|", "_"}
    markers = [m for _, m in (*plot_style.FAMILIES.values(), *plot_style.SPARE)]
    assert not thin & set(markers), sorted(thin & set(markers))


def test_a_device_colour_is_one_of_the_colour_blind_or_dark_palettes_and_its_familys():
    import seaborn as sns

    from helpers.calc.facts import load_devices

    allowed = set(sns.color_palette("colorblind").as_hex()) | set(sns.color_palette("dark").as_hex())
    assert {colour for colour, _ in plot_style.FAMILIES.values()} <= allowed
    styled = load_devices().dropna(subset=["colour"])
    assert (styled["key"] == styled["family"]).all() and styled["marker"].notna().all()
    assert plot_style.published_colour("A100") == plot_style.FAMILIES["a100-40gb"][0]
    assert plot_style.published_colour("V100") == "#333333"  # a device the study did not publish


def test_a_gpu_is_labelled_by_its_short_name_and_an_unknown_one_by_its_own():
    def label(name: str, key: str = "?") -> str:
        return plot_style.device_label(pd.Series({"device_type": "cuda", "device": name, "device_key": key}))

    assert label("NVIDIA A100-SXM4-40GB") == "A100 40GB" and label("Tesla T4") == "T4"
    assert label("NVIDIA H100 PCIe") == "H100 PCIe" and label("NVIDIA GeForce RTX 4090") == "GeForce RTX 4090"
    neuron = pd.Series({"device_type": "xla", "device.neuron": True, "device": "Trainium"})
    xla = pd.Series({"device_type": "xla", "device.neuron": False, "device": "Xeon"})
    assert [plot_style.device_label(r) for r in (neuron, xla)] == ["trn1 NeuronCore", "XLA on CPU"]
    assert plot_style.device_label(pd.Series({"device_type": "cpu", "device": "AMD EPYC 7R13"})) == "CPU EPYC 7R13"


def test_every_device_with_a_roof_has_its_short_name_for_the_capacities():
    from helpers.calc.facts import load_device_peaks

    named = {key: plot_style.SHORT_NAMES.get(key, key) for key in load_device_peaks()["key"]}
    assert not [key for key, name in named.items() if name == key], "a capacity would read as a file key"
    assert plots.STUDY_DEVICES and set(plots.STUDY_DEVICES) == {"t4", "l4", "a100-40gb", "trn1-core"}
