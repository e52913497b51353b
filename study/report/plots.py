"""The report's figures, drawn from the frame (helpers/study/frame.py) with the study's published figures beside.

Each figure compares devices (one colour per device, helpers/study/plot_style.py); a device that ran a
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
from matplotlib.ticker import MaxNLocator, NullLocator

from helpers.calc.facts import device_column, load_device_peaks
from helpers.run.paths import repo_path
from helpers.study import plot_style
from helpers.study.frame import SHARES, profiled
from helpers.study.published import STUDY_KEYS
from helpers.study.report import plots_tuning, tables

ROOF_KEYS = device_column("rank_peaks_key")  # plot_style family (or key) -> device_peaks.csv key of one rank
STUDY_DEVICES = [ROOF_KEYS[key] for key in STUDY_KEYS.values()]  # the study's devices, whose capacities are drawn
OP_CLASSES = {
    "matmul": "matmul",
    "attention": "attention",
    "elementwise_norm_act": "elementwise, norm, activation",
    "optimizer": "optimizer",
    "copy_data_movement": "copies, data movement",
    "other": "other",
    "host_gap": "host gap (no op running)",
}


BETWEEN_RUNS = "median of independent runs; bars: their range"


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
    for device, g in d.groupby("device", sort=False):  # an accelerator waiting on its host, said at its line
        if tables.host_bound(g, device):
            last = g.groupby("batch")["step_ms"].median()
            b.annotate(
                f"{g['who'].iloc[0]}: flat step, host-bound\n(the device waits on the host:\n"
                "its samples/s measure the host)",
                (last.index[-1], last.iloc[-1]),
                xytext=(-150, 30),
                textcoords="offset points",
                fontsize=7,
                color=g["colour"].iloc[0],
                arrowprops={"arrowstyle": "->", "color": g["colour"].iloc[0], "linewidth": 0.8},
            )
    a.set(title=f"Throughput vs batch\n({BETWEEN_RUNS})", ylabel="throughput, samples/s")
    b.set(
        title=f"Step time vs batch\n(each run's median step; {BETWEEN_RUNS.split('; ')[1]})",
        ylabel="median step time, ms",
    )
    for ax in (a, b):
        plot_style.log2_axis(ax.xaxis, d["batch"])
        ax.set_xlabel("batch size, samples per step")
    return fig


def _alike(df: pd.DataFrame, d: pd.DataFrame, suite: str) -> pd.DataFrame:
    """Return `suite`'s unprofiled rows of `d`'s configurations (device, model, batch, precision), with d's series."""
    other = plot_style.rows(df, suite, "step_ms", "max_length")
    other = other[~profiled(other)]  # the profiler slows the steps it watches: another configuration
    keys = ["device_key", "model", "batch", "precision"]
    series = d.drop_duplicates(keys).set_index(keys)["series"]
    other = other.join(series.rename("same"), on=keys, how="inner")
    return other.assign(series=other["same"])


def _over_l32(d: pd.DataFrame) -> pd.DataFrame:
    """Return the series that ran L=32, with `rel`: each run's step time over its series' median step at L=32."""
    at32 = d[d["max_length"] == 32].groupby("series")["step_ms"].median()
    d = d[d["series"].isin(at32.index)]
    return d.assign(rel=d["step_ms"] / d["series"].map(at32))


def _profile_points(b, c, same: pd.DataFrame) -> None:
    """Draw the profile_memory suite's runs of the same configuration, hollow, on the step and ratio panels."""
    if same.empty:
        return
    same = same.assign(
        series=same["series"] + ": profile_memory suite, unprofiled runs (same configuration, another sweep)"
    )
    hollow = {"markerfacecolor": "white", "markersize": 7, "linestyle": "none"}
    plot_style.lines(b, same, "max_length", "step_ms", **hollow)
    rel = _over_l32(same)
    plot_style.lines(c, rel[rel["max_length"] != 32], "max_length", "rel", **hollow)


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
    _profile_points(b, c, _alike(df, d, "profile_memory"))
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
    b.set(
        title="Step time vs sequence length\n(measured only; bars: range between runs)", ylabel="median step time, ms"
    )
    c.set(
        title="Step time relative to L=32\n(each line over its own L=32; bars: runs)",
        ylabel="step time ÷ step time at L=32",
    )
    for ax in (a, b, c):
        plot_style.log2_axis(ax.xaxis, lengths if ax is c else d["max_length"])
        ax.set_xlabel("sequence length L, tokens (padded)")
    plot_style.log2_axis(c.yaxis, [x / 32 for x in lengths])
    return fig


# one dash pattern per roof, beside its device's colour: two CPUs' roofs a few percent apart stay apart
ROOF_DASHES = ((0, (6, 2)), (0, (1, 1.5)), (0, (4, 1.5, 1, 1.5)), (0, (8, 2, 1, 2, 1, 2)), (0, (2, 3)), (0, (10, 3)))


def _roof(ax, xs, peak: float, bw_gbps: float, colour: str, linestyle, label: str) -> None:
    """Draw min(peak, intensity x bandwidth) over `xs` (only the flat roof where the bandwidth is unknown)."""
    ys = np.full_like(xs, peak) if np.isnan(bw_gbps) else np.minimum(peak, xs * bw_gbps / 1000)
    ax.plot(xs, ys, color=colour, linestyle=linestyle, label=label)


def _roofs(d: pd.DataFrame) -> dict:
    """Return each device's one roof per dtype: {(device, dtype): (peak TFLOP/s, GB/s or NaN, colour, peak source)}."""
    bandwidth = load_device_peaks().set_index("key")["mem_bw_gbps"]
    out = {}
    for (who, dtype), g in d.dropna(subset=["peak_tflops"]).groupby(["who", "compute_dtype"], sort=False):
        fam = plot_style.family(g.iloc[0])
        measured = g["peak_bw_gbps"].median() if "peak_bw_gbps" in g else np.nan  # a CPU's, with its peak
        bw = measured if pd.notna(measured) else float(bandwidth.get(ROOF_KEYS.get(fam, fam), np.nan))
        out[(who, dtype)] = (
            g["peak_tflops"].median(),
            bw,
            g["colour"].iloc[0],
            str(g["peak_source"].iloc[0]).split(" (")[0],
        )
    return out


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
    d = d.sort_values("who", kind="stable")
    d = d.assign(compute_dtype=d["compute_dtype"].fillna("fp32"))  # as the frame's peak assumes
    if d.empty:
        return None
    traj = plot_style.published(published_dir, "roofline.csv")
    ai, tf = traj["arithmetic_intensity_flop_per_byte"], traj["achieved_tflops"]
    study = published_roof(published_dir)
    roofs = _roofs(d)
    ridges = [
        p * 1000 / b
        for p, b in [r[:2] for r in roofs.values()] + [(study["peak_tflops"], study["mem_bw_gbps"])]
        if b > 0
    ]
    xs = np.geomspace(min(d["ai"].min(), ai.min()) / 4, max(d["ai"].max(), *ridges) * 3, 200)
    # tall: five decades of TFLOP/s need the height, and the legend below takes a third of it
    fig, (ax,) = plot_style.figure(1, width=10.0, height=11.0)
    for (who, dtype), g in d.groupby(["who", "compute_dtype"], sort=False):
        ax.scatter(
            g["ai"],
            g["tflops"],
            edgecolors=g["colour"].iloc[0],
            marker=g["marker"].iloc[0],
            s=32,
            facecolors=g["colour"].iloc[0] if dtype == "bf16" else "none",
            linewidths=1.3,
            zorder=3,
            label=f"{who}: {dtype} runs ({'filled' if dtype == 'bf16' else 'hollow'}; FLOP/byte a model)",
        )
    for i, ((who, dtype), (peak, bw, colour, source)) in enumerate(roofs.items()):
        bw_text = "bandwidth unknown" if np.isnan(bw) else f"{bw:,.0f} GB/s"
        peak_text = f"{peak:.3g} TFLOP/s" + ("" if source == "published" else f" ({source})")
        dashes = ROOF_DASHES[i % len(ROOF_DASHES)]
        _roof(ax, xs, peak, bw, colour, dashes, f"roof: {who} {dtype}: {peak_text}, {bw_text}")
    _roof(
        ax,
        xs,
        study["peak_tflops"],
        study["mem_bw_gbps"],
        plot_style.published_colour("trn1"),
        "-.",
        f"published roof, the study's: {study['device']}: {study['peak_tflops']:g} TFLOP/s, "
        f"{study['mem_bw_gbps']:g} GB/s",
    )
    ax.plot(
        ai,
        tf,
        color=plot_style.published_colour("trn1"),
        marker="X",
        markersize=10,
        linestyle="none",
        zorder=4,
        label=f"published (trn1 · bert-base): batch {traj['batch'].iloc[0]} → {traj['batch'].iloc[-1]}; "
        "FLOP/byte profiled, not a model",
    )
    ax.annotate(
        "",
        xy=(ai.iloc[-1], tf.iloc[-1]),
        xytext=(ai.iloc[0], tf.iloc[0]),
        arrowprops={"arrowstyle": "->", "color": plot_style.published_colour("trn1"), "linewidth": 1.5},
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
    peaks = [r[0] for r in roofs.values()] + [study["peak_tflops"]]
    plot_style.log_axis(ax.xaxis, xs[0], xs[-1])
    plot_style.log_axis(ax.yaxis, min(d["tflops"].min(), tf.min()) / 3, max(peaks) * 2.5)
    ax.set(
        xlabel="arithmetic intensity, FLOP per byte of memory traffic (a model: FLOPs and bytes from shapes; "
        "the study's: its own count)",
        ylabel="achieved throughput, TFLOP/s",
        title="Roofline: each run under its device's roof\n(roofs from published peaks unless marked measured)",
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
    """Return the BertConfig of a measured model (MiniLM from its installed package), None where not at hand."""
    from transformers import BertConfig

    from helpers.run import models

    if model_name == "bert-base-uncased":
        return BertConfig(num_labels=6)
    try:
        return BertConfig.from_pretrained(models.minilm_dir(), num_labels=6) if model_name == "minilm" else None
    except (ImportError, OSError):  # the package that holds MiniLM is not installed here
        return None


def memory(df, published_dir):
    """Measured peak memory against batch (device and host apart) beside each model's estimate and the capacities."""
    from transformers import BertConfig

    from helpers.calc.memory import GIB, estimate_train_memory

    d = pd.concat([plot_style.rows(df, s, "mem_gib", "batch", "max_length") for s in ("batch_scaling", "small_batch")])
    if d.empty:
        return None
    d = d.assign(series=d["series"] + ", L=" + d["max_length"].astype(int).astype(str))
    kinds = [
        (kind, g)
        for kind, g in (
            ("device memory: CUDA max allocated", d[d["device_type"] == "cuda"]),
            ("host memory: the process's peak RSS", d[d["device_type"] != "cuda"]),
        )
        if len(g)
    ]
    fig, axes = plot_style.figure(len(kinds), width=6.4, height=5.0)
    batches = range(2, 65)  # the suites' batches span 2..64

    def estimate(cfg, length: int, mode: str, device_type: str = "cuda") -> list[float]:
        return [estimate_train_memory(cfg, b, length, mode, device_type=device_type)["total"] / GIB for b in batches]

    ranges = d.groupby(["series", "batch"])["mem_gib"].agg(["median", "min", "max", "count"])
    within = ((ranges["max"] - ranges["min"]) / ranges["median"]).max()
    for ax, (kind, g) in zip(axes, kinds):
        plot_style.lines(ax, g, "batch", "mem_gib", bars=False)  # the runs' range: under a marker (said in the title)
        device = kind.startswith("device")
        for series, s in g.groupby("series", sort=False):  # the estimate of the measured model, beside it
            r = s.iloc[0]
            cfg = _own_config(str(r["model_name"]))
            if cfg is None:
                continue
            mode = "bf16" if str(r["compute_dtype"]) == "bf16" else "fp32"
            est = estimate(cfg, int(r["max_length"]), mode, "cuda" if device else "cpu")
            ax.plot(batches, est, color=r["colour"], linestyle=":", linewidth=1.2, label=f"model: {series}, {mode}")
        ax.set(
            xlabel="batch size, samples per step",
            ylabel="peak memory, GiB",
            title=f"{kind[0].upper()}{kind[1:]}",
        )
        plot_style.log2_axis(ax.xaxis, set(g["batch"]) | {2, 4, 8, 16, 32, 64})
        if not device:
            plot_style.log_axis(ax.yaxis, ax.get_ylim()[0] / 1.5, ax.get_ylim()[1] * 1.5)
            continue
        cfg = BertConfig(num_labels=6)
        for (length, mode), ls in zip(((32, "bf16"), (128, "bf16"), (128, "fp32")), ("-", "--", "-.")):
            est = estimate(cfg, length, mode)
            ax.plot(
                batches, est, color="black", linestyle=ls, linewidth=1, label=f"model: bert-base, L={length}, {mode}"
            )
        peaks = load_device_peaks().set_index("key")
        measured = [ROOF_KEYS.get(plot_style.family(r), plot_style.family(r)) for _, r in g.iterrows()]
        capacity: dict[float, list[str]] = {}
        for key in dict.fromkeys(list(STUDY_DEVICES) + measured):
            if key in peaks.index and key != "host":
                name = plot_style.SHORT_NAMES.get(key, key)
                capacity.setdefault(float(peaks.loc[key, "memory_gib"]), []).append(name)
        for gib in capacity:
            ax.axhline(gib, color="gray", linewidth=0.8)
        plot_style.log_axis(ax.yaxis, min(g["mem_gib"].min(), 0.5) / 1.5, max(capacity) * 1.6)
        right = ax.twinx()
        right.set(yscale="log", ylim=ax.get_ylim())
        right.set_yticks(list(capacity), [f"{' / '.join(v)}: {k:g} GiB" for k, v in capacity.items()], fontsize=8)
        right.yaxis.set_minor_locator(NullLocator())
        right.grid(False)
    fig.suptitle(
        "Memory vs batch: measured peaks beside their model's estimate (dotted), device capacities\n"
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
    batches = sorted(set(d["batch"]) | set(speed["batch"]) | set(pub["batch"]))
    for ax in axes:  # one extent on every panel, so a batch sits at one place across them
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
    a.margins(y=0.15)
    b.margins(y=0.1)
    a.yaxis.set_major_locator(MaxNLocator(integer=True))  # a graph count is whole
    a.set(title="XLA graph compilations", ylabel="graph compilations, count")
    b.set(title="Train time, median of runs\n(lighter: compiling; whiskers: run range)", ylabel="train time, s")
    plot_style.key(fig, Patch(facecolor="0.5", alpha=0.4, label="lighter part of a bar: compiling graphs"))
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
