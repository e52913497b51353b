"""The first-run checklist as one command: does this machine run the study's path on the device it has?

    python -m helpers.check                     # the device present: CUDA, else Neuron, else the CPU
    PJRT_DEVICE=CPU python -m helpers.check     # torch-xla's CPU backend (.venv-xla; on a trn1: unset)
    python -m helpers.check --device cuda       # fails, saying why, unless the runs use CUDA
    python -m helpers.check -p lr 1e6           # a run parameter for every run (here: a loss that overflows)

Each check prints its number, pass / fail / skip and what it compared; the exit status is 1 when any failed.
The runs are the study's own: Nvidia/train.py or Trainium/train.py (steps.run_all), one process each as a
sweep runs them, on `bert-tiny-random` (2 layers, 4.4 M parameters, random weights), 64 training rows of the
data (EMOTION_DATA_DIR, else the hub) and 5 steps (3 of warm-up). Every run and the matmul of check 7 is a
child process with a time limit (RUN_TIMEOUT_S, MATMUL_TIMEOUT_S), killed past it, so the check as a whole is
bounded (`bound_s`): a compile or a collective that hangs fails its check instead of billing an instance. Their
records and logs go to a temporary folder, kept (and named) when a check fails, or to --results (`make
cloud-run` keeps them under Experiment/runs/check, which comes home). What only a person can judge (a power
cap, clocks under load, the compile cache's disk) is in docs/HARDWARE.md.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import typing
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import metadata
from importlib.util import find_spec
from pathlib import Path
from typing import Literal

import torch

from helpers.calc.facts import cuda_device_key
from helpers.calc.roofline import device_peak, neuron_core_key
from helpers.launch import child_env
from helpers.measure import peaks
from helpers.run import device, neuron, records
from helpers.run.args import ConfigError, Device, Precision, build_args
from helpers.run.argv import to_argv
from helpers.run.paths import REPO_ROOT, RESULTS_DIR

SUITE = "check"  # the records' folder below the results
READINGS = "_check"  # check 7's readings below the results: a folder starting with _ holds no records
STEPS = 5
EVAL_LOSSES = ("val_loss", "test_loss")  # the record's evaluation after training: both must be finite
# what every run of the check trains: the smallest published BERT shape, random weights, a few rows; a
# periodic evaluation mid-run, so check 4 sees its graphs counted as evaluation, not as a training recompile
RUN = dict(
    model_name="bert-tiny-random",
    train_subset=64,
    eval_subset=16,
    batch=8,
    max_length=32,
    max_steps=STEPS,
    log_every=1,
    eval_every=2,
    curve_rows=16,
    progress=False,
    suite=SUITE,
    replace_record=True,
)
# each environment's requirements file, and the command that builds the environment from it
BUILT_BY = {
    "requirements.txt": "make venv",
    "requirements-xla.txt": "make xla-venv",
    "requirements-neuron.txt": "make neuron-venv",
}
NVIDIA_DEVICE = Path("/dev/nvidia0")  # the first GPU, present where the NVIDIA driver found one
NEURON_CORES = Path("/sys/devices/virtual/neuron_device")  # the driver's sysfs: neuronN/neuron_coreM per core
# a dense bf16 matmul reaches 60-80% of a datasheet peak; below 60%: a power cap, low clocks, or a peak in the
# file that is too high; above 110%: a peak that is too low (either makes every MFU on the device wrong)
DEVICE_BAND = (0.6, 1.1)
# the device kinds (device_peaks.csv keys) where check 7's matmul was measured against the row and read inside
# the band: the band gates a run there only; elsewhere the reading is recorded and warned about, not judged
BAND_MEASURED_ON = {
    "h200": "778 of 989 TFLOP/s (79%), an H200 on 2026-11-26 (docs/HARDWARE.md)",
    "a10g": "69.5 of 70 TFLOP/s (99%), a g5.xlarge (the A10G row of helpers/facts/device_peaks.csv)",
}
# the longest one run of the check may take, killed past it: on Neuron each run compiles its graphs cold
# (neuronx-cc, minutes each even for bert-tiny); elsewhere a run takes seconds to a minute
RUN_TIMEOUT_S = {"neuron": 1200.0, "other": 600.0}
MATMUL_TIMEOUT_S = {"neuron": 900.0, "other": 300.0}  # check 7's matmul: on Neuron one cold compile first
KILL_GRACE_S = 10  # between SIGTERM and SIGKILL to a run past its limit
# a CPU's roof is measured on the machine and moves with load and threads: beyond 3x, every MFU is off as much
CPU_BAND = (1 / 3, 3.0)
# warn: measured and recorded but not judged (no measured band for the device kind); it fails nothing
Status = Literal["pass", "fail", "skip", "warn"]


@dataclass
class Outcome:
    """What one check found: pass, fail or skip, and what it compared (or why it could not)."""

    status: Status
    text: str


@dataclass
class Machine:
    """What the checks share: the device asked for and found, where the runs report, and their records."""

    requested: str
    results: Path
    params: dict  # the command line's -p values, given to every run
    timeout_s: float | None = None  # each run's limit; None: the device's RUN_TIMEOUT_S
    dev: device.DeviceInfo | None = None
    runs: dict[str, dict] = field(default_factory=dict)  # precision -> its finished record


# ----------------------------------------------------------------------------- 1. versions
def requirements_file() -> str:
    """Return the requirements file of this environment: the Neuron, the XLA or the main one."""
    if find_spec("torch_neuronx"):
        return "requirements-neuron.txt"
    return "requirements-xla.txt" if find_spec("torch_xla") else "requirements.txt"


def requirements(path: Path) -> list:
    """Return the packaging Requirements of a requirements file, its `-r` includes followed."""
    from packaging.requirements import Requirement

    out = []
    for line in path.read_text().splitlines():
        line = line.split(" #")[0].strip()
        if line.startswith("-r "):
            out += requirements(path.parent / line[3:].strip())
        elif line and not line.startswith(("#", "-")):
            out.append(Requirement(line))
    return out


def unmet(found: list) -> list[str]:
    """Return the requirements this environment does not meet, each saying what is installed."""
    out = []
    for req in found:
        if req.marker is not None and not req.marker.evaluate():
            continue
        try:
            have = metadata.version(req.name)
        except metadata.PackageNotFoundError:
            out.append(f"{req.name} missing")
            continue
        if req.specifier and not req.specifier.contains(have, prereleases=True):
            out.append(f"{req.name} {have} (wants {req.specifier})")
    return out


def versions(machine: Machine) -> Outcome:
    """The libraries and drivers a result depends on, and the pins of this environment's requirements file."""
    libraries = ", ".join(f"{k} {v}" for k, v in records.library_versions().items())
    system = device.system_versions()
    drivers = "; ".join(f"{k.replace('_', ' ')} {v}" for k, v in system.items()) or "no GPU or Neuron driver"
    text = f"Python {sys.version.split()[0]}, {libraries}; {drivers}"
    name = requirements_file()
    if not (REPO_ROOT / name).exists():
        return Outcome("pass", f"{text} ({name} not beside this install: pins not compared)")
    missing = unmet(requirements(REPO_ROOT / name))
    if missing:
        return Outcome("fail", f"{name} not met: {', '.join(missing)}: rebuild the environment (`{BUILT_BY[name]}`)")
    return Outcome("pass", f"{text}; every requirement of {name} met")


# ----------------------------------------------------------------------------- 2. the device
def requested_device() -> str:
    """Return the device the check asks for by default: xla where PJRT_DEVICE names one, else auto."""
    return "xla" if os.environ.get("PJRT_DEVICE") and device.xla_available() else "auto"


def unused_hardware(requested: str, dev: device.DeviceInfo) -> str | None:
    """Return why `dev` is a silent fallback from hardware this machine has (None when it is not)."""
    if requested == "cpu":
        return None  # asked for by name
    if NVIDIA_DEVICE.exists() and dev.type != "cuda" and requested != "xla":
        hidden = os.environ.get("CUDA_VISIBLE_DEVICES")
        if hidden is not None and torch.cuda.device_count() == 0:
            return (
                f"an NVIDIA GPU is present ({NVIDIA_DEVICE}) but CUDA_VISIBLE_DEVICES={hidden!r} hides every GPU "
                f"from torch, so the runs would use {dev.name}: unset it (`unset CUDA_VISIBLE_DEVICES`) or name "
                "a GPU (CUDA_VISIBLE_DEVICES=0; nvidia-smi -L lists them)"
            )
        built = f"CUDA {torch.version.cuda}" if torch.version.cuda else "no CUDA (a CPU build of torch)"
        return (
            f"an NVIDIA GPU is present ({NVIDIA_DEVICE}) but the runs would use {dev.name}: torch "
            f"{torch.__version__} is built for {built} and sees no GPU; install the CUDA build of torch, "
            "or a driver new enough for its CUDA (nvidia-smi shows the driver's)"
        )
    if neuron.NEURON_DEVICE.exists() and not dev.neuron:
        return (
            f"this machine has NeuronCores ({neuron.NEURON_DEVICE}) but the runs would use {dev.name}: "
            "torch-neuronx is not in this environment; use .venv-neuron (`make neuron-venv`)"
        )
    if dev.neuron and os.environ.get("PJRT_DEVICE") == "CPU":
        return "PJRT_DEVICE=CPU on a machine with NeuronCores: the runs would train on the host; unset it"
    return None


def xla_setting(requested: str) -> str | None:
    """Return what to set where this environment cannot run `requested` (None when it can)."""
    # .venv-xla (torch-xla without torch-neuronx) runs torch-xla's CPU backend only, with PJRT_DEVICE=CPU
    if not find_spec("torch_xla") or find_spec("torch_neuronx"):
        return None
    pjrt = os.environ.get("PJRT_DEVICE")
    if requested != "xla":
        return (
            f"device={requested!r} in the XLA environment (torch-xla, no torch-neuronx; PJRT_DEVICE "
            f"{'unset' if pjrt is None else repr(pjrt)}): it runs torch-xla's CPU backend only. Set PJRT_DEVICE=CPU "
            "(`PJRT_DEVICE=CPU python -m helpers.check`); the CPU and CUDA paths run in .venv (`make venv`)"
        )
    if pjrt not in (None, "CPU"):  # unset, resolve_device sets CPU
        return (
            f"PJRT_DEVICE={pjrt!r} in the XLA environment: requirements-xla.txt installs torch-xla's CPU backend "
            "only (no PJRT plugin for another device), so every run would fail minutes in. Set PJRT_DEVICE=CPU; "
            "a CUDA GPU runs in .venv (`make venv`, `python -m helpers.check`)"
        )
    return None


def device_used(machine: Machine) -> Outcome:
    """The requested device resolves to one this machine has, not to the CPU when it has an accelerator."""
    refused = xla_setting(machine.requested)
    if refused:
        return Outcome("fail", refused)
    try:
        dev = device.resolve_device(machine.requested)
    except ConfigError as err:
        return Outcome("fail", f"device={machine.requested!r}: {err}")
    fallback = unused_hardware(machine.requested, dev)
    if fallback:
        return Outcome("fail", fallback)
    machine.dev = dev
    via = f" (PJRT_DEVICE={os.environ['PJRT_DEVICE']})" if dev.type == "xla" and not dev.neuron else ""
    return Outcome(
        "pass",
        f"{machine.requested}{via} -> {dev.torch_device}, {dev.name}; every run below "
        f"must record this device ({dev.key})",
    )


# ----------------------------------------------------------------------------- the runs
def run_params(machine: Machine, run_name: str, **values) -> dict:
    """Return the parameters of one run of the check: RUN, the device, `values`, then the user's -p."""
    dev = machine.dev
    # XLA's CPU backend: tiny graphs compile more than they run, so compile them fast
    extra = {"xla_fast_compile": True} if dev.type == "xla" and not dev.neuron else {}
    return {
        **RUN,
        "device": dev.type,
        "results_path": str(machine.results),
        "run_name": run_name,
        **extra,
        **values,
        **machine.params,
    }


def device_kind(dev: device.DeviceInfo) -> str:
    """Return the key of RUN_TIMEOUT_S and MATMUL_TIMEOUT_S for `dev`: neuron, else other."""
    return "neuron" if dev.neuron else "other"


def bound_s(neuron: bool) -> float:
    """Return the longest the check can take, in seconds: every run and the matmul at their limits."""
    kind = "neuron" if neuron else "other"
    runs = len(typing.get_args(Precision))  # the modes but auto, and the two-rank run
    return runs * RUN_TIMEOUT_S[kind] + MATMUL_TIMEOUT_S[kind]


def run_bounded(command: list[str], timeout_s: float, out: typing.IO | None = None) -> int | None:
    """Return the exit status of `command` run from the repository with its output in `out`, None past `timeout_s`."""
    # a session of its own: past the limit its whole group is sent SIGTERM, then SIGKILL, so its children go too
    proc = subprocess.Popen(
        command, start_new_session=True, stdout=out, stderr=subprocess.STDOUT, cwd=REPO_ROOT, env=child_env()
    )
    try:
        return proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return None
    finally:  # past the limit, or Ctrl-C: the run does not outlive the check
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=KILL_GRACE_S)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def exit_on_sigterm() -> None:
    """Make SIGTERM (a task's `timeout`, `sky cancel`) unwind like Ctrl-C, so run_bounded ends its run."""
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))


def train_once(machine: Machine, params: dict) -> tuple[dict | None, str]:
    """Return the record (None if none) and the output's tail of the study's script run bounded for `params`."""
    args = build_args(params)
    script = REPO_ROOT / ("Trainium" if machine.dev.type == "xla" else "Nvidia") / "train.py"
    log = machine.results / "logs" / f"{params['run_name']}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    limit = machine.timeout_s or RUN_TIMEOUT_S[device_kind(machine.dev)]
    t0 = time.perf_counter()
    with open(log, "w") as out:
        code = run_bounded([sys.executable, str(script), *to_argv(args)], limit, out)
    where = records.record_path(machine.results, SUITE, params["run_name"], machine.dev.key)
    record = records.read_record(where)
    tail = " | ".join(log.read_text().strip().splitlines()[-4:])
    if code is None:
        record, tail = None, f"killed after its limit of {limit:.0f} s (log {log}): {tail}"
    print(
        f"   {params['run_name']}: {record['status'] if record else 'no record'} in "
        f"{time.perf_counter() - t0:.0f} s ({'killed' if code is None else f'exit {code}'}; log {log})",
        flush=True,
    )
    return record, tail


def precision_modes(dev: device.DeviceInfo) -> tuple[list[str], list[str]]:
    """Return the precision modes this device runs, and those it refuses with why."""
    modes, refused = [], []
    for mode in (m for m in typing.get_args(Precision) if m != "auto"):
        try:
            with warnings.catch_warnings():  # a slow mode (bf16 without fast bf16) still runs: its log says
                warnings.simplefilter("ignore")
                device.resolve_precision(mode, dev)
        except ConfigError as err:
            refused.append(f"{mode} ({str(err).split(':')[0]})")
            continue
        modes.append(mode)
    return modes, refused


def five_steps(machine: Machine, modes: list[str] | None = None) -> Outcome:
    """Five steps in every precision mode the device runs, finished here with finite training and evaluation losses."""
    found, refused = precision_modes(machine.dev)
    problems, losses = [], []
    for mode in modes or found:
        name = f"check-{mode}"
        record, tail = train_once(machine, run_params(machine, name, precision=mode))
        if record is None:
            elsewhere = sorted(p.name for p in (machine.results / SUITE).glob(f"{name}@*.json"))
            problems.append(
                f"{mode}: no record on {machine.dev.key}"
                + (f"; it ran elsewhere: {', '.join(elsewhere)}" if elsewhere else f" ({tail})")
            )
            continue
        metrics = record.get("metrics") or {}
        loss = metrics.get("final_loss")
        evaluation = {k: metrics.get(k) for k in EVAL_LOSSES}
        if record["status"] != "finished":
            problems.append(f"{mode}: {record['status']}: {record.get('error')}")
        elif loss is None or not math.isfinite(loss):
            problems.append(f"{mode}: final loss {loss}, not a finite number")
        elif not all(v is not None and math.isfinite(v) for v in evaluation.values()):
            # the last training loss is taken before the last update: weights it broke show only here
            problems.append(
                f"{mode}: evaluation after training {', '.join(f'{k} {v}' for k, v in evaluation.items())}: "
                "not finite numbers (the last update broke the weights, or the evaluation did not run)"
            )
        elif record["timing"]["steps"] != STEPS:
            problems.append(f"{mode}: {record['timing']['steps']} steps, not {STEPS}")
        else:
            machine.runs[mode] = record
            losses.append(loss)
    if problems:
        return Outcome("fail", "; ".join(problems))
    note = f"; not on this device: {', '.join(refused)}" if refused else ""
    return Outcome(
        "pass",
        f"{', '.join(machine.runs)}: {STEPS} steps each on {machine.dev.key}, final loss "
        f"{min(losses):.3f} to {max(losses):.3f}{note}",
    )


# ----------------------------------------------------------------------------- 4. XLA graphs
def xla_graphs(machine: Machine) -> Outcome:
    """On XLA: no compilation after warm-up, one graph execution per step, evaluation's graphs counted apart."""
    if machine.dev.type != "xla":
        return Outcome(
            "skip", f"{machine.dev.type} is not an XLA device (run it with PJRT_DEVICE=CPU in .venv-xla, or on a trn1)"
        )
    if not machine.runs:
        return Outcome("skip", "no finished run to read (check 3 failed)")
    problems, seen = [], []
    for mode, record in machine.runs.items():
        x, steps = record["xla"], record["timing"]["steps"]
        train, evaluation = x["train"]["uncached_compiles"], x["eval"]["uncached_compiles"]
        if x["compilations_after_warmup"]:
            problems.append(
                f"{mode}: {x['compilations_after_warmup']} compilation(s) after the warm-up "
                f"steps (per step: {x['compilations_per_step']})"
            )
        if x["train"]["execute_count"] != steps:
            problems.append(f"{mode}: {x['train']['execute_count']} graph executions in {steps} training steps")
        if not evaluation or x["graph_compilations"] != train + evaluation:
            problems.append(f"{mode}: evaluation's compilations not counted apart (xla.eval: {x['eval']})")
        seen.append(f"{mode} {train} + {evaluation}")
    if problems:
        return Outcome("fail", "; ".join(problems))
    return Outcome(
        "pass",
        f"each run: training's graphs compiled in the warm-up steps and none after, one "
        f"execution per step; evaluation's counted apart (training + evaluation graphs: "
        f"{', '.join(seen)})",
    )


# ----------------------------------------------------------------------------- 5. energy
def energy_window(machine: Machine) -> Outcome:
    """The energy figure covers the timing figure's window: energy.seconds equals timing.steady_time_s."""
    if not machine.runs:
        return Outcome("skip", "no finished run to read (check 3 failed)")
    problems = []
    for mode, record in machine.runs.items():
        energy, steady_s = record.get("energy") or {}, record["timing"]["steady_time_s"]
        if energy.get("window") != "steady" or not math.isclose(
            energy.get("seconds") or 0, steady_s, rel_tol=1e-9, abs_tol=1e-9
        ):
            problems.append(
                f"{mode}: energy.seconds {energy.get('seconds')} over the "
                f"{energy.get('window')!r} window, timing.steady_time_s {steady_s}"
            )
    if problems:
        return Outcome("fail", "; ".join(problems))
    energy = next(iter(machine.runs.values()))["energy"]
    if energy.get("joules"):
        joules = f"{energy['joules']:.3g} J by {energy['method']} ({energy['source']})"
    elif energy.get("method") == "measured":  # the H200's NVML counter did not move in a 5-step window
        joules = (
            f"0 J over its {1000 * energy['seconds']:.0f} ms: the counter ({energy.get('source')}) did not "
            "advance in a window this short; a run of seconds reads it"
        )
    else:
        joules = f"no joules here: {energy.get('reason')}"
    return Outcome("pass", f"energy.seconds = timing.steady_time_s in every run (the timer's steady windows); {joules}")


# ----------------------------------------------------------------------------- 6. two ranks
def neuron_cores(root: Path = NEURON_CORES) -> int:
    """Return the NeuronCores the Neuron driver lists (0 where it lists none)."""
    return len(list(root.glob("neuron*/neuron_core*")))


def device_count(dev: device.DeviceInfo) -> tuple[int, str]:
    """Return how many devices of this kind a run can spread over, and what they are."""
    if dev.type == "cuda":
        return torch.cuda.device_count(), "CUDA devices"
    if dev.neuron:
        return neuron_cores(), f"NeuronCores under {NEURON_CORES}"
    if dev.type == "xla":
        return 1, "torch-xla's CPU backend, which has no cross-process collectives"
    return 1, "the CPU; ranks there split its cores (tests/test_launch.py trains two)"


def two_ranks(machine: Machine) -> Outcome:
    """Where two or more devices exist: a two-rank run records world size 2 and disjoint shards."""
    count, what = device_count(machine.dev)
    if count == 0:
        return Outcome(
            "skip",
            f"no {what} to count (a driver with another sysfs layout): count them with "
            "neuron-ls and train -p num_devices 2 by hand",
        )
    if count < 2:
        return Outcome("skip", f"one device ({what}): the two-rank check needs two")
    precision = device.resolve_precision("auto", machine.dev)
    record, tail = train_once(
        machine, run_params(machine, "check-two-ranks", num_devices=2, train_subset=128, precision=precision)
    )
    if record is None:
        return Outcome("fail", f"no record of the two-rank run ({tail})")
    shards = (record.get("distributed") or {}).get("shards") or {}
    if record["status"] != "finished" or record.get("world_size") != 2:
        return Outcome("fail", f"{record['status']} with world size {record.get('world_size')}: {record.get('error')}")
    if shards.get("overlap_rows") != 0 or len(shards.get("rows_per_rank") or []) != 2:
        return Outcome("fail", f"the ranks' shards are not disjoint: {shards}")
    rows = " + ".join(map(str, shards["rows_per_rank"]))
    return Outcome("pass", f"{count} {what}: world size 2, shards of {rows} rows, {shards['overlap_rows']} shared")


# ----------------------------------------------------------------------------- 7. the bf16 roof
def device_matmul_tflops(dev: device.DeviceInfo, n: int = 8192, repeats: int = 20) -> float:
    """Return the TFLOP/s of `repeats` n x n bf16 matmuls on a GPU or NeuronCore (after 3 warm-up ones)."""
    a = torch.randn(n, n, dtype=torch.bfloat16, device=dev.torch_device)
    b = torch.randn_like(a)

    def matmuls(times: int) -> None:
        for _ in range(times):
            c = a @ b  # kept alive until the sync: XLA executes only what a live tensor needs
            if dev.type == "xla":
                import torch_xla

                torch_xla.sync()  # one graph per matmul, as a training step is one graph
        device.synchronize(dev)
        del c

    matmuls(3)
    t0 = time.perf_counter()
    matmuls(repeats)
    return 2 * n**3 * repeats / (time.perf_counter() - t0) / 1e12


# check 7's matmul in a child process (bounded like a run): python -c MATMUL DEVICE N
MATMUL = (
    "import sys; from helpers.check import device_matmul_tflops; from helpers.run.device import resolve_device; "
    "print(device_matmul_tflops(resolve_device(sys.argv[1]), int(sys.argv[2])))"
)


def bounded_matmul_tflops(dev: device.DeviceInfo, timeout_s: float, n: int = 8192) -> float:
    """Return device_matmul_tflops(dev, n) from a child process; TimeoutError past `timeout_s`, else RuntimeError."""
    with tempfile.TemporaryFile("w+") as out:
        code = run_bounded([sys.executable, "-c", MATMUL, dev.type, str(n)], timeout_s, out)
        out.seek(0)
        lines = out.read().strip().splitlines()
    if code is None:
        raise TimeoutError(f"the {n} x {n} bf16 matmuls did not finish in {timeout_s:g} s (killed)")
    if code != 0:
        raise RuntimeError(f"the matmul process exited {code}: {' | '.join(lines[-3:])}")
    return float(lines[-1])


def cpu_roof(machine: Machine) -> tuple[dict, str]:
    """Return the bf16 roof runs on this CPU divide by (kept in the repository, else measured now) and its source."""
    key = f"bf16, {torch.get_num_threads()} threads"
    kept = peaks.read_kept(REPO_ROOT / RESULTS_DIR / records.PEAKS / f"{machine.dev.key}.json").get(key)
    if isinstance(kept, dict) and kept.get("peak_tflops"):
        where = f"{RESULTS_DIR}/{records.PEAKS}/{machine.dev.key}.json"
        return kept, f"kept in {where} ({key}, measured {kept.get('measured_at')})"
    measured = peaks.machine_peak(machine.dev.key, "bf16", machine.results / records.PEAKS)
    return measured, f"measured by this check ({key}; none kept for this CPU: a first run here measures one)"


def matmul_roof(machine: Machine) -> Outcome:
    """A bf16 matmul now against the peak MFU divides by: the device's published row, or this CPU's roof."""
    dev = machine.dev
    if dev.type == "cuda" or dev.neuron:
        if dev.neuron:
            # torch_xla is imported (check 2 named the device) but not started: the runtime reads the one-core
            # setting when the device opens, so apply_env's "imported before" warning does not apply
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                neuron.apply_env(build_args(run_params(machine, "check-matmul")))
        peak = device_peak(dev.describe(), "bf16")
        if not peak["peak_tflops"]:
            return Outcome(
                "fail",
                f"no bf16 peak for {dev.name} ({peak['source']}): add its row to "
                "helpers/facts/device_peaks.csv with its source",
            )
        measured = bounded_matmul_tflops(dev, MATMUL_TIMEOUT_S[device_kind(dev)])
        what = "8192 x 8192 bf16 matmuls"
        key = neuron_core_key(dev.instance) if dev.neuron else cuda_device_key(dev.name)
        outcome = judge_roof(what, measured, peak, DEVICE_BAND, unmeasured=key not in BAND_MEASURED_ON)
        keep_reading(machine, key, what, measured, peak, outcome)
        return outcome
    peak, source = cpu_roof(machine)
    if not peak["peak_tflops"]:  # measured on a busy machine: not trusted, so nothing to judge against
        return Outcome("skip", f"no trusted bf16 roof for this CPU: {peak['reason']}")
    now = peaks.measure_peak("bf16")  # the roof's own procedure: the best of the model shapes
    what = f"the best bf16 matmul of the model shapes now ({now['shape']}, torch on the CPU)"
    # a CPU's matmul rate under other load says nothing about its roof: judged only when no other process
    # shared the cores while it ran (the load average would still count checks 3-6's own training runs)
    return judge_roof(what, now["peak_tflops"], {**peak, "source": source}, CPU_BAND, peaks.busy_problem(now))


def keep_reading(
    machine: Machine, key: str | None, what: str, measured_tflops: float, peak: dict, outcome: Outcome
) -> None:
    """Write check 7's reading to READINGS/matmul@DEVICE.json beside the runs' records (no record reader enters)."""
    # the first readings of a device kind are what its measured band is later made of
    reading = {
        "device": machine.dev.describe(),
        "peak_key": key,
        "what": what,
        "measured_tflops": measured_tflops,
        "peak_tflops": peak["peak_tflops"],
        "fraction_of_peak": measured_tflops / peak["peak_tflops"],
        "peak_source": peak["source"],
        "status": outcome.status,
        "measured_at": records.now(),
    }
    where = machine.results / READINGS
    where.mkdir(parents=True, exist_ok=True)
    (where / f"matmul@{machine.dev.key}.json").write_text(json.dumps(reading, indent=1) + "\n")


def judge_roof(
    what: str,
    measured_tflops: float,
    peak: dict,
    band: tuple[float, float],
    busy: str | None = None,
    unmeasured: bool = False,
) -> Outcome:
    """Pass within `band` (fractions of the peak); skip when `busy`; warn where the band is `unmeasured`."""
    ratio, (low, high) = measured_tflops / peak["peak_tflops"], band
    text = (
        f"{what}: {measured_tflops:.3g} TFLOP/s, {100 * ratio:.0f}% of the {peak['peak_tflops']:.3g} "
        f"TFLOP/s MFU divides by ({peak['source']})"
    )
    if busy:
        return Outcome("skip", f"{text}; not judged: the machine is busy ({busy}), run it on a quiet one")
    if unmeasured:
        inside = "inside" if low <= ratio <= high else "outside"
        return Outcome(
            "warn",
            f"{text}: {inside} the {100 * low:.0f}-{100 * high:.0f}% band, not judged: the band was measured on "
            f"{', '.join(BAND_MEASURED_ON)} only; recorded ({READINGS}/matmul@DEVICE.json beside the records): "
            "read MFU on this device with that in mind",
        )
    if not low <= ratio <= high:
        return Outcome(
            "fail",
            f"{text}: outside {100 * low:.0f}-{100 * high:.0f}%; correct the peak (with "
            "its source) or find the cap (power, clocks, load) before reading any MFU",
        )
    return Outcome("pass", text)


# ----------------------------------------------------------------------------- the command
CHECKS: tuple[tuple[str, Callable[[Machine], Outcome]], ...] = (
    ("versions and drivers", versions),
    ("the requested device is the one used", device_used),
    (f"{STEPS} steps in every precision mode, training and evaluation losses finite", five_steps),
    ("on XLA one training graph per steady step, evaluation compiled apart", xla_graphs),
    ("the energy window is the timing window", energy_window),
    ("two ranks record world size 2 and disjoint shards", two_ranks),
    ("a bf16 matmul against the peak MFU divides by", matmul_roof),
)


def run_checks(machine: Machine, out=sys.stdout) -> list[Outcome]:
    """Run every check in order, printing each as it ends (`N. status  title: text`); return them."""
    outcomes: list[Outcome] = []
    for number, (title, check) in enumerate(CHECKS, 1):
        if number > 2 and machine.dev is None:
            outcome = Outcome("skip", "no device to run on (check 2 failed)")
        else:
            try:
                outcome = check(machine)
            except Exception as err:  # noqa: BLE001 - a check that breaks is a failed one, with its reason
                outcome = Outcome("fail", f"{type(err).__name__}: {err}")
        print(f"{number}. {outcome.status}  {title}: {outcome.text}", file=out, flush=True)
        outcomes.append(outcome)
    return outcomes


def main(argv: list[str] | None = None) -> int:
    """Command line: python -m helpers.check [--device auto|cuda|cpu|xla] [--results DIR] [-p NAME VALUE]"""
    parser = argparse.ArgumentParser(prog="python -m helpers.check", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--device",
        choices=typing.get_args(Device),
        default=None,
        help="the device the runs must use (default: xla where PJRT_DEVICE is set, else auto)",
    )
    parser.add_argument(
        "--results",
        default=None,
        help="keep the runs' records and logs here (default: a temporary folder, removed when every check passes)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=None,
        help="seconds one run may take before it is killed (default: "
        + ", ".join(f"{v:g} on {k}" for k, v in RUN_TIMEOUT_S.items())
        + ")",
    )
    parser.add_argument(
        "-p",
        nargs=2,
        action="append",
        default=[],
        metavar=("NAME", "VALUE"),
        help="a run parameter (helpers/run/args.py) given to every run of the check",
    )
    args = parser.parse_args(argv)
    exit_on_sigterm()
    if args.timeout is not None and not (math.isfinite(args.timeout) and args.timeout > 0):
        parser.error(f"--timeout={args.timeout:g} is invalid: give the seconds one run may take, > 0")
    results = Path(args.results or tempfile.mkdtemp(prefix="accelbench-check-")).resolve()
    machine = Machine(args.device or requested_device(), results, dict(args.p), args.timeout)
    print(f"accelbench check: device {machine.requested}, records in {results}", flush=True)
    outcomes = run_checks(machine)
    failed = [n for n, o in enumerate(outcomes, 1) if o.status == "fail"]
    counts = {s: sum(o.status == s for o in outcomes) for s in typing.get_args(Status)}
    warned = f", {counts['warn']} warned" if counts["warn"] else ""
    print(f"check: {counts['pass']} passed, {counts['fail']} failed, {counts['skip']} skipped{warned}")
    if failed:
        print(
            f"check FAILED: {', '.join(f'{n} ({outcomes[n - 1].text})' for n in failed)}; records and logs "
            f"kept in {results}",
            file=sys.stderr,
        )
        return 1
    if args.results is None:
        shutil.rmtree(results, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
