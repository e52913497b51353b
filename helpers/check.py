"""The first-run check: does this machine run the study's loops on the device asked for, and are its figures sound?

    python -m helpers.check                        # the device present: XLA where torch-xla is, else CUDA, else CPU
    python -m helpers.check --device cuda          # fails, saying why, unless the runs train on a CUDA GPU
    python -m helpers.check -p lr 1e6 --results R  # a parameter for every run; records and logs kept in R

Each numbered check prints pass / fail / skip / warn and what it compared; the exit status is 1 when one failed.
The runs are the loops themselves (Nvidia/train.py, or Trainium/train.py on XLA), each a child process on
`bert-tiny-random` (2 layers, random weights), 64 training rows, 5 steps, killed past --timeout like check 7's
matmul, so the check as a whole is bounded (`bound_s`). Only the standard library is imported before the checks
run: a missing package is named by check 1, not by a traceback.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from importlib import metadata
from importlib.util import find_spec
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
SUITE = "check"  # the runs' records go to <results>/check/
MODES = ("bf16", "fp16", "fp32", "bf16-pure", "bf16-pure-sr")
STEPS = 5
# every run: the smallest BERT shape, a periodic evaluation mid-run (check 4 counts its graphs apart)
RUN = dict(model_name="bert-tiny-random", train_subset=64, eval_subset=16, batch=8, max_length=32, max_steps=STEPS)
RUN |= dict(log_every=1, eval_every=2, curve_rows=16, progress=False, suite=SUITE)
NVIDIA_DEVICE = Path("/dev/nvidia0")  # the first GPU, where the NVIDIA driver found one
NEURON_DEVICE = Path("/dev/neuron0")  # the first Trainium device, where the Neuron driver found one
NEURON_CORES = Path("/sys/devices/virtual/neuron_device")  # neuronN/neuron_coreM per NeuronCore
TIMEOUT_S = {"neuron": 1200.0, "other": 600.0}  # a run or the matmul, killed past it; Neuron compiles cold first
# a dense bf16 matmul reaches 60-80% of a datasheet peak: below 60% a power cap, low clocks or a peak too high;
# above 110% a peak too low. Judged on the kinds where it was measured; elsewhere the reading is a warning
DEVICE_BAND = (0.6, 1.1)
BAND_MEASURED_ON = ("h200", "a10g")  # 778 of 989 TFLOP/s on 2026-11-26; 69.5 of 70 on a g5.xlarge
CPU_BAND = (1 / 3, 3.0)  # a CPU's roof is measured on the machine and moves with load: a reading, never a verdict


@dataclass
class Outcome:
    """What one check found (pass, fail, skip or warn) and what it compared, or why it could not."""

    status: str
    text: str


@dataclass
class Machine:
    """What the checks share: the device asked for and found, the runs' folder and limit, their records."""

    requested: str
    results: Path
    params: dict = field(default_factory=dict)  # -p NAME VALUE, given to every run
    timeout_s: float | None = None  # each run's and the matmul's limit; check 2 sets the device's default
    device: str | None = None  # cuda | cpu | xla, once check 2 passed
    dev: object = None  # the helpers.devices.Device every run must record
    runs: dict[str, dict] = field(default_factory=dict)  # precision -> its finished record


def bound_s(neuron: bool, timeout_s: float | None = None) -> float:
    """Return the longest the check can take, in seconds: every run and the matmul at their limit."""
    return (len(MODES) + 2) * (timeout_s or TIMEOUT_S["neuron" if neuron else "other"])


# ----------------------------------------------------------------------------- 1. versions
def requirements(path: Path) -> list[str]:
    """Return the requirement lines of a requirements file, its `-r` includes followed."""
    out = []
    for line in (line.split("#")[0].strip() for line in path.read_text().splitlines()):
        if line.startswith("-r "):
            out += requirements(path.parent / line[3:].strip())
        elif line and not line.startswith("-"):
            out.append(line)
    return out


def unmet(lines: list[str]) -> list[str]:
    """Return the requirements this environment does not meet, each saying what is installed."""
    try:
        from packaging.requirements import Requirement
    except ImportError:  # itself named missing below; the versions are compared once it is installed
        Requirement = None
    out = []
    for line in lines:
        req = Requirement(line) if Requirement else None
        name = req.name if req else re.match(r"[\w.-]+", line)[0]
        have = installed(name)
        if have is None:
            out.append(f"{name} missing")
        elif req and req.specifier and not req.specifier.contains(have, prereleases=True):
            out.append(f"{name} {have} (wants {req.specifier})")
    return out


def installed(name: str) -> str | None:
    """Return the installed version of a distribution, None where it is not installed."""
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def versions(machine: Machine) -> Outcome:
    """The environment against its requirements file's pins (Neuron: the SDK whose pins it meets, if any)."""
    xla = "requirements-xla.txt" if find_spec("torch_xla") else "requirements.txt"
    names = sorted(p.name for p in REPO_ROOT.glob("requirements-neuron*.txt")) if find_spec("torch_neuronx") else [xla]
    found = {name: unmet(requirements(REPO_ROOT / name)) for name in names}
    met = [name for name, missing in found.items() if not missing]
    if met:
        have = ", ".join(f"{n} {v}" for n in ("torch", "torch-xla", "torch-neuronx") if (v := installed(n)))
        return Outcome("pass", f"Python {sys.version.split()[0]}, {have}: every requirement of {met[0]} met")
    builds = {"requirements.txt": "make venv", "requirements-xla.txt": "make xla-venv"}
    fix = " or ".join(builds.get(name, f"make neuron-venv NEURON_REQUIREMENTS={name}") for name in found)
    return Outcome("fail", "; ".join(f"{n}: {', '.join(m)}" for n, m in found.items()) + f": rebuild it ({fix})")


# ----------------------------------------------------------------------------- 2. the device
def wanted(requested: str) -> str:
    """Return the device a request names: auto is XLA where torch-xla is installed, CUDA where a GPU is, else CPU."""
    if requested != "auto":
        return requested
    if find_spec("torch_xla") or os.environ.get("PJRT_DEVICE"):
        return "xla"
    import torch

    return "cuda" if NVIDIA_DEVICE.exists() or torch.cuda.is_available() else "cpu"


def cuda_problem() -> str | None:
    """Return why the runs could not train on a CUDA GPU here (None when they can)."""
    import torch

    hidden = os.environ.get("CUDA_VISIBLE_DEVICES")
    if torch.cuda.is_available():
        return None
    if hidden is not None and hidden.strip() in ("", "-1"):
        return (
            f"CUDA_VISIBLE_DEVICES={hidden!r} hides every GPU from torch: unset it (`unset CUDA_VISIBLE_DEVICES`) "
            "or name one (CUDA_VISIBLE_DEVICES=0; `nvidia-smi -L` lists them)"
        )
    if not torch.version.cuda:
        return f"torch {torch.__version__} is a CPU build: on the GPU machine `make venv` installs PyPI's CUDA build"
    if not NVIDIA_DEVICE.exists():
        return f"no NVIDIA GPU here ({NVIDIA_DEVICE} is absent): run on a GPU machine, or ask for --device cpu"
    return (
        f"torch (CUDA {torch.version.cuda}) sees no GPU though {NVIDIA_DEVICE} exists: `nvidia-smi`: "
        "is the driver too old?"
    )


def xla_problem() -> str | None:
    """Return why the runs could not train on the XLA device this machine has (None when they can)."""
    neuron, pjrt = bool(find_spec("torch_neuronx")), os.environ.get("PJRT_DEVICE")
    if not find_spec("torch_xla"):
        return "torch-xla is not in this environment: .venv-xla (`make xla-venv`) on a CPU, .venv-neuron on a trn1"
    if NEURON_DEVICE.exists() and not neuron:
        return f"{NEURON_DEVICE} exists but torch-neuronx is not in this environment: use .venv-neuron"
    if neuron and NEURON_DEVICE.exists() and pjrt == "CPU":
        return "PJRT_DEVICE=CPU on a machine with NeuronCores: the runs would train on the host; unset it"
    if not neuron and pjrt not in (None, "CPU"):
        return f"PJRT_DEVICE={pjrt!r}: this environment has torch-xla's CPU backend only; set PJRT_DEVICE=CPU"
    return None


def device_used(machine: Machine) -> Outcome:
    """The device asked for is one the runs can use, never a silent fallback to the CPU."""
    want = wanted(machine.requested)
    problem = {"cuda": cuda_problem, "xla": xla_problem}.get(want, lambda: None)()
    if problem:
        return Outcome("fail", f"--device {machine.requested} ({want}): {problem}")
    from helpers import devices

    neuron = bool(find_spec("torch_neuronx"))
    make = {
        "cpu": devices.cpu_device,
        "cuda": lambda: devices.cuda_device(0),
        "xla": lambda: devices.xla_device(neuron),
    }
    machine.device, machine.dev = want, make[want]()
    machine.timeout_s = machine.timeout_s or TIMEOUT_S["neuron" if neuron else "other"]
    said = [
        f"{k} {v}" for k, v in machine.dev.section().items() if k in ("cuda_runtime", "gpu_driver", "neuron_driver")
    ]
    text = f"{machine.requested} -> {machine.dev.name} ({', '.join(said) or 'no accelerator driver'})"
    return Outcome("pass", f"{text}; every run must record {machine.dev.key}")


# ----------------------------------------------------------------------------- the runs
def run_values(machine: Machine, run_name: str, **values) -> dict:
    """Return one run's parameters: RUN, the device, `values`, then the user's -p values over them."""
    xla_cpu = machine.device == "xla" and not machine.dev.neuron  # tiny graphs compile more than they run: fast
    device = {"xla_fast_compile": True} if xla_cpu else {} if machine.device == "xla" else {"device": machine.device}
    return {**RUN, "results_path": str(machine.results), "run_name": run_name, **device, **values, **machine.params}


def run_bounded(command: list[str], timeout_s: float, out=None, env: dict | None = None) -> int | None:
    """Return the exit status of `command` run from the repository, None when it passed `timeout_s` (killed)."""
    env = env or {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")])}
    if find_spec("torch_xla") and not find_spec("torch_neuronx"):
        env.setdefault("PJRT_DEVICE", "CPU")
    # a session of its own: its whole group ends with it (torchrun's ranks, a compiler)
    proc = subprocess.Popen(
        command, cwd=REPO_ROOT, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
    )
    try:
        return proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return None
    finally:  # past the limit, Ctrl-C, SIGTERM or SIGHUP: the run never outlives the check
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def exit_on_signals() -> None:
    """Make SIGTERM (a `timeout`, `sky cancel`) and SIGHUP (a closed terminal) unwind like Ctrl-C."""
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda signum, frame: sys.exit(128 + signum))


def train_once(machine: Machine, values: dict, ranks: int = 1) -> tuple[dict | None, str]:
    """Return the record a bounded run of the loop wrote (None if none) and what its log ends with."""
    from helpers import record

    script = "Trainium/train.py" if machine.device == "xla" else "Nvidia/train.py"
    launch = ["-m", "torch.distributed.run", f"--nproc_per_node={ranks}"] if ranks > 1 else []
    files = lambda: set((machine.results / SUITE).glob(f"{record.glob_escape(values['run_name'])}@*.json"))
    before, log = files(), machine.results / "logs" / f"{values['run_name']}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "w") as out:
        argv = [sys.executable, *launch, script, *(f"--{k}={v}" for k, v in values.items())]
        code = run_bounded(argv, machine.timeout_s, out)
    tail = f"log {log}: " + " | ".join(log.read_text(errors="replace").strip().splitlines()[-3:])
    new = files() - before  # the run's own file: a name run before on this device gets a .runN sibling
    found = record.read(new.pop())[0] if new else []
    print(
        f"   {values['run_name']}: {found[0]['status'] if found else 'no record'}, exit {code}; log {log}", flush=True
    )
    if code is None:
        return None, f"killed after its limit of {machine.timeout_s:g} s (--timeout; {tail})"
    return (found[0] if found else None), tail


def five_steps(machine: Machine, only: tuple[str, ...] = MODES) -> Outcome:
    """Five steps in every precision mode the loop takes, finished on check 2's device with finite losses."""
    from helpers import arguments

    problems, refused = [], []
    for mode in only:
        values = run_values(machine, f"check-{mode}", precision=mode)
        try:
            arguments.build(values, arguments.TrainiumArgs if machine.device == "xla" else arguments.NvidiaArgs)
        except arguments.ConfigError as err:
            refused.append(f"{mode} ({str(err).split(':')[0]})")
            continue
        rec, tail = train_once(machine, values)
        metrics = (rec or {}).get("metrics") or {}  # the last update's broken weights show in the evaluation only
        losses = [metrics.get(k) for k in ("final_loss", "val_loss", "test_loss")]
        finite = all(isinstance(v, int | float) and math.isfinite(v) for v in losses)
        if rec is None:
            problems.append(f"{mode}: no record ({tail})")
        elif rec["device"]["key"] != machine.dev.key:
            problems.append(f"{mode}: ran on {rec['device']['key']}, not {machine.dev.key}: a silent fallback")
        elif rec["status"] != "finished":
            problems.append(f"{mode}: {rec['status']}: {rec.get('error')}")
        elif not finite:
            problems.append(f"{mode}: final, validation and test loss {losses}: not all finite")
        elif rec["timing"]["steps"] != STEPS:
            problems.append(f"{mode}: {rec['timing']['steps']} steps, not {STEPS}")
        else:
            machine.runs[mode] = rec
    if problems or not machine.runs:
        return Outcome("fail", "; ".join(problems) or f"every mode refused: {', '.join(refused)}")
    loss = [r["metrics"]["final_loss"] for r in machine.runs.values()]
    text = f"{', '.join(machine.runs)}: {STEPS} steps on {machine.dev.key}, final loss {min(loss):.3f}-{max(loss):.3f}"
    return Outcome("pass", text + (f"; refused here: {', '.join(refused)}" if refused else ""))


# ----------------------------------------------------------------------------- 4, 5: what the records show
def xla_graphs(machine: Machine) -> Outcome:
    """On XLA: no compilation after the warm-up, one training graph execution per step, evaluation counted apart."""
    if machine.device != "xla" or not machine.runs:
        xla = machine.device == "xla"
        return Outcome("skip", "no finished run (check 3 failed)" if xla else "not XLA (.venv-xla, or a trn1)")
    problems, seen = [], []
    for mode, rec in machine.runs.items():
        x, steps = rec["xla"], rec["timing"]["steps"]
        train, evaluation = x["train"]["uncached_compiles"], (x.get("eval") or {}).get("uncached_compiles")
        if x["compilations_after_warmup"]:
            problems.append(f"{mode}: {x['compilations_after_warmup']} compilation(s) after the warm-up steps")
        if x["train"]["execute_count"] != steps:
            problems.append(f"{mode}: {x['train']['execute_count']} graph executions in {steps} training steps")
        if not evaluation or x["graph_compilations"] != train + evaluation:
            problems.append(f"{mode}: evaluation's compilations not counted apart (xla.eval: {x.get('eval')})")
        seen.append(f"{mode} {train} + {evaluation}")
    status = "fail" if problems else "pass"
    return Outcome(status, "; ".join(problems) or f"none after warm-up, one a step; training + evaluation: {seen}")


def energy_window(machine: Machine) -> Outcome:
    """The energy figure's window is the timing figure's: energy.seconds equals timing.steady_time_s."""
    pairs = {mode: (rec.get("energy") or {}, rec["timing"]["steady_time_s"]) for mode, rec in machine.runs.items()}
    if all(e.get("seconds") is None for e, _ in pairs.values()):
        return Outcome("skip", f"no energy reading: {[e.get('reason') for e, _ in pairs.values()][:1] or 'no run'}")
    problems = [
        f"{mode}: energy.seconds {e.get('seconds')} over the {e.get('window')!r} window, steady_time_s {steady}"
        for mode, (e, steady) in pairs.items()
        if e.get("window") != "steady" or not math.isclose(e.get("seconds") or 0, steady, rel_tol=1e-9, abs_tol=1e-9)
    ]
    joules = {mode: e["joules"] for mode, (e, _) in pairs.items() if e.get("joules") is not None}
    said = f"joules {joules}" if joules else f"no joules here: {next(iter(pairs.values()))[0].get('reason')}"
    return Outcome("fail" if problems else "pass", "; ".join(problems) or f"the same window in every run; {said}")


# ----------------------------------------------------------------------------- 6. two ranks
def two_ranks(machine: Machine) -> Outcome:
    """Where two devices exist: a two-rank run records world size 2 and disjoint shards."""
    if machine.device == "cuda":
        import torch

        count = torch.cuda.device_count()
    else:  # a CPU, and XLA on one, have no second device (torch-xla's CPU backend no cross-process collectives)
        count = len(list(NEURON_CORES.glob("neuron*/neuron_core*"))) if machine.dev.neuron else 1
    if count < 2:
        return Outcome("skip", f"{count} {machine.device} device(s) here: the two-rank check needs two")
    rec, tail = train_once(machine, run_values(machine, "check-two-ranks", num_devices=2, train_subset=128), ranks=2)
    shards = (((rec or {}).get("distributed") or {}).get("shards")) or {}
    if rec is None or rec["status"] != "finished" or rec.get("world_size") != 2:
        return Outcome("fail", f"{rec and rec['status']} with world size {rec and rec.get('world_size')}: {tail}")
    if shards.get("overlap_rows") != 0 or len(shards.get("rows_per_rank") or []) != 2:
        return Outcome("fail", f"the ranks' shards are not disjoint: {shards}")
    return Outcome("pass", f"{count} devices: world size 2, shards of {shards['rows_per_rank']} rows, none shared")


# ----------------------------------------------------------------------------- 7. the bf16 peak
def matmul_tflops(device: str, n: int, repeats: int = 20) -> float:
    """Return the TFLOP/s of `repeats` n x n bf16 matmuls on `device` (cuda, cpu or xla), after 3 warm-up ones."""
    import torch

    if device == "xla":
        import torch_xla
        import torch_xla.core.xla_model as xm

        # one graph per matmul, as a training step is one graph; wait_device_ops: until the device has run them
        # (torch-xla 2.9's sync(wait=True) returns before its CPU backend has: 28.9 "TFLOP/s" on 2 cores)
        dev, step, wait = torch_xla.device(), torch_xla.sync, xm.wait_device_ops
    else:
        dev, step, wait = device, (lambda: None), (torch.cuda.synchronize if device == "cuda" else lambda: None)
    a = torch.randn(n, n, dtype=torch.bfloat16, device=dev)
    b = torch.randn_like(a)
    for i in range(repeats + 3):
        if i == 3:  # after the warm-up matmuls (and on XLA the compile)
            wait()
            t0 = time.perf_counter()
        a = (a @ b) * (1.0 / n)  # each on the last one's result: no run can be skipped or served from a cache
        step()
    wait()
    return 2 * n**3 * repeats / (time.perf_counter() - t0) / 1e12


def bounded_matmul(device: str, n: int, timeout_s: float, neuron: bool = False) -> float:
    """Return matmul_tflops(device, n) from a child process; TimeoutError past `timeout_s`, else RuntimeError."""
    code = f"from helpers.check import matmul_tflops; print(matmul_tflops({device!r}, {n}))"
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), **({"NEURON_RT_NUM_CORES": "1"} if neuron else {})}
    with tempfile.TemporaryFile("w+") as out:  # NEURON_RT_NUM_CORES=1: the peak it is held against is one core's
        status = run_bounded([sys.executable, "-c", code], timeout_s, out, env)
        out.seek(0)
        lines = out.read().strip().splitlines()
    if status is None:
        raise TimeoutError(f"{n} x {n} bf16 matmuls did not finish in {timeout_s:g} s (--timeout; killed)")
    if status != 0:
        raise RuntimeError(f"the matmul exited {status}: {' | '.join(lines[-3:])}")
    return float(lines[-1])


def matmul_peak(machine: Machine) -> Outcome:
    """A bf16 matmul now against the peak MFU divides by: the device's published row, or this CPU's measured roof."""
    cpu = not (machine.device == "cuda" or machine.dev.neuron)  # XLA on a CPU too
    n = 1024 if cpu else 8192  # a CPU finishes 1024^2 in seconds
    measured = bounded_matmul(machine.device, n, machine.timeout_s, machine.dev.neuron)
    from helpers import devices, flops, peaks, record

    section = machine.dev.section()
    if cpu:  # a CPU's roof: what its runs measured and kept
        kept = peaks.cpu_roof(section["key"], "bf16", section["torch_threads"], machine.results / record.PEAKS) or {}
        peak, source = kept.get("peak_tflops"), kept.get("source", "no roof kept yet for this CPU")
    else:
        peak, source = flops.peak(section, "bf16")
    return judge(f"{n} x {n} bf16 matmuls", measured, peak, source, cpu, devices.kind(section))


def judge(what: str, measured: float, peak: float | None, source: str, cpu: bool, kind: str) -> Outcome:
    """Pass a reading inside its band of the peak; warn where the band is not known to hold; else fail."""
    text = f"{what}: {measured:.3g} TFLOP/s"
    if not peak:
        return Outcome("skip" if cpu else "fail", f"{text}; no bf16 peak to hold it against ({source})")
    (low, high), ratio = CPU_BAND if cpu else DEVICE_BAND, measured / peak
    text += f", {ratio:.0%} of the {peak:.4g} TFLOP/s MFU divides by ({source})"
    if low <= ratio <= high:
        return Outcome("pass", text)
    if cpu or kind not in BAND_MEASURED_ON:
        why = "a CPU's roof moves with load" if cpu else f"the band was measured on {', '.join(BAND_MEASURED_ON)} only"
        return Outcome("warn", f"{text}: outside {low:.0%}-{high:.0%}, not judged ({why}): read its MFU with care")
    return Outcome("fail", f"{text}: outside {low:.0%}-{high:.0%}: correct the peak (with its source) or find the cap")


# ----------------------------------------------------------------------------- the command
CHECKS = (
    ("versions against this environment's pins", versions),
    ("the device asked for is the one the runs use", device_used),
    (f"{STEPS} steps in every precision mode, losses finite", five_steps),
    ("on XLA one training graph per step, evaluation counted apart", xla_graphs),
    ("the energy window is the timing window", energy_window),
    ("two ranks record world size 2 and disjoint shards", two_ranks),
    ("a bf16 matmul against the peak MFU divides by", matmul_peak),
)


def run_checks(machine: Machine) -> list[Outcome]:
    """Run every check in order, printing each as it ends (`N. status  title: text`); return them."""
    outcomes = []
    for number, (title, check) in enumerate(CHECKS, 1):
        try:
            outcome = check(machine) if number <= 2 or machine.dev else Outcome("skip", "no device (check 2 failed)")
        except Exception as err:  # noqa: BLE001 - a check that breaks is a failed one, with its reason
            outcome = Outcome("fail", f"{type(err).__name__}: {err}")
        print(f"{number}. {outcome.status}  {title}: {outcome.text}", flush=True)
        outcomes.append(outcome)
    return outcomes


def main(argv: list[str] | None = None) -> int:
    """Command line: python -m helpers.check [--device D] [--results DIR] [--timeout S] [-p NAME VALUE]..."""
    parser = argparse.ArgumentParser(prog="python -m helpers.check", description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", choices=("auto", "cuda", "cpu", "xla"), default="auto")
    parser.add_argument("--results", help="keep the runs' records and logs here (default: a temporary folder)")
    parser.add_argument("--timeout", type=float, help="seconds a run or the matmul may take (600; 1200 on Neuron)")
    parser.add_argument("-p", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"), help="a run parameter")
    args = parser.parse_args(argv)
    if args.timeout is not None and not (math.isfinite(args.timeout) and args.timeout > 0):
        parser.error(f"--timeout {args.timeout:g}: give the seconds a run may take, > 0")
    exit_on_signals()
    results = Path(args.results or tempfile.mkdtemp(prefix="accelbench-check-")).resolve()
    print(f"accelbench check: device {args.device}, records and logs in {results}", flush=True)
    outcomes = run_checks(Machine(args.device, results, dict(args.p), args.timeout))
    print(
        "check: " + ", ".join(f"{sum(o.status == s for o in outcomes)} {s}" for s in ("pass", "fail", "skip", "warn"))
    )
    failed = [f"{n} ({o.text})" for n, o in enumerate(outcomes, 1) if o.status == "fail"]
    if failed:
        print(f"check FAILED: {'; '.join(failed)}; records and logs kept in {results}", file=sys.stderr)
        return 1
    if args.results is None:
        shutil.rmtree(results, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
