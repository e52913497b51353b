"""How the report's figures look: seaborn's whitegrid theme at paper scale, its colour-blind palette with one
colour per device, published points marked, legends below and a footer line.

Colours follow the device, never the suite, so a device reads the same in every figure; the study's
published figures reuse their device's colour with their own marker (X), dashed lines and hatched bars,
and are labelled "published (device)".
"""

from __future__ import annotations

import itertools
from pathlib import Path

import matplotlib
import pandas as pd
import seaborn as sns
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.layout_engine import ConstrainedLayoutEngine
from matplotlib.ticker import FixedLocator, FuncFormatter, LogLocator, NullFormatter, NullLocator

from helpers import devices
from helpers.record import repo_path
from study.notation import short_device
from study.published import STUDY_KEYS

PALETTE = sns.color_palette("colorblind").as_hex()  # Okabe-Ito's hues: told apart by colour-blind readers too
DARK = sns.color_palette("dark").as_hex()  # for devices beyond the families: never mistaken for one of them
THEME = {
    **sns.axes_style("whitegrid"),
    **sns.plotting_context("paper", rc={"axes.titlesize": 11}),
    "axes.prop_cycle": matplotlib.cycler(color=PALETTE),
    "savefig.dpi": 110,
    "legend.frameon": False,
    "errorbar.capsize": 3,
}
FOOTER_IN = 0.22  # height of the footer line, inches
# (colour, marker) by device family (helpers/facts/devices.csv, in its order: seaborn's colour-blind palette,
# its dark one where a hue misleads); a family not listed, or a second device of a family, takes the next of
# SPARE, in device key order
# every marker has an inside: a hollow one (fp32 runs, a range's ends) must read apart from a filled one,
# which a thin plus, cross or star cannot show
FACTS = devices.facts()
FAMILIES = {r.family: (r.colour, r.marker) for r in FACTS.dropna(subset=["colour"]).itertuples()}
# the near-circles (hexagon, octagon) last: a second CPU must not read as the first's circles
SPARE = ((DARK[4], "d"), (DARK[5], "<"), (DARK[6], ">"), (DARK[8], "h"), (DARK[9], "8"))
SHORT_NAMES = FACTS["short_name"].dropna().to_dict()
STUDY_FAMILIES = {name: FACTS.at[key, "family"] for name, key in STUDY_KEYS.items()}  # 'A100' -> family
MODELS = {"minilm": "MiniLM", "bert-base-uncased": "bert-base", "bert-base-random": "bert-base (random init)"}
# a published line; a published bar is hatched
PUBLISHED = {"marker": "X", "linestyle": "--", "markersize": 9}
PUBLISHED_HATCH = "///"


def theme():
    """Return a context in which figures are drawn and saved in the report's look (THEME)."""
    return matplotlib.rc_context(THEME)


def family(row: pd.Series) -> str:
    """Return a device's family in helpers/facts/devices.csv ('trn1', 'h200', 'cpu', 'xla-cpu'): what picks its colour."""
    return str(FACTS.at[row["kind"], "family"]) if row.get("kind") in FACTS.index else str(row.get("device_key"))


def device_label(row: pd.Series) -> str:
    """Return a device's short name, with its host-bound status: 'H200 (host-bound)', 'CPU Xeon 2.80GHz',
    'XLA CPU (EPYC)'."""
    fam = family(row)
    name = short_device(str(row.get("device"))).replace("@ ", "")
    label = f"CPU {name}" if fam == "cpu" else name if fam == "xla-cpu" else SHORT_NAMES.get(fam, name)
    return label + (f" ({row['host_bound']})" if row.get("host_bound") else "")


def device_styles(families: dict[str, str]) -> dict[str, tuple[str, str]]:
    """Return (colour, marker) per device key: its family's for the family's first device, a spare one after."""
    taken, spare, style = set(), itertools.cycle(SPARE), {}
    rank = {fam: i for i, fam in enumerate(FAMILIES)}
    for key in sorted(families, key=lambda k: (rank.get(families[k], len(rank)), k)):
        known = FAMILIES.get(families[key])
        style[key] = known if known and known[0] not in taken else next(spare)
        taken.add(style[key][0])
    return style


def with_devices(df: pd.DataFrame) -> pd.DataFrame:
    """Return `df` with `who` (device label), `model` (short model name), `colour`, `marker` (by device)."""
    df = df.copy()
    df["who"] = [device_label(r) for _, r in df.iterrows()]
    names = df.get("model_name", pd.Series(None, index=df.index))
    df["model"] = names.map(lambda m: MODELS.get(m, m or "model?"))
    devices = df.drop_duplicates("device_key").set_index("device_key")
    style = device_styles({k: family(r) for k, r in devices.iterrows()})
    df["colour"] = df["device_key"].map(lambda k: style[k][0])
    df["marker"] = df["device_key"].map(lambda k: style[k][1])
    return df


def published_colour(device: str) -> str:
    """Return the colour of a device the study published ('trn1', 'A100', 'T4', 'L4')."""
    return FAMILIES.get(STUDY_FAMILIES.get(device), ("#333333",))[0]


def lr_text(value: float) -> str:
    """Return a learning rate as people write it: 2e-5, 1.5e-4."""
    mantissa, exponent = f"{float(value):.2e}".split("e")
    return f"{mantissa.rstrip('0').rstrip('.')}e{int(exponent)}"


def log2_axis(axis, values) -> None:
    """Put `axis` on a base-2 log scale with one plain label per value drawn (16, 32, 64, 128)."""
    (axis.axes.set_xscale if axis.axis_name == "x" else axis.axes.set_yscale)("log", base=2)
    axis.set_major_locator(FixedLocator(sorted({float(v) for v in values})))
    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    axis.set_minor_locator(NullLocator())


def log_axis(axis, lo: float, hi: float) -> None:
    """Put `axis` on a log scale from `lo` to `hi`, labelled 1, 2, 5, 10 (only decades beyond 1000x)."""
    (axis.axes.set_xscale if axis.axis_name == "x" else axis.axes.set_yscale)("log")
    (axis.axes.set_xlim if axis.axis_name == "x" else axis.axes.set_ylim)(lo, hi)
    axis.set_major_locator(LogLocator(subs=(1, 2, 5) if hi / lo <= 1e3 else (1,)))
    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    axis.set_minor_formatter(NullFormatter())


def log_y(ax, values) -> None:
    """Use a log y axis (labels 1, 2, 5, 10, ...) when `values` span more than a factor of 30."""
    values = pd.Series(values).dropna()
    if len(values) and values.min() > 0 and values.max() / values.min() > 30:
        log_axis(ax.yaxis, values.min() / 1.3, values.max() * 1.3)


def lines(ax, d: pd.DataFrame, x: str, y: str, suffix=None, bars: bool = True, **kws) -> None:
    """Draw per series the median of `y` by `x` over runs in its device's style, bars (where `bars`) their range."""
    if d.empty:
        return
    said = {s: s + (f" — {suffix(g)}" if suffix else "") for s, g in d.groupby("series", sort=False)}
    d = d.assign(series=d["series"].map(said))
    sns.lineplot(
        d,
        x=x,
        y=y,
        hue="series",
        style="series",
        palette=dict(zip(d["series"], d["colour"])),
        markers=dict(zip(d["series"], d["marker"])),
        dashes=False,
        estimator="median",
        errorbar=("pi", 100) if bars else None,
        err_style="bars",
        ax=ax,
        **{"markeredgecolor": "auto", **kws},  # the marker whole in its colour, not seaborn's white rim
    )


def count_text(counts) -> str:
    """Return a range of counts as people say it: '3', '1 to 3'."""
    lo, hi = int(min(counts)), int(max(counts))
    return f"{lo}" if lo == hi else f"{lo} to {hi}"


def runs_text(g: pd.DataFrame) -> str:
    """Return how many independent runs a series' points rest on: '3 runs a point', '1 to 3 runs a point'."""
    counts = g.groupby([c for c in ("batch", "max_length", "precision") if c in g]).size()
    return f"{count_text(counts)} run{'s' * bool(counts.max() > 1)} a point"


def figure(n: int = 1, width: float = 5.0, height: float = 3.6, wrap: int = 3):
    """Return a figure and `n` axes, `wrap` to a row at most, in constrained layout above the footer line."""
    ncols = min(n, wrap)
    nrows = -(-n // ncols)
    foot = FOOTER_IN / (height * nrows)
    layout = ConstrainedLayoutEngine(rect=(0, foot, 1, 1 - foot))
    # drawn at the resolution it is written at, so the layout measures the text it writes; not pyplot: no global state
    fig = Figure(figsize=(width * ncols, height * nrows), dpi=THEME["savefig.dpi"], layout=layout)
    FigureCanvasAgg(fig)
    axes = list(fig.subplots(nrows, ncols, squeeze=False).flat)
    for ax in axes[n:]:
        ax.remove()
    return fig, axes[:n]


def rows(df: pd.DataFrame, suite: str, *columns: str) -> pd.DataFrame:
    """Return the finished rows of `suite` having `columns` (a device's full variant if any), and `series`."""
    d = df[(df["suite"] == suite) & (df["status"] == "finished")].dropna(subset=list(columns))
    full = set(d.loc[d["variant"] == "full", "device_key"])
    d = d[(d["variant"] == "full") | ~d["device_key"].isin(full)]
    return d.assign(series=d["who"] + " · " + d["model"]).sort_values(["who", "series"], kind="stable")


def published(published_dir, file: str) -> pd.DataFrame:
    """Return one of the study's published tables (Experiment/published/<file>)."""
    return pd.read_csv(repo_path(published_dir) / file)


def key(fig, handle) -> None:
    """Add a legend entry that no drawn artist carries (what hatching or shading means)."""
    fig.__dict__.setdefault("legend_extras", []).append(handle)


def handles(fig) -> tuple[list, list[str]]:
    """Return every labelled artist of `fig` once: measured first, then published, then `key`'s entries."""
    found: dict[str, object] = {}
    for ax in fig.axes:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            found.setdefault(label, handle)
    order = sorted(found, key=lambda label: label.startswith("published"))
    for handle in getattr(fig, "legend_extras", []):
        order.append(handle.get_label())
        found.setdefault(handle.get_label(), handle)
    return [found[label] for label in order], order


def finish(fig, command: str) -> None:
    """Put one legend of every entry below the axes, as many columns as fit, and the footer naming `command`."""
    entries = handles(fig)
    fig.text(0.005, FOOTER_IN / 3 / fig.get_figheight(), f"Written by `{command}`", fontsize=7, color="dimgray")
    for ax in fig.axes:
        if ax.get_legend():
            ax.get_legend().remove()
    for ncol in range(min(len(entries[0]), 4), 0, -1):
        legend = fig.legend(*entries, loc="outside lower center", ncols=ncol)
        legend.borderaxespad = FOOTER_IN * 72 / legend.prop.get_size_in_points()  # clear of the footer line
        if ncol == 1 or legend.get_window_extent(fig.canvas.get_renderer()).width < 0.98 * fig.bbox.width:
            break
        legend.remove()
    fig.get_layout_engine().execute(fig)  # laid out once: a later draw (a check, the save) changes nothing
    fig.set_layout_engine("none")


def save(fig, path: Path) -> Path:
    """Write `fig` as a PNG with no time or version in it (same figure, same bytes); return the path."""
    with theme():
        fig.savefig(path, metadata={"Software": None})
    return path
