"""The benchmark's Markdown: each section's figures and verdicts into BENCHMARKS.md, live or from the raw file."""

from __future__ import annotations

import itertools
import json
import statistics
from pathlib import Path

import pandas as pd

from bench.cases import LEVER_SECTIONS, PEAK
from bench.harness import paired_ratios, paired_text
from bench.trainer_tta import PROJECT
from helpers.calc.flops import estimate_mfu


def _verdict(value: float | None, target: float, rounds: list[float] | None = None) -> str:
    """Return whether a figure meets its target, or that its rounds fall on both sides of it."""
    if value is None:
        return "not measured"
    if rounds and min(rounds) < target <= max(rounds):
        return f"**not resolved**: its rounds fall on both sides ({min(rounds):.3f} .. {max(rounds):.3f})"
    return "met" if value >= target else "**not met**"


def _table(rows: list[dict] | pd.DataFrame, left: int = 1) -> list[str]:
    """Return formatted `rows` as Markdown table lines, the first `left` columns left-aligned."""
    frame = pd.DataFrame(rows)
    align = ["left"] * left + ["right"] * (frame.shape[1] - left)
    return frame.to_markdown(index=False, disable_numparse=True, colalign=align).splitlines()


def _rate_table(rates: dict[str, list[dict]], key: str = "samples", unit: str = "samples/s") -> list[str]:
    """Return the table of each configuration's median rate of `key` over its windows, their range and count."""
    windows = [{"configuration": n, "rate": w[key]} for n, ws in rates.items() if key in ws[0] for w in ws]
    agg = pd.DataFrame(windows).groupby("configuration", sort=False)["rate"].agg(["median", "min", "max", "size"])
    g = agg[["median", "min", "max"]].map("{:.3g}".format)
    table = {
        f"median {unit}": g["median"],
        "min .. max": g["min"] + " .. " + g["max"],
        "windows": agg["size"].astype(str),
    }
    return _table(pd.DataFrame(table).reset_index())


def _windows(results: dict):
    """Yield every timed window of every section."""
    for sec in results.values():
        levers = sec.get("levers")  # the levers section's: a list of sections; the eval section's: a dict of figures
        for rates in [sec.get("rates")] + [x.get("rates") for x in (levers if isinstance(levers, list) else [])]:
            for windows in (rates or {}).values():
                yield from windows


def _head(results: dict, meta: dict) -> str:
    """Return the italic line naming the command, date, machine and load of the windows in `results`."""
    gate = ""
    if meta.get("max_other_cores"):
        others = [w["other_cores"] for w in _windows(results) if w.get("other_cores") is not None]
        late = sum(o >= meta["max_other_cores"] for o in others)
        gate = (
            f" Each window waited until other processes used < {meta['max_other_cores']} cores; "
            f"{late} of {len(others)} windows started without that (wait timed out)."
        )
    return (
        f"_Written by `{meta['command']}` on {meta['date']}. Machine: {meta['machine']}; "
        f"torch {meta['torch']}, transformers {meta['transformers']}, {meta['threads']} torch "
        f"threads; 1-minute load average {meta['load_start']:.2f} at start, "
        f"{meta['load_end']:.2f} at end.{gate}_"
    )


def render(results: dict, meta: dict) -> dict[str, str]:
    """Return the Markdown blocks ('main', 'levers', 'tta', 'eval') for the sections in `results`."""
    head = _head(results, meta)
    md = [head, ""]
    o = results.get("overhead")
    md += ["### 1. Harness overhead: `fit` vs a bare PyTorch loop", ""]
    md += ["### 2. `fit` vs Hugging Face `Trainer`", ""] if not o else []
    if o:
        r_bare, t_bare = paired_text(o["rates"], "fit (harness)", "bare loop")
        r_hf, t_hf = paired_text(o["rates"], "fit (harness)", "Trainer")
        v_bare = _verdict(r_bare, 0.97, paired_ratios(o["rates"], "fit (harness)", "bare loop"))
        v_hf = _verdict(r_hf, 1.0, paired_ratios(o["rates"], "fit (harness)", "Trainer"))
        md += [
            f"{o['config']['model_name']}, batch {o['config']['batch']}, L={o['config']['max_length']}, "
            f"precision {o['precision']}, {o['config']['optim']}; {o['steps_per_window']} "
            "optimizer steps a window.",
            "",
            *_rate_table(o["rates"]),
            "",
            f"**fit / bare loop = {t_bare}** (target >= 0.97x: {v_bare}).",
            "",
            "### 2. `fit` vs Hugging Face `Trainer`",
            "",
            f"Same rounds as section 1. **fit / Trainer = {t_hf}** (target >= 1.0x: {v_hf}).",
            "",
        ]
    else:
        md += ["Not measured in this run (`--sections overhead`).", ""]
    s = results.get("speedup")
    md += ["### 3. Optimized preset vs the study's baseline preset", ""]
    if s:
        x, t_x = paired_text(s["rates"], "optimized preset", "baseline preset")
        v_x = _verdict(x, 10, paired_ratios(s["rates"], "optimized preset", "baseline preset"))
        md += [
            f"{s['model']}; baseline `{s['baseline']}`; optimized `{s['optimized']}`; "
            f"{s['steps_per_window']} optimizer steps a window.",
            "",
            *_rate_table(s["rates"]),
            "",
            f"**optimized / baseline samples/s = {t_x}** (target >= 10x: {v_x}).",
            "",
        ]
    else:
        md += ["Not measured in this run (`--sections speedup`).", ""]
    md += ["### 4. MFU of the optimized preset", ""]
    if s:
        p = s["peak"]
        achieved, peak, mfu, rounds = _mfu(s)
        mfu_rounds = (
            f" Per round, optimized FLOP/s / peak FLOP/s: median {mfu:.3f} of {len(rounds)} "
            f"rounds, range {min(rounds):.3f} .. {max(rounds):.3f}."
            if rounds and mfu is not None
            else ""
        )
        md += [
            f"Model FLOPs = forward + backward matmuls (`calc.flops.model_flops`, padded length; "
            f"AdamW's elementwise work left out), MFU as `calc.flops.estimate_mfu`. "
            f"Peak: {p.get('source')}.",
            "",
        ]
        if "scan" in p:
            md += [*_table([{"matmul shape": k, "TFLOP/s (0.5 s scan)": f"{v:.3f}"} for k, v in p["scan"].items()]), ""]
        md += [
            f"Achieved {achieved:.3f} TFLOP/s (median) against a {p['precision']} peak of "
            f"{peak or float('nan'):.3f} TFLOP/s: **MFU = "
            f"{'%.1f%%' % (100 * mfu) if mfu else 'not measured'}** "
            f"(target >= 40%: {_verdict(mfu, 0.40, rounds)}).{mfu_rounds}",
            "",
        ]
    else:
        md += ["Not measured in this run (`--sections speedup`).", ""]
    md += ["### 5. Data pipeline", ""]
    d = results.get("data")
    if d:
        t = statistics.median(d["tokenize_s"])
        md += [
            f"Tokenizing the full training split ({d['rows']} rows, max_length {d['max_length']}, "
            f"{d['padding']} padding, `tokens.tokenize`): median of {len(d['tokenize_s'])} = "
            f"**{t:.2f} s** ({d['rows'] / t:,.0f} rows/s).",
            "",
        ]
    if s:
        st = s["stall"]
        md += [
            f"Loader stalls in the optimized windows ({st['micro_batches']} micro-batches): wait on "
            f"`next(loader)` median {st['wait_median_ms']:.2f} ms, max {st['wait_max_ms']:.2f} ms, "
            f"against a median step of {st['step_median_ms']:.0f} ms: **{100 * st['stall_fraction']:.2f}% "
            "of the loop waits on data**.",
            "",
        ]
    if not d and not s:
        md += ["Not measured in this run (`--sections data speedup`).", ""]
    md += ["### Accuracy: baseline vs optimized preset (MiniLM)", ""]
    a = results.get("accuracy")
    if a:
        md += [
            f"`model_name=minilm`, first {a['rows']} training rows, {a['epochs']} epoch(s), full test split.",
            "",
        ]
        rows = [
            {
                "preset": preset,
                "precision": r["precision"],
                "steps": str(r["steps"]),
                "test accuracy": f"{r['test_accuracy']:.4f}",
                "test macro-F1": f"{r['test_macro_f1']:.4f}",
                "samples/s": f"{r['samples_per_s']:.1f}",
                "train time (s)": f"{r['train_time_s']:.0f}",
            }
            for preset, r in a["runs"].items()
        ]
        md += _table(rows, left=2)
        b, o2 = a["runs"]["baseline"]["test_accuracy"], a["runs"]["optimized"]["test_accuracy"]
        md += ["", f"Optimized - baseline test accuracy = **{o2 - b:+.4f}** (target >= 0: {_verdict(o2 - b, 0)}).", ""]
    else:
        md += ["Not measured in this run (`--sections accuracy`).", ""]
    blocks = {"main": "\n".join(md)}
    for name, lines in (("levers", _levers), ("tta", _tta), ("eval", _eval)):
        if results.get(name):
            blocks[name] = "\n".join([head, "", *lines(results[name])])
    return blocks


def _levers(lv: dict) -> list[str]:
    """Return the levers section: the reference and one row per lever."""
    return [
        f"Reference `{lv['reference']}`; {lv['steps_per_window']} optimizer steps a "
        "window; control and variant alternate round by round; ratio = variant / control "
        "samples/s, the median of the per-round ratios (their range beside).",
        "",
        *_table([_lever_row(x) for x in lv["levers"]], left=3),
    ]


def _lever_row(x: dict) -> dict[str, str]:
    """Return a lever's row: its settings, both sides' median samples/s and the per-round ratios' median and range."""
    per_round = paired_ratios(x["rates"], "variant", "control")
    return {
        "lever": x["name"],
        "control": f"`{x['control']}`",
        "variant": f"`{x['variant']}`",
        "control samples/s": f"{x['control_samples_per_s']:.2f}",
        "variant samples/s": f"{x['variant_samples_per_s']:.2f}",
        "ratio": f"{statistics.median(per_round):.3f}x",
        "per-round range": f"{min(per_round):.3f} .. {max(per_round):.3f}",
        "variant's first window (s)": f"{x['warmup_s']:.1f}",
    }


def _mfu(s: dict) -> tuple[float, float | None, float | None, list[float]]:
    """Return the achieved and peak TFLOP/s, the MFU (None without a peak) and the MFU of each round."""
    windows, peaks = s["rates"]["optimized preset"], s["rates"].get(PEAK)
    achieved = statistics.median(w["flops"] for w in windows) / 1e12
    if peaks:  # timed in the same rounds: per round, the machine's drift cancels
        rounds = [estimate_mfu(w["flops"], 1.0, p["flops"] / 1e12) for w, p in zip(windows, peaks)]
        peak_tflops = statistics.median(p["flops"] for p in peaks) / 1e12
        return achieved, peak_tflops, statistics.median(rounds), rounds
    peak = s["peak"].get("peak_tflops")
    return achieved, peak, estimate_mfu(achieved * 1e12, 1.0, peak) if peak else None, []


def _eval(e: dict) -> list[str]:
    """Return the evaluation section: rows/s before and after, their paired ratio, and whether they agree."""
    names = list(e["rates"])
    x, text = paired_text(e["rates"], names[1], names[0])
    before, after = e["figures"]["before"], e["figures"]["after"]
    same = all(before[k] == after[k] for k in ("accuracy", "macro_f1", "rows"))
    c = e["config"]
    return [
        "### Evaluation of the whole validation split: before and after the sorted, built-once loader",
        "",
        f"Does one evaluation cost less, measuring the same? {c['model_name']} (L<={c['max_length']}, "
        f"{c['padding']} padding, precision {e['precision']}) fine-tuned {e['train_steps']} steps, then "
        f"the {e['rows']:,} validation rows evaluated by each side in turn, the order rotated each "
        f"round. Before: the DataLoader evaluation used ({e['batch_rows']['before']} rows a batch in "
        f"file order, collated at every evaluation, no_grad); after: `training.eval_loader` "
        f"({e['batch_rows']['after']} rows a batch sorted by length, collated once per run in "
        f"{e['build_s']:.2f} s, inference mode).",
        "",
        *_rate_table(e["rates"], unit="rows/s"),
        "",
        f"**after / before rows/s = {text}**. Accuracy {after['accuracy']:.4f} after, "
        f"{before['accuracy']:.4f} before, macro-F1 {after['macro_f1']:.4f} / {before['macro_f1']:.4f}: "
        + ("identical" if same else "**different**")
        + f"; per-row predictions {'identical' if e['same_predictions'] else '**different**'}"
        + ("" if e["same_predictions"] else f" on {e.get('rows_predicted_apart')} of {e['rows']:,} rows")
        + f" ({e['labels_predicted']} labels predicted); mean loss {after['loss']:.6f} / "
        f"{before['loss']:.6f}.",
        "",
        *_eval_levers(e, names[1]),
    ]


def _eval_levers(e: dict, after: str) -> list[str]:
    """Return one line per evaluation lever: its paired rows/s ratio to `after`'s and the rows it predicts apart."""
    lines = []
    for name, lever in (e.get("levers") or {}).items():
        _, text = paired_text(e["rates"], name, after)
        acc, base = e["figures"][name]["accuracy"], e["figures"]["after"]["accuracy"]
        lines.append(
            f"- **{name} / after rows/s = {text}**; accuracy {acc:.4f} against {base:.4f}, "
            f"{lever['rows_predicted_apart']} of {e['rows']:,} rows predicted otherwise."
        )
    if not lines:
        return []
    return [
        "Evaluation levers, each against the after side (the training weights in the training precision):",
        "",
        *lines,
        "",
    ]


def _seconds(values: list, beyond: list | None = None) -> str:
    """Return the median of the seconds that exist, else a minimum from `beyond`, else 'not reached'."""
    known = [v for v in values if v is not None]
    above = [b for b in beyond or [] if b is not None]
    share = f" ({len(known)} of {len(values)})" if len(known) < len(values) else ""
    return (
        f"{statistics.median(known):.0f}" + share
        if known
        else f"≥ {min(above):.0f} (a minimum: not reached)"
        if above
        else "not reached"
    )


def _tta(t: dict) -> list[str]:
    """Return the time-to-target section: one row per configuration, then the ratios against the run path."""
    z, rates = t["sizes"], t["rates"]
    target = f"{100 * z['target']:.0f}%"
    md = [
        f"### Time to {target} validation accuracy: the project's run path vs Hugging Face `Trainer`",
        "",
        f"Which reaches {target} validation accuracy in fewer training seconds? {z['model']}, "
        f"{z['train_rows']} shuffled training rows, {z['eval_rows'] or 'all'} validation rows evaluated "
        f"every {z['eval_every']} optimizer steps outside each clock (a time is the first evaluation at or "
        f"past the target: an upper bound by up to one interval); {z['rounds']} round(s), the order "
        "rotated each round"
        + (f", seeds {', '.join(str(x) for x in z['seeds'])} in turn" if list(z.get("seeds", [42])) != [42] else "")
        + (
            "; each configuration trains its whole recipe, then evaluates the test split"
            if z.get("to_the_end")
            else "; each configuration stops at its first evaluation at or above the target"
        )
        + (
            f"; a Trainer configuration short of it ends at its first evaluation past {z['budget_s']:.0f} "
            "training s (its time and ratio are then lower bounds)."
            if z.get("budget_s")
            else "."
        ),
        "",
        f"Time to {target} is training seconds (evaluations left out); wall to {target} is what a user "
        "waits: the seconds from the configuration's start step (checks, data, tokens, model) to the end "
        "of the evaluation that reached it, every evaluation included (the bench process's own start-up "
        "is in neither).",
        "",
        *_table([_tta_row(name, t["configs"][name], windows, target) for name, windows in rates.items()], left=3),
    ]
    lines = []
    for label, r in t["ratios"].items():
        known = [x for x in r["per_round"] if x is not None]
        lines.append(
            f"**{label} = {r['median']:.2f}x** ("
            + (
                f"median of {len(known)} per-round ratios, range {min(known):.2f} .. {max(known):.2f}"
                if len(known) > 1
                else "one round: a single run each, no spread"
            )
            + ")"
            if r["median"] is not None and None not in r["per_round"]
            else _at_least(label, r, target)
        )
    walls = [f"{label} = {r['median']:.2f}x" for label, r in t["wall_ratios"].items() if r["median"] is not None]
    wall = [f"Wall to {target} (median of the rounds where both reached it): " + "; ".join(walls) + "."]
    ratio_line = f"Time to {target}, ratio > 1: the project's run path is faster. " + "; ".join(lines) + "."
    return md + ["", ratio_line, *(["", *wall] if walls else []), "", *_final_test(rates)]


def _tta_row(name: str, recipe: dict, windows: list[dict], target: str) -> dict[str, str]:
    """Return a configuration's row of the time-to-target table: its recipe and the medians over its rounds."""
    steps_at = [w["target_step"] for w in windows if w.get("target_step")]
    return {
        "configuration": name,
        "recipe": f"L={recipe['max_length']} {recipe['padding']}"
        f"{', length-grouped' if recipe.get('group_by_length') else ''}, batch {recipe['batch']}, "
        f"lr {recipe['lr']:g}, {recipe['epochs']} epoch(s)",
        "precision": windows[0]["precision"],
        f"time to {target} (s, median; ≥: a minimum)": _seconds(
            [w["time_to_target_s"] for w in windows], [w.get("beyond_s") for w in windows]
        ),
        f"wall to {target} (s, median; ≥: a minimum)": _seconds([w["wall_to_target_s"] for w in windows]),
        "at step": f"{statistics.median(steps_at):.0f}" if steps_at else "-",
        "steps trained": f"{statistics.median(w['steps'] for w in windows):.0f}",
        "training s": f"{statistics.median(w['train_time_s'] for w in windows):.0f}",
        "samples/s": f"{statistics.median(w['samples'] or 0 for w in windows):.1f}",
        "best validation accuracy": f"{max(w['best_val_accuracy'] or 0 for w in windows):.2%}",
    }


def _final_test(rates: dict[str, list[dict]]) -> list[str]:
    """Return the final test accuracies seed by seed and each Trainer's mean paired difference from the run path's."""
    measured = {
        n: {w["seed"]: w["test_accuracy"] for w in ws if w.get("test_accuracy") is not None} for n, ws in rates.items()
    }
    if not any(measured.values()):
        return []
    md = [
        "Which ends higher on the test split after the whole recipe? Each seed trains every configuration from "
        "the same seeded model and rows (2,000 test rows: one run's accuracy is within about ±1.2 points, 95%).",
        "",
        *_table(
            [
                {
                    "configuration": name,
                    "seed: test accuracy": ", ".join(f"{seed}: {acc:.2%}" for seed, acc in by_seed.items()),
                    "mean": f"{statistics.mean(by_seed.values()):.2%}",
                }
                for name, by_seed in measured.items()
                if by_seed
            ],
            left=2,
        ),
    ]
    ours = measured.get(PROJECT, {})
    for name, by_seed in measured.items():
        paired = [100 * (by_seed[s] - ours[s]) for s in by_seed if s in ours and name != PROJECT]
        if paired:
            md += [
                "",
                f"**{name} - project run path: {statistics.mean(paired):+.2f} points** (mean of {len(paired)} "
                f"paired seed(s); per seed {', '.join(f'{d:+.2f}' for d in paired)}).",
            ]
    return md + [""]


def _at_least(label: str, r: dict, target: str) -> str:
    """Return the ratio line where some rounds did not reach `target`: the lower bound where every round has one."""
    bounds = r.get("at_least") or []
    if None in bounds or not bounds:
        return f"**{label}: not measured** (a side did not reach {target} in every round)" + (
            f"; where both did, median {r['median']:.2f}x" if r["median"] is not None else ""
        )
    return (
        f"**{label} >= {min(bounds):.2f}x** in each of {len(bounds)} round(s) (a lower bound: the "
        f"Trainer did not reach {target} in {r['per_round'].count(None)} of them, so its time there is "
        "more than its last evaluation's)"
    )


def levers_block(sections: list[str]) -> str:
    """Return the block a run of `sections` writes its lever rows to: `levers`, or `levers-<names>`."""
    groups = [s for s in sections if s in LEVER_SECTIONS]
    return "levers-" + "-".join(groups) if groups and "levers" not in sections else "levers"


def lever_block(command: str) -> str:
    """Return the block a levers run's rows go to, from the command that measured them."""
    words = command.split()
    asked = words[words.index("--sections") + 1 :] if "--sections" in words else []
    return levers_block(list(itertools.takewhile(lambda w: not w.startswith("--"), asked)))


def render_raw(raw: Path) -> dict[str, str]:
    """Return the blocks of the raw windows file's latest record of each section and lever, with its command."""
    rows = [json.loads(line) for line in raw.read_text().splitlines() if line.strip()]
    latest = {r["section"]: r for r in rows if r["section"] not in ("levers", "tta", "eval")}
    blocks = {}
    if latest:
        runs: dict[tuple, list[str]] = {}  # one head line per run (command, date) that wrote a section
        for name, r in latest.items():
            runs.setdefault((r["meta"]["command"], r["meta"]["date"]), []).append(name)
        metas = {
            key: {"load_end": latest[names[-1]]["meta"]["load_start"]} | latest[names[-1]]["meta"]
            for key, names in runs.items()
        }
        heads = [
            _head({n: latest[n]["result"] for n in names}, metas[key]).replace(
                "_Written by", f"_{', '.join(names)}: written by", 1
            )
            for key, names in runs.items()
        ]
        body = render({n: r["result"] for n, r in latest.items()}, next(iter(metas.values())))["main"]
        blocks["main"] = "\n\n".join(heads) + "\n" + body.split("\n", 1)[1]
    by_block: dict[str, list[dict]] = {}  # a levers record goes to the block its command wrote
    for r in rows:
        if r["section"] == "levers":
            by_block.setdefault(lever_block(r["meta"]["command"]), []).append(r)
    for block, records in by_block.items():
        parts, seen = [], set()
        for r in reversed(records):  # newest first: a lever measured again keeps its latest rows only
            fresh = [x for x in r["result"]["levers"] if x["name"] not in seen]
            seen |= {x["name"] for x in fresh}
            if fresh:
                result = {"levers": {**r["result"], "levers": fresh}}
                parts.insert(0, render(result, {"load_end": r["meta"]["load_start"]} | r["meta"])["levers"])
        blocks[block] = "\n\n".join(parts)
    for name in ("tta", "eval"):
        last = next((r for r in reversed(rows) if r["section"] == name), None)
        if last:  # the latest measurement, with its own command line
            blocks[name] = render({name: last["result"]}, {"load_end": last["meta"]["load_start"]} | last["meta"])[name]
    return blocks


def write_blocks(path: Path, blocks: dict[str, str]) -> None:
    """Replace each `<!-- bench:NAME begin -->...<!-- bench:NAME end -->` block in `path` (append if absent)."""
    text = path.read_text() if path.exists() else "# Benchmarks\n"
    for name, body in blocks.items():
        begin, end = f"<!-- bench:{name} begin -->", f"<!-- bench:{name} end -->"
        block = f"{begin}\n{body}\n{end}"
        if begin in text and end in text:
            text = text[: text.index(begin)] + block + text[text.index(end) + len(end) :]
        else:
            text = text.rstrip("\n") + f"\n\n{block}\n"
    path.write_text(text)
