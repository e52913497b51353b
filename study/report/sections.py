"""One section of the report per suite: the question it answers, its tables, and what the data show."""

from __future__ import annotations

import math

import pandas as pd

from study import frame
from study.claims import accuracy
from study.frame import profiled
from study.notation import DASH, fmt
from study.published import PUBLISHED_DIR, published
from study.report import accuracy_table, tables
from study.report.lora_table import lora_section
from study.report.tables import caption, markdown, no_runs
from study.report.tta_table import tta_section
from study.sweep.suites import Suite

STUDY_TEST_ROWS = 2000


def _published(spec: dict, published_dir) -> pd.DataFrame | None:
    """Return the suite's published columns indexed as its rows match on, or None where it has none."""
    pub = (spec.get("published") or [None])[0]
    if not pub:
        return None
    table = published(pub["file"], published_dir)
    for column, mapping in pub.get("map", {}).items():
        table[column] = table[column].replace(mapping)
    table = table.rename(columns={v: k for k, v in pub.get("match", {}).items()}).set_index(spec["keys"])
    for column in (c for c in pub["columns"] if "accuracy" in c):  # fractions as printed, in % as every page's
        table[column] = table[column].map(lambda v: f"{100 * float(v):.2f}" if _is_fraction(v) else v)
    names = {
        c: n if "accuracy" not in c or "%" in n else n.replace("accuracy", "accuracy %")
        for c, n in pub["columns"].items()
    }
    return tables.keyed(table[list(pub["columns"])].rename(columns=names))


def grid_section(suite: Suite, df: pd.DataFrame, published_dir) -> str:
    """Return the suite's grid: rows = its keys, a column group per device, published columns, the trend."""
    spec = suite.report
    keys, values = spec["keys"], spec["values"]
    parts = [caption(suite, df) if len(df) else no_runs(suite)]
    parts.append(markdown(tables.grid_table(df, keys, values, _published(spec, published_dir))))
    if "util_pct" in values and len(df):
        per_device = df.groupby("label")["util_metric"].first()
        metrics = "; ".join(f"{d}: {m}" for d, m in per_device.items())
        parts.append(
            f"Utilization measures different things per device ({metrics}); published columns are "
            "the study's A100 SM % and trn1 engine %: compare each with its own kind only."
        )
    for device in dict.fromkeys(df["label"]):
        for value in spec.get("trend") or []:
            line = tables.trend(df, keys[0], value, device)
            if line:
                parts.append(line)
        if keys[0] == "batch" and len(df) and "step_ms" in df:
            parts.append(tables.host_bound(df, device))
    return "\n\n".join(p for p in parts if p)


def accuracy_section(suite: Suite, df: pd.DataFrame, published_dir) -> str:
    """Return test accuracy with 95% intervals per cell, flags for runs that learned nothing, and the best cell."""
    spec = suite.report
    keys = spec["keys"]
    pub = _published(spec, published_dir)
    if not len(df):
        parts = [no_runs(suite)]
        table = pd.DataFrame(columns=keys).set_index(keys)
    else:
        parts = [caption(suite, df)]
        table = None
        for device, g in df.groupby("label", sort=False):
            t = accuracy_table.accuracy_table(g, keys)
            if df["label"].nunique() > 1:
                t.columns = [f"{c} · {device}" for c in t.columns]
            table = t if table is None else table.join(t, how="outer")
    if pub is not None:
        table = tables.keyed(table).join(pub, how="outer")
    parts.append(markdown(table.fillna(DASH)))
    for device, g in df.groupby("label", sort=False):
        parts.append(f"{device}: " + accuracy_table.best_cell(g, keys))
    parts.append(INTERVAL_NOTE)
    return "\n\n".join(parts)


INTERVAL_NOTE = (
    "Accuracies in %, mean ± half-width of the 95% t-interval over seeds where a cell has "
    "several; a cell with one seed (or runs sharing one) has no spread between seeds and shows "
    "none: its test set's sampling error (binomial, 95%) is stated instead. A cell whose mean is more "
    "than 5 points below the best its model reached on that device at that budget (`learned?` no) did "
    "not learn, the claims' criterion too, and is left out of conclusions."
)


def _is_fraction(value) -> bool:
    try:
        return 0 < float(value) <= 1
    except (TypeError, ValueError):
        return False


def precision_section(suite: Suite, df: pd.DataFrame, published_dir) -> str:
    """Return accuracy per precision mode and length, and the study's question: SR minus round-to-nearest."""
    text = accuracy_section(suite, df, published_dir)
    pub = published("stochastic_rounding.csv", published_dir)
    rows = []
    paired = accuracy.paired_diffs(df, "precision", "bf16-pure-sr", "bf16-pure", "max_length") if len(df) else {}
    for length in sorted({int(x) for x in pub["max_length"]} | {int(x) for x in df["max_length"].dropna()}):
        diffs = paired.get(length, [])
        mine = pub[pub["max_length"].astype(int) == length].set_index("stochastic_rounding")["accuracy"]
        on, off = (float(mine["on"]), float(mine["off"])) if {"on", "off"} <= set(mine.index) else (math.nan,) * 2
        noise = 100 * math.sqrt(2) * accuracy.binomial_half_width(on, STUDY_TEST_ROWS) if on == on else math.nan
        rows.append(
            {
                "max_length": str(length),
                "seeds": str(len(diffs)),
                "measured: SR − nearest (points)": accuracy_table.fmt_interval(diffs, None) if diffs else DASH,
                "published (trn1, one run each): SR on − off (points)": fmt(100 * (on - off)) if on == on else DASH,
                f"noise of a published difference (95%, two runs on {STUDY_TEST_ROWS:,} rows)": f"± {noise:.2f}",
            }
        )
    return (
        text
        + "\n\nThe study's question, stochastic rounding of the bf16 weight update, per length:\n\n"
        + pd.DataFrame(rows).to_markdown(index=False, disable_numparse=True)
    )


def token_stats_section(suite: Suite, df: pd.DataFrame, published_dir) -> str:
    """Return the token-length statistics and the length the suites use, with the rule that picks it."""
    done = df[df["status"] == "finished"]
    if done.empty or "token_stats.mean" not in done:
        return no_runs(suite)
    r = done.iloc[-1]
    mean = r["token_stats.mean"]
    chosen = 1 << math.ceil(math.log2(mean))
    rows = [
        ("rows", r["token_stats.rows"]),
        ("min", r["token_stats.min"]),
        ("max", r["token_stats.max"]),
        ("mean", mean),
        ("median", r["token_stats.median"]),
        ("covers 90%", r["token_stats.p90"]),
        ("covers 95%", r["token_stats.p95"]),
        ("covers 99%", r["token_stats.p99"]),
        ("chosen length: the power of two above the mean (the study's rule)", chosen),
        ("alternative: the power of two covering 95% of rows", r["token_stats.chosen_pow2"]),
    ]
    table = pd.DataFrame(
        {"statistic": [k for k, _ in rows], f"tokens ({r['model_name']} tokenizer)": [fmt(v) for _, v in rows]}
    )
    return (
        "Lengths in tokens of the training split, [CLS] and [SEP] included, without truncation.\n\n"
        + table.to_markdown(index=False, disable_numparse=True)
        + f"\n\nThe suites train at max_length={chosen}, the study's choice: the mean is {mean:.1f} "
        f"tokens, the next power of two is {chosen}, and it fills the NeuronCore's 128x128 tensor-engine tiles; rows "
        f"longer than {chosen} are truncated (covering 95% would need {int(r['token_stats.chosen_pow2'])})."
    )


def speedup_section(suite: Suite, df: pd.DataFrame, published_dir) -> str:
    """Return baseline vs optimized preset per device: train time, speedup, accuracy; published beside."""
    rows = {}
    done = df[(df["status"] == "finished") & ~profiled(df)] if len(df) else df
    for device, g in done.groupby("label", sort=False):
        base, opt = g[g["preset"] == "baseline"], g[g["preset"] == "optimized"]
        if base.empty or opt.empty:
            continue
        b, o = frame.estimate(base, "train_s"), frame.estimate(opt, "train_s")
        rows[f"measured ({device}, {g['variant'].iloc[0]})"] = [
            tables.spread_cell(base, "train_s"),
            tables.spread_cell(opt, "train_s"),
            str(frame.ratio(b, o)),
            tables.spread_cell(opt, "samples_per_s"),
            *(
                accuracy_table.fmt_interval(
                    list(arm["test_acc"]), int(arm["test_rows"].max() or 0) or None, accuracy_table.seeds(arm)
                )
                for arm in (base, opt)
            ),
            f"{fmt(g['train_subset'].iloc[0] or accuracy.TRAIN_ROWS)} × {g['epochs'].iloc[0]} epoch(s), "
            f"{g['model_name'].iloc[0]}",
        ]
    for _, p in published("speedup.csv", published_dir).iterrows():
        rows[f"published ({p['device']})"] = [
            p["baseline_train_time_s"],
            p["optimized_train_time_s"],
            p["speedup"],
            p["optimized_samples_per_s"],
            DASH,
            DASH,
            "16,000 × 3 epochs, bert-base",
        ]
    labels = [
        "baseline train s (median of runs; their range)",
        "optimized train s (median of runs; their range)",
        "speedup (ratio of the medians; extreme ratios of runs)",
        "optimized samples/s (median of runs; their range)",
        "baseline test accuracy %",
        "optimized test accuracy %",
        "rows × epochs, model",
    ]
    table = pd.DataFrame(rows, index=labels).rename_axis("")
    parts = [] if len(df) else [no_runs(suite)]
    return "\n\n".join(
        parts
        + [
            table.to_markdown(disable_numparse=True),
            "Each figure: the median of the runs, the lowest and highest run beside it (study/frame.py `estimate` and "
            f"`ratio`, as the claims and the figure take them; a spread between runs with >= {frame.MIN_RUNS} of them, "
            "one run's: the spread of its steps). Measured samples/s count samples processed in "
            "the steady state; the published T4/L4/A100 figures are 16,000 rows / the whole 3-epoch time, 3x below "
            "that rate (Experiment/published/README.md). A host-bound device's speedup is the host's, not the "
            "accelerator's: its step waits on Python, launches and the input.",
        ]
    )


def padding_section(suite: Suite, df: pd.DataFrame, published_dir) -> str:
    """Return static vs dynamic padding on XLA, and what the compile time per shape means for a bert-base epoch."""
    text = grid_section(suite, df, published_dir)
    dyn = df[(df["padding"] == "dynamic") & (df["status"] == "finished") & (df["shapes"] > 0)]
    if dyn.empty:
        return text
    cell = dyn[dyn["shapes"] == dyn["shapes"].max()]  # the configuration that met the most shapes, over its runs
    r = cell.median(numeric_only=True).combine_first(cell.iloc[0])
    return text + (
        f"\n\nEstimate, not a measurement: dynamic padding (no multiple) compiled {fmt(r['compilations'])} graphs "
        f"for {fmt(r['shapes'])} distinct batch shapes in {fmt(r['compile_s'])} s on {cell['label'].iloc[0]} "
        f"(medians of {len(cell)} runs, as in the table; {fmt(r['compile_s'] / max(r['compilations'], 1))} s a graph; "
        f"{fmt(r['train_compile_s'])} s of it inside the train time, the figure's lighter part, the rest in "
        f"evaluation). An epoch of the real split at batch {int(r['batch'])} and max_length {int(r['max_length'])} "
        f"meets up to {int(r['max_length']) - 2} distinct lengths (one graph each in training, more in evaluation); "
        'the study reports more than 77 h for dynamic padding on trn1 (§3.1 "77+ hours": a lower bound), where '
        "neuronx-cc takes minutes per graph, against minutes of static-padding training."
    )


def roofline_section(suite: Suite, df: pd.DataFrame, published_dir) -> str:
    """Return every finished run's point under its device's one roof, by suite, with the published trajectory."""
    done = df[(df["status"] == "finished") & df["tflops"].notna()]
    parts = []
    if done.empty:
        parts.append("No runs with FLOP counts yet: run `make report`.")
    else:
        table = (
            done.assign(compute_dtype=done["compute_dtype"].fillna("fp32"))
            .groupby(["label", "compute_dtype", "suite"], sort=True)
            .agg(
                runs=("run_name", "size"),
                ai_lo=("ai", "min"),
                ai_hi=("ai", "max"),
                tflops=("tflops", "median"),
                mfu_pct=("mfu_pct", "median"),
                peak=("peak_tflops", "first"),
                source=("peak_source", "first"),
            )
            .reset_index()
        )
        shown = pd.DataFrame(
            {
                "device": table["label"],
                "dtype": table["compute_dtype"],
                "suite": table["suite"],
                "runs": table["runs"],
                "FLOP/byte (range)": [
                    f"{fmt(lo)}–{fmt(hi)}" if lo != hi else fmt(lo) for lo, hi in zip(table["ai_lo"], table["ai_hi"])
                ],
                "TFLOP/s (median)": table["tflops"].map(fmt),
                "MFU % (median)": table["mfu_pct"].map(fmt),
                "peak TFLOP/s": table["peak"].map(fmt),
                "peak from": table["source"],
            }
        )
        parts.append(shown.to_markdown(index=False, disable_numparse=True))
    pub = published("roofline.csv", published_dir)
    parts.append(
        "Published (trn1, batch 8 → 64): "
        + "; ".join(
            f"batch {p['batch']}: {p['arithmetic_intensity_flop_per_byte']} FLOP/byte, {p['achieved_tflops']} TFLOP/s"
            for _, p in pub.iterrows()
        )
        + ". TFLOP/s and MFU are model FLOPs (helpers/flops.py) over each run's steady seconds per step, against one "
        "peak per device and dtype: published for GPUs and NeuronCores, measured once on the machine for CPUs "
        "(`python -m helpers.peaks`); FLOP/byte is a model too (bytes from the shapes, helpers/memory.py)."
    )
    return "\n\n".join(parts)


KINDS = {
    "grid": grid_section,
    "accuracy": accuracy_section,
    "precision": precision_section,
    "token_stats": token_stats_section,
    "speedup": speedup_section,
    "padding": padding_section,
    "roofline": roofline_section,
    "time_to_accuracy": tta_section,
    "lora": lora_section,
}


def section(suite: Suite, df: pd.DataFrame, published_dir=PUBLISHED_DIR) -> str:
    """Return the Markdown body of `suite`'s section from its frame rows."""
    kind = suite.report.get("table") or "grid"
    if kind == "grid" and not (suite.report.get("keys") and suite.report.get("values")):  # the sweep accepts it
        head = caption(suite, df) if len(df) else no_runs(suite)
        return (
            head + "\n\nNo table: the suite's file names no `[report]` `keys` and `values` to tabulate its points by."
        )
    return KINDS[kind](suite, df, published_dir)
