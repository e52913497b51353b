"""Fill the Neuron compile cache before a sweep (`--precompile`): one short trial per distinct compile configuration.

`neuron_parallel_compile <command>` runs the command with every graph a stub, then compiles the graphs it met in
parallel into the cache. A trial is the point's own `Trainium/train.py` run cut to a few steps: with static padding
it meets every shape the point trains on; with dynamic padding the lengths it did not meet compile during the run.
Off a trn1 the tool is missing: the trials are printed and nothing runs.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from helpers import arguments, record
from study.sweep.points import env_python, kill_processes
from study.sweep.suites import Suite, expand, platform

TOOL = "neuron_parallel_compile"
TRIAL_STEPS = 10  # "a few steps (eg. 10-15)": the neuron_parallel_compile page of the Neuron docs
TRIAL_TIMEOUT_S = 3600.0  # ours: a bert-base graph takes neuronx-cc minutes; a trial compiles a handful
TRIALS_DIR = "Experiment/runs/precompile"  # the trials' records: not results (their outputs are stubs)
MAX_RETRIES = "1"  # NEURON_PARALLEL_COMPILE_MAX_RETRIES: "set ... =1 when precompiling on trn1.2xlarge"
# parameters that change no graph: values the graphs take as data, how long a run goes, what it reports
NOT_COMPILED = {
    "seed",
    "lr",
    "weight_decay",
    "warmup_ratio",
    "epochs",
    "max_steps",
    "train_subset",
    "eval_subset",
    "shuffle_subset",
    "drop_bad_rows",
    "data_dir",
    "log_every",
    "timing_warmup_steps",
    "eval_every",
    "curve_rows",
    "stop_at_accuracy",
    "diverge_factor",
    "progress",
    "profile",
    "profile_steps",
    "profile_dir",
    "save_dir",
    "precompile",
}


@dataclass
class Trial:
    """One precompile trial: the point it stands for, its command line and what the tool reads of its environment."""

    suite: str
    point: str
    command: list[str]
    env: dict[str, str] = field(default_factory=dict)
    timeout_s: float = TRIAL_TIMEOUT_S


def trial_command(python: str | Path, params: dict, run_name: str, suite: str) -> list[str]:
    """Return the neuron_parallel_compile command of a point's trial: its own flags, a few steps, its own name."""
    steps = min(TRIAL_STEPS, params.get("max_steps") or TRIAL_STEPS)
    trial = {**params, "run_name": f"{run_name}-precompile", "suite": suite, "results_path": TRIALS_DIR}
    trial |= {"progress": False, "max_steps": steps, "log_every": steps}
    return [TOOL, str(python), "Trainium/train.py", *arguments.to_cli(arguments.build(trial, arguments.TrainiumArgs))]


def trials(suites: list[Suite], variant: str) -> list[Trial]:
    """Return one trial per distinct compile configuration of the Trainium points of `suites`' `variant`."""
    seen, out = set(), []
    for suite in suites:
        if suite.kind != "notebook" or platform(suite) is not arguments.TrainiumArgs:
            continue
        for point in expand(suite, variant):
            key = json.dumps({k: v for k, v in point.params.items() if k not in NOT_COMPILED}, sort_keys=True)
            if key in seen:
                continue
            seen.add(key)
            env = {"NEURON_PARALLEL_COMPILE_MAX_RETRIES": MAX_RETRIES}
            if point.params.get("neuron_cache_dir"):
                env["NEURON_COMPILE_CACHE_URL"] = point.params["neuron_cache_dir"]
            command = trial_command(env_python(suite.env), point.params, point.run_name, suite.name)
            out.append(Trial(suite.name, point.run_name, command, env))
    return out


def find_tool(found: list[Trial]) -> str | None:
    """Return neuron_parallel_compile: on PATH, else beside a trial's python (None where neither has it)."""
    # beside: the Neuron environment's bin, which a sweep started as .venv-neuron/bin/python does not put on PATH
    beside = [Path(t.command[1]).parent / TOOL for t in found]
    return shutil.which(TOOL) or next((str(p) for p in beside if p.exists()), None)


def run_trial(tool: str, trial: Trial) -> int | None:
    """Run one trial in a session of its own; return its exit status, None when killed past its limit."""
    proc = subprocess.Popen(
        [tool, *trial.command[1:]], cwd=record.REPO_ROOT, env={**os.environ, **trial.env}, start_new_session=True
    )
    try:
        return proc.wait(timeout=trial.timeout_s)
    except subprocess.TimeoutExpired:
        return None
    finally:  # past its limit, or Ctrl-C: no compiler outlives the trial
        if proc.poll() is None:
            kill_processes([psutil.Process(proc.pid)])


def precompile(suites: list[Suite], variant: str, out=sys.stdout) -> None:
    """Run the trials where neuron_parallel_compile is installed, else print what would run."""
    found = trials(suites, variant)
    tool = find_tool(found)
    print(f"precompile: {len(found)} trials, one per distinct compile configuration", file=out)
    for i, trial in enumerate(found, 1):
        if tool is None:
            print("  " + shlex.join([f"{k}={v}" for k, v in trial.env.items()] + trial.command), file=out)
            continue
        code = run_trial(tool, trial)
        ended = f"killed after its limit of {trial.timeout_s:.0f} s" if code is None else f"exit {code}"
        print(f"precompile {i}/{len(found)} {trial.point}: {ended}", file=out, flush=True)
    if tool is None and found:
        print(f"precompile: {TOOL} is not here (it comes with torch-neuronx on a trn1): nothing was run", file=out)
