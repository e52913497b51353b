"""The sweep runner: every point of the chosen suites not yet done on this machine's device.

    python -m study.sweep SUITE|FILE.toml|all [--variant quick|full] [--set NAME=VALUE ...] [--list | --plan]

It exits 1 when a point it ran ended failed, oom or timeout (their records say why), 2 on a refused command.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import math
import os
import signal
import sys
from collections import Counter
from types import SimpleNamespace

import psutil

from helpers import arguments, record
from study.sweep import plan, points, precompile
from study.sweep.suites import (
    SUITES_DIR,
    TARGETS,
    VARIANTS,
    Suite,
    expand,
    find_suites,
    platform,
    resolve_suite,
    retarget,
    suites_folder,
    timeout_of,
    with_overrides,
)

RUNS_DIR = "Experiment/runs"
FAILED = ("failed", "oom", "timeout")  # a point that ended so makes the sweep's exit status 1


def device_for(suite: Suite, variant: str, asked: dict) -> dict | None:
    """Return the device section a suite's points would record here (None where its environment is missing)."""
    if suite.kind == "token_stats":  # in-process, on the host CPU
        from helpers import devices

        return devices.cpu_device().section()
    if suite.kind != "notebook" or not points.env_python(suite.env).exists():
        return None
    trainium = platform(suite) is arguments.TrainiumArgs
    want = (suite.env, "xla" if trainium else str(expand(suite, variant)[0].params.get("device", "auto")))
    if want not in asked:
        asked[want] = points.device_of(*want)
    return asked[want]


def check_device(suite: Suite, variant: str, dev: dict) -> None:
    """Refuse a point this device cannot run (CUDA graphs off CUDA, a compiled fp16 step) before any point runs."""
    from helpers import precision

    for point in expand(suite, variant):
        args = arguments.build(point.params, platform(suite))
        mode, flags = getattr(args, "bf16_mode", "autocast"), getattr(args, "extra_cc_flags", "")
        used = precision.choose(args.precision, SimpleNamespace(**dev), mode, flags).used
        try:  # the model's position limit is the run's own check: its config may be on the hub
            args.check_device(dev["type"], used, math.inf)
        except arguments.ConfigError as err:
            raise arguments.ConfigError(f"{suite.name} [{variant}] {point.run_name} on {dev['name']}: {err}") from None


def sweep(
    suites: list[Suite],
    variant: str,
    results: str = record.RESULTS_DIR,
    runs_dir: str = RUNS_DIR,
    timeout_s: float | None = None,
    jobs: int | None = None,
    force: bool = False,
    out=None,
) -> dict[str, Counter]:
    """Run every point of `suites` not yet done here; return {suite: Counter(status)}."""
    out = out or sys.stdout
    results, runs_dir = record.repo_path(results), record.repo_path(runs_dir)
    points._STOPPING.clear()
    todo, asked = [], {}
    for suite in suites:
        dev = device_for(suite, variant, asked)
        reason = points.skip_reason(suite, dev, force)
        if reason:
            print(f"skipped {suite.name}: {reason}", file=out)
            continue
        if suite.kind == "notebook":
            check_device(suite, variant, dev)
        todo.append((suite, dev))
    for suite, _ in todo:  # a folder it cannot write: refused before any point runs or locks
        record.check_folder(results / suite.name, "--results")
        for why in record.read(results / suite.name)[1]:  # named, then run past (never replaced)
            print(f"skipped record {suite.name}/{why}", file=out)
    summary = {s.name: Counter() for s, _ in todo}
    total, ended = sum(len(expand(s, variant)) for s, _ in todo), 0
    for suite, dev in todo:
        found = expand(suite, variant)
        n_jobs = min(jobs or suite.variants[variant].get("jobs", 1), len(found))
        threads = max(1, (os.cpu_count() or 1) // n_jobs) if n_jobs > 1 else None
        limit = timeout_of(suite, variant) if timeout_s is None else timeout_s
        pool = concurrent.futures.ThreadPoolExecutor(n_jobs)
        try:
            futures = {
                pool.submit(points.run_point, suite, p, dev, results, runs_dir, limit, threads): p for p in found
            }
            for future in concurrent.futures.as_completed(futures):
                status, wall = future.result()
                summary[suite.name][status] += 1
                ended += 1
                took = f" ({wall:.0f} s)" if wall else ""
                print(f"[{ended}/{total}] {futures[future].run_name}: {status}{took}", file=out, flush=True)
        except BaseException:  # Ctrl-C or SIGTERM: stop the running notebooks, record nothing for them
            points._STOPPING.set()
            pool.shutdown(wait=False, cancel_futures=True)
            for proc in list(points._LIVE):
                with contextlib.suppress(psutil.Error):
                    points.kill_processes([psutil.Process(proc.pid)])
            raise
        pool.shutdown()
    for name, counts in summary.items():
        print(f"{name}: " + (", ".join(f"{n} {k}" for k, n in counts.items()) or "no points"), file=out)
    return summary


def every_suite(suites_dir: str) -> list[Suite]:
    """Return the suites `all` runs: every one but those marked on_demand (named, they still run)."""
    found = find_suites(suites_dir)
    for suite in (s for s in found if s.on_demand):
        print(f"sweep: {suite.name} is on demand, left out of `all` (run it by name)", file=sys.stderr)
    return [s for s in found if not s.on_demand]


def main(argv: list[str] | None = None) -> None:
    """Command line: python -m study.sweep SUITE|all [--variant quick|full] [--jobs N] ..."""
    parser = argparse.ArgumentParser(prog="python -m study.sweep", description=__doc__.split("\n\n")[0])
    parser.add_argument("suite", help="a suite name in Experiment/suites, a path to a .toml file, or all")
    parser.add_argument("--variant", choices=VARIANTS, default="quick")
    parser.add_argument("--timeout", type=float, help="seconds per point, > 0 (default: the suite's timeout_s)")
    parser.add_argument("--jobs", type=int, help="points at once, >= 1, each on cpu_count / jobs threads")
    parser.add_argument("--results", default=record.RESULTS_DIR, help="folder of the run records")
    parser.add_argument("--runs-dir", default=RUNS_DIR, help="where executed notebooks and their logs go")
    parser.add_argument("--suites-dir", default=SUITES_DIR, type=suites_folder)
    parser.add_argument("--target", choices=TARGETS, default="nvidia", help="trainium: through Trainium/baseline.ipynb")
    parser.add_argument("--force", action="store_true", help="run suites that need fast bf16 on a device without it")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a run parameter over every point (repeatable); the points keep their names, +NAME=VALUE appended",
    )
    parser.add_argument("--list", action="store_true", help="print the points and their run names; run nothing")
    parser.add_argument("--plan", action="store_true", help="print each point's time limit and the price it bounds")
    parser.add_argument("--instance", help=f"the instance --plan prices (default: {plan.DEFAULT_INSTANCE})")
    parser.add_argument("--precompile", action="store_true", help="trainium: fill the Neuron compile cache first")
    args = parser.parse_args(argv)
    if args.timeout is not None and not (math.isfinite(args.timeout) and args.timeout > 0):
        parser.error(f"--timeout={args.timeout:g} is invalid: give the seconds a point may take, > 0")
    if args.jobs is not None and args.jobs < 1:
        parser.error(f"--jobs={args.jobs} is invalid: give the points to run at once, >= 1")
    if args.precompile and args.target != "trainium":
        parser.error("--precompile fills the Neuron compile cache: it needs --target trainium")
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))  # unwinds into run_notebook
    try:
        found = every_suite(args.suites_dir) if args.suite == "all" else [resolve_suite(args.suite, args.suites_dir)]
        suites = [with_overrides(retarget(s, args.target), args.set, args.variant) for s in found]
    except arguments.ConfigError as err:
        parser.error(str(err))
    if args.list:
        for suite in suites:
            listed = expand(suite, args.variant)
            print(f"{suite.name} ({suite.kind}, {len(listed)} points)", *(f"  {p.run_name}" for p in listed), sep="\n")
        return
    if args.plan:
        command = " ".join(["python -m study.sweep", *(argv if argv is not None else sys.argv[1:])])
        return print(plan.plan_text(suites, args.variant, args.target, args.instance, command))
    if args.precompile:
        precompile.precompile(suites, args.variant)
    try:
        summary = sweep(suites, args.variant, args.results, args.runs_dir, args.timeout, args.jobs, args.force)
    except (arguments.ConfigError, record.RecordError) as err:
        parser.error(str(err))
    failed = {name: sum(c[s] for s in FAILED) for name, c in summary.items() if any(c[s] for s in FAILED)}
    if failed:
        raise SystemExit(f"sweep: points failed ({', '.join(f'{n} in {s}' for s, n in failed.items())}): see records")
