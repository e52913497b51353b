"""helpers/study/decide/cost_plot.py: the decision figure (job cost against epochs) is deterministic, colours
a device as every other figure does, and draws and promises break-even dots only where they are."""

import pandas as pd
import pytest
from plot_checks import overlaps

from helpers.study import frame
from helpers.study.decide import cost_plot, ranking
from tests.study.decide.job_records import row_of, write_job_records


@pytest.fixture()
def df(tmp_path) -> pd.DataFrame:
    return frame.load(write_job_records(tmp_path))[0]


def test_plot_is_deterministic(df, tmp_path):
    job = ranking.Job()
    table = ranking.decision(df, job)
    breaks = ranking.break_even(table, job)
    command = "python -m helpers.study.decide"
    first = cost_plot.plot(table, breaks, job, command, tmp_path / "a.png", ranking.PAIRS).read_bytes()
    assert first[:8] == b"\x89PNG\r\n\x1a\n"
    assert cost_plot.plot(table, breaks, job, command, tmp_path / "b.png", ranking.PAIRS).read_bytes() == first


def test_the_cost_plot_colours_a_device_as_every_other_figure_does(df):
    from helpers.study import plot_style

    table = ranking.decision(df, ranking.Job())
    a100 = plot_style.FAMILIES["a100-40gb"][0]
    assert cost_plot._colour(row_of(table, "A100", "published")) == a100
    assert cost_plot._colour(row_of(table, "A100-SXM4-40GB")) == a100  # a short name, the A100's colour all the same
    assert cost_plot._colour(row_of(table, "trn1", "published")) == plot_style.FAMILIES["trn1"][0]
    assert cost_plot._colour(row_of(table, "^Xeon", "proxy")) == plot_style.FAMILIES["cpu"][0]
    assert cost_plot._colour(row_of(table, "XLA", "proxy")) == plot_style.FAMILIES["xla-cpu"][0]
    two = plot_style.device_styles({"EPYC": "cpu", "Xeon": "cpu"})  # two measured CPUs: never one colour
    epyc, xeon = (
        cost_plot._colour(pd.Series({"source": "measured", "device": d, "colour_family": "cpu"}), two)
        for d in ("EPYC", "Xeon")
    )
    assert epyc == plot_style.FAMILIES["cpu"][0] and xeon != epyc


def test_the_cost_plot_promises_break_even_dots_only_where_it_draws_them(df):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    job = ranking.Job()
    table = ranking.decision(pd.DataFrame(), job)  # published only: trn1's compile is not measured, no crossing
    breaks = ranking.break_even(table, job)
    fig, ax = plt.subplots()
    cost_plot._panel(
        ax, table[table["family"].isin(("trn1", "gpu"))], breaks[breaks["epochs"].notna()], job, "t", "trn1"
    )
    assert "no break-even" in ax.get_title() and not [l for l in ax.lines if l.get_marker() == "o"]
    plt.close(fig)
    fig, ax = plt.subplots()
    table = ranking.decision(df, ranking.Job(shared_instance=True))
    breaks = ranking.break_even(table, ranking.Job(shared_instance=True))
    cost_plot._panel(
        ax,
        table[table["family"].isin(("trn1", "gpu"))],
        breaks[breaks["family"] == "trn1"].dropna(subset=["epochs"]),
        ranking.Job(shared_instance=True),
        "t",
        "trn1",
    )
    assert "dots: break-even" in ax.get_title() and [l for l in ax.lines if l.get_marker() == "o"]
    plt.close(fig)


def test_the_cost_plot_states_its_price_and_names_a_pair_it_cannot_draw(df):
    from helpers.study import plot_style

    xla = df["device_type"] == "xla"
    job = ranking.Job()
    table = ranking.decision(df.assign(batch=df["batch"].where(~xla, 8)), job)  # XLA on the CPU: no like eager run
    fig = cost_plot.figure(table, ranking.break_even(table, job), job, "python -m helpers.study.decide", ranking.PAIRS)
    assert overlaps(fig) == [] and len(fig.axes) == 1
    assert "priced at the whole instance: on-demand us-east-1" in fig._suptitle.get_text()
    assert (
        "not drawn: XLA on this CPU against eager on it (no eager run of the same configuration)"
        in plot_style.handles(fig)[1]
    )


def test_only_rows_that_break_even_compared_are_drawn(df):
    job = ranking.Job()
    xla = df["device_type"] == "xla"
    unlike = df.assign(batch=df["batch"].where(~xla, 8), max_length=df["max_length"].where(~xla, 64))
    table = ranking.decision(unlike, job)  # XLA on the CPU ran another configuration than the CPU
    breaks = ranking.break_even(table, job)
    assert cost_plot.compared(table, breaks, ("xla-cpu", "cpu")).empty  # nothing drawn under "XLA on this CPU"
    assert set(cost_plot.compared(table, breaks, ("trn1", "gpu"))["family"]) == {"trn1", "gpu"}
