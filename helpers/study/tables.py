"""The Markdown tables of the report, one section per suite, from records already selected.

A suite's `[report]` table says how it is tabulated: `table` (grid, the default; token_stats,
speedup, cost, roofline), `keys` (the parameters a row stands for; its runs, i.e. seeds, are
averaged), `values` (names in METRICS) and `[[report.published]]` joins of the study's figures
(Experiment/published/*.csv), shown as printed in columns labelled "published (device)".
`selected` is {suite name: {variant: records}} as helpers.report builds it.
"""
from __future__ import annotations

import csv
import math
import statistics
from collections import Counter
from pathlib import Path

from helpers import suites, sweep
from helpers.config import repo_path

PUBLISHED_DIR = "Experiment/published"
DASH = "—"
# name: (column label, record paths tried in order, scale; None = text)
METRICS = {
    "step_ms": ("step ms", ("timing.step_time_median_s",), 1000),
    "samples_per_s": ("samples/s", ("timing.samples_per_s",), 1),
    "tokens_per_s": ("tokens/s", ("timing.tokens_per_s",), 1),
    "train_s": ("train s", ("timing.train_time_s",), 1),
    "first_step_s": ("first step s", ("timing.first_step_s",), 1),
    "tflops": ("TFLOP/s", ("systems.achieved_tflops",), 1),
    "mfu_pct": ("MFU %", ("systems.mfu",), 100),
    "ai": ("AI FLOP/B", ("systems.arithmetic_intensity",), 1),
    "peak_tflops": ("peak TFLOP/s", ("systems.peak_tflops",), 1),
    "mem_bw_gbps": ("mem BW GB/s", ("systems.mem_bw_gbps",), 1),
    "bound": ("bound", ("systems.bound",), None),
    "mem_gib": ("peak mem GiB", ("memory.cuda_max_allocated_gib", "memory.host_peak_rss_gib"), 1),
    "util_pct": ("util %", ("utilization.sm_util_pct_mean", "utilization.neuroncore_util_pct_mean",
                            "utilization.proc_cpu_util_pct_mean"), 1),
    "compilations": ("compilations", ("xla.graph_compilations", "xla.compilations"), 1),
    "compile_s": ("compile s", ("xla.compile_time_s",), 1),
    "shapes": ("shapes", ("shapes.distinct",), 1),
    "test_acc": ("test acc", ("metrics.test_accuracy",), 1),
    "val_acc": ("val acc", ("metrics.val_accuracy",), 1),
    "test_f1": ("test macro-F1", ("metrics.test_macro_f1",), 1),
    "final_loss": ("final loss", ("metrics.final_loss",), 1),
    "share_matmul": ("matmul %", ("profile.class_share.matmul",), 100),
    "share_attention": ("attention %", ("profile.class_share.attention",), 100),
    "share_elementwise": ("elementwise %", ("profile.class_share.elementwise_norm_act",), 100),
    "share_optimizer": ("optimizer %", ("profile.class_share.optimizer",), 100),
    "share_copy": ("copy %", ("profile.class_share.copy_data_movement",), 100),
    "share_other": ("other %", ("profile.class_share.other",), 100),
    "share_host_gap": ("host gap %", ("profile.class_share.host_gap",), 100),
}
FULL_TRAIN_ROWS = 16000  # dair-ai/emotion's training split: what one epoch of the study is


# ----------------------------------------------------------------------------- values and records
def dig(record: dict, path: str):
    """Return the value at a dotted path in a record (None where any part is missing)."""
    value = record
    for part in path.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value


def metric(record: dict, name: str):
    """Return a METRICS value of a record, scaled; None when absent or not a number (text metrics as is)."""
    _, paths, scale = METRICS[name]
    for path in paths:
        value = dig(record, path)
        if scale is None and isinstance(value, str):
            return value
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
            return value * scale
    return None


def norm(value) -> str:
    """Return a parameter value as the text rows match and show on: numbers as %g, None as 'none'."""
    if value is None:
        return "none"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, (int, float)):
        return f"{float(value):g}"
    text = str(value).strip()
    if text in ("", "None", "none", "null"):
        return "none"
    try:
        return f"{float(text):g}"
    except ValueError:
        return text


def fmt(value) -> str:
    """Return a number with 4 significant digits (thousands with separators), or the dash for none."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return DASH
    if isinstance(value, str):
        return value
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.4g}"


def summarize(values: list) -> str:
    """Return 'mean ± std' over several numbers, the number itself for one, the commonest text for texts."""
    values = [v for v in values if v is not None]
    if not values:
        return DASH
    if isinstance(values[0], str):
        return Counter(values).most_common(1)[0][0]
    if len(values) == 1:
        return fmt(values[0])
    return f"{fmt(statistics.fmean(values))} ± {statistics.stdev(values):.2g}"


def device_of(record: dict) -> str:
    """Return the device name of a record (its type when unnamed, 'unknown' for runner-written ones)."""
    dev = record.get("device") or {}
    return dev.get("name") or dev.get("type") or "unknown"


# ----------------------------------------------------------------------------- Markdown
def md_table(header: list[str], rows: list[list[str]], text_columns: int = 1) -> str:
    """Return a Markdown table; the first `text_columns` columns left-aligned, the rest right-aligned."""
    align = [":---" if i < text_columns else "---:" for i in range(len(header))]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(align) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def load_published(spec: dict, keys: list[str], published_dir: str | Path = PUBLISHED_DIR
                   ) -> tuple[list[str], dict[tuple, dict[str, str]]]:
    """Return the labels and, per row key, the published figures as printed in the CSV."""
    with open(repo_path(published_dir) / spec["file"], newline="") as f:
        rows = list(csv.DictReader(f))
    mapping = spec.get("map", {})
    labels = list(spec["columns"].values())
    out: dict[tuple, dict[str, str]] = {}
    for row in rows:
        key = []
        for name in keys:
            column = spec["match"][name]
            key.append(norm(mapping.get(column, {}).get(row[column], row[column])))
        out[tuple(key)] = {label: row[column] or DASH for column, label in spec["columns"].items()}
    return labels, out


def published_columns(spec: dict, keys: list[str], published_dir: str | Path = PUBLISHED_DIR
                      ) -> tuple[list[str], dict[tuple, dict[str, str]]]:
    """Return the labels of every `[[report.published]]` join of `spec` and, per row key, their cells."""
    labels, published = [], {}
    for pub in spec.get("published", []):
        pub_labels, pub_rows = load_published(pub, keys, published_dir)
        labels += pub_labels
        for key, cells in pub_rows.items():
            published.setdefault(key, {}).update(cells)
    return labels, published


def grid_table(spec: dict, recs: list[dict], published_dir: str | Path = PUBLISHED_DIR) -> str:
    """Return the Markdown table of `recs` grouped by spec['keys'], published figures beside."""
    keys, values = spec["keys"], spec.get("values", [])
    groups: dict[tuple, list[dict]] = {}
    for rec in recs:
        groups.setdefault(tuple(norm(rec["params"].get(k)) for k in keys), []).append(rec)
    labels, published = published_columns(spec, keys, published_dir)
    header = keys + ["runs"] + [METRICS[v][0] for v in values] + labels
    rows = []
    for key in list(groups) + [k for k in published if k not in groups]:
        group = groups.get(key, [])
        done = [r for r in group if r.get("status") == "finished"]
        others = Counter(r.get("status", "?") for r in group if r.get("status") != "finished")
        runs = str(len(done)) + "".join(f" (+{n} {status})" for status, n in sorted(others.items()))
        cells = [summarize([metric(r, v) for r in done]) for v in values]
        rows.append(list(key) + [runs] + cells + [published.get(key, {}).get(l, DASH) for l in labels])
    return md_table(header, rows, text_columns=len(keys))


def fixed_params(suite: suites.Suite, variant: str) -> str:
    """Return the parameters every point of a variant shares, as `k=v` text."""
    points = suites.expand(suite, variant)
    first = points[0].params
    same = [k for k in first if k not in suites.WHERE and all(p.params.get(k) == first[k] for p in points)]
    return ", ".join(f"{k}={norm(first[k])}" for k in same)


def caption(suite: suites.Suite, variant: str, recs: list[dict]) -> str:
    """Return the line above a variant's table: fixed parameters, devices, runs."""
    devices = ", ".join(sorted({device_of(r) for r in recs}))
    return f"`{variant}` variant ({len(recs)} runs on {devices}); fixed: {fixed_params(suite, variant)}."


def no_runs(suite: suites.Suite) -> str:
    """Return the line a table without records shows."""
    why = sweep.skip_reason(suite) if suite.kind == "notebook" else None
    return (f"No runs yet — run `python -m helpers.sweep {suite.name}`"
            + (f" (not runnable here: {why})" if why else "") + ".")


SPREAD_NOTE = "Cells with ± are the mean ± standard deviation over a row's runs (its seeds)."


def grid_section(suite: suites.Suite, selected: dict, published_dir=PUBLISHED_DIR) -> str:
    """Return the Markdown body of a grid suite: one table per variant that has records."""
    spec, by_variant = suite.report, selected.get(suite.name, {})
    if not by_variant:
        parts = [no_runs(suite)]
        if spec.get("published"):
            parts += ["Published figures of the study, for when it runs:",
                      grid_table(spec, [], published_dir)]
        return "\n\n".join(parts)
    parts = []
    for variant, recs in by_variant.items():
        for device in dict.fromkeys(device_of(r) for r in recs):  # one table per device
            mine = [r for r in recs if device_of(r) == device]
            parts += [caption(suite, variant, mine), grid_table(spec, mine, published_dir)]
    if any(n > 1 for recs in by_variant.values()
           for n in Counter(tuple(norm(r["params"].get(k)) for k in spec["keys"]) for r in recs).values()):
        parts.append(SPREAD_NOTE)
    return "\n\n".join(parts)


def token_stats_section(suite: suites.Suite, selected: dict, published_dir=PUBLISHED_DIR) -> str:
    """Return the token-length statistics, one column per variant."""
    by_variant = selected.get(suite.name, {})
    done = {v: [r for r in recs if r.get("status") == "finished"] for v, recs in by_variant.items()}
    done = {v: recs[-1] for v, recs in done.items() if recs}
    if not done:
        return no_runs(suite)
    names = [("rows", "rows"), ("min", "min"), ("max", "max"), ("mean", "mean"), ("median", "median"),
             ("p90", "covers 90%"), ("p95", "covers 95%"), ("p99", "covers 99%"),
             ("chosen_pow2", "chosen length (95% coverage, next power of two)")]
    header = ["statistic"] + [f"tokens ({v}: {r['params']['model_name']} tokenizer)" for v, r in done.items()]
    rows = [[label] + [fmt(r["token_stats"].get(key)) for r in done.values()] for key, label in names]
    return ("Lengths in tokens of the training split, [CLS] and [SEP] included, without truncation.\n\n"
            + md_table(header, rows))


def _published_rows(file: str, published_dir) -> dict[str, dict]:
    with open(repo_path(published_dir) / file, newline="") as f:
        return {row["device"]: row for row in csv.DictReader(f)}


def _by_device(recs: list[dict], variant: str) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for rec in recs:
        if rec.get("status") == "finished":
            out.setdefault(f"measured ({device_of(rec)}, {variant})", []).append(rec)
    return out


def _mean(recs: list[dict], name: str, preset: str | None = None) -> float | None:
    values = [metric(r, name) for r in recs if preset is None or r["params"].get("preset") == preset]
    values = [v for v in values if v is not None]
    return statistics.fmean(values) if values else None


def speedup_section(suite: suites.Suite, selected: dict, published_dir=PUBLISHED_DIR) -> str:
    """Return baseline vs optimized train time and speedup: measured per device, published beside."""
    by_variant = selected.get(suite.name, {})
    columns: dict[str, list[str]] = {}
    for variant, recs in by_variant.items():
        for label, group in _by_device(recs, variant).items():
            base, opt = _mean(group, "train_s", "baseline"), _mean(group, "train_s", "optimized")
            rows_seen = {norm(r["params"].get("train_subset")) for r in group}
            epochs = {norm(r["params"].get("epochs")) for r in group}
            columns[label] = [fmt(base), fmt(opt), fmt(base / opt) if base and opt else DASH,
                              fmt(_mean(group, "samples_per_s", "optimized")),
                              f"{'/'.join(sorted(rows_seen)).replace('none', '16,000')} × {'/'.join(epochs)}"]
    for device, row in _published_rows("speedup.csv", published_dir).items():
        columns[f"published ({device})"] = [row["baseline_train_time_s"], row["optimized_train_time_s"],
                                            row["speedup"], row["optimized_samples_per_s"], "16,000 × 3"]
    labels = ["baseline train s", "optimized train s", "speedup (baseline / optimized)",
              "optimized samples/s", "train rows × epochs"]
    table = md_table(["", *columns], [[label] + [c[i] for c in columns.values()]
                                      for i, label in enumerate(labels)])
    parts = [] if by_variant else [no_runs(suite)]
    return "\n\n".join(parts + [table, "Measured samples/s count samples actually processed in the steady "
                                "state; the published T4/L4/A100 figures are 16,000 rows / whole 3-epoch "
                                "time, 3x below that rate (Experiment/published/README.md)."])


def instance_for(record: dict) -> str | None:
    """Return the on-demand instance whose price a record's device is billed at (None for the CPU)."""
    from helpers import cost, roofline

    dev = record.get("device") or {}
    key = ("trn1-chip" if dev.get("neuron") else
           roofline.cuda_device_key(dev.get("name", "")) if dev.get("type") == "cuda" else None)
    if key is None:
        return None
    prices = cost.load_instance_prices()
    rows = prices[prices["device"] == key].sort_values("accelerators")
    return None if rows.empty else str(rows.iloc[0]["instance"])


def cost_section(suite: suites.Suite, selected: dict, published_dir=PUBLISHED_DIR) -> str:
    """Return seconds, dollars per epoch and per 3-epoch task: measured optimized runs, published beside."""
    from helpers import cost

    source = suite.report.get("source", "speedup")
    by_variant = selected.get(source, {})
    columns: dict[str, list[str]] = {}
    for variant, recs in by_variant.items():
        for label, group in _by_device([r for r in recs if r["params"].get("preset") == "optimized"],
                                       variant).items():
            rate = _mean(group, "samples_per_s")
            sec = FULL_TRAIN_ROWS / rate if rate else None
            instance = instance_for(group[0])
            price = cost.price_per_accelerator_hour(instance) if instance else None
            priced = sec is not None and price is not None
            columns[label] = [fmt(sec), instance or "no price (not an instance in helpers/facts)",
                              fmt(price), fmt(cost.cost_per_epoch_usd(sec, price)) if priced else DASH,
                              fmt(cost.cost_for_task_usd(sec, price, 3)) if priced else DASH]
    for device, row in _published_rows("cost.csv", published_dir).items():
        columns[f"published ({device})"] = [row["sec_per_epoch"], row["instance_as_printed"],
                                            row["cost_per_hour_usd"], row["cost_per_epoch_usd"],
                                            row["cost_for_task_usd"]]
    labels = ["sec per epoch", "instance", "USD per accelerator-hour", "USD per epoch", "USD per 3-epoch task"]
    table = md_table(["", *columns], [[label] + [c[i] for c in columns.values()]
                                      for i, label in enumerate(labels)])
    parts = [] if by_variant else [f"No runs yet — run `python -m helpers.sweep {source}`"
                                   " (cost is computed from its optimized runs)."]
    note = ("Measured sec per epoch = 16,000 rows / steady-state samples/s of the optimized preset (no "
            "compilation or evaluation); prices from helpers/facts/instance_prices.csv via helpers/cost.py.")
    return "\n\n".join(parts + [table, note])


def roofline_section(suite: suites.Suite, selected: dict, published_dir=PUBLISHED_DIR) -> str:
    """Return the source suite's points by batch (published beside) and every run's roofline summary."""
    source = suite.report.get("source", "batch_scaling")
    recs = [r for v in selected.get(source, {}).values() for r in v]
    parts = [f"Points of `{source}` by batch:", grid_table(suite.report, recs, published_dir)]
    points: dict[tuple, list[dict]] = {}
    for name, by_variant in selected.items():
        for variant, vrecs in by_variant.items():
            for rec in vrecs:
                if rec.get("status") == "finished" and metric(rec, "tflops") is not None:
                    key = (name, variant, device_of(rec), dig(rec, "precision.used") or "?")
                    points.setdefault(key, []).append(rec)
    if not points:
        parts.append("No runs yet — run `python -m helpers.sweep all` (every finished run is a point).")
        return "\n\n".join(parts)
    names = ["ai", "tflops", "mfu_pct", "peak_tflops", "mem_bw_gbps", "bound"]
    rows = [[*key, str(len(group))] + [summarize([metric(r, n) for r in group]) for n in names]
            for key, group in points.items()]
    header = ["suite", "variant", "device", "precision", "runs"] + [METRICS[n][0] for n in names]
    parts += ["Every finished run, by suite (the roofs are the records' own: measured on the CPU, "
              "published for GPUs and trn1):", md_table(header, rows, text_columns=4)]
    return "\n\n".join(parts)


def mean_ci(values: list[float]) -> tuple[float, float]:
    """Return the mean of `values` and the half-width of its 95% t-interval (nan for fewer than two)."""
    from scipy import stats

    mean = statistics.fmean(values)
    if len(values) < 2:
        return mean, math.nan
    return mean, stats.t.ppf(0.975, len(values) - 1) * statistics.stdev(values) / math.sqrt(len(values))


def fmt_ci(values: list[float], scale: float = 1.0, digits: int = 2) -> str:
    """Return 'mean ± half-width' (95% t-interval) of `values` x `scale`, the dash for none."""
    values = [v * scale for v in values if v is not None]
    if not values:
        return DASH
    mean, half = mean_ci(values)
    return f"{mean:.{digits}f}" + ("" if math.isnan(half) else f" ± {half:.{digits}f}")


CI_NOTE = ("Accuracy and F1 in percent: mean ± half-width of the 95% t-interval over seeds. Δ is each "
           "seed's difference to `{ref}` at the same length and seed (same data order, same initial "
           "weights), so the interval is of the paired difference: where it contains 0, this grid cannot "
           "tell the mode from `{ref}`.")


STUDY_TEST_ROWS = 2000  # dair-ai/emotion's test split: what the study's accuracies were measured on


def paired_diffs(done: list[dict], mode: str, ref: str) -> dict[str, list[float]]:
    """Return per max_length the test-accuracy differences `mode` - `ref` of runs with the same seed."""
    acc = {(r["params"].get("precision"), norm(r["params"].get("max_length")), r["params"].get("seed")):
           metric(r, "test_acc") for r in done}
    out: dict[str, list[float]] = {}
    for (precision, length, seed), a in acc.items():
        b = acc.get((ref, length, seed))
        if precision == mode and a is not None and b is not None:
            out.setdefault(length, []).append(a - b)
    return out


def _percent(cell: str) -> str:
    try:
        return f"{100 * float(cell):.2f}"
    except ValueError:
        return cell


def precision_table(spec: dict, recs: list[dict], published_dir=PUBLISHED_DIR) -> str:
    """Return accuracy and F1 with 95% intervals per (mode, length), the paired difference to the
    reference mode, step time and peak memory, and the published figures (in %) beside."""
    keys, ref = spec["keys"], spec.get("reference", "bf16")
    done = [r for r in recs if r.get("status") == "finished"]
    groups: dict[tuple, list[dict]] = {}
    for rec in done:
        groups.setdefault(tuple(norm(rec["params"].get(k)) for k in keys), []).append(rec)
    labels, published = published_columns(spec, keys, published_dir)
    header = keys + ["runs", "test acc %", "test macro-F1 %", f"Δ acc vs {ref} (points)", "step ms",
                     "peak mem GiB"] + [label.replace("accuracy", "accuracy %") for label in labels]
    rows = []
    diffs = {mode: paired_diffs(done, mode, ref) for mode, _ in groups}
    for key in sorted(groups, key=lambda k: (k[1], k[0])) + [k for k in published if k not in groups]:
        group = groups.get(key, [])
        rows.append(list(key) + [str(len(group)), fmt_ci([metric(r, "test_acc") for r in group], 100),
                                 fmt_ci([metric(r, "test_f1") for r in group], 100),
                                 DASH if key[0] == ref else fmt_ci(diffs.get(key[0], {}).get(key[1], []), 100),
                                 summarize([metric(r, "step_ms") for r in group]),
                                 summarize([metric(r, "mem_gib") for r in group])]
                    + [_percent(published.get(key, {}).get(label, DASH)) for label in labels])
    return md_table(header, rows, text_columns=len(keys))


def sr_effect_table(spec: dict, recs: list[dict], published_dir=PUBLISHED_DIR) -> str:
    """Return the study's question per length: stochastic minus nearest rounding of bf16 weights, measured
    (paired by seed, 95% interval) beside the published single-run difference and its binomial noise."""
    done = [r for r in recs if r.get("status") == "finished"]
    diffs = paired_diffs(done, "bf16-pure-sr", "bf16-pure")
    labels, published = published_columns(spec, spec["keys"], published_dir)
    rows = []
    for length in sorted(set(diffs) | {k[1] for k in published}, key=float):
        cells = [published.get((mode, length), {}).get(labels[0]) if labels else None
                 for mode in ("bf16-pure-sr", "bf16-pure")]
        pub = noise = DASH
        if all(c not in (None, DASH) for c in cells):
            on, off = map(float, cells)
            p = (on + off) / 2
            pub = f"{100 * (on - off):+.2f}"
            noise = f"± {100 * 1.96 * math.sqrt(2 * p * (1 - p) / STUDY_TEST_ROWS):.2f}"
        rows.append([length, str(len(diffs.get(length, []))), fmt_ci(diffs.get(length, []), 100), pub, noise])
    header = ["max_length", "seeds", "measured: bf16-pure-sr − bf16-pure (points)",
              "published (trn1, one run each): SR on − off (points)",
              f"noise of a published difference: 95% interval of two single runs on {STUDY_TEST_ROWS:,} rows"]
    return md_table(header, rows)


def precision_section(suite: suites.Suite, selected: dict, published_dir=PUBLISHED_DIR) -> str:
    """Return the precision study: one interval table per variant and device, or the published figures."""
    by_variant = selected.get(suite.name, {})
    if not by_variant:
        return grid_section(suite, selected, published_dir)
    parts = []
    for variant, recs in by_variant.items():
        for device in dict.fromkeys(device_of(r) for r in recs):
            mine = [r for r in recs if device_of(r) == device]
            parts += [caption(suite, variant, mine), precision_table(suite.report, mine, published_dir),
                      "The study's question, stochastic rounding of the bf16 weight update, per length:",
                      sr_effect_table(suite.report, mine, published_dir)]
    parts.append(CI_NOTE.format(ref=suite.report.get("reference", "bf16")))
    return "\n\n".join(parts)


SECTIONS = {"grid": grid_section, "precision": precision_section, "token_stats": token_stats_section,
            "speedup": speedup_section, "cost": cost_section, "roofline": roofline_section}


def section(suite: suites.Suite, selected: dict, published_dir=PUBLISHED_DIR) -> str:
    """Return the Markdown body of `suite`'s table(s) from the selected records."""
    return SECTIONS[suite.report.get("table", "grid")](suite, selected, published_dir)
