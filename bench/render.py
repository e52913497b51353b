"""BENCHMARKS.md's generated blocks, from the raw results the bench appends to <results>/_bench/*.jsonl."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pandas as pd

from bench import rounds
from bench.overhead import BARE, GOAL

SECTIONS = ("overhead", "tta")  # the sections with a block; a raw file's other rows are retired sections' windows


def table(rows: list[dict] | pd.DataFrame, left: int = 1) -> list[str]:
    """Return `rows` as Markdown table lines, the first `left` columns left-aligned."""
    frame = pd.DataFrame(rows)
    align = ["left"] * left + ["right"] * (frame.shape[1] - left)
    return frame.to_markdown(index=False, disable_numparse=True, colalign=align).splitlines()


def verdict(value: float | None, target: float, per_round: list[float | None]) -> str:
    """Return whether a ratio meets its target, or that its rounds fall on both sides of it."""
    known = [x for x in per_round if x is not None]
    if value is None:
        return "not measured"
    if min(known) < target <= max(known):
        return f"**not resolved**: its rounds fall on both sides ({min(known):.3f} .. {max(known):.3f})"
    return "met" if value >= target else "**not met**"


def head(meta: dict, result: dict) -> str:
    """Return the italic line naming the command, date, machine and load the section's figures were measured under."""
    gate = ""
    if meta.get("max_other_cores"):
        others = [w["other_cores"] for ws in result["rates"].values() for w in ws if w.get("other_cores") is not None]
        late = sum(o >= meta["max_other_cores"] for o in others)
        gate = (
            f" Each run waited until other processes used < {meta['max_other_cores']} cores; "
            f"{late} of {len(others)} runs started without that (wait timed out)."
        )
    return (
        f"_Written by `{meta['command']}` on {meta['date']}. Machine: {meta['machine']}; torch {meta['torch']}, "
        f"transformers {meta['transformers']}, {meta['threads']} torch threads; 1-minute load average "
        f"{meta['load_start']:.2f} at start, {meta.get('load_end', meta['load_start']):.2f} at end.{gate}_"
    )


def rate_table(rates: dict[str, list[dict]]) -> list[str]:
    """Return each configuration's median samples/s over its runs, their range and count."""
    runs = pd.DataFrame([{"configuration": n, "rate": w["samples"]} for n, ws in rates.items() for w in ws])
    agg = runs.groupby("configuration", sort=False)["rate"].agg(["median", "min", "max", "size"])
    text = agg[["median", "min", "max"]].map("{:.3g}".format)
    shown = {"median samples/s": text["median"], "min .. max": text["min"] + " .. " + text["max"], "runs": agg["size"]}
    return table(pd.DataFrame(shown).reset_index())


def overhead(o: dict) -> list[str]:
    """Return the overhead section: each configuration's samples/s, then each one's paired ratio to the bare loop."""
    c, rates = o["config"], o["rates"]
    used = o.get("precision") or rates[BARE][0].get("precision")
    warm = (
        f"each run {o['warmup_steps']} warm-up steps (a fresh model), then" if "warmup_steps" in o else "after warm-up,"
    )
    lines = []
    for i, name in enumerate(n for n in rates if n != BARE):
        per_round = rounds.paired_ratios(rates, name, BARE)
        value, text = rounds.summary(per_round)
        goal = f" (target >= {GOAL}x: {verdict(value, GOAL, per_round)})" if i == 0 else ""
        lines += [f"**{name} / {BARE} = {text}**{goal}.", ""]
    return [
        "### Harness overhead: the platform's loop against a bare loop",
        "",
        f"Does the loop's measuring (timer, monitor, meters, record) cost throughput? {c['model_name']}, batch "
        f"{c['batch']}, L={c['max_length']}, precision {used}, {c['optim']}, step mode {c.get('step_mode', 'eager')}"
        f"{', data on the device' if c.get('data_on_device') else ''}; {warm} {o['steps_per_window']} optimizer "
        "steps timed in one window; one window of each configuration a round, the order rotated each round.",
        "",
        *rate_table(rates),
        "",
        *lines,
    ]


def seconds(values: list, beyond: list) -> str:
    """Return the median of the seconds that exist, else a minimum from `beyond`, else 'not reached'."""
    known, above = [v for v in values if v is not None], [b for b in beyond if b is not None]
    if known:
        return f"{statistics.median(known):.0f}" + (
            f" ({len(known)} of {len(values)})" if len(known) < len(values) else ""
        )
    return f"≥ {min(above):.0f} (a minimum: not reached)" if above else "not reached"


def tta_row(name: str, recipe: dict, runs: list[dict], target: str) -> dict[str, str]:
    """Return a configuration's row of the time-to-target table: its recipe and the medians over its rounds."""
    at = [w["target_step"] for w in runs if w.get("target_step")]
    return {
        "configuration": name,
        "recipe": f"L={recipe['max_length']} {recipe['padding']}{', length-grouped' if recipe.get('group_by_length') else ''}"
        f", batch {recipe['batch']}, lr {recipe['lr']:g}, {recipe['epochs']} epoch(s)",
        "precision": runs[0]["precision"],
        f"time to {target} (s, median; ≥: a minimum)": seconds(
            [w["time_to_target_s"] for w in runs], [w.get("beyond_s") for w in runs]
        ),
        f"wall to {target} (s, median)": seconds([w.get("wall_to_target_s") for w in runs], []),
        "at step": f"{statistics.median(at):.0f}" if at else "-",
        "steps trained": f"{statistics.median(w['steps'] for w in runs):.0f}",
        "training s": f"{statistics.median(w['train_time_s'] for w in runs):.0f}",
        "samples/s": f"{statistics.median(w['samples'] or 0 for w in runs):.1f}",
        "best validation accuracy": f"{max(w['best_val_accuracy'] or 0 for w in runs):.2%}",
    }


def ratio_line(label: str, r: dict, target: str) -> str:
    """Return a ratio's line: its median and range, or the lower bound where the Trainer fell short in some rounds."""
    known, bounds = [x for x in r["per_round"] if x is not None], r.get("at_least") or []
    if r["median"] is not None and len(known) == len(r["per_round"]):
        return f"**{label} = {rounds.summary(known)[1]}**"
    if bounds and None not in bounds:
        return (
            f"**{label} >= {min(bounds):.2f}x** in each of {len(bounds)} round(s) (a lower bound: the Trainer did not "
            f"reach {target} in {r['per_round'].count(None)} of them, so its time there is more than its last "
            "evaluation's)"
        )
    where = f"; where both did, median {r['median']:.2f}x" if r["median"] is not None else ""
    return f"**{label}: not measured** (a side did not reach {target} in every round){where}"


def final_test(rates: dict[str, list[dict]], loop: str) -> list[str]:
    """Return the final test accuracies seed by seed and each Trainer's mean paired difference from the loop's."""
    by_seed = {
        n: {w["seed"]: w["test_accuracy"] for w in ws if w.get("test_accuracy") is not None} for n, ws in rates.items()
    }
    if not any(by_seed.values()):
        return []
    rows = [
        {
            "configuration": n,
            "seed: test accuracy": ", ".join(f"{s}: {a:.2%}" for s, a in accs.items()),
            "mean": f"{statistics.mean(accs.values()):.2%}",
        }
        for n, accs in by_seed.items()
        if accs
    ]
    md = [
        "Which ends higher on the test split after the whole recipe? Each seed trains every configuration from the "
        "same seeded model and rows (2,000 test rows: one run's accuracy is within about ±1.2 points, 95%).",
        "",
        *table(rows, left=2),
    ]
    for name, accs in by_seed.items():
        paired = [100 * (a - by_seed[loop][s]) for s, a in accs.items() if s in by_seed[loop] and name != loop]
        if paired:
            md += [
                "",
                f"**{name} - {loop}: {statistics.mean(paired):+.2f} points** (mean of {len(paired)} paired "
                f"seed(s); per seed {', '.join(f'{d:+.2f}' for d in paired)}).",
            ]
    return md


def tta(t: dict) -> list[str]:
    """Return the time-to-target section: a row per configuration, the ratios to the loop, the final test."""
    z, rates = t["sizes"], t["rates"]
    target, loop = f"{100 * z['target']:.0f}%", next(n for n in rates if not n.startswith("Trainer"))
    seeds = list(z.get("seeds") or [42])
    how = [
        f"{z['rounds']} round(s), the order rotated each round"
        + (f", seeds {', '.join(map(str, seeds))} in turn" if seeds != [42] else ""),
        "each configuration trains its whole recipe, then evaluates the test split"
        if z.get("to_the_end")
        else "each configuration stops at its first evaluation at or above the target",
    ]
    if z.get("budget_s"):
        how.append(
            f"a Trainer short of it ends at its first evaluation past {z['budget_s']:.0f} training s (its time and ratio are then lower bounds)"
        )
    md = [
        f"### Time to {target} validation accuracy: {loop} against Hugging Face `Trainer`",
        "",
        f"Which reaches {target} validation accuracy in fewer training seconds? {z['model']}, {z['train_rows']} "
        f"shuffled training rows, {z['eval_rows'] or 'all'} validation rows evaluated every {z['eval_every']} optimizer "
        f"steps outside each clock (a time is the first evaluation at or past the target: an upper bound by up to one "
        f"interval); {'; '.join(how)}. Wall is from the configuration's start (data, tokens, model) to the end of the "
        "evaluation that reached the target, every evaluation included.",
        "",
        *table([tta_row(n, t["configs"][n], ws, target) for n, ws in rates.items()], left=3),
        "",
        f"Time to {target}, ratio > 1: {loop} is sooner. "
        + "; ".join(ratio_line(k, r, target) for k, r in t["ratios"].items())
        + ".",
    ]
    walls = [f"{k} = {r['median']:.2f}x" for k, r in (t.get("wall_ratios") or {}).items() if r["median"] is not None]
    if walls:
        md += ["", f"Wall to {target} (median of the rounds where both reached it): " + "; ".join(walls) + "."]
    return md + ["", *final_test(rates, loop)]


def blocks(rows: list[dict], prefix: str = "") -> dict[str, str]:
    """Return a block per section of `rows` (raw results): its latest measurement, under the command that made it."""
    out = {}
    for section, render in (("overhead", overhead), ("tta", tta)):
        last = next((r for r in reversed(rows) if r["section"] == section), None)
        if last:
            out[prefix + section] = (
                "\n".join([head(last["meta"], last["result"]), "", *render(last["result"])]).rstrip() + "\n"
            )
    return out


def read_raw(path: Path) -> list[dict]:
    """Return the raw results of a .jsonl file, one row per section a bench run measured."""
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def write_blocks(path: Path, new: dict[str, str]) -> None:
    """Replace each `<!-- bench:NAME begin -->...<!-- bench:NAME end -->` block in `path` (appended where absent)."""
    text = path.read_text() if path.exists() else "# Benchmarks\n"
    for name, body in new.items():
        begin, end = f"<!-- bench:{name} begin -->", f"<!-- bench:{name} end -->"
        block = f"{begin}\n{body}{end}"
        if begin in text and end in text:
            text = text[: text.index(begin)] + block + text[text.index(end) + len(end) :]
        else:
            text = text.rstrip("\n") + f"\n\n{block}\n"
    path.write_text(text)
