"""The report's figures, drawn from the frame (study/frame.py) with the study's published figures beside.

Each figure compares devices (one colour per device, study/plot_style.py); a device that ran a
suite's full variant shows that, else its quick one, and every line names its model. Published points
(X markers, dashed, hatched) are the study's bert-base runs; they share an axis with measured runs only
where the quantity compares (accuracy, speedup, utilization %, FLOP/s), never as raw step times.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib import patheffects
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import MaxNLocator

from helpers.record import repo_path
from study import cost, plot_style
from study.frame import SHARES
from study.report import plots_tuning

OP_CLASSES = {
    "matmul": "matmul",
    "attention": "attention",
    "elementwise_norm_act": "elementwise, norm, activation",
    "optimizer": "optimizer",
    "copy_data_movement": "copies, data movement",
    "other": "other",
    "host_gap": "host gap (no op running)",
}


BETWEEN_RUNS = "median of independent runs;\nbars: their range, none on a point of one run"


def batch_scaling(df, published_dir):
    """Throughput and step time against batch, per device: medians over independent runs, bars their range."""
    d = plot_style.rows(df, "batch_scaling", "samples_per_s")
    if d.empty:
        return None
    fig, (a, b) = plot_style.figure(2, height=4.2)

    def said(g: pd.DataFrame) -> str:
        return (
            f"{'/'.join(sorted(set(g['precision'].dropna().astype(str)))) or 'precision?'}, {plot_style.runs_text(g)}"
        )

    for ax, y in ((a, "samples_per_s"), (b, "step_ms")):
        plot_style.lines(ax, d, "batch", y, suffix=said)
        plot_style.log_y(ax, d[y])
    for _, g in d[d["host_bound"] != ""].groupby("device_key", sort=False):  # said at its line
        last = g.groupby("batch")["step_ms"].median()
        if len(last) > 1:
            b.annotate(
                f"{g['who'].iloc[0]}: flat step\n(the device waits on the host:\nits samples/s measure the host)",
                (last.index[-1], last.iloc[-1]),
                xytext=(-150, 30),
                textcoords="offset points",
                fontsize=7,
                color=g["colour"].iloc[0],
                arrowprops={"arrowstyle": "->", "color": g["colour"].iloc[0], "linewidth": 0.8},
            )
    a.set(title=f"Throughput vs batch\n({BETWEEN_RUNS})", ylabel="throughput, samples/s")
    b.set(
        title="Step time vs batch\n(each run's median step, the median of runs;\n" + BETWEEN_RUNS.split(";\n")[1] + ")",
        ylabel="median step time, ms",
    )
    for ax in (a, b):
        plot_style.log2_axis(ax.xaxis, d["batch"])
        ax.set_xlabel("batch size, samples per step")
    return fig


def _over_l32(d: pd.DataFrame) -> pd.DataFrame:
    """Return the series that ran L=32, with `rel`: each run's step time over its series' median step at L=32."""
    at32 = d[d["max_length"] == 32].groupby("series")["step_ms"].median()
    d = d[d["series"].isin(at32.index)]
    return d.assign(rel=d["step_ms"] / d["series"].map(at32))


def seq_len(df, published_dir):
    """Tokens/s, step time and its growth over L=32 against sequence length, beside FLOP growth and the published."""
    d = plot_style.rows(df, "seq_len", "step_ms")
    if d.empty:
        return None
    fig, (a, b, c) = plot_style.figure(3, width=4.6, height=4.0)
    for ax, y in ((a, "tokens_per_s"), (b, "step_ms")):
        plot_style.lines(ax, d, "max_length", y, suffix=plot_style.runs_text)
        plot_style.log_y(ax, d[y])
    rel = _over_l32(d)
    plot_style.lines(c, rel, "max_length", "rel", suffix=plot_style.runs_text)
    for model, g in rel.groupby("model", sort=False):  # FLOPs per step from shapes: a model, the same per device
        flops = g.groupby("max_length")["flops_per_step"].median()
        if 32 in flops.index:
            c.plot(
                flops.index,
                flops / flops.loc[32],
                color="black",
                linestyle="--",
                linewidth=1,
                label=f"model: {model} FLOPs per step ÷ at L=32",
            )
    pub = plot_style.published(published_dir, "seq_len_profile.csv")
    pub_rel = pub["step_time_ms"] / pub.loc[pub["max_length"] == 32, "step_time_ms"].iloc[0]
    c.plot(
        pub["max_length"],
        pub_rel,
        color=plot_style.published_colour("trn1"),
        **plot_style.PUBLISHED,
        label="published (trn1 · bert-base), over its own L=32",
    )
    lengths = sorted(set(d["max_length"]) | set(pub["max_length"]))
    a.set(title=f"Tokens/s vs sequence length\n({BETWEEN_RUNS})", ylabel="throughput, tokens/s (padded)")
    b.set(title=f"Step time vs sequence length\n({BETWEEN_RUNS})", ylabel="median step time, ms")
    c.set(title="Step time relative to L=32\n(each line over its own L=32)", ylabel="step time ÷ step time at L=32")
    for ax in (a, b, c):
        plot_style.log2_axis(ax.xaxis, lengths if ax is c else d["max_length"])
        ax.set_xlabel("sequence length L, tokens (padded)")
    plot_style.log2_axis(c.yaxis, [x / 32 for x in lengths])
    return fig


DTYPE_STYLE = {"bf16": ("--", True), "fp32": (":", False)}  # dtype: (its roofs' line, its runs' markers filled)


def _roof(ax, xs, peak: float, bw_gbps: float, colour: str, linestyle, label: str = "_nolegend_") -> None:
    """Draw min(peak, intensity x bandwidth) over `xs` (only the flat roof where the bandwidth is unknown)."""
    ys = np.full_like(xs, peak) if np.isnan(bw_gbps) else np.minimum(peak, xs * bw_gbps / 1000)
    ax.plot(xs, ys, color=colour, linestyle=linestyle, label=label)


def published_roof(published_dir) -> dict:
    """Return the roof the study drew (Experiment/published/device_peaks.csv): device, TFLOP/s, GB/s."""
    row = plot_style.published(published_dir, "device_peaks.csv").iloc[0]
    return {
        "device": row["device"],
        "peak_tflops": float(row["peak_tflops"]),
        "mem_bw_gbps": float(row["peak_mem_bandwidth_gbps"]),
    }


def roofline(df, published_dir):
    """Achieved TFLOP/s against arithmetic intensity, per device under its one roof, with the published trn1 path."""
    compiled_in_steps = df["compilations_after_warmup"].fillna(0) > 0  # dynamic XLA: compile time in its step time
    d = df[(df["status"] == "finished") & (df["ai"] > 0) & (df["tflops"] > 0) & ~compiled_in_steps]
    d = d.sort_values("who", kind="stable").assign(compute_dtype=d["compute_dtype"].fillna("fp32"))
    if d.empty:
        return None
    traj = plot_style.published(published_dir, "roofline.csv")
    ai, tf = traj["arithmetic_intensity_flop_per_byte"], traj["achieved_tflops"]
    study = published_roof(published_dir)
    roofs = d.dropna(subset=["peak_tflops"]).groupby(["who", "compute_dtype"], sort=False)
    roofs = roofs.agg(peak=("peak_tflops", "median"), bw=("peak_bw_gbps", "median"), colour=("colour", "first"))
    ridges = [
        p * 1000 / b for p, b in zip([*roofs["peak"], study["peak_tflops"]], [*roofs["bw"], study["mem_bw_gbps"]])
    ]
    xs = np.geomspace(min(d["ai"].min(), ai.min()) / 4, np.nanmax([d["ai"].max(), *ridges]) * 3, 200)
    fig, (ax,) = plot_style.figure(1, width=10.0, height=8.5)
    for (who, dtype), g in d.groupby(["who", "compute_dtype"], sort=False):
        colour, marker, filled = g["colour"].iloc[0], g["marker"].iloc[0], DTYPE_STYLE.get(dtype, ("-", False))[1]
        if who not in ax.get_legend_handles_labels()[1]:  # one entry a device, its marker filled
            ax.plot([], [], color=colour, marker=marker, linestyle="none", label=who)
        ax.scatter(
            g["ai"],
            g["tflops"],
            edgecolors=colour,
            marker=marker,
            s=32,
            linewidths=1.3,
            facecolors=colour if filled else "none",
            zorder=3,
        )
    for (who, dtype), r in roofs.iterrows():
        _roof(ax, xs, r["peak"], r["bw"], r["colour"], DTYPE_STYLE.get(dtype, ("-",))[0])
    for dtype, (line, filled) in DTYPE_STYLE.items():
        said = f"{dtype}: {'filled' if filled else 'hollow'} runs; its roofs {'dashed' if filled else 'dotted'}"
        plot_style.key(
            fig,
            Line2D(
                [],
                [],
                color="0.3",
                linestyle=line,
                marker="o",
                markerfacecolor="0.3" if filled else "white",
                label=said,
            ),
        )
    trn1 = plot_style.published_colour("trn1")
    label = f"published roof, the study's: {study['device']}: {study['peak_tflops']:g} TFLOP/s, {study['mem_bw_gbps']:g} GB/s"
    _roof(ax, xs, study["peak_tflops"], study["mem_bw_gbps"], trn1, "-.", label)
    ax.plot(
        ai,
        tf,
        color=trn1,
        marker="X",
        markersize=10,
        linestyle="none",
        zorder=4,
        label=f"published (trn1 · bert-base): batch {traj['batch'].iloc[0]} → {traj['batch'].iloc[-1]}; FLOP/byte profiled",
    )
    ax.annotate(
        "",
        xy=(ai.iloc[-1], tf.iloc[-1]),
        xytext=(ai.iloc[0], tf.iloc[0]),
        arrowprops={"arrowstyle": "->", "color": trn1, "linewidth": 1.5},
    )
    for b, x, y in zip(traj["batch"], ai, tf):  # above the crosses, clear of the GPU's squares below them
        ax.annotate(
            f"trn1 b{b} (profiled)",
            (x, y),
            xytext=(0, 12),
            textcoords="offset points",
            ha="center",
            fontsize=8,
            bbox={"boxstyle": "round,pad=0.15", "facecolor": "white", "edgecolor": "none", "alpha": 0.85},
        )
    plot_style.log_axis(ax.xaxis, xs[0], xs[-1])
    plot_style.log_axis(
        ax.yaxis, min(d["tflops"].min(), tf.min()) / 3, max([*roofs["peak"], study["peak_tflops"]]) * 2.5
    )
    ax.set(
        xlabel="arithmetic intensity, FLOP per byte of memory traffic (a model: FLOPs and bytes from shapes; "
        "the study's: its own count)",
        ylabel="achieved throughput, TFLOP/s",
        title="Roofline: each run under its device's roofs, one per dtype\n(peaks and bandwidths: the table above; "
        "published for GPUs and trn1, measured for CPUs)",
    )
    return fig


# op class -> (colour, hatch): saturated hues told apart, the host gap (no op running) hatched white
OP_COLOURS = {
    "matmul": (plot_style.PALETTE[0], None),
    "attention": (plot_style.PALETTE[1], None),
    "elementwise_norm_act": (plot_style.PALETTE[2], None),
    "optimizer": (plot_style.PALETTE[4], None),
    "copy_data_movement": (plot_style.PALETTE[8], None),
    "other": (plot_style.PALETTE[7], None),
    "host_gap": ("white", "///"),
}
LABELLED_PCT = 3.0  # a narrower segment has no room for its figure: it is written beside the bar


def profile(df, published_dir):
    """Share of a training step's profiled time by op class, per device and length, as stacked bars."""
    columns = [f"share_{s}" for s in SHARES]
    d = plot_style.rows(df, "profile_memory", "share_matmul")
    if d.empty:
        return None
    shares = d.groupby(["series", "max_length"], sort=False)[columns].mean().fillna(0)
    fig, (ax,) = plot_style.figure(1, width=10.0, height=0.5 * len(shares) + 1.9)
    left = np.zeros(len(shares))
    y = np.arange(len(shares))[::-1]
    for column in columns:
        colour, hatch = OP_COLOURS[column[6:]]
        bars = ax.barh(
            y,
            shares[column],
            left=left,
            color=colour,
            hatch=hatch,
            edgecolor="0.3" if hatch else colour,
            label=OP_CLASSES[column[6:]],
        )
        dark = column[6:] in ("matmul", "other")  # white figures on the dark segments
        ax.bar_label(
            bars,
            [f"{w:.0f}" if w >= LABELLED_PCT else "" for w in shares[column]],
            label_type="center",
            fontsize=7,
            color="white" if dark else "black",
        )
        left += shares[column].to_numpy()
    for yi, (_, row) in zip(y, shares.iterrows()):  # the segments too narrow for a figure, said beside the bar
        small = [
            f"{OP_CLASSES[c[6:]].split(',')[0].split(' (')[0]} {v:.1f}%" for c, v in row.items() if 0 < v < LABELLED_PCT
        ]
        if small:
            ax.text(101, yi, "; ".join(small), va="center", fontsize=7, clip_on=False)
    ax.set_yticks(y, [f"{s}, L={int(L)}" for s, L in shares.index])
    ax.set(
        xlim=(0, 100),
        xlabel="share of profiled step time, % (profiler self time)",
        title="Where a training step's time goes, by op class",
    )
    return fig


def _own_config(model_name: str):
    """Return the configuration of a measured model, offline (a hub name by its -random alias), None if not at hand."""
    from helpers import models

    alias = {hub: name for name, (hub, _, _) in models.RANDOM.items()}.get(model_name, model_name)
    try:
        return models.config(alias)
    except (ImportError, OSError, ValueError):  # the package that holds MiniLM is not installed here
        return None


def memory(df, published_dir):
    """Measured peak memory against batch, device and host apart, each series beside its model's estimate."""
    from helpers.memory import GIB, estimate_train_memory

    d = pd.concat([plot_style.rows(df, s, "mem_gib", "batch", "max_length") for s in ("batch_scaling", "small_batch")])
    if d.empty:
        return None
    d = d.assign(series=d["series"] + ", L=" + d["max_length"].astype(int).astype(str))
    kinds = [
        (kind, g)
        for kind, g in (
            ("Device memory: CUDA max allocated", d[d["device_type"] == "cuda"]),
            ("Host memory: the process's peak RSS", d[d["device_type"] != "cuda"]),
        )
        if len(g)
    ]
    fig, axes = plot_style.figure(len(kinds), width=6.4, height=5.0)
    batches = range(2, 65)  # the suites' batches span 2..64
    ranges = d.groupby(["series", "batch"])["mem_gib"].agg(["median", "min", "max", "count"])
    within = ((ranges["max"] - ranges["min"]) / ranges["median"]).max()
    for ax, (title, g) in zip(axes, kinds):
        plot_style.lines(ax, g, "batch", "mem_gib", bars=False)  # the runs' range: under a marker (said in the title)
        device, gaps = title.startswith("Device"), []
        for series, s in g.groupby("series", sort=False):  # the estimate of the measured model, beside it
            r, cfg = s.iloc[0], _own_config(str(s["model_name"].iloc[0]))
            if cfg is None:
                continue
            mode = "bf16" if str(r["compute_dtype"]) == "bf16" else "fp32"
            est = [
                estimate_train_memory(cfg, b, int(r["max_length"]), mode, device_type="cuda" if device else "cpu")[
                    "total"
                ]
                / GIB
                for b in batches
            ]
            ax.plot(batches, est, color=r["colour"], linestyle=":", linewidth=1.2, label=f"model: {series}, {mode}")
            gaps += [m - est[int(b) - batches.start] for b, m in zip(s["batch"], s["mem_gib"])]
        if not device and gaps:  # the model counts the training's tensors; a process holds more than them
            title += (
                f"\n{min(gaps):.2g}–{max(gaps):.2g} GiB above the model at every batch:\nthe model counts "
                "tensors only; the process holds\nthe interpreter, libraries and data too"
            )
        ax.set(xlabel="batch size, samples per step", ylabel="peak memory, GiB", title=title)
        plot_style.log2_axis(ax.xaxis, set(g["batch"]) | {2, 4, 8, 16, 32, 64})
        plot_style.log_axis(ax.yaxis, ax.get_ylim()[0] / 1.5, ax.get_ylim()[1] * 1.5)
    fig.suptitle(
        "Memory vs batch: measured peaks beside their model's estimate (dotted; the largest batch each accelerator "
        "fits: lora.md)\n"
        f"(median of {plot_style.count_text(ranges['count'])} runs, which differ by at most {within:.0%}: no bars)"
    )
    return fig


def small_batch(df, published_dir):
    """Utilization % of each kind on an axis of its own, and samples/s at small batches."""
    d, speed = (plot_style.rows(df, "small_batch", column, "batch") for column in ("util_pct", "samples_per_s"))
    if d.empty and speed.empty:
        return None
    # an accelerator's utilization only: a CPU process's % says nothing of the claim (GPU against trn1)
    d = d[d["util_pct"].notna() & (d["device_type"] != "cpu")]
    metrics = list(dict.fromkeys(d["util_metric"]))
    fig, axes = plot_style.figure(2 + len(metrics), width=5.0, height=3.8)
    a, b, own = axes[0], axes[-1], axes[1:-1]
    pub = plot_style.published(published_dir, "small_batch_util.csv")
    # the vector engine in a dark hue of its own: not trn1's amber twice
    for column, device, what, marker, colour in (
        ("a100_sm_util_pct", "A100", "SM utilization %", "X", plot_style.published_colour("A100")),
        ("trn_tensor_engine_util_pct", "trn1", "tensor engine active %", "X", plot_style.published_colour("trn1")),
        ("trn_vector_engine_util_pct", "trn1", "vector engine active %", "P", plot_style.DARK[5]),
    ):
        a.plot(
            pub["batch"],
            pub[column],
            color=colour,
            marker=marker,
            markersize=8,
            linestyle="--" if marker == "X" else ":",
            label=f"published ({device} · bert-base): {what}",
        )
    a.set(
        title="Published: A100 SM % and trn1 engine %"
        + ("" if metrics else "\n(no accelerator's utilization measured here)"),
        ylabel="utilization, %",
        ylim=(0, 105),
    )
    for ax, metric in zip(own, metrics):
        plot_style.lines(ax, d[d["util_metric"] == metric], "batch", "util_pct", suffix=plot_style.runs_text)
        ax.set(title=f"Measured:\n{metric}\n(median of runs; bars: their range)", ylabel="%", ylim=(0, 105))
    plot_style.lines(b, speed, "batch", "samples_per_s", suffix=plot_style.runs_text)
    plot_style.log_y(b, speed["samples_per_s"])
    b.set(title=f"Throughput at small batches\n({BETWEEN_RUNS})", ylabel="throughput, samples/s")
    for ax, shown in zip(axes, [pub, *(d[d["util_metric"] == m] for m in metrics), speed]):
        batches = sorted(set(shown["batch"]))  # each panel over the batches it has: no axis without data
        plot_style.log2_axis(ax.xaxis, batches)
        ax.set_xlim(batches[0] / 1.25, batches[-1] * 1.25)
        ax.set_xlabel("batch size, samples per step")
    return fig


def padding(df, published_dir):
    """Graph compilations and train time (compiling part lighter) for static against dynamic padding."""
    d = plot_style.rows(df, "padding", "compilations")
    if d.empty:
        return None
    multiple = d["pad_to_multiple_of"].map(lambda m: f",\nmultiple of {int(m)}" if pd.notna(m) and m else "")
    d = d.assign(
        case=d["padding"].astype(str) + multiple,
        compiling=d["train_compile_s"].fillna(0).clip(upper=d["train_s"]),  # what of the train time compiled
    )
    cases = sorted(set(d["case"]), key=lambda c: (not c.startswith("static"), "multiple" not in c, c))
    fig, (a, b) = plot_style.figure(2, width=5.0, height=3.8)
    palette = dict(zip(d["series"], d["colour"]))
    bars = {"x": "case", "hue": "series", "order": cases, "estimator": "median", "saturation": 1}
    sns.barplot(d, y="compilations", errorbar=None, palette=palette, ax=a, **bars)
    for container in a.containers:
        a.bar_label(container, fmt="%.0f", fontsize=8)
    halo = [patheffects.withStroke(linewidth=3.5, foreground="white")]  # whiskers show on a dark bar too
    whiskers = {"color": "black", "linewidth": 1.2, "path_effects": halo}
    sns.barplot(d, y="train_s", errorbar=("pi", 100), capsize=0.15, err_kws=whiskers, palette=palette, ax=b, **bars)
    # the compiling part lighter: white at 60% over the bar, as the bar's colour at 40% on white
    lighter = {s: "white" for s in palette}
    sns.barplot(d, y="compiling", errorbar=None, palette=lighter, alpha=0.6, legend=False, ax=b, **bars)
    for container in b.containers[len(b.containers) // 2 :]:  # the lighter bars: their seconds, medians of runs
        b.bar_label(container, fmt="%.0f s", label_type="center", fontsize=8)
    a.margins(y=0.15)
    b.margins(y=0.1)
    a.yaxis.set_major_locator(MaxNLocator(integer=True))  # a graph count is whole
    a.set(title="XLA graph compilations", ylabel="graph compilations, count")
    b.set(title="Train time, median of runs\n(lighter: compiling; whiskers: run range)", ylabel="train time, s")
    plot_style.key(
        fig,
        Patch(
            facecolor="0.5",
            alpha=0.4,
            label="lighter: compiling graphs inside the train time (xla.train; the table's compile s adds evaluation's)",
        ),
    )
    runs = d.groupby(["series", "case"]).size()
    plot_style.key(
        fig,
        Line2D(
            [],
            [],
            color="black",
            marker="|",
            markersize=8,
            linestyle="none",
            label=f"whiskers: slowest to fastest of {plot_style.count_text(runs)} independent runs",
        ),
    )
    for ax in (a, b):
        ax.set_xlabel("padding")
    return fig


def cost_figure(df, published_dir):
    """A job's cost against its epochs per device: the study's times at its printed prices, the records' at ours."""
    job = cost.Job()
    table = cost.decision(df, job, published_dir)
    styles = plot_style.device_styles(
        {r["device_key"]: plot_style.family(r) for _, r in table.dropna(subset=["kind"]).iterrows()}
    )
    measured = table[(table["source"] != "published") & table["epoch_usd"].notna()]
    published = table[table["source"] == "published"]
    panels = [
        ("published: the study's optimized runs at the prices it printed\n" + published["setup"].iloc[0], published),
        (
            "measured here, each its own configuration, at on-demand prices\n(proxies: another model or a CPU, never ranked)",
            measured,
        ),
    ]
    epochs = np.linspace(0, max(10.0, 2 * job.epochs), 201)
    fig, axes = plot_style.figure(2, width=6.0, height=4.4)
    for ax, (title, d) in zip(axes, panels):
        for _, r in d.iterrows():
            is_published = r["source"] == "published"
            colour = plot_style.published_colour(r["device"]) if is_published else styles[r["device_key"]][0]
            what = "; compile time not published: a lower bound" if r["lower_bound"] else ""
            ax.plot(
                epochs,
                np.nan_to_num(r["one_off_usd"]) + epochs * r["epoch_usd"],
                color=colour,
                linestyle="--" if is_published else "-",
                label=f"{r['device']} (published{what})" if is_published else f"{r['device']} ({r['setup']})",
            )
        ax.axvline(job.epochs, color="gray", linewidth=0.8, linestyle=":")
        ax.set(
            title=title,
            xlabel=f"epochs over {job.rows:,} rows (dotted: the job's {job.epochs:g})",
            xlim=(0, epochs[-1]),
        )
        ax.set(ylabel="job cost, USD", ylim=(0, None))
    for _, r in table[(table["source"] != "published") & table["epoch_usd"].isna()].iterrows():
        plot_style.key(fig, Patch(facecolor="white", label=f"not drawn: {r['device']} (no price for its instance)"))
    fig.suptitle("Job cost against epochs: one-off (compilation, warm-up) + epochs × $ per epoch")
    return fig


# suite -> (file name, figure); a suite may have several
PLOTS = (
    ("batch_scaling", "batch_scaling", batch_scaling),
    ("seq_len", "seq_len", seq_len),
    ("lr_llrd", "lr_llrd_heatmap", plots_tuning.lr_llrd),
    ("precision", "precision_accuracy", plots_tuning.precision),
    ("speedup", "speedup", plots_tuning.speedup),
    ("roofline", "roofline", roofline),
    ("profile_memory", "profile_op_classes", profile),
    ("profile_memory", "memory_vs_batch", memory),
    ("small_batch", "small_batch_utilization", small_batch),
    ("padding", "padding_compilations", padding),
    ("cost", "decide_cost", cost_figure),
)


def figures(df: pd.DataFrame, published_dir, command: str):
    """Yield (suite, file name, finished figure) for every figure that has data."""
    if df.empty:
        return
    df = plot_style.with_devices(df)
    with plot_style.theme():
        for suite, name, draw in PLOTS:
            fig = draw(df, published_dir)
            if fig is not None:
                plot_style.finish(fig, command)
                yield suite, name, fig


def make_all(
    df: pd.DataFrame, pictures_dir: str | Path, published_dir: str | Path, command: str
) -> dict[str, list[Path]]:
    """Write every figure that has data into `pictures_dir` as PNG; return {suite: [paths written]}."""
    pictures_dir = repo_path(pictures_dir)
    pictures_dir.mkdir(parents=True, exist_ok=True)
    out: dict[str, list[Path]] = {}
    for suite, name, fig in figures(df, published_dir, command):
        out.setdefault(suite, []).append(plot_style.save(fig, pictures_dir / f"{name}.png"))
    return out
