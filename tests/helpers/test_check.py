"""The first-run check (`python -m helpers.check`): it names what is missing, refuses a device the runs would not
use, bounds every child by --timeout, ends its run when it is itself ended, and judges what the records show."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path

import psutil
import pytest

from helpers import check, devices

REPO = Path(__file__).resolve().parents[2]
LINE = re.compile(r"^(\d+)\. (pass|fail|skip|warn)  (.+?): (.+)$")


def run_check(*args: str, python: list[str] | None = None, env: dict | None = None, timeout: float = 600):
    """Run `python -m helpers.check ARGS` here; return the process and {number: (status, text)} of its checks."""
    env = {**os.environ, "PYTHONPATH": str(REPO), **(env or {})}
    command = [*(python or [sys.executable]), "-m", "helpers.check", *args]
    proc = subprocess.run(command, cwd=REPO, capture_output=True, text=True, env=env, timeout=timeout)
    found = {int(m[1]): (m[2], m[4]) for m in map(LINE.match, proc.stdout.splitlines()) if m}
    return proc, found


# ----------------------------------------------------------------------------- 1. versions
def test_a_python_without_the_packages_names_them_at_check_1_not_in_a_traceback(tmp_path):
    # -S: no site-packages at all, the standard library only: every requirement is missing
    proc, found = run_check("--device", "cpu", "--results", str(tmp_path), python=[sys.executable, "-S"])
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert found[1][0] == "fail" and "torch missing" in found[1][1] and "pydantic missing" in found[1][1]
    assert "rebuild it (make venv)" in found[1][1]
    assert found[2][0] == "fail" and "No module named" in found[2][1]  # the import the device needs, named
    assert all(found[n][0] == "skip" for n in range(3, 8))


def test_one_missing_package_and_one_off_its_pin_are_named(tmp_path, monkeypatch):
    (tmp_path / "base.txt").write_text(f"pytest=={metadata.version('pytest')}  # met\n--extra-index-url x\n")
    (tmp_path / "requirements.txt").write_text("# the list\n-r base.txt\ntorch==0.0.1\nno-such-package-here==1.0\n")
    lines = check.requirements(tmp_path / "requirements.txt")
    assert [re.match(r"[\w-]+", line)[0] for line in lines] == ["pytest", "torch", "no-such-package-here"]
    assert check.unmet(lines) == [f"torch {metadata.version('torch')} (wants ==0.0.1)", "no-such-package-here missing"]
    monkeypatch.setattr(check, "REPO_ROOT", tmp_path)
    outcome = check.versions(check.Machine("cpu", tmp_path))
    assert outcome.status == "fail" and "no-such-package-here missing" in outcome.text


def test_a_neuron_environment_passes_on_the_sdk_pins_it_meets_and_names_both_when_it_meets_neither(
    tmp_path, monkeypatch
):
    monkeypatch.setattr(check, "REPO_ROOT", tmp_path)
    monkeypatch.setattr(check, "find_spec", lambda name: name in ("torch_xla", "torch_neuronx"))
    (tmp_path / "requirements-neuron.txt").write_text("torch==0.0.1\n")  # the 2.31 pins, not met here
    (tmp_path / "requirements-neuron-2.29.txt").write_text(f"pytest=={metadata.version('pytest')}\n")
    outcome = check.versions(check.Machine("xla", tmp_path))
    assert outcome.status == "pass" and "every requirement of requirements-neuron-2.29.txt met" in outcome.text
    (tmp_path / "requirements-neuron-2.29.txt").write_text("pytest==0.0.1\n")
    outcome = check.versions(check.Machine("xla", tmp_path))
    assert outcome.status == "fail" and "requirements-neuron-2.29.txt: pytest" in outcome.text
    assert "make neuron-venv NEURON_REQUIREMENTS=requirements-neuron.txt" in outcome.text


# ----------------------------------------------------------------------------- 2. the device
def test_cuda_asked_for_with_an_empty_cuda_visible_devices_says_so_and_runs_nothing(tmp_path):
    proc, found = run_check("--device", "cuda", "--results", str(tmp_path), env={"CUDA_VISIBLE_DEVICES": ""})
    assert proc.returncode == 1
    assert found[2][0] == "fail" and "CUDA_VISIBLE_DEVICES='' hides every GPU from torch: unset it" in found[2][1]
    assert all(found[n] == ("skip", "no device (check 2 failed)") for n in range(3, 8))
    assert not list(tmp_path.rglob("*.json"))


def test_a_gpu_the_driver_shows_is_asked_for_by_auto_never_silently_replaced_by_the_cpu(tmp_path, monkeypatch):
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is visible here: auto uses it")
    monkeypatch.setattr(check, "NVIDIA_DEVICE", tmp_path / "nvidia0")
    monkeypatch.setattr(check, "find_spec", lambda name: None)  # not the XLA environment
    monkeypatch.delenv("PJRT_DEVICE", raising=False)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert check.device_used(check.Machine("auto", tmp_path)).status == "pass"  # no GPU: the CPU, rightly
    (tmp_path / "nvidia0").touch()  # what the NVIDIA driver creates for the first GPU
    outcome = check.device_used(check.Machine("auto", tmp_path))
    assert outcome.status == "fail" and "--device auto (cuda)" in outcome.text
    assert "is a CPU build" in outcome.text or "sees no GPU" in outcome.text
    assert check.device_used(check.Machine("cpu", tmp_path)).status == "pass"  # asked for by name


@pytest.mark.parametrize(
    "neuron, neuron_device, pjrt, says",
    [
        (False, False, None, None),  # .venv-xla: the children get PJRT_DEVICE=CPU
        (False, False, "CUDA", "PJRT_DEVICE='CUDA': this environment has torch-xla's CPU backend only"),
        (False, True, None, "torch-neuronx is not in this environment"),
        (True, True, "CPU", "PJRT_DEVICE=CPU on a machine with NeuronCores"),
        (True, True, None, None),
    ],
)
def test_xla_refuses_at_check_2_what_would_train_elsewhere(neuron, neuron_device, pjrt, says, tmp_path, monkeypatch):
    monkeypatch.setattr(check, "find_spec", lambda name: name == "torch_xla" or (neuron and name == "torch_neuronx"))
    monkeypatch.setattr(check, "NEURON_DEVICE", tmp_path / "neuron0")
    if neuron_device:
        (tmp_path / "neuron0").touch()
    monkeypatch.delenv("PJRT_DEVICE", raising=False) if pjrt is None else monkeypatch.setenv("PJRT_DEVICE", pjrt)
    problem = check.xla_problem()
    assert problem is None if says is None else says in problem
    assert check.wanted("auto") == "xla"


# ----------------------------------------------------------------------------- bounded in time
def test_timeout_bounds_every_run_and_the_matmul(tmp_path):
    proc, found = run_check("--device", "cpu", "--timeout", "0.5", "--results", str(tmp_path))
    assert proc.returncode == 1
    assert found[3][0] == "fail" and "killed after its limit of 0.5 s (--timeout; log" in found[3][1]
    assert found[7][0] == "fail" and "did not finish in 0.5 s (--timeout; killed)" in found[7][1]
    assert (tmp_path / "logs" / "check-fp32.log").exists()  # the run's log, kept for the failure


def test_a_run_past_its_limit_is_killed_with_its_whole_group(tmp_path):
    pid = tmp_path / "grandchild"
    command = ["sh", "-c", f"sleep 60 & echo $! > {pid}; wait"]
    assert check.run_bounded(command, timeout_s=1) is None  # None: past its limit, killed (not its exit status)
    assert wait_gone(int(pid.read_text()))


def wait_gone(pid: int) -> bool:
    """Return whether process `pid` is gone (or a zombie) within a few seconds."""
    for _ in range(100):
        if not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
            return True
        time.sleep(0.1)
    return False


@pytest.mark.parametrize("sig", [signal.SIGHUP, signal.SIGTERM])
def test_the_check_ended_by_a_signal_ends_the_run_it_waits_on(sig, tmp_path):
    pid = tmp_path / "pid"
    code = (
        "from helpers import check; check.exit_on_signals(); "
        f"check.run_bounded(['sh', '-c', 'echo $$ > {pid}; exec sleep 60'], 120)"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    for _ in range(600):  # the run has started once it wrote its pid
        if pid.exists() and pid.read_text().strip():
            break
        time.sleep(0.1)
    proc.send_signal(sig)  # a closed terminal (HUP), a task's `timeout` or `sky cancel` (TERM)
    assert proc.wait(timeout=60) == 128 + sig
    assert wait_gone(int(pid.read_text()))


def test_the_matmul_runs_in_a_child_and_the_bound_follows_the_timeout():
    assert check.bounded_matmul("cpu", 64, timeout_s=300) > 0
    assert check.bound_s(neuron=False, timeout_s=100) == (len(check.MODES) + 2) * 100
    assert check.bound_s(neuron=True) > check.bound_s(neuron=False)


# ----------------------------------------------------------------------------- what the records must show
def record(steady_s: float, energy_s: float | None, window: str = "steady", **xla) -> dict:
    """A finished run's timing, energy and xla sections, with `xla`'s changes."""
    section = {
        "compilations_after_warmup": 0,
        "graph_compilations": 2,
        "train": {"execute_count": 5, "uncached_compiles": 1},
        "eval": {"uncached_compiles": 1},
        **xla,
    }
    energy = {"window": window, "seconds": energy_s, "joules": 1.5, "method": "measured"}
    return {"timing": {"steps": 5, "steady_time_s": steady_s}, "energy": energy, "xla": section}


def test_the_energy_window_must_be_the_timing_window():
    machine = check.Machine("cpu", Path("."))
    machine.runs = {"fp32": record(1.25, 1.25)}
    assert check.energy_window(machine).status == "pass"
    machine.runs["bf16"] = record(1.25, 1.75)  # a meter that also covered a warm-up step
    outcome = check.energy_window(machine)
    assert outcome.status == "fail" and "bf16: energy.seconds 1.75" in outcome.text
    machine.runs["bf16"] = record(1.25, 1.25, window="whole run")
    assert check.energy_window(machine).status == "fail"
    machine.runs = {"fp32": record(1.25, None)}
    assert check.energy_window(machine).status == "skip"  # no reader: nothing to compare


def test_xla_graphs_fail_on_a_recompile_an_extra_execution_or_evaluation_charged_to_training():
    machine = check.Machine("xla", Path("."), device="xla")
    machine.runs = {"fp32": record(1.0, 1.0)}
    assert check.xla_graphs(machine).status == "pass"
    for change, words in (
        ({"compilations_after_warmup": 1}, "compilation(s) after the warm-up"),
        ({"train": {"execute_count": 6, "uncached_compiles": 1}}, "6 graph executions in 5"),
        ({"eval": {"uncached_compiles": 0}}, "not counted apart"),
    ):
        machine.runs = {"fp32": record(1.0, 1.0, **change)}
        outcome = check.xla_graphs(machine)
        assert outcome.status == "fail" and words in outcome.text


@pytest.mark.parametrize(
    "measured, cpu, kind, status",
    [
        (778.0, False, "h200", "pass"),  # 79% of 989: the H200's reading
        (300.0, False, "h200", "fail"),  # a cap, or a peak too high, where the band was measured
        (300.0, False, "l4", "warn"),  # outside the band on a kind it was never measured on
        (0.5, True, "cpu", "pass"),
        (0.05, True, "cpu", "warn"),  # a CPU's roof is a reading, never a verdict
    ],
)
def test_check_7_holds_the_matmul_against_the_peak_where_the_band_is_known(measured, cpu, kind, status):
    peak = 1.0 if cpu else 989.4
    outcome = check.judge("bf16 matmuls", measured, peak, "the row's source", cpu, kind)
    assert outcome.status == status and f"{measured / peak:.0%} of the {peak:.4g} TFLOP/s" in outcome.text
    assert check.judge("bf16 matmuls", measured, None, "no row", cpu, kind).status == ("skip" if cpu else "fail")


def test_the_device_the_runs_must_record_is_the_loops_own_key(tmp_path):
    machine = check.Machine("cpu", tmp_path)
    assert check.device_used(machine).status == "pass"
    assert machine.dev.key == devices.cpu_device().key and machine.timeout_s == check.TIMEOUT_S["other"]
    values = check.run_values(machine, "check-fp32", precision="fp32")
    assert values["device"] == "cpu" and values["results_path"] == str(tmp_path) and values["max_steps"] == 5


# ----------------------------------------------------------------------------- the loops for real
@pytest.fixture(scope="module")
def check_data(tmp_path_factory) -> Path:
    """A folder of train/validation/test.jsonl, six labels each cued by a word (64/16/16 rows)."""
    root = tmp_path_factory.mktemp("check-data")
    cues = ("sad", "happy", "love", "angry", "afraid", "surprised")
    for split, rows in (("train", 64), ("validation", 16), ("test", 16)):
        lines = [f'{{"text": "i feel so {cues[i % 6]} today", "label": {i % 6}}}' for i in range(rows)]
        (root / f"{split}.jsonl").write_text("\n".join(lines) + "\n")
    return root


@pytest.mark.slow
def test_a_run_of_the_loop_passes_check_3_and_5_and_a_loss_that_overflows_fails_check_3(check_data, tmp_path):
    sane = check.Machine("cpu", tmp_path / "sane", {"data_dir": str(check_data)})
    absurd = check.Machine("cpu", tmp_path / "absurd", {"data_dir": str(check_data), "lr": "1e6", "warmup_ratio": "0"})
    for machine in (sane, absurd):
        assert check.device_used(machine).status == "pass"
    passed = check.five_steps(sane, only=("fp32",))
    assert passed.status == "pass" and list(sane.runs) == ["fp32"], passed.text
    assert check.energy_window(sane).status in ("pass", "skip")  # skip: no energy reader on this machine
    failed = check.five_steps(absurd, only=("fp32",))
    assert failed.status == "fail" and failed.text.startswith("fp32: ") and not absurd.runs


@pytest.mark.xla
@pytest.mark.slow
def test_the_check_on_torch_xlas_cpu_backend_counts_one_training_graph_per_step(check_data, tmp_path):
    pytest.importorskip("torch_xla", reason="needs torch-xla: run in .venv-xla (make test-xla)")
    machine = check.Machine("xla", tmp_path, {"data_dir": str(check_data)})
    assert check.device_used(machine).status == "pass" and machine.dev.key.startswith("xla-")
    assert check.five_steps(machine, only=("fp32",)).status == "pass"
    outcome = check.xla_graphs(machine)
    assert outcome.status == "pass" and "one a step" in outcome.text
