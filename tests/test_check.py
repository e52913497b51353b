"""The first-run checklist (`python -m helpers.check`): it passes here, numbers every check, and fails with
the reason when a check fails: a device that is not there, a loss that does not stay finite."""

from __future__ import annotations

import json
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
import torch

from helpers import check
from helpers.run import device

REPO = Path(__file__).resolve().parent.parent
LINE = re.compile(r"^(\d+)\. (pass|fail|skip|warn)  (.+?): (.+)$")


def run_check(*args: str, env: dict | None = None) -> tuple[subprocess.CompletedProcess, dict]:
    """Run `python -m helpers.check ARGS` here; return the process and {number: (status, text)} of its
    checks."""
    env = {**os.environ, "PYTHONPATH": str(REPO), **(env or {})}
    proc = subprocess.run(
        [sys.executable, "-m", "helpers.check", *args], cwd=REPO, capture_output=True, text=True, env=env, timeout=1200
    )
    found = {int(m[1]): (m[2], m[4]) for m in map(LINE.match, proc.stdout.splitlines()) if m}
    return proc, found


def assert_passes(proc: subprocess.CompletedProcess, found: dict, device_type: str) -> None:
    """Every check numbered 1 to 7 in order, none failed, the runs on `device_type`."""
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert list(found) == list(range(1, len(check.CHECKS) + 1))
    assert {status for status, _ in found.values()} <= {"pass", "skip", "warn"}
    assert found[2][0] == found[3][0] == found[5][0] == "pass"
    # a CPU's roof is not judged under load (this machine's cores may be shared), nor a GPU's without a measured band;
    # a roof measured now under load is not trusted, so there is none to judge against
    assert found[7][0] == "pass" or "not judged" in found[7][1] or "no trusted bf16 roof" in found[7][1]
    assert f"-> {device_type}" in found[2][1] and "final loss" in found[3][1]
    assert found[6][0] == "skip" and "the two-rank check needs two" in found[6][1]  # one device here
    assert re.search(r"check: \d passed, 0 failed, \d skipped", proc.stdout)


@pytest.mark.slow
def test_the_check_passes_on_this_machine_and_numbers_every_check(tiny_data_dir):
    proc, found = run_check("-p", "data_dir", str(tiny_data_dir))
    assert_passes(proc, found, "cuda" if torch.cuda.is_available() else "cpu")
    if not torch.cuda.is_available():
        assert found[4][0] == "skip" and "not an XLA device" in found[4][1]


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_a_device_that_is_not_there_fails_check_2_with_the_reason_and_runs_nothing(tmp_path):
    proc, found = run_check("--device", "cuda", "--results", str(tmp_path))
    assert proc.returncode == 1
    assert found[2][0] == "fail" and "device='cuda' but no CUDA GPU is visible" in found[2][1]
    assert all(found[n] == ("skip", "no device to run on (check 2 failed)") for n in range(3, 8))
    assert "check FAILED: 2 (device='cuda'" in proc.stderr
    assert not list(tmp_path.rglob("*.json"))  # no run started


@pytest.mark.slow
def test_a_loss_that_overflows_fails_check_3_and_a_sane_one_passes(tiny_data_dir, tmp_path):
    data = {"data_dir": str(tiny_data_dir)}
    absurd = check.Machine(
        "cpu", tmp_path / "absurd", {**data, "lr": "1e6", "max_grad_norm": "None", "warmup_ratio": "0"}
    )
    sane = check.Machine("cpu", tmp_path / "sane", data)
    for machine in (absurd, sane):
        assert check.device_used(machine).status == "pass"
    failed = check.five_steps(absurd, modes=["fp32"])
    assert failed.status == "fail" and failed.text.startswith("fp32: diverged: loss became nan")
    assert not absurd.runs and check.energy_window(absurd).status == "skip"  # nothing finished to read
    passed = check.five_steps(sane, modes=["fp32"])
    assert passed.status == "pass" and list(sane.runs) == ["fp32"]


def test_a_gpu_the_runs_would_not_use_is_a_silent_fallback_unless_the_cpu_was_asked_for(tmp_path, monkeypatch):
    cpu = device.resolve_device("cpu")
    assert check.unused_hardware("auto", cpu) is None or check.NVIDIA_DEVICE.exists()
    monkeypatch.setattr(check, "NVIDIA_DEVICE", tmp_path / "nvidia0")
    (tmp_path / "nvidia0").touch()  # what the NVIDIA driver creates for the first GPU
    assert "an NVIDIA GPU is present" in check.unused_hardware("auto", cpu)
    assert check.unused_hardware("cpu", cpu) is None  # asked for by name


def test_requirements_follow_includes_and_name_what_is_missing_or_off_its_pin(tmp_path):
    (tmp_path / "base.txt").write_text(
        f"pytest=={metadata.version('pytest')}  # met\ntorch==0.0.1\n--extra-index-url https://example.invalid\n"
    )
    (tmp_path / "top.txt").write_text("# the list\n-r base.txt\nno-such-package-here==1.0\n")
    found = check.requirements(tmp_path / "top.txt")
    assert [r.name for r in found] == ["pytest", "torch", "no-such-package-here"]
    assert check.unmet(found) == [f"torch {metadata.version('torch')} (wants ==0.0.1)", "no-such-package-here missing"]


def steady_record(steady_s: float, energy_s: float, window: str = "steady", **xla) -> dict:
    """A finished record's timing and energy sections, and an `xla` section with `xla`'s changes."""
    section = {
        "compilations_after_warmup": 0,
        "compilations_per_step": {"0": 1},
        "graph_compilations": 2,
        "train": {"execute_count": 5, "uncached_compiles": 1},
        "eval": {"uncached_compiles": 1},
        **xla,
    }
    return {
        "timing": {"steps": 5, "steady_time_s": steady_s},
        "energy": {"window": window, "seconds": energy_s, "joules": None, "reason": "no reader"},
        "xla": section,
    }


def test_the_energy_window_must_be_the_timing_window():
    machine = check.Machine("cpu", Path("."), {})
    machine.runs = {"fp32": steady_record(1.25, 1.25)}
    assert check.energy_window(machine).status == "pass"
    assert "no joules here: no reader" in check.energy_window(machine).text
    # the energy counter of the first GPU did not move over the check's few steady steps: 0 J, said so
    machine.runs["fp32"]["energy"].update(
        joules=0.0, method="measured", source="NVML total energy counter", reason=None
    )
    assert (
        "0 J over its 1250 ms: the counter (NVML total energy counter) did not advance"
        in check.energy_window(machine).text
    )
    machine.runs["bf16"] = steady_record(1.25, 1.75)  # a meter that also covered a warm-up step
    assert "bf16: energy.seconds 1.75" in check.energy_window(machine).text
    machine.runs["bf16"] = steady_record(1.25, 1.25, window="whole run")
    assert check.energy_window(machine).status == "fail"


def test_xla_graphs_fail_on_a_recompile_an_extra_execution_or_evaluation_charged_to_training():
    machine = check.Machine("xla", Path("."), {})
    machine.dev = device.DeviceInfo("xla", "xla:0", "XLA CPU", "AVX2", bf16_fast=False)
    machine.runs = {"fp32": steady_record(1.0, 1.0)}
    assert check.xla_graphs(machine).status == "pass"
    for change, words in (
        ({"compilations_after_warmup": 1}, "compilation(s) after the warm-up"),
        ({"train": {"execute_count": 6, "uncached_compiles": 1}}, "6 graph executions in 5"),
        ({"eval": {"uncached_compiles": 0}}, "not counted apart"),
    ):
        machine.runs = {"fp32": steady_record(1.0, 1.0, **change)}
        outcome = check.xla_graphs(machine)
        assert outcome.status == "fail" and words in outcome.text


@pytest.mark.parametrize("measured, status", [(69.5, "fail"), (87.5, "pass"), (140.0, "fail")])
def test_a_bf16_matmul_is_held_against_the_peak_60_to_110_percent(measured, status):
    # the A10G: 69.5 TFLOP/s measured against the A10's 125 in the file is 56%, a peak too high
    a10 = {"peak_tflops": 125.0, "source": "NVIDIA A10 datasheet"}
    outcome = check.judge_roof("8192 x 8192 bf16 matmuls", measured, a10, check.DEVICE_BAND)
    assert outcome.status == status and f"{100 * measured / 125:.0f}% of the 125 TFLOP/s" in outcome.text
    busy = check.judge_roof("a CPU matmul", measured, a10, check.CPU_BAND, busy="load 9.0 on 2 cores")
    assert busy.status == "skip" and "not judged: the machine is busy (load 9.0 on 2 cores)" in busy.text


def test_neuron_cores_are_counted_from_the_drivers_sysfs(tmp_path):
    for core in ("neuron0/neuron_core0", "neuron0/neuron_core1"):  # a trn1.2xlarge: one device, two cores
        (tmp_path / core).mkdir(parents=True)
    assert check.neuron_cores(tmp_path) == 2 and check.neuron_cores(tmp_path / "absent") == 0


# ----------------------------------------------------------------------------- torch-xla's CPU backend
@pytest.mark.xla
@pytest.mark.slow
def test_the_check_passes_on_torch_xlas_cpu_backend(tiny_data_dir):
    pytest.importorskip("torch_xla", reason="needs torch-xla: run in .venv-xla (make test-xla)")
    proc, found = run_check("-p", "data_dir", str(tiny_data_dir), env={"PJRT_DEVICE": "CPU"})
    assert_passes(proc, found, "xla:0")
    assert found[4][0] == "pass" and "none after" in found[4][1]
    assert "fp16" not in found[3][1].split(":")[0]  # XLA runs no fp16: named as refused instead


# ----------------------------------------------------------------------------- bounded in time
def test_a_run_past_its_limit_is_killed_and_fails_check_3_with_its_log(tiny_data_dir, tmp_path):
    machine = check.Machine("cpu", tmp_path, {"data_dir": str(tiny_data_dir)}, timeout_s=1)
    assert check.device_used(machine).status == "pass"
    outcome = check.five_steps(machine, modes=["fp32"])
    assert outcome.status == "fail" and "killed after its limit of 1 s" in outcome.text
    assert (tmp_path / "logs" / "check-fp32.log").exists() and not machine.runs


def test_the_matmul_runs_in_a_child_that_is_killed_past_its_limit():
    cpu = device.resolve_device("cpu")
    assert check.bounded_matmul_tflops(cpu, timeout_s=300, n=64) > 0
    with pytest.raises(TimeoutError, match="did not finish in 0.2 s"):
        check.bounded_matmul_tflops(cpu, timeout_s=0.2, n=64)  # python alone takes longer to start


def test_a_check_stopped_by_sigterm_takes_the_run_it_waits_on_with_it(tmp_path):
    pid = tmp_path / "pid"
    code = (
        "import sys; from helpers import check; check.exit_on_sigterm(); "
        f"check.run_bounded(['sh', '-c', 'echo $$ > {pid}; exec sleep 60'], 120)"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    for _ in range(600):  # the run has started when it wrote its pid
        if pid.exists() and pid.read_text().strip():
            break
        time.sleep(0.1)
    proc.send_signal(signal.SIGTERM)  # what the task's `timeout` sends when the run passes its limit
    assert proc.wait(timeout=60) == 128 + signal.SIGTERM
    run = int(pid.read_text())
    assert not psutil.pid_exists(run) or psutil.Process(run).status() == psutil.STATUS_ZOMBIE


def test_the_checks_bound_counts_every_run_and_the_matmul():
    runs = len([m for m in check.typing.get_args(check.Precision) if m != "auto"]) + 1  # the modes, two ranks
    assert check.bound_s(neuron=True) == runs * check.RUN_TIMEOUT_S["neuron"] + check.MATMUL_TIMEOUT_S["neuron"]
    assert check.bound_s(neuron=False) < check.bound_s(neuron=True)


# ----------------------------------------------------------------------------- what a run must show
def finished(final_loss: float, val_loss, test_loss) -> dict:
    """A finished record of the check's run with these losses."""
    metrics = {"final_loss": final_loss, "val_loss": val_loss, "test_loss": test_loss}
    return {"status": "finished", "metrics": metrics, "timing": {"steps": check.STEPS}}


@pytest.mark.parametrize(
    "val_loss, test_loss, status",
    [(1.7, 1.8, "pass"), (None, None, "fail"), (float("nan"), 1.8, "fail"), (1.7, float("inf"), "fail")],
)
def test_weights_broken_by_the_last_update_fail_check_3_on_the_evaluation_losses(
    val_loss, test_loss, status, monkeypatch, tmp_path
):
    # the last training loss is computed before the last update: finite even when that update made NaN weights
    machine = check.Machine("cpu", tmp_path, {})
    machine.dev = device.resolve_device("cpu")
    monkeypatch.setattr(check, "train_once", lambda m, p: (finished(1.79, val_loss, test_loss), ""))
    outcome = check.five_steps(machine, modes=["fp32"])
    assert outcome.status == status
    if status == "fail":
        assert "evaluation after training" in outcome.text and "not finite" in outcome.text


@pytest.mark.parametrize("gpu, measured, status", [("NVIDIA L4", 30.0, "warn"), ("NVIDIA H200", 30.0, "fail")])
def test_check_7_judges_a_device_kind_only_where_its_band_was_measured_and_records_the_reading(
    gpu, measured, status, monkeypatch, tmp_path
):
    machine = check.Machine("cuda", tmp_path, {})
    machine.dev = device.DeviceInfo("cuda", "cuda:0", gpu, "AVX2", bf16_fast=True)
    monkeypatch.setattr(check, "bounded_matmul_tflops", lambda dev, timeout_s: measured)
    outcome = check.matmul_roof(machine)
    assert outcome.status == status
    reading = json.loads((tmp_path / check.READINGS / f"matmul@{machine.dev.key}.json").read_text())
    assert reading["measured_tflops"] == measured and reading["status"] == status
    if status == "warn":
        assert "not judged: the band was measured on h200, a10g only" in outcome.text


def test_check_7_skips_a_cpu_whose_roof_measured_now_is_not_trusted(monkeypatch, tmp_path):
    # a busy machine measures an implausible roof, which is never kept: nothing to judge the matmul against
    machine = check.Machine("cpu", tmp_path, {})
    machine.dev = device.DeviceInfo("cpu", "cpu", "Test CPU", "AVX512", bf16_fast=True)
    monkeypatch.setattr(check, "REPO_ROOT", tmp_path)  # no roof kept in the repository for it
    slow = {"peak_tflops": 1e-6, "mem_bw_gbps": 1.0, "shape": "s", "by_shape": {"s": 1e-6}, "threads": 1}
    monkeypatch.setattr(check.peaks, "measure_peak", lambda dtype: slow)
    outcome = check.matmul_roof(machine)
    assert outcome.status == "skip" and "no trusted bf16 roof" in outcome.text


@pytest.mark.parametrize("others_cores, load, status", [(1.5, 0.0, "skip"), (0.0, 99.0, "pass")])
def test_check_7_judges_a_cpu_by_the_cores_others_used_during_its_matmul_not_the_load_average(
    others_cores, load, status, monkeypatch, tmp_path
):
    """The load average still counts checks 3-6's own training runs: an idle machine came out busy."""
    machine = check.Machine("cpu", tmp_path, {})
    machine.dev = device.DeviceInfo("cpu", "cpu", "Test CPU", "AVX512", bf16_fast=True)
    monkeypatch.setattr(check, "cpu_roof", lambda m: ({"peak_tflops": 1.0}, "kept"))
    now = {"peak_tflops": 1.0, "shape": "s", "others_cores": others_cores, "cpu_count": 2}
    monkeypatch.setattr(check.peaks, "measure_peak", lambda dtype: now)
    monkeypatch.setattr(os, "getloadavg", lambda: (load, load, load))
    outcome = check.matmul_roof(machine)
    assert outcome.status == status
    assert ("not judged: the machine is busy" in outcome.text) == (status == "skip")


# ----------------------------------------------------------------------------- what to set, said early
def test_an_empty_cuda_visible_devices_is_named_where_the_driver_shows_a_gpu(tmp_path, monkeypatch):
    cpu = device.resolve_device("cpu")
    monkeypatch.setattr(check, "NVIDIA_DEVICE", tmp_path / "nvidia0")
    (tmp_path / "nvidia0").touch()
    monkeypatch.setattr(check.torch.cuda, "device_count", lambda: 0)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert "CUDA_VISIBLE_DEVICES='' hides every GPU" in check.unused_hardware("auto", cpu)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert "install the CUDA build of torch" in check.unused_hardware("auto", cpu)


@pytest.mark.parametrize(
    "requested, pjrt, says",
    [
        ("auto", None, "Set PJRT_DEVICE=CPU"),
        ("xla", "CUDA", "PJRT_DEVICE='CUDA' in the XLA environment"),
        ("xla", "CPU", None),
        ("xla", None, None),  # resolve_device sets CPU itself
    ],
)
def test_the_xla_environment_refuses_at_check_2_what_it_cannot_run(requested, pjrt, says, monkeypatch, tmp_path):
    monkeypatch.setattr(check, "find_spec", lambda name: name == "torch_xla")  # .venv-xla: no torch-neuronx
    if pjrt is None:
        monkeypatch.delenv("PJRT_DEVICE", raising=False)
    else:
        monkeypatch.setenv("PJRT_DEVICE", pjrt)
    found = check.xla_setting(requested)
    assert found is None if says is None else says in found
    if says:
        outcome = check.device_used(check.Machine(requested, tmp_path, {}))
        assert outcome.status == "fail" and says in outcome.text
