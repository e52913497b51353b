"""The report's figures of what the study tuned: LR x LLRD, precision modes, and the baseline -> optimized speedup.

Accuracies are percent; an interval is 95%, over seeds (several runs) or the test set (one run), from
study/claims/accuracy.py. Cells and points that did not learn (the claims' criterion, the frame's
`learned` column) are hatched or hollow. The study's published accuracies (bert-base on trn1) stand beside
measured bert-base runs, and as differences beside any model's.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib import colormaps
from matplotlib.patches import Patch, Rectangle

from study import frame, plot_style
from study.claims import accuracy

# precision mode: its tick label (bf16-pure rounds each weight update to nearest or stochastically)
MODES = {
    "fp32": "fp32",
    "bf16": "bf16\nautocast",
    "bf16-pure": "bf16-pure\nnearest",
    "bf16-pure-sr": "bf16-pure\nstochastic",
}
HATCH = {"hatch": "//", "edgecolor": "white", "linewidth": 0}
NEAR = "0.7"  # cells that did not learn, below the colour scale: light enough for dark text through the hatching
# a colour map per panel: each panel has its own accuracy range, so one hue must never read as one accuracy across them
CMAPS, PUBLISHED_CMAP = ("viridis", "magma", "plasma", "YlGnBu", "inferno"), "cividis"
STUDY_TEST_ROWS = 2000  # dair-ai/emotion's test split: the rows the study's accuracies are counted on
STUDY_TRAIN_ROWS = 16_000  # its train split, which the study trained on for 3 epochs (report 5.8)
STUDY_WORKLOAD = f"{STUDY_TRAIN_ROWS:,} rows × 3 epochs"


def _decay(value) -> str:
    """Return an LLRD decay as a column label: 'none' (one flat LR) or the factor (0.95)."""
    return "none" if value in (None, "none", "") or pd.isna(value) else f"{float(value):g}"


def _grid(d: pd.DataFrame, value: str, lrs, decays, rows: int | None = None) -> tuple[pd.DataFrame, ...]:
    """Return mean accuracy % by (lr, decay), its 95% half-width in points, and whether each cell did not learn."""
    d = d.assign(unlearned=~d["learned"].astype(bool) if "learned" in d else False)
    g = d.groupby(["lr", "decay"]).agg(acc=(value, "mean"), unlearned=("unlearned", "any"))
    half = d.groupby(["lr", "decay"])[value].agg(lambda v: _interval(v, rows)[1] if v.count() > 1 or rows else np.nan)
    grid = g["acc"].unstack().reindex(index=lrs, columns=decays) * 100
    near = g["unlearned"].unstack().reindex(index=lrs, columns=decays)
    return grid, near.fillna(False).astype(bool), half.unstack().reindex(index=lrs, columns=decays)


def colour_range(cells: tuple[pd.DataFrame, ...]) -> tuple[float, float]:
    """Return the accuracy range of a grid's learned cells, widened by their largest 95% half-width."""
    # the width: two cells whose intervals overlap never read as far apart in colour
    grid, near, half = (c.to_numpy(dtype=float) for c in cells)
    learned = grid[(near == 0) & ~np.isnan(grid)]
    halves = half[near == 0]
    pad = float(np.nanmax(halves)) if np.isfinite(halves).any() else 0.05
    lo, hi = (learned.min(), learned.max()) if learned.size else (np.nanmin(grid), np.nanmax(grid))
    return lo - pad, hi + pad


def _heatmap(ax, cells: tuple[pd.DataFrame, ...], title: str, vrange: tuple[float, float], cmap: str) -> None:
    """Draw one grid as cells of mean ± 95% half-width; cells that did not learn hatched, off the colour scale."""
    grid, near, half = cells
    text = np.vectorize(cell_text)(grid.to_numpy(dtype=float), half.to_numpy(dtype=float))
    sns.heatmap(
        grid,
        ax=ax,
        cmap=colormaps[cmap].with_extremes(under=NEAR),
        vmin=vrange[0],
        vmax=vrange[1],
        annot=text,
        fmt="",
        annot_kws={"fontsize": 7.5},
        yticklabels=[plot_style.lr_text(v) for v in grid.index],
        cbar_kws={"label": "accuracy, %", "pad": 0.03},
    )
    for i, j in zip(*np.nonzero(near.to_numpy())):
        ax.add_patch(Rectangle((j, i), 1, 1, fill=False, **HATCH))
    ax.tick_params(axis="y", labelrotation=0)
    ax.grid(False)
    ax.set_facecolor("0.88")
    ax.set(title=title, xlabel="layer-wise LR decay (none: one flat LR)", ylabel="peak learning rate")


def cell_text(mean: float, half: float) -> str:
    """Return a heatmap cell: the mean accuracy % over its 95% half-width, so neighbours read as (not) different."""
    return f"{mean:.2f}" + ("" if np.isnan(half) else f"\n±{half:.2f}")


def lr_llrd(df, published_dir):
    """Mean test accuracy % ± 95% half-width over LR x LLRD decay, a heatmap per measured series, published beside."""
    d = plot_style.rows(df, "lr_llrd", "test_acc", "lr")
    if d.empty:
        return None
    pub = plot_style.published(published_dir, "lr_llrd.csv")
    pub = pub.assign(decay=pub["llrd_decay"].map(_decay), lr=pub["lr"].astype(float))
    d = d.assign(decay=d["llrd_decay"].map(_decay), lr=d["lr"].astype(float))
    lrs = sorted(set(d["lr"]) | set(pub["lr"]))
    decays = ["none"] + sorted((set(d["decay"]) | set(pub["decay"])) - {"none"}, key=float, reverse=True)
    seeds = lambda g: f"mean of {g['seed'].nunique()} seeds" if g["seed"].nunique() > 1 else "one seed"  # noqa: E731
    panels = [
        (f"{s}\nmeasured, {seeds(g)}; {workload(g)}", _grid(g, "test_acc", lrs, decays, int(g["test_rows"].max())))
        for s, g in d.groupby("series", sort=False)
    ]
    panels.append(
        (
            f"published (trn1 · bert-base)\nmean of 2 runs, ± test set at n={STUDY_TEST_ROWS:,}; {STUDY_WORKLOAD}",
            _grid(pub, "accuracy", lrs, decays, STUDY_TEST_ROWS),
        )
    )
    fig, axes = plot_style.figure(len(panels), width=5.4, height=3.9)
    # a colour scale and map per panel: another model and budget, its accuracies are not on the others' scale, and
    # one scale would saturate the published panel and hide its differences
    engine = fig.get_layout_engine()
    fig.set_layout_engine("none")  # seaborn draws the figure per heatmap (its text colours): laid out once, after
    for i, (ax, (title, cells)) in enumerate(zip(axes, panels)):
        cmap = PUBLISHED_CMAP if i == len(panels) - 1 else CMAPS[i % len(CMAPS)]
        _heatmap(ax, cells, title, colour_range(cells), cmap)
    fig.set_layout_engine(engine)
    plot_style.key(
        fig,
        Patch(
            facecolor="white",
            label="a cell: mean test accuracy %, ± its 95% half-width (over seeds; "
            "one run or the published mean: the test set's sampling error)",
        ),
    )
    if any(near.to_numpy().any() for _, (_, near, _) in panels):
        label = "did not learn: mean over 5 points under the best its model reached on that device at that budget"
        plot_style.key(fig, Patch(facecolor="white", label=f"{label} (hatched; the claims' criterion)", **HATCH))
    if any(grid.isna().to_numpy().any() for _, (grid, *_) in panels):
        plot_style.key(fig, Patch(facecolor="0.88", label="not run"))
    return fig


def _interval(values, rows=None) -> tuple[float, float]:
    """Return the mean and 95% half-width (0 where unknown) of accuracies `values` (fractions), in percent."""
    mean, half, _ = accuracy.mean_interval(list(values), rows)
    return 100 * mean, 0.0 if np.isnan(half) else 100 * half


def _points(
    ax, x: list, stats: list[tuple[float, float]], offset: float, g: pd.DataFrame, label: str, hollow: bool = False
) -> None:
    """Draw means with 95% interval bars at `x` + `offset` in `g`'s device colour and marker (hollow where asked)."""
    if stats:
        mean, half = zip(*stats)
        ax.errorbar(
            np.array(x) + offset,
            mean,
            yerr=half,
            linestyle="none",
            marker=g["marker"].iloc[0],
            color=g["colour"].iloc[0],
            markerfacecolor="white" if hollow else g["colour"].iloc[0],
            label=label,
        )


def _why_not(arms: pd.DataFrame) -> list[str]:
    """Return why a difference between these arms is not the mode's effect (an arm did not learn, unlike optimizers)."""
    why = []
    if "learned" in arms and not arms["learned"].astype(bool).all():
        why.append("an arm did not learn")
    if arms.groupby("precision")["optimizer"].first().nunique() > 1:
        why.append("unlike optimizers")
    return why


def sampling_error(acc: float, rows: int = STUDY_TEST_ROWS) -> float:
    """Return the 95% half-width, in points, of an accuracy counted once on `rows` test rows (one published run)."""
    return 100 * accuracy.binomial_half_width(acc, rows)


def precision(df, published_dir):
    """Test accuracy % by precision mode per length (95% intervals), and the stochastic-rounding effect."""
    d = plot_style.rows(df, "precision", "test_acc", "max_length", "precision")
    if d.empty:
        return None
    lengths = sorted(d["max_length"].dropna().astype(int).unique())
    modes = [m for m in MODES if m in set(d["precision"])] + sorted(set(d["precision"]) - set(MODES))
    pub = plot_style.published(published_dir, "stochastic_rounding.csv")
    pub = pub.assign(precision=pub["stochastic_rounding"].map({"off": "bf16-pure", "on": "bf16-pure-sr"}))
    fig, axes = plot_style.figure(len(lengths) + 1, width=4.3, height=3.8, wrap=4)
    series = list(dict.fromkeys(d["series"]))
    shift = {s: (k - (len(series) - 1) / 2) * 0.5 / len(series) for k, s in enumerate(series)}
    trn1 = {
        "color": plot_style.published_colour("trn1"),
        "marker": "X",
        "markersize": 9,
        "linestyle": "none",
        "label": f"published (trn1 · bert-base), one run each; bars: test-set sampling error at "
        f"n={STUDY_TEST_ROWS:,} (95%)",
    }
    learned = d["learned"].astype(bool) if "learned" in d else pd.Series(True, index=d.index)
    for ax, length in zip(axes, lengths):
        for s in series:
            g = d[(d["series"] == s) & (d["max_length"] == length)].groupby("precision")
            stats = {m: _interval(x["test_acc"], x["test_rows"].max()) for m, x in g}
            flat = {m: bool(learned[x.index].all()) for m, x in g}
            for ok in (True, False):
                ms = [m for m in stats if flat[m] is ok]
                _points(
                    ax,
                    [modes.index(m) for m in ms],
                    [stats[m] for m in ms],
                    shift[s],
                    d[d["series"] == s],
                    s if ok else f"{s}: did not learn (hollow; the claims' floor)",
                    hollow=not ok,
                )
        p = pub[(pub["max_length"] == length) & pub["precision"].isin(modes)]
        if (d["model"] == "bert-base").any():  # published runs are bert-base: beside bert-base runs only
            ax.errorbar(
                p["precision"].map(modes.index) + 0.35,
                p["accuracy"] * 100,
                yerr=[sampling_error(a) for a in p["accuracy"]],
                **trn1,
            )
        ax.set_xticks(range(len(modes)), [MODES.get(m, m) for m in modes], fontsize=8)
        ax.set(
            title=f"L = {length}: test accuracy by mode\n(mean, 95% interval)",
            xlim=(-0.5, len(modes) - 0.4),
            xlabel="precision mode (bf16-pure: update rounding)",
            ylabel="test accuracy, %",
        )
    lo, hi = min(ax.get_ylim()[0] for ax in axes[:-1]), max(ax.get_ylim()[1] for ax in axes[:-1])
    for ax in axes[:-1]:  # one scale for every length, so their panels compare; room for the markers
        ax.set_ylim(lo - 0.04 * (hi - lo), hi + 0.04 * (hi - lo))
    ax = axes[-1]
    for s in series:
        mine = d[d["series"] == s]
        diffs = accuracy.paired_diffs(mine, "precision", "bf16-pure-sr", "bf16-pure", "max_length")
        diffs = {int(L): v for L, v in diffs.items() if int(L) in lengths}
        for L, v in diffs.items():
            arms = mine[(mine["max_length"] == L) & mine["precision"].isin(("bf16-pure", "bf16-pure-sr"))]
            why = _why_not(arms.assign(learned=learned[arms.index]))
            mean, half = _interval(np.array(v))
            _points(ax, [lengths.index(L)], [(mean, half)], shift[s], mine, s, hollow=bool(why))
            if why:  # the difference is drawn, and said not to be stochastic rounding's effect
                ax.annotate(  # above the interval, centred: clear of the axes' frame
                    "not an SR effect:\n" + ",\n".join(why),
                    (lengths.index(L) + shift[s], mean + half),
                    xytext=(0, 6),
                    textcoords="offset points",
                    fontsize=7,
                    ha="center",
                    va="bottom",
                )
    wide = pub.pivot_table(index="max_length", columns="stochastic_rounding", values="accuracy")
    effect = ((wide["on"] - wide["off"]) * 100).reindex(lengths).dropna()
    band = [np.hypot(sampling_error(wide.loc[L, "on"]), sampling_error(wide.loc[L, "off"])) for L in effect.index]
    ax.errorbar([lengths.index(L) + 0.3 for L in effect.index], effect, yerr=band, **trn1)
    ax.axhline(0, color="gray", linewidth=0.8)
    lo, hi = ax.get_ylim()
    ax.set_ylim(lo, hi + 0.35 * (hi - lo))  # room above the intervals for what they are not
    ax.set_xticks(range(len(lengths)), [str(L) for L in lengths])
    ax.set(
        title="Stochastic rounding: SR − nearest\n(paired by seed, 95% interval)",
        xlim=(-0.5, len(lengths) - 0.4),
        xlabel="sequence length L, tokens",
        ylabel="difference in test accuracy, points",
    )
    return fig


def workload(g: pd.DataFrame) -> str:
    """Return what a series' runs trained on: '2,000 rows × 1 epoch' (all rows: the 16,000 of the train split)."""
    rows = int(g["train_subset"].max()) if g["train_subset"].notna().any() else STUDY_TRAIN_ROWS
    epochs = float(g["epochs"].max())
    return f"{rows:,} rows × {epochs:g} epoch{'s' * (epochs != 1)}"


def _measured_speedups(d: pd.DataFrame) -> pd.DataFrame:
    """Return per series with both presets its label, speedup band (frame.estimate, frame.ratio), colour, model."""
    out = []
    for series, g in d[~frame.profiled(d)].groupby("series", sort=False):
        base, opt = g[g["preset"] == "baseline"], g[g["preset"] == "optimized"]
        if len(base) and len(opt):
            band = frame.ratio(frame.estimate(base, "train_s"), frame.estimate(opt, "train_s"))
            out.append(
                {
                    "label": f"{series}\n({g['variant'].iloc[0] or 'ad hoc'}: {len(base)} baseline, {len(opt)} optimized "
                    f"runs;\n{workload(g)})",
                    "value": band.mid,
                    "colour": g["colour"].iloc[0],
                    "lo": band.lo,
                    "hi": band.hi,
                    "model": g["model"].iloc[0],
                }
            )
    return pd.DataFrame(out)


def speedup(df, published_dir):
    """Baseline -> optimized speedup (train time ratio) per device, measured and published, as horizontal bars."""
    measured = _measured_speedups(plot_style.rows(df, "speedup", "train_s"))
    if measured.empty:
        return None
    pub = plot_style.published(published_dir, "speedup.csv")
    pub = pub.assign(
        label=[f"published ({device} · bert-base;\n{STUDY_WORKLOAD})" for device in pub["device"]],
        value=pub["speedup"],
        colour=pub["device"].map(plot_style.published_colour),
        lo=np.nan,
        hi=np.nan,
    )
    # measured (MiniLM, its own rows) and published (bert-base, the study's job) on axes of their own: a
    # speedup of one workload is not on the other's scale
    panels = (
        (
            f"measured here ({', '.join(sorted(set(measured['model'])))})",
            measured,
            "speedup: median baseline ÷ median optimized train time (×)",
        ),
        (
            f"published by the study (bert-base, {STUDY_WORKLOAD})",
            pub,
            "speedup: baseline ÷ optimized train time, one run each (×)",
        ),
    )
    fig, axes = plot_style.figure(2, width=8.0, height=0.6 * max(len(measured), len(pub)) + 1.6, wrap=1)
    top = 1.3 * max(measured[["value", "hi"]].max().max(), pub["value"].max())  # one scale: the panels compare
    for ax, (title, bars, xlabel) in zip(axes, panels):
        y = np.arange(len(bars))[::-1]
        hatch = plot_style.PUBLISHED_HATCH if bars is pub else None
        ax.barh(y, bars["value"], color=bars["colour"], hatch=hatch, edgecolor="black" if hatch else None)
        spread = bars.dropna(subset=["lo"])
        if len(spread):  # the extreme ratios of the runs: slowest baseline over fastest optimized and back
            err = [spread["value"] - spread["lo"], spread["hi"] - spread["value"]]
            ax.errorbar(spread["value"], y[spread.index], xerr=err, fmt="none", color="black", capsize=4, linewidth=1)
        for yi, (_, r) in zip(y, bars.iterrows()):
            ranged = f" ({r['lo']:.2f}–{r['hi']:.2f})" if pd.notna(r["lo"]) else ""
            ax.text(r["hi"] if ranged else r["value"], yi, f" {r['value']:.2f}×{ranged}", va="center", fontsize=8)
        ax.set_yticks(y, bars["label"])
        ax.set(title=title, xlabel=xlabel, xlim=(0, top))
    fig.suptitle("Baseline → optimized: how many times faster training gets")
    plot_style.key(
        fig,
        Patch(
            facecolor="0.6",
            label="measured here; whiskers: the extreme ratios of the runs (study/frame.py estimate and ratio, as the "
            "claims take them),\nnone for one run a preset; a host-bound device's speedup is its host's",
        ),
    )
    plot_style.key(
        fig,
        Patch(
            facecolor="white",
            edgecolor="black",
            hatch=plot_style.PUBLISHED_HATCH,
            label=f"published by the study (bert-base, {STUDY_WORKLOAD})",
        ),
    )
    return fig
