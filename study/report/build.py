"""Every table and plot of the report from the run records: Experiment/<suite>.md, Experiment/claims.md,
Experiment/REPORT.md and Pictures/*.png.

    python -m study.report [--results Experiment/results]

Reads every record below the results folder (several machines' folders copied side by side included),
keeps the suites' current points (records of an edited suite never mix with new ones), and renders from
that one frame: the findings, the machines, a section per suite, the accelerator decision. Rendering
starts no process and runs nothing; a second run on the same records writes the same bytes.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from pathlib import Path

import pandas as pd

from helpers import record
from helpers.record import repo_path
from study import cost, frame
from study.claims import accuracy, findings
from study.claims.verdict import prepare
from study.frame import current_points
from study.notation import fmt, header
from study.published import PUBLISHED_DIR
from study.report import sections
from study.report.agreement import agreement_markdown
from study.sweep.suites import SUITES_DIR, find_suites, suites_folder

OUT_DIR = "Experiment"
PICTURES_DIR = "Pictures"
RESULTS = "Experiment/results"


def machines(df: pd.DataFrame) -> str:
    """Return the table of devices the records come from: runs, dates, instance and CPU features."""
    if df.empty:
        return "No runs yet: run `make report` (or `python -m study.sweep all`)."
    table = df.groupby("device").agg(
        key=("device_key", "first"),
        instance=("instance", lambda s: ", ".join(sorted(set(s.dropna()))) or "—"),
        finished=("status", lambda s: f"{(s == 'finished').sum()} / {len(s)}"),
        dates=("finished_at", lambda s: f"{str(s.min())[:10]} to {str(s.max())[:10]}"),
    )
    return table.reset_index().to_markdown(index=False)


def first_runs(df: pd.DataFrame) -> str:
    """Return the smoke suite's runs (cloud/smoke.toml, `make cloud`'s first run of a device): one row each."""
    runs = df[(df["suite"] == "smoke") & (df["status"] == "finished")].sort_values(["device", "finished_at"])
    if runs.empty:
        return "No smoke run yet: `make cloud TARGET=trn1` (or a GPU) runs `cloud/smoke.toml` first on a new device."
    table = pd.DataFrame(
        {
            "device": runs["label"],
            "model, batch × L, dtype": [
                f"{m}, {b} × {n}, {p}"
                for m, b, n, p in zip(runs["model_name"], runs["batch"], runs["max_length"], runs["compute_dtype"])
            ],
            "samples/s": runs["samples_per_s"].map(fmt),
            "step ms": runs["step_ms"].map(fmt),
            "MFU %": runs["mfu_pct"].map(fmt),
            "util. %": runs["util_pct"].map(fmt),
            "W": runs["watts"].map(fmt),
            "samples/J": runs["samples_per_j"].map(fmt),
            "date": runs["finished_at"].map(lambda t: str(t)[:10]),
        }
    )
    metrics = "; ".join(f"{d}: {m}" for d, m in runs.groupby("label")["util_metric"].first().items())
    return (
        "The smoke suite's one short run per device (`cloud/smoke.toml`; its `full` variant trains bert-base's exact "
        "shapes with random weights: it times a step and says nothing of accuracy). Step ms: the median step; W: mean "
        f"power over the steady windows; utilization: {metrics}. Read MFU beside the utilization: a low MFU with a "
        "busy device is slow kernels; with an idle one, the device waited on the host.\n\n"
        + table.to_markdown(index=False, disable_numparse=True)
    )


def build_report(
    results: str | Path = RESULTS,
    out_dir: str | Path = OUT_DIR,
    pictures_dir: str | Path = PICTURES_DIR,
    suites_dir: str | Path = SUITES_DIR,
    published_dir: str | Path = PUBLISHED_DIR,
    command: str = "python -m study.report",
    plots: bool = True,
    include_fixtures: bool = False,
) -> list[Path]:
    """Write Experiment/<suite>.md, Experiment/REPORT.md and the figures; return the paths written."""
    results, out_dir = repo_path(results), repo_path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    suites = find_suites(suites_dir)
    df, skipped = frame.load(results, include_fixtures)
    current = current_points(df, suites)
    if len(current):  # the claims' criterion, over every suite's runs, for the tables too
        current = current.assign(learned=accuracy.learned(prepare(current)))
    pictures = {}
    if plots:
        from study.report.plots import make_all  # matplotlib only where figures are drawn

        pictures = make_all(current, pictures_dir, published_dir, command)
    head, written = header(command), []
    for suite in suites:
        whole = suite.kind == "derived" and not suite.report.get("source")  # e.g. the roofline: every run
        source = suite.report.get("source") or suite.name
        rows = current if whole or not len(current) else current[current["suite"] == source]
        body = [f"## {suite.order}. {suite.title}"] + ([suite.description] if suite.description else [])
        if suite.report.get("table") == "decision":  # the study's job: 3 epochs of 16,000 rows, 94% validation
            body.append(cost.markdown(cost.decision(current, cost.Job(), published_dir), cost.Job()))
        else:
            body.append(sections.section(suite, rows, published_dir))
        body += [
            f"![{p.stem.replace('_', ' ')}]({Path(os.path.relpath(p, out_dir)).as_posix()})"
            for p in pictures.get(suite.name, [])
        ]
        text = "\n\n".join(body) + "\n"
        path = out_dir / f"{suite.name}.md"
        path.write_text(f"{head}\n\n{text}")
        written.append(path)
    shown = results.relative_to(repo_path(".")) if results.is_relative_to(repo_path(".")) else results
    note = (
        f"{len(df)} records below `{shown}`, {len(current)} of them current points of a suite"
        + (f"; skipped: {', '.join(f'{n} {k}' for k, n in skipped.items())}" if skipped else "")
        + "."
    )
    table = findings.findings(current, published_dir)
    claims = out_dir / "claims.md"
    claims.write_text(f"{head}\n\n# The study's claims, one by one\n\n{findings.markdown(table)}")
    intro = [
        head,
        "",
        "# BERT fine-tuning on dair-ai/emotion: the report",
        "",
        findings.bottom_line(current, table),
        "",
        findings.summary(table, page="claims.md", quotes=False),
        "",
        findings.counts(table),
        "",
        "Each claim's words in the study, its rule, evidence and verdict: [claims.md](claims.md). "
        "Published columns are the original study's figures (Experiment/published/README.md), never results of this "
        "repository. `quick` variants are sized for 2 CPU cores (MiniLM, the real data); they test the study's claims "
        "in direction, the `full` variants reproduce them on a GPU or trn1.",
        "",
        "## Machines",
        "",
        note,
        "",
        machines(current),
        "",
        "## First runs on each device",
        "",
        first_runs(df),
        "",
        "## Agreement between suites",
        "",
        agreement_markdown(current),
        "",
        "## Sections",
        "",
        "Each suite's tables and figures are on a page of their own:",
        "",
        *[f"- [{suite.order}. {suite.title}]({suite.name}.md)" for suite in suites],
        "",
    ]
    report = out_dir / "REPORT.md"
    report.write_text("\n".join(intro))
    return written + [claims, report] + [p for ps in pictures.values() for p in ps]


def unusable_results(results: Path) -> str | None:
    """Return why `results` cannot make a report (not a folder, no valid record below it), or None."""
    if not results.is_dir():
        return "no such folder of run records"
    found, skipped = record.read(results)
    if not found:
        unread = f" ({sum(skipped.values())} file(s) skipped: {', '.join(list(skipped)[:3])})" if skipped else ""
        return f"holds no run record{unread}"
    return None


def same_folder(a: str | Path, b: str | Path) -> bool:
    """True when the folders `a` and `b` (relative to the repository root) are one."""
    return repo_path(a).resolve() == repo_path(b).resolve()


def committed_outputs(args: argparse.Namespace) -> list[str]:
    """Return the committed report's folders that the command line `args` would write into."""
    return [
        f"--{flag} {default}"
        for flag, given, default, writes in (
            ("out-dir", args.out_dir, OUT_DIR, True),
            ("pictures", args.pictures, PICTURES_DIR, not args.no_plots),
        )
        if writes and same_folder(given, default)
    ]


def main(argv: list[str] | None = None) -> None:
    """Command line: python -m study.report [--results DIR] [--out-dir DIR] [--pictures DIR]."""
    parser = argparse.ArgumentParser(prog="python -m study.report", description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", default=RESULTS, help="folder of the run records (every machine's below it)")
    parser.add_argument("--out-dir", default=OUT_DIR, help="where <suite>.md and REPORT.md go")
    parser.add_argument("--pictures", default=PICTURES_DIR, help="where the figures go")
    parser.add_argument("--suites-dir", default=SUITES_DIR, type=suites_folder)
    parser.add_argument("--no-plots", action="store_true", help="tables only")
    args = parser.parse_args(argv)
    why = unusable_results(repo_path(args.results))
    if why:  # before anything is written: a mistyped folder must never empty the committed report
        parser.error(f"--results {args.results}: {why}; nothing was written")
    committed = committed_outputs(args)
    if committed and not same_folder(args.results, RESULTS):
        parser.error(
            f"--results {args.results}: the committed report ({', '.join(committed)}) is made from every record "
            f"below {RESULTS}; a report of {args.results} alone goes elsewhere: give --out-dir and --pictures "
            "(nothing was written)"
        )
    command = shlex.join(["python", "-m", "study.report", *(sys.argv[1:] if argv is None else argv)])
    for path in build_report(
        args.results, args.out_dir, args.pictures, args.suites_dir, command=command, plots=not args.no_plots
    ):
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
