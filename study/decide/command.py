"""python -m helpers.study.decide: which accelerator for a fine-tuning job (the table: ranking.py)."""

from __future__ import annotations

import argparse
import dataclasses
import math
import shlex
import sys

from helpers.run.paths import RESULTS_DIR, repo_path
from helpers.study import frame
from helpers.study.decide import ranking
from helpers.study.frame import current_points
from helpers.study.notation import header
from helpers.study.sweep.suites import SUITES_DIR, find_suites, suites_folder

# a job's size is bounded so that its hours and dollars stay finite numbers: a million epochs of a billion
# rows is past any fine-tuning job, and past it float arithmetic turns costs into inf ("cheapest at $inf")
MAX_EPOCHS = 1e6
MAX_ROWS = 1e9


def whole_number(text: str) -> int:
    """Return `text` as an integer (1e5 and 100000 alike); argparse's error for anything else."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value) or value != int(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite whole number")
    return int(value)


def main(argv: list[str] | None = None) -> None:
    """Command line: print the decision table for a job; --write DIR also writes it with its plot into DIR."""
    p = argparse.ArgumentParser(prog="python -m helpers.study.decide", description=ranking.__doc__.split("\n\n")[0])
    p.add_argument("--epochs", type=float, default=3, help="epochs of the job")
    p.add_argument("--rows", type=whole_number, default=ranking.FULL_ROWS, help="training rows per epoch")
    p.add_argument("--target-accuracy", type=float, default=0.94, help="validation accuracy to reach (0-1)")
    p.add_argument("--runs-sharing-cache", type=int, default=1, help="runs that share one compile cache")
    p.add_argument("--warm-cache", action="store_true", help="the compile cache is already warm")
    p.add_argument(
        "--shared-instance",
        action="store_true",
        help="price one accelerator's share of a multi-accelerator instance "
        "(default: the whole instance, "
        "what a single user pays)",
    )
    p.add_argument(
        "--model",
        default=None,
        help="answer from records of this model only (a hub id, e.g. roberta-base; "
        "its -random configuration counts, for speed and cost)",
    )
    p.add_argument(
        "--lora-r", type=int, default=None, help="answer from LoRA runs of this rank (default: full fine-tuning)"
    )
    p.add_argument("--results", default=RESULTS_DIR, help="folder of run records")
    p.add_argument(
        "--suites-dir",
        default=SUITES_DIR,
        type=suites_folder,
        help="suites whose current points are read (a record of an "
        "edited suite's older point, or of no suite, is left out, as in the report)",
    )
    p.add_argument(
        "--write",
        metavar="DIR",
        help="also write DIR/decide.md and DIR/decide_cost.png (the report's own, "
        "for its default job, are Experiment/cost.md and Pictures/decide_cost.png)",
    )
    args = p.parse_args(argv)
    if (
        args.runs_sharing_cache < 1
        or not 0 < args.target_accuracy <= 1
        or not 0 < args.epochs <= MAX_EPOCHS
        or not 1 <= args.rows <= MAX_ROWS
        or (args.lora_r is not None and args.lora_r < 0)
    ):
        p.error(
            "need --runs-sharing-cache >= 1, 0 < --target-accuracy <= 1 (a fraction), "
            "a finite 0 < --epochs <= "
            f"{MAX_EPOCHS:,.0f}, 1 <= --rows <= {MAX_ROWS:,.0f}, --lora-r >= 0 "
            f"(got --epochs {args.epochs:g}, "
            f"--rows {args.rows:,})"
        )
    if not repo_path(args.results).is_dir():
        p.error(f"--results {args.results}: no such folder of run records")
    # every option but --results, --suites-dir and --write is named as a field of Job
    job = ranking.Job(**{f.name: getattr(args, f.name) for f in dataclasses.fields(ranking.Job)})
    df, skipped = frame.load(repo_path(args.results))
    df = current_points(df, find_suites(args.suites_dir))
    for what in skipped:  # a foreign record that fails the schema, or a newer one: named, never fatal
        print(f"skipped record {what}", file=sys.stderr)
    table = ranking.decision(df, job)
    print(ranking.markdown(table, breaks := ranking.break_even(table, job), job))
    if args.write:
        from helpers.study.decide import cost_plot  # matplotlib only where the figure is drawn

        given = sys.argv[1:] if argv is None else argv
        command = shlex.join(["python", "-m", "helpers.study.decide", *given])
        out = repo_path(args.write)
        page, figure = out / "decide.md", out / "decide_cost.png"
        try:
            out.mkdir(parents=True, exist_ok=True)
            text = ranking.markdown(table, breaks, job, figure="decide_cost.png")
            page.write_text(f"{header(command)}\n\n{text}\n")
            print(f"wrote {page}\nwrote {cost_plot.plot(table, breaks, job, command, figure, ranking.PAIRS)}")
        except OSError as err:
            p.error(f"--write {args.write}: cannot write there ({err.strerror or err}: {err.filename or out})")


if __name__ == "__main__":
    main()
