"""The cloud run (helpers/study/cloud.py, cloud/*.yaml): task files SkyPilot accepts, a dry run that prints
the task, the plan and the cost and contacts nothing, and one run command, the same on the instance and here.
No test contacts a cloud."""

from __future__ import annotations

import fnmatch
import importlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from importlib.util import find_spec
from pathlib import Path

import pytest
import yaml

from helpers import check
from helpers.calc import prices
from helpers.calc.facts import cuda_device_key, load_instance_prices
from helpers.study import cloud, frame
from helpers.study.sweep import plan, runner, suites

REPO = Path(__file__).resolve().parents[2]
CLOUD_PYTHON = REPO / cloud.CLOUD_BIN / "python"
needs_skypilot = pytest.mark.skipif(
    not CLOUD_PYTHON.exists(),
    reason=f"{cloud.CLOUD_BIN}/python is missing: "
    "`make cloud-venv` installs SkyPilot there (`make test` builds it first)",
)
# imported first by every Python process started with this folder on PYTHONPATH: no process can open a network
# connection, so a dry run that reached for a cloud, a catalog or the hub would fail
NO_NETWORK = """
import socket

def _refuse(*args, **kwargs):
    raise OSError("network blocked by the test: the dry run must contact nothing")

_connect = socket.socket.connect

def _connect_local(self, address):
    if self.family in (socket.AF_INET, socket.AF_INET6):
        _refuse()
    return _connect(self, address)

socket.socket.connect = _connect_local
socket.getaddrinfo = _refuse
"""


def task_file(name: str) -> dict:
    """Return a task file of cloud/ as written."""
    return yaml.safe_load((REPO / "cloud" / name).read_text())


def snapshot() -> dict:
    """Return every file of the checkout (environments, git and caches aside) with its size and mtime."""
    skip = {".git", ".pytest_cache", "__pycache__"}
    return {
        p: (p.stat().st_size, p.stat().st_mtime_ns)
        for p in REPO.rglob("*")
        if p.is_file()
        and not skip & set(p.relative_to(REPO).parts)
        and not p.relative_to(REPO).parts[0].startswith(".venv")
    }


# ----------------------------------------------------------------------------- SkyPilot's schema
@needs_skypilot
def test_every_target_renders_tasks_skypilots_schema_accepts():
    ami = "ami-0123456789abcdef0"
    tasks = [
        cloud.render(target, "cloud/smoke.toml padding", "full", lab=lab, image_id=ami)
        for target in cloud.TARGETS
        for lab in (False, True)
    ]
    said = cloud.validate(*tasks)
    assert said.startswith("valid: SkyPilot") and said.endswith(f"({len(tasks)} tasks)")
    for config in tasks:
        assert config["resources"]["autostop"] == {"idle_minutes": cloud.IDLE_MINUTES, "down": True}
        assert config["envs"]["SUITES"] == "cloud/smoke.toml padding" and config["envs"]["VARIANT"] == "full"


@needs_skypilot
@pytest.mark.parametrize(
    "break_it, says",
    [
        pytest.param(lambda c: c.update(rnu=c.pop("run")), "rnu", id="a misspelled task field"),
        pytest.param(
            lambda c: c["resources"].update(autostop={"idle_minute": 15}), "autostop", id="a misspelled autostop field"
        ),
        pytest.param(lambda c: c["resources"].update(disk_size="big"), "disk_size", id="a disk size in words"),
    ],
)
def test_a_task_skypilot_would_refuse_is_refused_here(break_it, says):
    config = cloud.render("trn1")
    break_it(config)
    with pytest.raises(cloud.CloudError, match="fails SkyPilot's schema") as err:
        cloud.validate(config)
    assert says in str(err.value)


# ----------------------------------------------------------------------------- what each target launches
@pytest.mark.parametrize("target", [t for t, spec in cloud.TARGETS.items() if spec.pinned and t != "local"])
def test_a_pinned_target_launches_the_instance_its_plan_prices(target):
    resources = cloud.render(target)["resources"]
    row = load_instance_prices().set_index("instance").loc[cloud.TARGETS[target].instance]
    assert resources["instance_type"] == cloud.TARGETS[target].instance
    if "accelerators" in resources:  # trn1: SkyPilot reads the Trainium from the instance type
        name, count = resources["accelerators"].split(":")
        assert name.lower() == row["device"] and int(count) == row["accelerators"]


def test_the_trn1_task_builds_the_neuron_environment_and_sweeps_the_trainium_target():
    trn1, gpu = task_file("trn1.yaml"), task_file("gpu.yaml")
    assert "make neuron-venv" in trn1["setup"] and trn1["envs"]["SWEEP_TARGET"] == "trainium"
    assert trn1["envs"]["SWEEP_PY"] == ".venv-neuron/bin/python"
    assert gpu["envs"]["SWEEP_PY"] == ".venv/bin/python"
    assert "bash cloud/setup_gpu.sh" in gpu["setup"] and gpu["envs"]["SWEEP_TARGET"] == "nvidia"
    assert 'make venv PYTHON="$PY"' in (REPO / "cloud" / "setup_gpu.sh").read_text()
    assert "image_id" not in trn1["resources"]  # looked up at launch: the newest DLAMI of SDK 2.31
    lookup = cloud.ami_command("us-east-1")
    assert "Name=description,Values=*Neuron SDK 2.31*" in lookup
    assert lookup[:3] == [".venv-cloud/bin/aws", "ec2", "describe-images"]


def test_the_dlami_lookup_takes_the_multi_framework_neuron_dlami_only():
    pattern = cloud.DLAMI_NAME
    assert fnmatch.fnmatchcase("Deep Learning AMI Neuron (Ubuntu 24.04) 20260801", pattern)
    for other in ("PyTorch 2.9", "JAX 0.6", "vLLM 0.10"):  # single-framework DLAMIs of the same SDK
        assert not fnmatch.fnmatchcase(f"Deep Learning AMI Neuron {other} (Ubuntu 24.04) 20260801", pattern)
    assert not fnmatch.fnmatchcase("Deep Learning AMI Neuron (Ubuntu 22.04) 20260801", pattern)


def test_the_disks_hold_the_images():
    # the Neuron DLAMI docs ask for at least 512 GB on Trn instances; SkyPilot refuses an image larger than its disk
    assert task_file("trn1.yaml")["resources"]["disk_size"] >= 512
    assert task_file("gpu.yaml")["resources"]["disk_size"] >= 256  # SkyPilot's default, which its images fit


# ----------------------------------------------------------------------------- one run command
def test_the_run_every_task_launches_is_the_run_the_local_target_runs():
    trn1, gpu = task_file("trn1.yaml"), task_file("gpu.yaml")
    assert trn1["run"] == gpu["run"] == 'timeout --kill-after=60 "$RUN_TIMEOUT_S" make cloud-run\n'
    local = cloud.render("local")
    assert (local["setup"], local["run"]) == (gpu["setup"], gpu["run"])
    lab = cloud.render("a10g", lab=True)
    assert lab["setup"] == gpu["setup"] and lab["run"] == cloud.LAB_RUN and "make lab" in lab["run"]
    # trn1's setup builds .venv-neuron only; the lab's runs JupyterLab from .venv: built before the tunnel opens
    trn1_lab = cloud.render("trn1", lab=True)
    assert trn1_lab["setup"].startswith(trn1["setup"]) and trn1_lab["setup"].rstrip().endswith("make venv")


# ----------------------------------------------------------------------------- bounded in time and money
@pytest.mark.parametrize("target", ["trn1", "a10g", "h100"])
def test_every_step_has_a_limit_and_the_printed_bound_is_their_sum(target):
    config = cloud.render(target, "cloud/smoke.toml padding", "full")
    env = config["envs"]
    assert config["setup"].startswith('timeout --kill-after=60 "$SETUP_TIMEOUT_S" ')
    assert config["run"].startswith('timeout --kill-after=60 "$RUN_TIMEOUT_S" ')
    parts = dict((name, seconds) for name, seconds, _ in cloud.run_parts(config))
    neuron = target == "trn1"
    assert parts["the check"] == check.bound_s(neuron) and ("precompile" in parts) == neuron
    suites_s = sum(len(suites.expand(s, "full")) * suites.timeout_of(s, "full") for s in cloud.suites_of(config))
    assert parts["the suites"] == suites_s and int(env["RUN_TIMEOUT_S"]) == round(sum(parts.values()))
    total_s = cloud.PROVISION_S + int(env["SETUP_TIMEOUT_S"]) + int(env["RUN_TIMEOUT_S"]) + 60 * cloud.IDLE_MINUTES
    assert cloud.total_hours(config) == pytest.approx(total_s / 3600)
    text = cloud.cost_text(target, config)
    for part in ("start:", "setup:", "run:", "the check", "the suites", "idle:", "in all, at most"):
        assert part in text
    if TARGETS_PINNED[target]:
        assert f"at most ${prices.instance_price(cloud.TARGETS[target].instance) * total_s / 3600:.2f}" in text
        assert f"{config['resources']['disk_size']} GB disk (EBS) bills apart" in text


TARGETS_PINNED = {t: spec.pinned for t, spec in cloud.TARGETS.items()}


def test_the_rendered_run_is_killed_at_its_limit(tmp_path):
    config = cloud.render("local")
    hang = f"{sys.executable} -c 'import time; time.sleep(120)'"  # a check that never ends
    env = {**os.environ, **config["envs"], "RUN_TIMEOUT_S": "2", "SWEEP_PY": hang, "CHECK_RESULTS": str(tmp_path)}
    out = subprocess.run(["bash", "-c", config["run"]], cwd=REPO, env=env, capture_output=True, text=True, timeout=90)
    assert out.returncode == 124, (out.stdout, out.stderr)  # timeout's status: killed at its limit


def test_an_offer_by_accelerator_name_is_priced_per_gpu_and_every_card_it_may_be_has_a_peak():
    for target in ("a100", "h100"):
        spec = cloud.TARGETS[target]
        name = spec.resources["accelerators"].split(":")[0]
        assert all(cuda_device_key(card) for card in cloud.CARDS[name])
        share = plan.target_of("nvidia", spec.instance, gpus=1).price_per_hour_usd
        assert share == pytest.approx(prices.instance_price(spec.instance) / 8)
    a100 = cloud.cost_text("a100", cloud.render("a100"))
    assert "AWS sells A100s only eight to a p4d.24xlarge" in a100 and "no offer of one A100 exists" in a100


def test_cloud_run_keeps_the_checks_logs_where_they_come_home_and_precompiles_on_trainium():
    def dry(*settings: str) -> str:
        command = ["make", "--no-print-directory", "-n", "cloud-run", "SWEEP_PY=python", *settings]
        return subprocess.run(command, cwd=REPO, capture_output=True, text=True, check=True).stdout

    out = dry("SWEEP_TARGET=trainium")
    check_line = next(line for line in out.splitlines() if "-m helpers.check" in line)
    results = re.search(r"--results (\S+)", check_line).group(1)
    assert results.startswith(cloud.RUNS + "/") and f"tee {results}/check.log" in check_line
    fetched = [c for c in cloud.commands("trn1", cloud.render("trn1"), "")["fetch"] if c[-1] == f"{cloud.RUNS}/"]
    assert fetched and "--exclude=*" not in fetched[0]  # Experiment/runs comes home whole: logs too
    assert "--target trainium --precompile" in out and "--precompile" not in dry("SWEEP_TARGET=nvidia")


def test_cloud_run_is_the_check_then_each_suite_through_the_sweeps_own_command_line():
    # --no-print-directory: under `make test` (a recursive make) every make prints "Entering directory"
    out = subprocess.run(
        [
            "make",
            "--no-print-directory",
            "-n",
            "cloud-run",
            "SUITES=cloud/smoke.toml padding",
            "VARIANT=full",
            "SWEEP_TARGET=trainium",
            "SWEEP_PY=python",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "python -m helpers.check --results" in out.splitlines()[1]
    assert "for suite in cloud/smoke.toml padding; do" in out
    sweep = re.search(r'sweep="python -m helpers.study.sweep \$suite ([^"]*)"', out).group(1).split()
    sweep.remove("--precompile")  # trainium
    argv = sweep + re.search(r"\$sweep (--results \S+) \|\| status=1", out).group(1).split()
    assert argv == ["--variant", "full", "--target", "trainium", "--results", "Experiment/results"]
    for suite in ("cloud/smoke.toml", "padding"):  # the sweep's own parser takes these flags
        runner.main([suite, *argv, "--list"])


def test_the_lab_settings_are_jupyters_own():
    config = json.loads((REPO / "cloud" / "jupyter" / "jupyter_server_config.json").read_text())
    where = {
        "ServerApp": "jupyter_server.serverapp",
        "MappingKernelManager": "jupyter_server.services.kernels.kernelmanager",
        "TerminalManager": "jupyter_server_terminals.terminalmanager",
    }
    for section, traits in config.items():
        cls = getattr(importlib.import_module(where[section]), section)
        assert set(traits) <= set(cls.class_traits()), (section, set(traits) - set(cls.class_traits()))


# ----------------------------------------------------------------------------- however a launch ends
@pytest.mark.parametrize("ends", ["finished", "failed", "interrupted", "kept", "lab closed"])
def test_however_a_launch_ends_the_records_come_home_and_the_cluster_goes(ends, monkeypatch):
    lab = ends == "lab closed"
    config, ran, launched = cloud.render("a10g", lab=lab), [], []

    def run(command: list[str], **kwargs) -> subprocess.CompletedProcess:
        """Record the command instead of running it; `sky launch` reads its task file, Ctrl-C ends the tunnel."""
        ran.append(command)
        if command[1:2] == ["launch"]:
            launched.append((Path(command[4]), yaml.safe_load(Path(command[4]).read_text())))
        if (ends == "interrupted" and command[1:2] == ["launch"]) or command[0] == "ssh":
            raise KeyboardInterrupt
        return subprocess.CompletedProcess(command, 1 if ends == "failed" else 0)

    monkeypatch.setattr(cloud.subprocess, "run", run)
    monkeypatch.setattr(sys.stdin, "isatty", lambda: False)  # no terminal: the lab is torn down without asking
    if ends == "interrupted":
        with pytest.raises(KeyboardInterrupt):
            cloud.launch("a10g", config, yes=True, keep=False, lab=lab)
    else:
        assert cloud.launch("a10g", config, yes=True, keep=ends == "kept", lab=lab) == (1 if ends == "failed" else 0)
    [(task_file, task)] = launched
    assert task == config and not task_file.exists()  # the task as printed, its temporary file gone
    cmd = cloud.commands("a10g", config, str(task_file), lab=lab, yes=True)
    tunnel = [cmd["tunnel"]] if lab else []
    assert ran == [cmd["launch"], *tunnel, *cmd["fetch"], *([] if ends == "kept" else [cmd["down"]])]


# ----------------------------------------------------------------------------- asking, and the dry run
def test_it_asks_on_a_terminal_and_refuses_without_one(monkeypatch):
    class Terminal:
        def isatty(self):
            return True

    monkeypatch.setattr(sys, "stdin", Terminal())
    for answer, default, expected in (("y", False, True), ("", False, False), ("no", True, False), ("", True, True)):
        monkeypatch.setattr("builtins.input", lambda prompt, a=answer: a)
        assert cloud.confirm("launch?", yes=False, default=default) is expected
    monkeypatch.setattr(sys.stdin, "isatty", lambda: False)
    assert cloud.confirm("launch?", yes=True)
    with pytest.raises(cloud.CloudError, match="YES=1"):
        cloud.confirm("launch?", yes=False)


@pytest.mark.parametrize(
    "word, means",
    [
        ("1", True),
        ("yes", True),
        ("True", True),
        ("y", True),
        ("on", True),
        ("0", False),
        ("no", False),
        ("false", False),
        ("", False),
    ],
)
def test_dry_run_and_the_other_switches_take_what_a_user_types_for_yes(word, means):
    assert cloud.switch(word) is means
    assert cloud.parser().parse_args(["trn1", f"--dry-run={word}"]).dry_run is means
    assert cloud.parser().parse_args(["trn1", "--dry-run"]).dry_run is True


def test_a_switch_that_is_neither_yes_nor_no_is_refused_not_taken_for_a_launch(capsys):
    with pytest.raises(SystemExit):
        cloud.parser().parse_args(["trn1", "--dry-run=ture"])
    assert "'ture' is neither yes" in capsys.readouterr().err


@pytest.mark.parametrize("word", ["true", "yes"])
def test_make_cloud_passes_dry_run_as_typed(word):
    out = subprocess.run(
        ["make", "--no-print-directory", "-n", "cloud", "TARGET=trn1", f"DRY_RUN={word}"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    line = next(line for line in out.splitlines() if "-m helpers.study.cloud trn1" in line)
    assert cloud.parser().parse_args(shlex.split(line)[3:]).dry_run is True


@pytest.mark.parametrize(
    "argv, says",
    [
        (["trn1", "--image-id", "ubuntu-24.04"], "is not an AMI id"),
        (["a10g", "--region", "us-est-1"], "REGION=us-est-1"),
        (["a10g", "--region", "eu-west-1"], "prices g5.xlarge in us-east-1 only"),
        (["a100", "--region", "us-east-1"], "IMAGE_ID and REGION pin an AWS instance"),
        (["trn1", "--suites", ""], "SUITES is empty: a launch would still rent trn1.2xlarge"),
        (["trn1", "--suites", "../elsewhere.toml"], "not a path inside the repository"),
        (["trn1", "--suites", "Experiment/runs/mine.toml"], "ignored by git"),
    ],
)
def test_what_a_launch_could_not_use_fails_the_dry_run(argv, says, capsys):
    assert cloud.main([*argv, "--dry-run"]) == 2
    out, err = capsys.readouterr()
    assert says in err and "Plan of" not in out and "Dry run" not in out


@needs_skypilot
def test_a_region_that_is_no_aws_region_fails_skypilots_check_here():
    config = cloud.render("a10g")
    config["resources"]["infra"] = "aws/us-est-1"
    with pytest.raises(cloud.CloudError, match="'us-est-1' is not an AWS region"):
        cloud.validate(config)


@needs_skypilot
def test_without_a_terminal_the_command_prints_then_refuses_to_launch(capsys, monkeypatch):
    monkeypatch.setattr(sys.stdin, "isatty", lambda: False)
    assert cloud.main(["a10g"]) == 2
    out, err = capsys.readouterr()
    assert "instance_type: g5.xlarge" in out and "Plan of" in out and "no terminal to ask" in err


@needs_skypilot
def test_the_dry_run_prints_the_task_the_plan_and_the_cost_and_touches_nothing(tmp_path):
    (tmp_path / "sitecustomize.py").write_text(NO_NETWORK)
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{REPO}", "PYTHONDONTWRITEBYTECODE": "1"}
    connect = "import socket; socket.create_connection(('127.0.0.1', 9))"
    blocked = subprocess.run([sys.executable, "-c", connect], env=env, capture_output=True, text=True)
    assert "network blocked by the test" in blocked.stderr  # the blocker works, in every child process
    before = snapshot()
    out = subprocess.run(
        [sys.executable, "-m", "helpers.study.cloud", "trn1", "--dry-run"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert snapshot() == before
    text = out.stdout
    assert "instance_type: trn1.2xlarge" in text and "valid: SkyPilot" in text  # the task, validated
    assert "Plan of `python -m helpers.study.sweep SUITE --variant quick --target trainium" in text
    assert "--instance trn1.2xlarge" in text and "## smoke (1 points)" in text  # the sweep's plan
    price = prices.instance_price("trn1.2xlarge")
    assert f"trn1.2xlarge at ${price:g}/h" in text and "the check 8,100 s" in text  # the bound: setup, check
    assert f"Cost: at most ${price * cloud.total_hours(cloud.render('trn1')):.2f}" in text
    assert "*Neuron SDK 2.31*" in text and "sky launch -c accelbench-trn1" in text
    assert "sky down -y accelbench-trn1" in text and "Dry run: nothing was launched" in text


# ----------------------------------------------------------------------------- the local run, for real
@pytest.mark.slow
def test_the_local_target_runs_the_task_here_and_its_record_lands_where_the_report_reads(tmp_path):
    if find_spec("helpers.check") is None:
        pytest.skip("the run's first step, `python -m helpers.check`, is not in this checkout")
    results = tmp_path / "results"
    # the committed roofs and precision probe of this machine, as in Experiment/results: read, not re-measured
    shutil.copytree(REPO / "Experiment" / "results" / "_peaks", results / "_peaks")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = subprocess.run(
        [sys.executable, "-m", "helpers.study.cloud", "local", "--results", str(results)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, (out.stdout[-3000:], out.stderr[-3000:])
    assert f"local run: {task_file('gpu.yaml')['run'].strip()}" in out.stdout
    found = list((results / "smoke").glob("smoke-quick-point-*@*.json"))
    assert len(found) == 1 and json.loads(found[0].read_text())["status"] == "finished"
    df, _ = frame.load(results)
    assert (df["suite"] == "smoke").sum() == 1 and df.loc[df["suite"] == "smoke", "steps"].item() == 4


# ----------------------------------------------------------------------------- what a first user reads
UPSTREAM = "PyTorch/XLA is no longer supported for training"  # announce-no-support-pytorch-xla-training


@pytest.mark.parametrize(
    "path", ["requirements-neuron.txt", "docs/HARDWARE.md", "cloud/trn1.yaml", "helpers/study/cloud.py"]
)
def test_where_the_neuron_pin_is_written_its_support_status_is_upstreams(path):
    text = " ".join((REPO / path).read_text().replace("#", " ").split())  # comments and wrapped lines joined
    assert UPSTREAM in text or "no longer supported for training" in text or "PyTorch/XLA training from" in text
    assert "2.29" in text and "last SDK with torch-neuronx for training" not in text


def test_the_docs_name_the_quota_a_new_aws_account_needs_and_the_default_neuron_release():
    text = " ".join((REPO / "docs" / "HARDWARE.md").read_text().split())
    for quota in ("Running On-Demand Trn instances", "Running On-Demand G and VT instances"):
        assert quota in text
    assert f"Starting with Neuron Release 2.30.0, {UPSTREAM} workloads on Trainium." in text
    assert "The default is 2.31" in text
