"""Every table and plot of the report from the run records: Experiment/<suite>.md, Experiment/REPORT.md
and Pictures/*.png.

    python -m helpers.report [--results Experiment/results/runs.jsonl]

One record per run name counts (the last finished one, else the last one written); only the run names
the suite files expand to today are tabulated, so records of an edited suite never mix with new ones.
The tables are helpers.tables, the figures helpers.plots.
"""
from __future__ import annotations

import argparse
import os
import shlex
import sys
from pathlib import Path

from helpers import records, suites, sweep, tables
from helpers.config import repo_path

OUT_DIR = "Experiment"
PICTURES_DIR = "Pictures"
PUBLISHED_DIR = tables.PUBLISHED_DIR
# library versions shown per device in REPORT.md
LIBRARIES = ("torch", "transformers", "torch-xla", "torch-neuronx", "neuronx-cc", "torchao")


def latest_records(all_records: list[dict]) -> dict[str, dict]:
    """Return one record per run name: the last finished one, else the last one written."""
    out: dict[str, dict] = {}
    for rec in all_records:
        name = rec.get("run_name")
        if name and (rec.get("status") == "finished" or out.get(name, {}).get("status") != "finished"):
            out[name] = rec
    return out


def select(found: list[suites.Suite], latest: dict[str, dict]) -> dict[str, dict[str, list[dict]]]:
    """Return {suite: {variant: records}} for the run names each suite expands to now (on any target)."""
    selected = {}
    for suite in found:
        by_variant = {}
        for variant in ("full", "quick"):
            if suite.kind == "derived":
                continue
            names = dict.fromkeys(p.run_name for target in suites.TARGETS
                                  for p in suites.expand(suites.retarget(suite, target), variant))
            recs = [latest[name] for name in names if name in latest]
            if recs:
                by_variant[variant] = recs
        selected[suite.name] = by_variant
    return selected


def frame(selected: dict[str, dict[str, list[dict]]]):
    """Return one row per selected record: suite, variant, status, device, precision, key params, METRICS."""
    import pandas as pd

    rows = []
    for suite, by_variant in selected.items():
        for variant, recs in by_variant.items():
            for rec in recs:
                params = rec.get("params", {})
                row = {"suite": suite, "variant": variant, "run_name": rec.get("run_name"),
                       "status": rec.get("status"), "device": tables.device_of(rec),
                       "precision": tables.dig(rec, "precision.used") or params.get("precision"),
                       "model_name": params.get("model_name"), "instance": tables.instance_for(rec)}
                for name in ("batch", "max_length", "lr", "seed", "num_devices"):
                    row[name] = params.get(name)
                for name in ("llrd_decay", "preset", "padding"):
                    row[name] = tables.norm(params.get(name))
                row.update({name: tables.metric(rec, name) for name in tables.METRICS})
                rows.append(row)
    columns = ["suite", "variant", "run_name", "status", "device", "precision", "model_name", "instance",
               "batch", "max_length", "lr", "seed", "num_devices", "llrd_decay", "preset", "padding",
               *tables.METRICS]
    return pd.DataFrame(rows, columns=columns)


def runs_overview(selected: dict[str, dict[str, list[dict]]]) -> str:
    """Return the table of devices the runs were on: runs, dates and library versions."""
    groups: dict[tuple, list[dict]] = {}
    for by_variant in selected.values():
        for recs in by_variant.values():
            for rec in recs:
                libs = rec.get("libraries") or {}
                versions = ", ".join(f"{k} {libs[k]}" for k in LIBRARIES if k in libs) or "not recorded"
                groups.setdefault((tables.device_of(rec), versions), []).append(rec)
    if not groups:
        return "No runs yet — run `python -m helpers.sweep all --variant quick` (or `make report`)."
    rows = []
    for (device, versions), recs in sorted(groups.items()):
        dates = sorted(str(r.get(k, ""))[:10] for r in recs for k in ("started_at", "finished_at") if r.get(k))
        done = sum(r.get("status") == "finished" for r in recs)
        rows.append([device, f"{done} / {len(recs)}", f"{dates[0]} to {dates[-1]}" if dates else "—", versions])
    return tables.md_table(["device", "finished / runs", "dates", "libraries"], rows, text_columns=4)


def shown_path(path: Path) -> str:
    """Return `path` relative to the repository root when inside it, else as given."""
    root = repo_path(".")
    return str(path.relative_to(root)) if path.is_relative_to(root) else str(path)


def header_line(command: str) -> str:
    """Return the first line of every generated Markdown file."""
    return f"<!-- Written by `{command}`; regenerate it, do not edit by hand. -->"


def suite_markdown(suite: suites.Suite, selected: dict, figures: list[Path], out_dir: Path,
                   published_dir) -> str:
    """Return a suite's section (heading, description, tables, figure links) without a header line."""
    parts = [f"## {suite.order}. {suite.title}"]
    if suite.description:
        parts.append(suite.description)
    parts.append(tables.section(suite, selected, published_dir))
    if suite.name == "profile_memory":
        parts.append(memory_fit_markdown())
    for fig in figures:
        parts.append(f"![{fig.stem.replace('_', ' ')}]({Path(os.path.relpath(fig, out_dir)).as_posix()})")
    return "\n\n".join(parts) + "\n"


def memory_fit_markdown(seq_lens: tuple[int, ...] = (32, 128), precision: str = "bf16") -> str:
    """Return the largest bert-base batch that fits each device (analytic), beside the study's observation."""
    from transformers import BertConfig

    from helpers import memory

    parts = ["### Largest bert-base batch that fits (analytic estimate, `python -m helpers.memory`)"]
    for seq_len in seq_lens:
        table = memory.fit_table(BertConfig(num_labels=6), seq_len, precision).drop(columns="key")
        parts.append(f"L={seq_len}, {precision}, AdamW, 1 GiB reserved:\n\n"
                     + table.to_markdown(index=False, floatfmt=".2f"))
    parts.append("Published (trn1.2xlarge): host OOM above batch 48, batch 64 only with 90 GB of swap. "
                 "The training tensors above fit a 32 GB host far beyond batch 48, so that OOM is not "
                 "the training state; the Neuron compiler's working memory is the likely cause (not "
                 "measured here).")
    return "\n\n".join(parts)


def build_report(results: str | Path = sweep.RESULTS, out_dir: str | Path = OUT_DIR,
                 pictures_dir: str | Path = PICTURES_DIR, suites_dir: str | Path = suites.SUITES_DIR,
                 published_dir: str | Path = PUBLISHED_DIR, command: str = "python -m helpers.report",
                 plots: bool = True) -> list[Path]:
    """Write Experiment/<suite>.md, Experiment/REPORT.md and the figures; return the paths written."""
    results, out_dir, pictures_dir = repo_path(results), repo_path(out_dir), repo_path(pictures_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    found = suites.find_suites(suites_dir)
    all_records, broken = records.read_records(results)
    selected = select(found, latest_records(all_records))
    figures: dict[str, list[Path]] = {}
    if plots:
        from helpers import plots as figs

        figures = figs.make_all(frame(selected), pictures_dir, published_dir, command)
    written, sections = [], []
    head = header_line(command)
    for suite in found:
        body = suite_markdown(suite, selected, figures.get(suite.name, []), out_dir, published_dir)
        path = out_dir / f"{suite.name}.md"
        path.write_text(f"{head}\n\n{body}")
        written.append(path)
        sections.append(body)
    shown = sum(len(r) for v in selected.values() for r in v.values())
    intro = [head, "", "# BERT fine-tuning on dair-ai/emotion: the report", "",
             f"Tables and figures from `{shown_path(results)}`: "
             f"{len(all_records)} records, {shown} of them current for a suite"
             + (f", {broken} broken lines skipped" if broken else "") + ". Published columns are the "
             "original study's figures (Experiment/published/README.md), never results of this repository; "
             "`quick` variants run a small model on a data subset and compare with them only in trend.", "",
             runs_overview(selected), ""]
    report = out_dir / "REPORT.md"
    report.write_text("\n".join(intro) + "\n" + "\n".join(sections))
    return written + [report] + [p for ps in figures.values() for p in ps]


def main(argv: list[str] | None = None) -> None:
    """Command line: python -m helpers.report [--results PATH] [--out-dir DIR] [--pictures DIR]."""
    parser = argparse.ArgumentParser(prog="python -m helpers.report", description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", default=sweep.RESULTS, help="JSONL run records (relative to the repo root)")
    parser.add_argument("--out-dir", default=OUT_DIR, help="where <suite>.md and REPORT.md go")
    parser.add_argument("--pictures", default=PICTURES_DIR, help="where the figures go")
    parser.add_argument("--suites-dir", default=suites.SUITES_DIR)
    parser.add_argument("--no-plots", action="store_true", help="tables only")
    args = parser.parse_args(argv)
    command = shlex.join(["python", "-m", "helpers.report", *(sys.argv[1:] if argv is None else argv)])
    for path in build_report(args.results, args.out_dir, args.pictures, args.suites_dir,
                             command=command, plots=not args.no_plots):
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
