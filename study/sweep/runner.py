"""The sweep runner: every point of the chosen suites not yet finished on this machine's device."""

from __future__ import annotations

import argparse
import concurrent.futures
import math
import os
import signal
import sys
import time
from pathlib import Path

from helpers.run import records
from helpers.run.args import ConfigError
from helpers.run.paths import repo_path
from helpers.study.sweep import plan, points, precompile
from helpers.study.sweep.suites import (
    SUITES_DIR,
    TARGETS,
    VARIANTS,
    Suite,
    expand,
    find_suites,
    resolve_suite,
    retarget,
    suites_folder,
    timeout_of,
    with_overrides,
)

RUNS_DIR = "Experiment/runs"
RESULTS = "Experiment/results"


def time_split(done: list[tuple[float, Path]]) -> dict:
    """Return the points' wall seconds and the shares spent training, evaluating and on everything else."""
    wall = sum(w for w, _ in done)
    train = evaluate = 0.0
    for _, path in done:
        phases = (records.read_record(path) or {}).get("phases", {})
        train += phases.get("train", 0.0)
        evaluate += phases.get("evaluate", 0.0)
    share = (lambda x: x / wall) if wall else (lambda x: 0.0)
    return {
        "points": len(done),
        "wall_s": wall,
        "train_s": train,
        "eval_s": evaluate,
        "train_share": share(train),
        "eval_share": share(evaluate),
        "other_share": share(max(wall - train - evaluate, 0.0)),
    }


def sweep(
    suites: list[Suite],
    variant: str,
    results: str | Path = RESULTS,
    runs_dir: str | Path = RUNS_DIR,
    timeout_s: float | None = None,
    out=sys.stdout,
    jobs: int | None = None,
    force: bool = False,
) -> dict[str, dict[str, int]]:
    """Run every point of `suites` not yet finished here; return {suite: {status: count}}."""
    from tqdm import tqdm

    if timeout_s is not None and not (math.isfinite(timeout_s) and timeout_s > 0):
        raise ConfigError(f"timeout={timeout_s!r} is invalid: give seconds per point > 0, or None for the suite's")
    results, runs_dir = repo_path(results), repo_path(runs_dir)
    points._STOPPING.clear()
    plan, devices = [], {}
    for suite in suites:
        want = (suite.env, str(suite.params.get("device", "auto")))
        if suite.kind == "notebook" and points.env_python(suite.env).exists() and want not in devices:
            devices[want] = points.device_of(*want)
        dev = devices.get(want) if suite.kind == "notebook" else points.device_of("main", "cpu")
        reason = points.skip_reason(suite, dev, force)
        if reason:
            print(f"skipped {suite.name}: {reason}", file=out)
        else:
            plan.append((suite, dev))
    for suite, _ in plan:  # a folder it cannot write (read-only): refused before any point runs or locks
        records.check_writable(results / suite.name, "--results")
    for suite, _ in plan:  # records the sweep cannot read (invalid, a newer schema): named, then run past
        for what in records.read_records(results / suite.name)[1] if (results / suite.name).is_dir() else ():
            print(f"skipped record {suite.name}/{what}", file=out)
    summary: dict[str, dict[str, int]] = {s.name: {} for s, _ in plan}
    walls: list[tuple[float, Path]] = []
    total = sum(len(expand(s, variant)) for s, _ in plan)
    t0 = time.perf_counter()
    with tqdm(total=total, desc=f"sweep {variant}", unit="run", file=out, dynamic_ncols=True) as bar:
        for suite, dev in plan:
            counts, spec, todo = summary[suite.name], suite.variants[variant], expand(suite, variant)
            n_jobs = min(jobs or spec.get("jobs", 1), max(1, len(todo)))
            threads = max(1, (os.cpu_count() or 1) // n_jobs) if n_jobs > 1 else None
            limit = timeout_of(suite, variant) if timeout_s is None else timeout_s
            pool = concurrent.futures.ThreadPoolExecutor(n_jobs)
            try:
                futures = {
                    pool.submit(points.run_point, suite, p, dev, results, runs_dir, limit, threads): p for p in todo
                }
                for future in concurrent.futures.as_completed(futures):
                    point, (status, wall, path) = futures[future], future.result()
                    counts[status] = counts.get(status, 0) + 1
                    if wall:
                        walls.append((wall, path))
                    if status not in ("finished", "already done"):
                        bar.write(f"{point.run_name}: {status} (its record: {path})", file=out)
                    bar.set_postfix_str(point.run_name[:60])
                    bar.update(1)
            except BaseException:  # Ctrl-C or SIGTERM: stop the running notebooks, record nothing for them
                points._STOPPING.set()
                pool.shutdown(wait=False, cancel_futures=True)
                for proc in list(points._LIVE):
                    points.kill_processes([points.psutil.Process(proc.pid)])
                raise
            pool.shutdown()
    for name, counts in summary.items():
        print(f"{name}: " + (", ".join(f"{n} {k}" for k, n in counts.items()) or "no points"), file=out)
    if walls:
        split = time_split(walls)
        print(
            f"wall time {time.perf_counter() - t0:.0f} s; in the {split['points']} points run "
            f"({split['wall_s']:.0f} s): training {100 * split['train_share']:.0f}%, evaluation "
            f"{100 * split['eval_share']:.0f}%, start-up, data, model and record "
            f"{100 * split['other_share']:.0f}%",
            file=out,
        )
    return summary


def main(argv: list[str] | None = None) -> None:
    """Command line: python -m helpers.study.sweep SUITE|all [--variant quick|full] [--jobs N] ..."""
    parser = argparse.ArgumentParser(prog="python -m helpers.study.sweep", description=__doc__.split("\n\n")[0])
    parser.add_argument("suite", help="a suite name in Experiment/suites, a path to a .toml file, or all")
    parser.add_argument("--variant", choices=VARIANTS, default="quick")
    parser.add_argument("--timeout", type=float, default=None, help="seconds per run, > 0 (default: the suite's)")
    parser.add_argument(
        "--jobs",
        type=int,
        default=None,
        help="points run at once, each on cpu_count / jobs threads (default: the suite's, else 1)",
    )
    parser.add_argument("--results", default=RESULTS, help="folder of the run records (relative to the repo root)")
    parser.add_argument("--runs-dir", default=RUNS_DIR, help="where executed notebooks and logs go")
    parser.add_argument("--suites-dir", default=SUITES_DIR, type=suites_folder)
    parser.add_argument(
        "--target",
        choices=TARGETS,
        default="nvidia",
        help="trainium: run the Nvidia-notebook suites through Trainium/baseline.ipynb "
        "(.venv-neuron where it exists, else .venv-xla)",
    )
    parser.add_argument(
        "--force", action="store_true", help="run suites that need fast bf16 on a device without it (slow: hours)"
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a run parameter over every point's own (repeatable; new run names): --set step_mode=cudagraphs",
    )
    parser.add_argument("--list", action="store_true", help="print the points and their run names; run nothing")
    parser.add_argument(
        "--plan",
        action="store_true",
        help="print per suite its points, the graphs they compile and estimated compile / train seconds and "
        "dollars (a model, sources named); run nothing",
    )
    parser.add_argument(
        "--instance",
        default=None,
        help="the instance --plan times and prices (default: "
        + ", ".join(f"{i} for {t}" for t, i in plan.DEFAULT_INSTANCE.items())
        + ")",
    )
    parser.add_argument(
        "--precompile",
        action="store_true",
        help="with --target trainium: fill the Neuron compile cache (neuron_parallel_compile, one short trial per "
        "distinct graph), then sweep and count the cache's hits",
    )
    args = parser.parse_args(argv)
    if args.jobs is not None and args.jobs < 1:
        parser.error(f"--jobs={args.jobs} is invalid: must be >= 1")
    if args.timeout is not None and not (math.isfinite(args.timeout) and args.timeout > 0):
        parser.error(
            f"--timeout={args.timeout:g} is invalid: give the seconds a point may take, > 0 "
            "(leave it out for the suite's own timeout_s)"
        )
    if args.precompile and args.target != "trainium":
        parser.error("--precompile fills the Neuron compile cache: it needs --target trainium")
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))  # unwinds into run_notebook
    try:
        suites = [
            with_overrides(retarget(s, args.target), args.set, args.variant)
            for s in (
                every_suite(args.suites_dir) if args.suite == "all" else [resolve_suite(args.suite, args.suites_dir)]
            )
        ]
    except ConfigError as err:  # the one suite asked for by name is broken (`all` skips a broken file)
        parser.error(str(err))
    if args.list:
        for suite in suites:
            found = expand(suite, args.variant)
            print(f"{suite.name} ({suite.kind}, {len(found)} points)")
            for point in found:
                print(f"  {point.run_name}")
        return
    if args.plan:
        command = " ".join(["python -m helpers.study.sweep", *(argv if argv is not None else sys.argv[1:])])
        print(plan.plan_text(suites, args.variant, args.target, args.instance, command))
        return
    state = precompile.precompile(suites, args.variant) if args.precompile else None
    try:
        sweep(suites, args.variant, args.results, args.runs_dir, args.timeout, jobs=args.jobs, force=args.force)
    except records.RecordWriteError as err:
        parser.error(str(err))
    if state is not None:
        precompile.cache_report(state, suites, args.variant, args.results)


def every_suite(suites_dir: str) -> list:
    """Return the suites `all` runs: every one but those marked on_demand (named, they still run)."""
    found = find_suites(suites_dir)
    for suite in (s for s in found if s.on_demand):
        print(
            f"sweep: {suite.name} is on demand, left out of `all` (run it by name: python -m helpers.study.sweep "
            f"{suite.name}); the report keeps its committed records",
            file=sys.stderr,
        )
    return [s for s in found if not s.on_demand]


if __name__ == "__main__":
    main()
