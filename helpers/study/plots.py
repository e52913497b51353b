"""The report's figures (seaborn) from the table of selected records that helpers.report builds.

Each function takes that table (one row per record: suite, variant, device, key parameters and the
METRICS of helpers.tables) and returns a figure, or None when there is nothing to draw. make_all
writes them into Pictures/ with a footer naming the command that wrote them.
"""
from __future__ import annotations

import csv
import math
import textwrap
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402

from helpers import tables  # noqa: E402
from helpers.config import repo_path  # noqa: E402

FULL_TRAIN_ROWS = 16000
CAPACITY_KEYS = ("t4", "l4", "a100-40gb", "trn1-core")  # memory lines drawn on the memory figure


def _published(published_dir, file: str) -> pd.DataFrame:
    with open(repo_path(published_dir) / file, newline="") as f:
        return pd.DataFrame(list(csv.DictReader(f)))


def _finished(df: pd.DataFrame, suite: str, *columns: str) -> pd.DataFrame:
    """Return the finished rows of `suite` that have every one of `columns`, with a `series` label."""
    out = df[(df["suite"] == suite) & (df["status"] == "finished")].dropna(subset=list(columns)).copy()
    out["series"] = out["device"] + " (" + out["variant"] + ", " + out["model_name"].astype(str) + ")"
    return out


def batch_scaling(df, published_dir):
    d = _finished(df, "batch_scaling", "samples_per_s")
    if d.empty:
        return None
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    sns.lineplot(d, x="batch", y="samples_per_s", hue="series", marker="o", errorbar="sd", ax=axes[0])
    sns.lineplot(d, x="batch", y="step_ms", hue="series", marker="o", errorbar="sd", ax=axes[1], legend=False)
    axes[0].set(title="Throughput vs batch", ylabel="samples/s (steady state)")
    axes[1].set(title="Step time vs batch", ylabel="median step ms")
    return fig


def seq_len(df, published_dir):
    d = _finished(df, "seq_len", "step_ms")
    if d.empty:
        return None
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    sns.lineplot(d, x="max_length", y="tokens_per_s", hue="series", marker="o", errorbar="sd", ax=axes[0])
    sns.lineplot(d, x="max_length", y="step_ms", hue="series", marker="o", errorbar="sd", ax=axes[1], legend=False)
    pub = _published(published_dir, "seq_len_profile.csv").astype(float)
    axes[1].scatter(pub["max_length"], pub["step_time_ms"], marker="x", color="black", label="published (trn1)")
    axes[1].legend()
    axes[0].set(title="Tokens/s vs sequence length", xscale="log", xlabel="max_length (padded)")
    axes[1].set(title="Step time vs sequence length", xscale="log", xlabel="max_length (padded)", ylabel="step ms")
    return fig


def lr_llrd(df, published_dir):
    d = _finished(df, "lr_llrd", "test_acc")
    pub = _published(published_dir, "lr_llrd.csv")
    pub["llrd_decay"] = pub["llrd_decay"].replace("", "none")
    panels = [("published accuracy (trn1)", pub.assign(lr=pub["lr"].astype(float),
                                                        value=pub["accuracy"].astype(float)))]
    if not d.empty:
        variant = "full" if "full" in set(d["variant"]) else "quick"
        panels.insert(0, (f"measured test accuracy ({variant}, mean over seeds)",
                          d[d["variant"] == variant].assign(value=d["test_acc"])))
    fig, axes = plt.subplots(1, len(panels), figsize=(5.5 * len(panels), 4), squeeze=False)
    for ax, (title, data) in zip(axes[0], panels):
        table = data.pivot_table(index="lr", columns="llrd_decay", values="value", aggfunc="mean")
        sns.heatmap(table, annot=True, fmt=".3f", cmap="viridis", ax=ax)
        ax.set(title=title, xlabel="LLRD decay (none = flat LR)", ylabel="learning rate")
    return fig


def _speedups(df) -> pd.DataFrame:
    d = _finished(df, "speedup", "train_s")
    rows = []
    for (series, variant), g in d.groupby(["device", "variant"]):
        base = g[g["preset"] == "baseline"]["train_s"].mean()
        opt = g[g["preset"] == "optimized"]["train_s"].mean()
        if base == base and opt == opt:  # both present (not NaN)
            rows.append({"device": f"{series} ({variant})", "speedup": base / opt, "source": "measured"})
    return pd.DataFrame(rows)


def speedup(df, published_dir):
    pub = _published(published_dir, "speedup.csv")
    data = pd.concat([_speedups(df), pd.DataFrame({"device": pub["device"], "speedup": pub["speedup"].astype(float),
                                                    "source": "published"})], ignore_index=True)
    fig, ax = plt.subplots(figsize=(8, 4))
    sns.barplot(data, x="device", y="speedup", hue="source", ax=ax)
    ax.set(title="Baseline → optimized speedup (train time ratio)", xlabel="", ylabel="speedup ×")
    ax.tick_params(axis="x", labelrotation=15)
    return fig


def cost(df, published_dir):
    from helpers import cost as prices

    pub = _published(published_dir, "cost.csv")
    data = [{"device": r["device"], "usd": float(r["cost_for_task_usd"]), "source": "published"}
            for _, r in pub.iterrows()]
    d = _finished(df, "speedup", "samples_per_s")
    for (device, variant, instance), g in d[d["preset"] == "optimized"].groupby(["device", "variant", "instance"]):
        sec = FULL_TRAIN_ROWS / g["samples_per_s"].mean()
        data.append({"device": f"{device} ({variant})", "source": "measured",
                     "usd": prices.cost_for_task_usd(sec, prices.price_per_accelerator_hour(instance), 3)})
    fig, ax = plt.subplots(figsize=(8, 4))
    sns.barplot(pd.DataFrame(data), x="device", y="usd", hue="source", ax=ax)
    ax.set(title="Cost of the 3-epoch fine-tuning task (optimized)", xlabel="", ylabel="USD")
    return fig


def roofline(df, published_dir):
    d = df[df["status"] == "finished"].dropna(subset=["ai", "tflops"])
    if d.empty:
        return None
    fig, ax = plt.subplots(figsize=(10, 5.5))
    sns.scatterplot(d, x="ai", y="tflops", hue="suite", style="precision", ax=ax, s=40)
    lo, hi = d["ai"].min() / 3, d["ai"].max() * 3
    roofs = d.dropna(subset=["peak_tflops", "mem_bw_gbps"]).groupby(["device", "precision"])[
        ["peak_tflops", "mem_bw_gbps"]].median()
    xs = pd.Series([lo * (hi / lo) ** (i / 100) for i in range(101)])
    for (device, precision), roof in roofs.iterrows():
        ys = (xs * roof["mem_bw_gbps"] / 1000).clip(upper=roof["peak_tflops"])
        ax.plot(xs, ys, linestyle="--", linewidth=1, label=f"roof: {device[:30]} {precision} (measured)")
    ax.set(xscale="log", yscale="log", xlabel="arithmetic intensity (FLOP/byte)",
           ylabel="achieved TFLOP/s", title="Every run under its device's roofs")
    ax.legend(fontsize=7, bbox_to_anchor=(1.01, 1), loc="upper left")
    return fig


def _t_interval(values) -> tuple[float, float]:
    """Return the 95% t-interval of the mean of `values` (a point for one value): seaborn's errorbar."""
    mean, half = tables.mean_ci(list(values))
    return (mean, mean) if math.isnan(half) else (mean - half, mean + half)


def precision(df, published_dir):
    d = _finished(df, "precision", "test_acc")
    if d.empty:
        return None
    d["test_acc"] *= 100
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4), width_ratios=(3, 2))
    sns.pointplot(d, x="precision", y="test_acc", hue="max_length", errorbar=_t_interval, dodge=0.3,
                  linestyle="none", capsize=0.1, ax=left)
    left.set(title="Test accuracy by mode (mean, 95% t-interval over seeds)", ylabel="test accuracy %")
    # the study's question: stochastic minus nearest rounding of bf16 weights, paired by length and seed
    wide = d.pivot_table(index=["device", "max_length", "seed"], columns="precision", values="test_acc")
    if {"bf16-pure", "bf16-pure-sr"} <= set(wide.columns):
        diff = (wide["bf16-pure-sr"] - wide["bf16-pure"]).dropna().rename("diff").reset_index()
        sns.pointplot(diff, x="max_length", y="diff", errorbar=_t_interval, linestyle="none", capsize=0.1,
                      ax=right, label="measured")
    pub = _published(published_dir, "stochastic_rounding.csv")
    pub["accuracy"] = pub["accuracy"].astype(float) * 100
    pub_diff = pub.pivot_table(index="max_length", columns="stochastic_rounding", values="accuracy")
    pub_diff = (pub_diff["on"] - pub_diff["off"]).rename("diff").reset_index()
    order = [str(x) for x in sorted(set(pub_diff["max_length"].astype(int)) |
                                    set(d["max_length"].dropna().astype(int)))]
    right.scatter([order.index(str(int(x))) for x in pub_diff["max_length"]], pub_diff["diff"], marker="x",
                  color="black", label="published (trn1, one run each)")
    right.axhline(0, color="grey", linewidth=0.8)
    right.legend(fontsize=8)
    right.set(title="SR effect: bf16-pure-sr − bf16-pure", xlabel="max_length", ylabel="Δ test accuracy (points)")
    return fig


SHARES = {"share_matmul": "matmul", "share_attention": "attention", "share_elementwise": "elementwise/norm/act",
          "share_optimizer": "optimizer", "share_copy": "copy/data movement", "share_other": "other",
          "share_host_gap": "host gap"}


def profile(df, published_dir):
    d = _finished(df, "profile_memory", "share_matmul")
    if d.empty:
        return None
    shares = d.groupby(["series", "max_length"])[list(SHARES)].mean().rename(columns=SHARES)
    fig, ax = plt.subplots(figsize=(8, 4))
    several = len({series for series, _ in shares.index}) > 1
    shares.index = [f"L={length}" + (f"\n{textwrap.fill(series, 28)}" if several else "")
                    for series, length in shares.index]
    shares.plot(kind="bar", stacked=True, ax=ax, colormap="tab10")
    ax.set(title="Where a training step's time goes (profiler self time by op class)", ylabel="share %",
           xlabel="" if several else d["series"].iloc[0])
    ax.tick_params(axis="x", labelrotation=0)
    ax.legend(fontsize=7, bbox_to_anchor=(1.01, 1), loc="upper left")
    return fig


def memory(df, published_dir):
    from helpers import memory as mem, models, roofline as roofs

    d = pd.concat([_finished(df, s, "mem_gib") for s in ("batch_scaling", "small_batch")])
    fig, ax = plt.subplots(figsize=(8, 4.5))
    if not d.empty:
        sns.lineplot(d, x="batch", y="mem_gib", hue="series", marker="o", ax=ax)
    batches = [2, 4, 8, 16, 32, 48, 64]
    cfg = models.load_config("bert-base-random")  # the bert-base-uncased architecture
    for length in (32, 128):
        est = [mem.estimate_train_memory(cfg, b, length, "bf16")["total"] / 2 ** 30 for b in batches]
        ax.plot(batches, est, linestyle=":", label=f"bert-base estimate, L={length}, bf16 (helpers.memory)")
    peaks = roofs.load_device_peaks().set_index("key")
    capacities: dict[float, list[str]] = {}
    for key in CAPACITY_KEYS:
        if key in peaks.index:
            capacities.setdefault(float(peaks.loc[key, "memory_gib"]), []).append(key)
    for gib, keys in capacities.items():
        ax.axhline(gib, color="gray", linewidth=0.8)
        ax.text(batches[0], gib, f" {' / '.join(keys)}: {gib:g} GiB", fontsize=7, va="bottom")
    ax.set(title="Memory vs batch: measured peaks, estimates and device capacities", xlabel="batch",
           ylabel="GiB", yscale="log")
    ax.legend(fontsize=7, loc="lower right")
    return fig


# suite: (file name, function); a suite may have several
PLOTS = (("batch_scaling", "batch_scaling", batch_scaling), ("seq_len", "seq_len", seq_len),
         ("lr_llrd", "lr_llrd_heatmap", lr_llrd), ("speedup", "speedup", speedup), ("cost", "cost", cost),
         ("roofline", "roofline", roofline), ("precision", "precision_accuracy", precision),
         ("profile_memory", "profile_op_classes", profile), ("profile_memory", "memory_vs_batch", memory))


def make_all(df: pd.DataFrame, pictures_dir: str | Path, published_dir: str | Path,
             command: str) -> dict[str, list[Path]]:
    """Write every figure that has data into `pictures_dir`; return {suite: [png paths]}."""
    pictures_dir = repo_path(pictures_dir)
    pictures_dir.mkdir(parents=True, exist_ok=True)
    sns.set_theme(style="whitegrid", context="notebook")
    out: dict[str, list[Path]] = {}
    for suite, name, draw in PLOTS:
        fig = draw(df, published_dir)
        if fig is None:
            continue
        fig.text(0.005, 0.005, f"Written by `{command}`", fontsize=7, color="gray")
        fig.tight_layout(rect=(0, 0.03, 1, 1))
        path = pictures_dir / f"{name}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        out.setdefault(suite, []).append(path)
    return out
