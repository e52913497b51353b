"""Fill the Neuron compile cache before a sweep (`--precompile`): one neuron_parallel_compile trial per new graph.

`neuron_parallel_compile <command>` runs a trial of the command with every graph a stub, then compiles the graphs
it met in parallel into the cache. After the sweep, `cache_report` counts the cache's hits and misses.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import psutil

from helpers.run import records
from helpers.run.args import RunArgs, build_args
from helpers.run.argv import to_argv
from helpers.run.neuron import neuron_env
from helpers.run.paths import REPO_ROOT, repo_path
from helpers.study.sweep import graphs
from helpers.study.sweep.plan import COMPILE_S_PER_GRAPH
from helpers.study.sweep.points import env_python, kill_processes
from helpers.study.sweep.suites import TARGETS, Point, Suite, expand

TOOL = "neuron_parallel_compile"
TRIAL_STEPS = 10  # "a few steps (eg. 10-15)": the neuron_parallel_compile page of the Neuron docs
TRIALS_DIR = "Experiment/runs/precompile"  # the trials' records: not results (their outputs are stubs)
DEFAULT_CACHE = "/var/tmp/neuron-compile-cache"  # neuronx-cc's, when neither --cache_dir nor the URL is set
# ours: graphs one neuron_parallel_compile call compiles at most; sized for a trn1.2xlarge (8 vCPU, 32 GiB),
# where one bert-base compile can take several GiB and the tool ran out of host memory (shared/NEURON.md)
MAX_GRAPHS_PER_TRIAL = 8
MAX_RETRIES = "1"  # NEURON_PARALLEL_COMPILE_MAX_RETRIES: "set ... =1 when precompiling on trn1.2xlarge"
TRIAL_START_S = 600.0  # a trial's own start, data and steps beyond its compiles: the tool, python, the model


@dataclass
class Trial:
    """One precompile trial: the point it stands for, the graphs it adds, and its command line."""

    suite: str
    point: str
    new_graphs: int
    command: list[str]
    env: dict[str, str]  # what neuron_parallel_compile itself reads: the point's cache, its retries

    @property
    def timeout_s(self) -> float:
        """Return the seconds the trial may take: twice the plan's cold compile of its new graphs, plus its start."""
        return TRIAL_START_S + 2 * COMPILE_S_PER_GRAPH * max(self.new_graphs, 1)


def trial_params(params: dict, run_name: str, suite: str, results: str | Path) -> dict:
    """Return the parameters of a point's trial: its own name and folder, no profile, few steps if static."""
    args = build_args(params)
    out = {
        **params,
        "run_name": f"{run_name}-precompile",
        "suite": suite,
        "results_path": str(results),
        "progress": False,
        "profile": False,
        "replace_record": True,
    }
    if args.task.padding == "static":  # one shape: a few steps and one padded evaluation batch show every graph
        steps = max(1, min(TRIAL_STEPS, graphs.optimizer_steps(args)))
        out.update(
            max_steps=steps,
            log_every=steps,
            eval_every=None,
            eval_subset=graphs.eval_batch(args) * args.train.num_devices,
        )
    return out


def precompile_command(python: str | Path, params: dict) -> list[str]:
    """Return the command that fills the Neuron cache with a trial of `params` (a pure function)."""
    return [TOOL, str(python), "Trainium/train.py", *to_argv(build_args(params))]


def trial_env(params: dict) -> dict[str, str]:
    """Return what neuron_parallel_compile reads of its own environment: the point's cache, one retry."""
    run = neuron_env(build_args(params))
    env = {k: run[k] for k in ("NEURON_CC_FLAGS", "NEURON_COMPILE_CACHE_URL") if k in run}
    return {**env, "NEURON_PARALLEL_COMPILE_MAX_RETRIES": MAX_RETRIES}


def cuts(items: list[list], seen: set, limit: int) -> list[tuple[int, list]]:
    """Return (end, keys it adds) of each prefix of `items` (graph-key lists) adding at most `limit` new keys."""
    out, have, new = [], set(seen), []
    for i, keys in enumerate(items):
        fresh = [k for k in dict.fromkeys(keys) if k not in have and k not in new]
        if new and len(new) + len(fresh) > limit:
            out.append((i, new))
            have.update(new)
            new = []
        new += fresh
    return out + [(len(items), new)] if new else out


def prefix_trials(args: RunArgs, lengths: dict, train_len: np.ndarray, seen: set) -> list[tuple[dict, list]]:
    """Return (overrides, new keys) of the trials before a dynamic-padding point's own, MAX_GRAPHS_PER_TRIAL each."""
    # the compiler's host memory is a trn1.2xlarge's limit (shared/NEURON.md): training steps in the loader's
    # order with one evaluation batch per split, then evaluation batches after one step
    ga, eb = args.train.gradient_accumulation_steps, graphs.eval_batch(args)
    rows = min(args.task.eval_subset or graphs.EVAL_ROWS, graphs.EVAL_ROWS)
    by_split = {}
    for split in ("validation", "test"):
        rows_len = np.minimum(lengths[split][:rows], args.task.max_length)
        maxima = graphs.chunk_maxima(rows_len, eb, drop_last=False)
        by_split[split] = graphs.round_up(maxima, args.task.pad_to_multiple_of)
    evals = [graphs.graph_keys(args, [], [v, t]) for v, t in zip(*by_split.values())]
    steps = [graphs.graph_keys(args, train_len[i : i + ga], []) for i in range(0, len(train_len), ga)]
    items = [steps[0] + evals[0], *steps[1:], *evals[1:]]
    found = cuts(items, seen, MAX_GRAPHS_PER_TRIAL)
    out = []
    for end, new in found[:-1]:  # the last prefix is the point's own trial
        n, eval_rows = (end, eb) if end <= len(steps) else (1, min((end - len(steps) + 1) * eb, rows))
        out.append(({"max_steps": n, "log_every": n, "eval_every": None, "eval_subset": eval_rows}, new))
    return out


def trials(suites: list[Suite], variant: str, lengths_for=None, results: str | Path = TRIALS_DIR) -> list[Trial]:
    """Return the trials that cover every distinct graph of `suites`' `variant`, in sweep order."""
    lengths_for = lengths_for or graphs.data_token_lengths
    seen, out = set(), []
    for suite in suites:
        if suite.kind != "notebook" or suite.notebook != TARGETS["trainium"][0]:
            continue
        for point in expand(suite, variant):
            args = build_args(point.params)
            lengths = None if args.task.padding == "static" else lengths_for(args.task.model_name, args.task.data_dir)
            keys = point_graphs(point, lengths_for)
            params = trial_params(point.params, point.run_name, suite.name, repo_path(results))
            python, env = env_python(suite.env), trial_env(params)
            if isinstance(lengths, dict) and keys:
                train_len = graphs.padded_lengths(args, lengths)[0]
                for i, (overrides, added) in enumerate(prefix_trials(args, lengths, train_len, seen), 1):
                    part = {**params, **overrides, "run_name": f"{params['run_name']}-part{i}"}
                    seen.update(added)
                    command = precompile_command(python, part)
                    out.append(Trial(suite.name, point.run_name, len(added), command, env))
            new = [k for k in dict.fromkeys(keys) if k not in seen]
            if keys and not new:
                continue  # every graph of this point is compiled by an earlier trial
            seen.update(new)
            out.append(Trial(suite.name, point.run_name, len(new), precompile_command(python, params), env))
    return out


def point_graphs(point: Point, lengths_for) -> list:
    """Return a point's graph keys; [] when its padded lengths cannot be counted here (it gets a trial anyway)."""
    args = build_args(point.params)
    lengths = None if args.task.padding == "static" else lengths_for(args.task.model_name, args.task.data_dir)
    padded = graphs.padded_lengths(args, lengths if isinstance(lengths, dict) else None)
    return graphs.graph_keys(args, *padded) if padded else []


def cache_dir(params: dict | None = None) -> str:
    """Return the Neuron compile cache a run uses: neuron_cache_dir, else NEURON_COMPILE_CACHE_URL, else the default."""
    return (params or {}).get("neuron_cache_dir") or os.environ.get("NEURON_COMPILE_CACHE_URL") or DEFAULT_CACHE


def cached_neffs(folder: str) -> int | None:
    """Return the compiled graphs (NEFFs) in a local Neuron cache (0 before the first); None for an S3 cache."""
    if "://" in folder:
        return None
    return sum(1 for _ in Path(folder).glob("*/MODULE_*/model.neff"))


def precompile(suites: list[Suite], variant: str, out=sys.stdout, tool: str | None = None) -> dict:
    """Run the trials where neuron_parallel_compile is installed, else print them; return what cache_report needs."""
    found = trials(suites, variant)
    cache = cache_dir(next((p.params for s in suites for p in expand(s, variant)), None))
    tool = tool or find_tool(found)
    print(
        f"precompile: {len(found)} trials cover {sum(t.new_graphs for t in found)} distinct graphs "
        f"(Neuron cache {cache})",
        file=out,
    )
    state = {"cache": cache, "started": records.now(), "ran": False}
    if tool is None:
        print(
            f"precompile: {TOOL} is not on PATH, so nothing was precompiled. It comes with torch-neuronx on a "
            "trn1 (activate the Neuron environment); here torch-xla runs on the CPU, where there is no Neuron "
            "cache to fill. On a trn1 these would run, one after another, before the sweep:",
            file=out,
        )
        for t in found:
            print("  " + shlex.join([f"{k}={v}" for k, v in t.env.items()] + t.command), file=out)
        return state
    state["before"] = cached_neffs(cache)
    for i, t in enumerate(found, 1):
        code = run_trial(tool, t)
        ended = f"killed after its limit of {t.timeout_s:.0f} s" if code is None else f"exit {code}"
        print(f"precompile {i}/{len(found)} {t.point}: {t.new_graphs} new graphs, {ended}", file=out)
    state.update(ran=True, precompiled=cached_neffs(cache), started=records.now())
    print(
        f"precompile: the cache holds {_count(state['precompiled'])} NEFFs ({_count(state['before'])} before)", file=out
    )
    return state


def find_tool(found: list[Trial]) -> str | None:
    """Return neuron_parallel_compile: on PATH, else beside a trial's python (None where neither has it)."""
    # beside: the Neuron environment's bin, which a sweep started as .venv-neuron/bin/python does not put on PATH
    beside = [Path(t.command[1]).parent / TOOL for t in found]
    return shutil.which(TOOL) or next((str(p) for p in beside if p.exists()), None)


def run_trial(tool: str, trial: Trial) -> int | None:
    """Run one trial in a session of its own; return its exit status, None when killed past its limit."""
    proc = subprocess.Popen(
        [tool, *trial.command[1:]], cwd=REPO_ROOT, env={**os.environ, **trial.env}, start_new_session=True
    )
    try:
        return proc.wait(timeout=trial.timeout_s)
    except subprocess.TimeoutExpired:
        return None
    finally:  # past its limit, or Ctrl-C: no compiler outlives the trial
        if proc.poll() is None:
            kill_processes([psutil.Process(proc.pid)])


def cache_report(state: dict, suites: list[Suite], variant: str, results: str | Path, out=sys.stdout) -> dict:
    """Print and return what the sweep's runs compiled and how much of it the cache served."""
    names = {p.run_name for s in suites for p in expand(s, variant)}
    recs = [
        r
        for s in suites
        if (repo_path(results) / s.name).is_dir()
        for r in records.read_records(repo_path(results) / s.name)[0]
        if r.get("run_name") in names and str(r.get("finished_at") or "") >= state["started"]
    ]
    compiled = sum((r.get("xla") or {}).get("graph_compilations") or 0 for r in recs)
    seconds = sum((r.get("xla") or {}).get("compile_time_s") or 0.0 for r in recs)
    after = cached_neffs(state["cache"])
    misses = None if after is None or state.get("precompiled") is None else after - state["precompiled"]
    report = {
        "runs": len(recs),
        "compilations": compiled,
        "compile_s": seconds,
        "misses": misses,
        "hits": None if misses is None else max(compiled - misses, 0),
    }
    if not state["ran"]:
        print(
            f"compile cache: no precompile ran; the sweep's {len(recs)} runs compiled {compiled} graphs in "
            f"{seconds:.0f} s",
            file=out,
        )
    elif misses is None:
        print(
            f"compile cache: {state['cache']} is not a local folder, so its hits cannot be counted; the sweep's "
            f"{len(recs)} runs compiled {compiled} graphs in {seconds:.0f} s",
            file=out,
        )
    else:  # torch-xla counts a graph the Neuron cache served as a compilation too, taking seconds, not minutes
        print(
            f"compile cache: the sweep's {len(recs)} runs compiled {compiled} graphs in {seconds:.0f} s; "
            f"{report['hits']} came from the cache (hits), {misses} were new to it (misses: graphs the trials "
            "did not meet)",
            file=out,
        )
    return report


def _count(value: int | None) -> str:
    """Return a NEFF count as text (an S3 cache is not counted)."""
    return "uncounted (S3)" if value is None else str(value)
