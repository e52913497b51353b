"""One point of a suite: its notebook run under papermill (token statistics in-process), locked, resumed, recorded.

A point is done when one of its records (`record.paths_of` its first file) has a status in `record.DONE`. A try that
wrote no record (killed at its timeout, a kernel that died) gets a failure record from the sweep, beside the others:
nothing is ever replaced, the report keeps the latest finished one.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import threading
import time
from pathlib import Path

import psutil
import yaml
from filelock import FileLock, Timeout

from helpers import arguments, record
from study.sweep.suites import ENVS, Point, Suite, platform

POINT_TAG = "ACCELBENCH_POINT"  # in the environment of every process of a point (the kernel inherits it)
_LIVE: set[subprocess.Popen] = set()  # notebooks running now, killed together when the sweep is stopped
_STOPPING = threading.Event()  # set when the sweep is stopped: the points it kills are not recorded


def env_python(env: str) -> Path:
    """Return the Python of environment `env` (main = .venv, xla = .venv-xla, neuron = .venv-neuron)."""
    return record.REPO_ROOT / ENVS[env][0] / "bin" / "python"


def device_of(env: str, requested: str = "auto") -> dict:
    """Return the device section a run in `env` would record (python -m helpers.devices, in that environment)."""
    out = subprocess.run(
        [str(env_python(env)), "-m", "helpers.devices", requested],
        capture_output=True,
        text=True,
        cwd=record.REPO_ROOT,
        timeout=300,
    )
    if out.returncode != 0:
        raise RuntimeError(f"{ENVS[env][0]} cannot name its device: {out.stderr.strip()[-500:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def skip_reason(suite: Suite, dev: dict | None, force: bool = False) -> str | None:
    """Return why `suite` cannot run on this machine (None when it can); `force` overrides fast-bf16."""
    if suite.kind == "derived":
        return "nothing to run: computed by `python -m study.report` from the other suites' records"
    if suite.kind == "token_stats":
        return None
    if not env_python(suite.env).exists():
        return (
            f"its environment {ENVS[suite.env][0]} is missing (`make {'xla-venv' if suite.env == 'xla' else 'venv'}`)"
        )
    if not record.repo_path(suite.notebook).exists():
        return f"its notebook {suite.notebook} does not exist"
    if suite.requires == "neuron" and not (dev or {}).get("neuron"):
        return f"it needs NeuronCores (a trn1 with torch-neuronx), {ENVS[suite.env][0]} has none: nothing recorded"
    if suite.requires == "fast-bf16" and not force and not (dev or {}).get("bf16_fast"):
        return (
            "it trains in bf16, and this device has no fast bf16 (a CPU without AMX / avx512_bf16 emulates it, "
            "hours for this suite); run it on an AMX CPU, a GPU or trn1, or force it with --force"
        )
    return None


def point_params(suite: Suite, point: Point, results: Path) -> dict:
    """Return the parameters the point's notebook gets."""
    return {**point.params, "run_name": point.run_name, "suite": suite.name, "results_path": str(results)}


def papermill_command(suite: Suite, params: dict, out_path: Path) -> list[str]:
    """Return the papermill command line for one point: its parameters as YAML (types kept), its env's kernel."""
    return [
        str(env_python(suite.env).parent / "papermill"),
        str(record.repo_path(suite.notebook)),
        str(out_path),
        "--kernel",
        ENVS[suite.env][1],
        "--cwd",
        str(record.REPO_ROOT),
        "--log-output",
        # PyYAML writes 2e-05 as 2.0e-05, which its loader (papermill's) reads back as a float
        "--parameters_yaml",
        yaml.safe_dump(params, default_flow_style=True).strip(),
    ]


def tagged(tag: str) -> list[psutil.Process]:
    """Return the live processes whose environment carries `POINT_TAG=tag` (a point's notebook, kernel ...)."""
    found = []
    for proc in psutil.process_iter():
        try:
            if proc.pid != os.getpid() and proc.environ().get(POINT_TAG) == tag:
                found.append(proc)
        except (psutil.Error, OSError):
            continue
    return found


def kill_processes(procs: list[psutil.Process]) -> None:
    """Kill `procs` and their children, and wait for them."""
    everything = set(procs)
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            everything |= set(proc.children(recursive=True))
    for proc in everything:
        with contextlib.suppress(psutil.Error):
            proc.kill()
    psutil.wait_procs(list(everything), timeout=10)


@contextlib.contextmanager
def point_lock(base: Path):
    """Hold the point's lock (yield True), or yield False when a live sweep holds it."""
    base.parent.mkdir(parents=True, exist_ok=True)
    # flock, released by the kernel when its process dies: no soft fallback, whose file would outlive a killed sweep
    lock = FileLock(base.parent / f".{base.name}.lock", timeout=0, fallback_to_soft=False)
    try:
        lock.acquire()
    except Timeout:
        yield False
        return
    try:
        yield True
    finally:
        lock.release()


def status_of(path: Path) -> str | None:
    """Return the status of the record in `path`, None when it holds none this code reads."""
    found, _ = record.read(path)
    return found[0]["status"] if found else None


def run_notebook(suite: Suite, params: dict, tag: str, runs_dir: Path, timeout_s: float, threads: int | None):
    """Run one point's notebook; return (papermill's exit status, whether it timed out, its log file)."""
    out = runs_dir / suite.name / f"{params['run_name']}.ipynb"
    out.parent.mkdir(parents=True, exist_ok=True)
    log = out.with_suffix(".log")
    env = {**os.environ, "TOKENIZERS_PARALLELISM": "false", "PYTHONUNBUFFERED": "1", POINT_TAG: tag}
    if threads:
        env["OMP_NUM_THREADS"] = str(threads)  # torch's intra-op pool; the record keeps torch_threads
    with open(log, "wb") as log_file:
        proc = subprocess.Popen(
            papermill_command(suite, params, out),
            cwd=record.REPO_ROOT,
            env=env,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        _LIVE.add(proc)
        try:
            proc.wait(timeout=timeout_s)
            timed_out = False
        except subprocess.TimeoutExpired:
            timed_out = True
        except BaseException:  # Ctrl-C or SIGTERM: the notebook is in its own session, stop it too
            kill_processes([psutil.Process(proc.pid)] + tagged(tag))
            raise
        finally:
            _LIVE.discard(proc)
        kill_processes(tagged(tag))  # the kernel outlives papermill when papermill is killed
        proc.wait()
    if _STOPPING.is_set():
        raise KeyboardInterrupt(f"{params['run_name']}: stopped with the sweep")
    return proc.returncode, timed_out, log


def record_failure(base: Path, suite: Suite, params: dict, status: str, error: str, dev: dict, **runner) -> Path:
    """Write the record of a point that ended without writing its own; return its file."""
    try:
        args = arguments.build(params, platform(suite))
        flat, given = args.flat(), args.given
    except arguments.ConfigError:  # the failure is the parameters themselves: kept as given
        flat, given = params, params
    rec = record.start(params["run_name"], flat, given, {**dev, "key": base.stem.rsplit("@", 1)[-1]}, suite.name)
    rec.libraries = {}  # the sweep's, not those of the environment the point ran in
    rec.status, rec.error, rec.finished_at = status, error, record.now()
    rec.runner = record.Runner(**runner) if runner else None
    return record.write(rec, base)


def run_token_stats(params: dict, base: Path, dev: dict) -> None:
    """Record the token-length statistics of the training split (no training)."""
    from helpers import data, models, tokens

    args = arguments.build(params, arguments.NvidiaArgs)
    # tokenization runs on the host CPU whatever the accelerator: that is the record's device
    rec = record.start(args.name(), args.flat(), args.given, dev, args.suite)
    ds = data.load(rec, args)
    t0 = time.perf_counter()
    lengths = tokens.token_lengths(ds["train"]["text"], models.tokenizer(args.model_name))
    rec.data.tokenize_s = time.perf_counter() - t0
    rec.model = record.ModelInfo(name=args.model_name)
    rec.token_stats = record.TokenStats(split="train", **tokens.length_stats(lengths))
    rec.status, rec.finished_at = "finished", record.now()
    record.write(rec, base)


def run_point(
    suite: Suite, point: Point, dev: dict, results: Path, runs_dir: Path, timeout_s: float, threads: int | None = None
) -> tuple[str, float]:
    """Run one point unless done or running in another sweep; return its status and wall seconds."""
    # resolved: two paths to one results folder (a symlink) meet at one lock and one process tag
    base = record.base_path(results, suite.name, point.run_name, dev["key"]).resolve()
    params = point_params(suite, point, results)
    with point_lock(base) as mine:
        if not mine:
            return "running in another sweep", 0.0
        kill_processes(tagged(str(base)))  # a dead sweep's notebook or kernel still on this point
        before = record.paths_of(base)
        if any(status_of(p) in record.DONE for p in before):
            return "already done", 0.0
        t0 = time.perf_counter()
        try:
            if suite.kind == "token_stats":
                run_token_stats(params, base, dev)
                return "finished", time.perf_counter() - t0
            code, timed_out, log = run_notebook(suite, params, str(base), runs_dir, timeout_s, threads)
        except (KeyboardInterrupt, SystemExit):
            raise
        except Exception as err:  # noqa: BLE001 - a bad point is recorded and the sweep goes on
            text = f"{type(err).__name__}: {err}"
            record_failure(base, suite, params, record.failure_status(text), text, dev)
            return record.failure_status(text), time.perf_counter() - t0
        wall = time.perf_counter() - t0
        new = [p for p in record.paths_of(base) if p not in before]
        if new and status_of(new[-1]):
            return status_of(new[-1]), wall
        tail = log.read_text(errors="replace")[-3000:]
        if timed_out:
            status, error = "timeout", f"killed after the {timeout_s:g} s timeout\n{tail}"
        else:
            status, error = record.failure_status(tail), f"papermill exited {code} without a record\n{tail}"
        ran = {
            "notebook": suite.notebook,
            "env": suite.env,
            "returncode": code,
            "output": str(log.with_suffix(".ipynb")),
        }
        record_failure(base, suite, params, status, error, dev, **ran, log=str(log))
        return status, wall
