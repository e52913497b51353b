"""One point of a suite: its notebook run under papermill (token statistics in-process), locked, resumed, recorded."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import yaml
from filelock import FileLock, Timeout

from helpers.run import records, schema
from helpers.run.args import ConfigError, build_args
from helpers.run.paths import REPO_ROOT
from helpers.study.sweep.suites import ENVS, Point, Suite

POINT_TAG = "ACCELBENCH_POINT"  # in the environment of every process of a point (the kernel inherits it)
_LIVE: set[subprocess.Popen] = set()  # notebooks running now, killed together when the sweep is stopped
_STOPPING = threading.Event()  # set when the sweep is stopped: the points it kills are not recorded


def env_python(env: str) -> Path:
    """Return the Python of environment `env` (main = .venv, xla = .venv-xla, neuron = .venv-neuron)."""
    return REPO_ROOT / ENVS[env][0] / "bin" / "python"


def device_of(env: str, requested: str = "auto") -> dict:
    """Return the device section a run in `env` would record (asked of that environment once)."""
    out = subprocess.run(
        [str(env_python(env)), "-m", "helpers.run.device", requested],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        timeout=300,
    )
    if out.returncode != 0:
        raise RuntimeError(f"{ENVS[env][0]} cannot name its device: {out.stderr.strip()[-500:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def skip_reason(suite: Suite, dev: dict | None, force: bool = False) -> str | None:
    """Return why `suite` cannot run on this machine (None when it can); `force` overrides fast-bf16."""
    if suite.kind == "derived":
        return "nothing to run: computed by `python -m helpers.study.report` from the other suites' records"
    if suite.kind == "token_stats":
        return None
    if not env_python(suite.env).exists():
        target = " (create it with `make xla-venv`)" if suite.env == "xla" else " (`make venv`)"
        return f"its environment {ENVS[suite.env][0]} is missing{target}"
    if not (REPO_ROOT / suite.notebook).exists():
        return f"its notebook {suite.notebook} does not exist"
    if suite.requires == "neuron" and not (dev or {}).get("neuron"):
        return (
            f"it needs NeuronCores (a trn1 instance with torch-neuronx) and {ENVS[suite.env][0]} has "
            "none; it is not faked on the CPU, nothing was recorded"
        )
    if suite.requires == "fast-bf16" and not force and not (dev or {}).get("bf16_fast"):
        return (
            "it trains in bf16 modes, and this machine's device has no fast bf16 (a CPU without AMX / "
            "avx512_bf16 emulates it, several times slower than fp32: hours for this suite); run it on "
            "an AMX CPU, a GPU or trn1, or force it with `python -m helpers.study.sweep SUITE --force`"
        )
    return None


def point_params(suite: Suite, point: Point, results: Path) -> dict:
    """Return the parameters the point's notebook gets."""
    return {**point.params, "run_name": point.run_name, "suite": suite.name, "results_path": str(results)}


def papermill_command(suite: Suite, params: dict, out_path: Path, kernel: str | None = None) -> list[str]:
    """Return the papermill command line for one point: its parameters as YAML (types kept)."""
    for name, value in params.items():
        if isinstance(value, (dict, list)):
            raise ConfigError(f"{name}={value!r}: suites pass scalar parameters only")
    return [
        str(env_python(suite.env).parent / "papermill"),
        str(REPO_ROOT / suite.notebook),
        str(out_path),
        "--kernel",
        kernel or ENVS[suite.env][1],
        "--cwd",
        str(REPO_ROOT),
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
def point_lock(record_file: Path):
    """Hold the point's lock (yield True), or yield False when a live sweep holds it."""
    record_file.parent.mkdir(parents=True, exist_ok=True)
    # flock, released by the kernel when its process dies: no soft fallback, whose file would outlive a killed sweep
    lock = FileLock(record_file.parent / f".{record_file.name}.lock", timeout=0, fallback_to_soft=False)
    try:
        lock.acquire()
    except Timeout:
        yield False
        return
    try:
        yield True
    finally:
        lock.release()


def run_notebook(
    suite: Suite,
    params: dict,
    record_file: Path,
    runs_dir: Path,
    timeout_s: float,
    threads: int | None = None,
    dev: dict | None = None,
) -> tuple[str, float]:
    """Run one point's notebook; record a failure it left unrecorded. Return its status and wall seconds."""
    name = params["run_name"]
    out = runs_dir / suite.name / f"{name}.ipynb"
    out.parent.mkdir(parents=True, exist_ok=True)
    log = out.with_suffix(".log")
    env = {**os.environ, "TOKENIZERS_PARALLELISM": "false", "PYTHONUNBUFFERED": "1", POINT_TAG: str(record_file)}
    if threads:
        env["OMP_NUM_THREADS"] = str(threads)  # torch's intra-op pool; the record keeps torch_threads
    record_file.unlink(missing_ok=True)  # an unfinished record of an earlier try is not this try's
    t0 = time.perf_counter()
    with open(log, "wb") as log_file:
        proc = subprocess.Popen(
            papermill_command(suite, params, out),
            cwd=REPO_ROOT,
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
            kill_processes([psutil.Process(proc.pid)] + tagged(str(record_file)))
            raise
        finally:
            _LIVE.discard(proc)
        kill_processes(tagged(str(record_file)))  # the kernel outlives papermill when papermill is killed
        proc.wait()
    wall = time.perf_counter() - t0
    if _STOPPING.is_set():
        raise KeyboardInterrupt(f"{name}: stopped with the sweep")
    render_html(out, f"python -m helpers.study.sweep {suite.name}")
    mine = records.read_record(record_file)
    if mine is not None and mine.get("status") != "running":
        return mine["status"], wall
    tail = log.read_text(errors="replace")[-3000:]
    if timed_out:
        status, error = "timeout", f"killed after the {timeout_s:g} s timeout\n{tail}"
    else:
        died = f"papermill exited {proc.returncode}" + (" (killed by a signal)" if proc.returncode < 0 else "")
        status, error = records.failure_status(tail), f"{died} without a record\n{tail}"
    record_failure(
        record_file,
        params,
        status,
        error,
        dev,
        runner={
            "notebook": suite.notebook,
            "env": suite.env,
            "returncode": proc.returncode,
            "output": str(out),
            "log": str(log),
        },
    )
    return status, wall


def record_failure(
    record_file: Path, params: dict, status: str, error: str, dev: dict | None = None, runner: dict | None = None
) -> schema.RunRecord:
    """Write and return the record of a point that ended without writing its own."""
    # no libraries: the runner's are not those of the environment the point ran in
    try:
        args = build_args(params)
        params, given = args.flat(), args.given
    except ConfigError:  # the failure is the parameters themselves: kept as given
        given = params
    rec = records.run_record(
        params,
        sorted(given),
        status=status,
        error=error,
        runner=runner,
        device={**(dev or {}), "key": record_file.stem.rsplit("@", 1)[-1]},
        finished_at=records.now(),
    )
    records.write_record(record_file, rec)
    return rec


def render_html(notebook: Path, command: str) -> None:
    """Put a first cell naming the command into the executed notebook and render it beside as HTML (if it can)."""
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
    try:
        html, _ = HTMLExporter().from_notebook_node(nb)
        notebook.with_suffix(".html").write_text(f"<!-- {line} -->\n{html}")
    except Exception as err:  # noqa: BLE001 - the HTML is a copy for reading; the point's record stands
        print(
            f"{notebook.name}: no HTML copy ({type(err).__name__}: {err}); the notebook itself is kept", file=sys.stderr
        )


def run_token_stats(params: dict, record_file: Path) -> str:
    """Record the token-length statistics of the training split (no training); return the status."""
    from helpers.run import data, device, models, tokens

    args = build_args(params)
    t = args.task
    ds, info = data.load_emotion(
        t.data_dir, t.train_subset, t.eval_subset, t.shuffle_subset, args.train.seed, t.drop_bad_rows
    )
    t0 = time.perf_counter()
    lengths = tokens.token_lengths(ds["train"]["text"], models.load_tokenizer(t.model_name))
    tokenize_s = time.perf_counter() - t0
    # tokenization runs on the host CPU whatever the accelerator: that is the record's device
    records.write_record(
        record_file,
        records.run_record(
            args.flat(),
            sorted(args.given),
            status="finished",
            finished_at=records.now(),
            libraries=records.library_versions(),
            data=schema.Data(**info, tokenize_s=tokenize_s),
            model=schema.ModelInfo(name=t.model_name),
            device=device.resolve_device("cpu").describe(),
            token_stats=schema.TokenStats(split="train", **tokens.length_stats(lengths)),
        ),
    )
    return "finished"


def run_point(
    suite: Suite, point: Point, dev: dict, results: Path, runs_dir: Path, timeout_s: float, threads: int | None = None
) -> tuple[str, float, Path]:
    """Run one point unless finished or running elsewhere; return its status, wall seconds and record path."""
    # resolved: two paths to one results folder (a symlink) meet at one lock and one process tag
    record_file = records.record_path(results, suite.name, point.run_name, dev["key"]).resolve()
    params = point_params(suite, point, results)
    with point_lock(record_file) as mine:
        if not mine:
            return "running in another sweep", 0.0, record_file
        kill_processes(tagged(str(record_file)))  # a dead sweep's notebook or kernel still on this point
        done = records.read_record(record_file)
        if done is not None and done.get("status") in records.DONE:
            return "already done", 0.0, record_file
        why = None if done is not None else records.unreadable(record_file)
        if why:  # a newer commit's record (a newer schema, an unknown key) or a hand-edited one: never deleted
            return f"kept: its record is not one this code reads ({why})", 0.0, record_file
        try:
            build_args(params)  # the one place parameters are checked
            if suite.kind == "token_stats":
                t0 = time.perf_counter()
                return run_token_stats(params, record_file), time.perf_counter() - t0, record_file
            status, wall = run_notebook(suite, params, record_file, runs_dir, timeout_s, threads, dev)
            return status, wall, record_file
        except (KeyboardInterrupt, SystemExit):
            raise
        except Exception as err:  # noqa: BLE001 - a bad point is recorded and the sweep goes on
            text = f"{type(err).__name__}: {err}"
            record_failure(record_file, params, records.failure_status(text), text, dev)
            return records.failure_status(text), 0.0, record_file
