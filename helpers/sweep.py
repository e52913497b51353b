"""The sweep runner: every point of a suite (helpers.suites) not yet finished, each as a notebook.

    python -m helpers.sweep batch_scaling --variant quick     # one suite (a name or a .toml path)
    python -m helpers.sweep all --variant quick               # every suite, saying which it skipped
    python -m helpers.sweep all --variant full --target trainium   # the study on trn1 (.venv-xla)

A point already in the results with a final status (records.finished_run_names) is skipped, so a
killed sweep resumes where it stopped and failed or timed-out points are tried again. Each notebook
runs under papermill as a subprocess of the suite's environment, in its own process group, killed
whole at the timeout, then rendered to HTML beside; a point that leaves no record gets one here
(failed, timeout, or oom when the error says so). `token_stats` suites run in-process. A suite variant
with `jobs = N` (or `--jobs N`) runs N points at once, each limited to cpu_count / N threads.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from helpers import records
from helpers.config import REPO_ROOT, ConfigError, RunConfig, repo_path
from helpers.suites import (ENVS, SUITES_DIR, TARGETS, VARIANTS, Point, Suite, expand, find_suites,
                            resolve_suite, retarget)

RUNS_DIR = "Experiment/runs"
RESULTS = "Experiment/results/runs.jsonl"
DEFAULT_TIMEOUT_S = 1800
_LIVE: set[subprocess.Popen] = set()  # notebooks running now, killed together when the sweep is stopped
_STOPPING = threading.Event()  # set when the sweep is stopped: the points it kills are not recorded
def env_python(env: str) -> Path:
    """Return the Python of environment `env` (main = .venv, xla = .venv-xla)."""
    return REPO_ROOT / ENVS[env] / "bin" / "python"


def skip_reason(suite: Suite, force: bool = False) -> str | None:
    """Return why `suite` cannot run on this machine (None when it can); `force` overrides fast-bf16."""
    if suite.kind == "derived":
        return "nothing to run: computed by `python -m helpers.report` from the other suites' records"
    if suite.kind == "token_stats":
        return None
    if not env_python(suite.env).exists():
        target = " (create it with `make xla-venv`)" if suite.env == "xla" else " (`make venv`)"
        return f"its environment {ENVS[suite.env]} is missing{target}"
    if not (REPO_ROOT / suite.notebook).exists():
        return f"its notebook {suite.notebook} does not exist yet"
    if not (env_python(suite.env).parent / "papermill").exists():
        return f"papermill is not installed in {ENVS[suite.env]}"
    if suite.requires == "fast-bf16" and not force and not _bf16_fast(suite.env):
        return ("it trains in bf16 modes, and this machine's CPU has no fast bf16 (no AMX / avx512_bf16: "
                "bf16 runs ~20x slower than fp32 here, hours for this suite) and no GPU; run it on an AMX "
                "CPU, a GPU or trn1, or force it with `python -m helpers.sweep SUITE --force`")
    if suite.requires == "neuron" and not _has_module(suite.env, "torch_neuronx"):
        return (f"it needs torch-neuronx (a trn1 instance with the Neuron SDK) and {ENVS[suite.env]} has "
                "none; it is not faked on the CPU, nothing was recorded")
    return None


def _has_module(env: str, module: str) -> bool:
    code = f"import importlib.util, sys; sys.exit(importlib.util.find_spec({module!r}) is None)"
    return subprocess.run([str(env_python(env)), "-c", code], capture_output=True).returncode == 0


def _bf16_fast(env: str) -> bool:
    """Return whether the device `env` would train on (CUDA, XLA, else this CPU) has fast bf16."""
    if env == "xla":
        return True  # trn1 computes in bf16; XLA on the CPU is a functional check, not a timing
    from helpers.device import resolve_device

    return resolve_device("auto").bf16_fast


def _count(results: Path, name: str) -> int:
    return sum(r.get("run_name") == name for r in records.read_records(results)[0])


def record_failure(results: Path, params: dict, status: str, error: str, **extra) -> dict:
    """Append the record of a point that ended without writing its own; return it."""
    rec = records.new_record(params, status=status, error=error, **extra)
    rec.pop("libraries")  # the runner's, not those of the environment the point ran in
    rec["finished_at"] = records.now()
    records.append_record(results, rec)
    return rec


def _kill_tree(proc: subprocess.Popen) -> None:
    """Kill papermill, its kernel (jupyter starts it in its own session) and anything they started."""
    import psutil

    try:
        children = psutil.Process(proc.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        children = []
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    for child in children:
        try:
            child.kill()
        except psutil.NoSuchProcess:
            pass
    proc.wait()


def papermill_command(suite: Suite, params: dict, out_path: Path) -> list[str]:
    """Return the papermill command line for one point: `-p NAME VALUE` per parameter."""
    cmd = [str(env_python(suite.env).parent / "papermill"), str(REPO_ROOT / suite.notebook), str(out_path),
           "--kernel", "python3", "--cwd", str(REPO_ROOT)]
    for name, value in params.items():
        if isinstance(value, (dict, list)):
            raise ConfigError(f"{name}={value!r}: suites pass scalar parameters only")
        cmd += ["-p", name, "None" if value is None else str(value)]
    return cmd


def run_notebook(suite: Suite, params: dict, results: Path, runs_dir: Path, timeout_s: float,
                 threads: int | None = None) -> str:
    """Run one point's notebook (on `threads` CPU threads if given); record a failure it left unrecorded.

    Return the point's status.
    """
    name = params["run_name"]
    out = runs_dir / suite.name / f"{name}.ipynb"
    out.parent.mkdir(parents=True, exist_ok=True)
    log = out.with_suffix(".log")
    before = _count(results, name)
    env = {**os.environ, "TOKENIZERS_PARALLELISM": "false", "PYTHONUNBUFFERED": "1"}
    if threads:
        env["OMP_NUM_THREADS"] = str(threads)  # torch's intra-op pool; the record keeps torch_threads
    with open(log, "wb") as log_file:
        proc = subprocess.Popen(papermill_command(suite, params, out), cwd=REPO_ROOT, env=env,
                                stdout=log_file, stderr=subprocess.STDOUT, start_new_session=True)
        _LIVE.add(proc)
        try:
            proc.wait(timeout=timeout_s)
            timed_out = False
        except subprocess.TimeoutExpired:
            _kill_tree(proc)
            timed_out = True
        except BaseException:  # Ctrl-C or SIGTERM: the notebook is in its own session, stop it too
            _kill_tree(proc)
            raise
        finally:
            _LIVE.discard(proc)
    if _STOPPING.is_set():
        raise KeyboardInterrupt(f"{name}: stopped with the sweep")
    render_html(out, f"python -m helpers.sweep {suite.name}")
    mine = [r for r in records.read_records(results)[0] if r.get("run_name") == name][before:]
    if mine:
        return mine[-1].get("status", "finished")
    tail = log.read_text(errors="replace")[-3000:]
    if timed_out:
        status, error = "timeout", f"killed after the {timeout_s:g} s timeout\n{tail}"
    else:
        died = f"papermill exited {proc.returncode}" + (" (killed by a signal)" if proc.returncode < 0 else "")
        status, error = records.failure_status(tail), f"{died} without a record\n{tail}"
    record_failure(results, params, status, error,
                   runner={"notebook": suite.notebook, "env": suite.env, "returncode": proc.returncode,
                           "output": str(out), "log": str(log)})
    return status


def render_html(notebook: Path, command: str) -> None:
    """Put a first cell naming the command into the executed notebook and render it beside as HTML."""
    import nbformat
    from nbconvert import HTMLExporter

    if not notebook.exists():
        return
    try:
        nb = nbformat.read(notebook, as_version=4)
    except Exception:  # noqa: BLE001 - a notebook cut short by a kill is not worth failing the sweep
        return
    line = f"Written by `{command}` (papermill run of a suite point); regenerate, do not edit."
    nb.cells.insert(0, nbformat.v4.new_markdown_cell(line))
    nbformat.write(nb, notebook)
    html, _ = HTMLExporter().from_notebook_node(nb)
    notebook.with_suffix(".html").write_text(f"<!-- {line} -->\n{html}")


def run_token_stats(params: dict, results: Path) -> str:
    """Record the token-length statistics of the training split (no training); return the status."""
    from helpers import data, device, models, tokens

    cfg = RunConfig.from_mapping(params).validate()
    ds, info = data.load_emotion(cfg.data_dir, cfg.train_subset, cfg.eval_subset, cfg.shuffle_subset,
                                 cfg.seed, cfg.drop_bad_rows)
    t0 = time.perf_counter()
    lengths = tokens.token_lengths(ds["train"]["text"], models.load_tokenizer(cfg.model_name))
    info["tokenize_s"] = time.perf_counter() - t0
    stats = tokens.length_stats(lengths)
    # tokenization runs on the host CPU whatever the accelerator: that is the record's device
    rec = records.new_record(cfg.to_dict(), status="finished", data=info, model={"name": cfg.model_name},
                             device={"type": "cpu", "name": device.cpu_name()},
                             token_stats={"split": "train", **stats})
    rec["finished_at"] = records.now()
    records.append_record(results, rec)
    return "finished"


def run_point(suite: Suite, point: Point, results: Path, runs_dir: Path, timeout_s: float,
              threads: int | None = None) -> str:
    """Run one point (a notebook, or the token statistics in-process); return its final status."""
    params = {**point.params, "run_name": point.run_name, "suite": suite.name,
              "results_path": str(results)}
    try:
        RunConfig.from_mapping(params).validate()  # the one place parameters are checked
        if suite.kind == "token_stats":
            return run_token_stats(params, results)
        return run_notebook(suite, params, results, runs_dir, timeout_s, threads)
    except Exception as err:  # noqa: BLE001 - a bad point is recorded and the sweep goes on
        text = f"{type(err).__name__}: {err}"
        status = records.failure_status(text)
        record_failure(results, params, status, text)
        return status


def sweep(suites: list[Suite], variant: str, results: str | Path = RESULTS, runs_dir: str | Path = RUNS_DIR,
          timeout_s: float | None = None, out=sys.stdout, jobs: int | None = None,
          force: bool = False) -> dict[str, dict[str, int]]:
    """Run every point of `suites` not yet finished; return {suite: {status or 'skipped': count}}.

    `jobs` overrides each suite variant's `jobs` (points run at once); `force` runs `fast-bf16` suites
    on a CPU without fast bf16.
    """
    from tqdm import tqdm

    results, runs_dir = repo_path(results), repo_path(runs_dir)
    _STOPPING.clear()
    plan = []
    for suite in suites:
        reason = skip_reason(suite, force)
        if reason:
            print(f"skipped {suite.name}: {reason}", file=out)
        else:
            plan.append(suite)
    done = records.finished_run_names(results)
    summary: dict[str, dict[str, int]] = {s.name: {} for s in plan}
    total = sum(len(expand(s, variant)) for s in plan)
    with tqdm(total=total, desc=f"sweep {variant}", unit="run", file=out, dynamic_ncols=True) as bar:
        for suite in plan:
            counts, spec, points = summary[suite.name], suite.variants[variant], expand(suite, variant)
            todo = [p for p in points if p.run_name not in done]
            if len(todo) < len(points):
                counts["already done"] = len(points) - len(todo)
                bar.update(counts["already done"])
            n_jobs = min(jobs or spec.get("jobs", 1), max(1, len(todo)))
            threads = max(1, (os.cpu_count() or 1) // n_jobs) if n_jobs > 1 else None
            limit = timeout_s or spec.get("timeout_s", DEFAULT_TIMEOUT_S)
            pool = concurrent.futures.ThreadPoolExecutor(n_jobs)
            try:
                futures = {pool.submit(run_point, suite, p, results, runs_dir, limit, threads): p for p in todo}
                for future in concurrent.futures.as_completed(futures):
                    point, status = futures[future], future.result()
                    counts[status] = counts.get(status, 0) + 1
                    if status != "finished":
                        bar.write(f"{point.run_name}: {status} (see its record in {results})", file=out)
                    bar.set_postfix_str(point.run_name[:60])
                    bar.update(1)
            except BaseException:  # Ctrl-C or SIGTERM: stop the running notebooks, record nothing for them
                _STOPPING.set()
                pool.shutdown(wait=False, cancel_futures=True)
                for proc in list(_LIVE):
                    _kill_tree(proc)
                raise
            pool.shutdown()
    for name, counts in summary.items():
        print(f"{name}: " + (", ".join(f"{n} {k}" for k, n in counts.items()) or "no points"), file=out)
    return summary


def main(argv: list[str] | None = None) -> None:
    """Command line: python -m helpers.sweep SUITE|all [--variant quick|full] [--timeout S] [--results P]."""
    parser = argparse.ArgumentParser(prog="python -m helpers.sweep", description=__doc__.split("\n\n")[0])
    parser.add_argument("suite", help="a suite name in Experiment/suites, a path to a .toml file, or all")
    parser.add_argument("--variant", choices=VARIANTS, default="quick")
    parser.add_argument("--timeout", type=float, default=None, help="seconds per run (default: the suite's)")
    parser.add_argument("--jobs", type=int, default=None,
                        help="points run at once, each on cpu_count / jobs threads (default: the suite's, else 1)")
    parser.add_argument("--results", default=RESULTS, help="JSONL run records (relative to the repo root)")
    parser.add_argument("--runs-dir", default=RUNS_DIR, help="where executed notebooks and logs go")
    parser.add_argument("--suites-dir", default=SUITES_DIR)
    parser.add_argument("--target", choices=TARGETS, default="nvidia",
                        help="trainium: run the Nvidia-notebook suites through Trainium/baseline.ipynb (.venv-xla)")
    parser.add_argument("--force", action="store_true",
                        help="run suites that need fast bf16 on a CPU without it (slow: hours)")
    parser.add_argument("--list", action="store_true", help="print the points and their run names; run nothing")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))  # unwinds into run_notebook
    suites = [retarget(s, args.target) for s in (find_suites(args.suites_dir) if args.suite == "all"
                                                   else [resolve_suite(args.suite, args.suites_dir)])]
    if args.list:
        for suite in suites:
            points = expand(suite, args.variant)
            print(f"{suite.name} ({suite.kind}, {len(points)} points): {skip_reason(suite) or 'runnable'}")
            for point in points:
                print(f"  {point.run_name}")
        return
    if args.jobs is not None and args.jobs < 1:
        parser.error(f"--jobs={args.jobs} is invalid: must be >= 1")
    sweep(suites, args.variant, args.results, args.runs_dir, args.timeout, jobs=args.jobs, force=args.force)


if __name__ == "__main__":
    main()
