"""The cloud run (helpers/study/cloud.py, cloud/*.yaml): task files SkyPilot accepts, a dry run that prints
the task, the plan and the cost and contacts nothing, and one run command, the same on the instance and here.
No test contacts a cloud."""

from __future__ import annotations

import importlib
import json
import os
import re
import shutil
import subprocess
import sys
from importlib.util import find_spec
from pathlib import Path

import pytest
import yaml

from helpers.calc import prices
from helpers.calc.facts import load_instance_prices
from helpers.study import cloud, frame
from helpers.study.sweep import runner

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
    assert "make venv" in gpu["setup"] and gpu["envs"]["SWEEP_TARGET"] == "nvidia"
    assert "image_id" not in trn1["resources"]  # looked up at launch: the newest DLAMI of SDK 2.31
    lookup = cloud.ami_command("us-east-1")
    assert "Name=description,Values=*Neuron SDK 2.31*" in lookup
    assert lookup[:3] == [".venv-cloud/bin/aws", "ec2", "describe-images"]


# ----------------------------------------------------------------------------- one run command
def test_the_run_every_task_launches_is_the_run_the_local_target_runs():
    trn1, gpu = task_file("trn1.yaml"), task_file("gpu.yaml")
    assert trn1["run"] == gpu["run"] == "make cloud-run\n"
    local = cloud.render("local")
    assert (local["setup"], local["run"]) == (gpu["setup"], gpu["run"])
    lab = cloud.render("a10g", lab=True)
    assert lab["setup"] == gpu["setup"] and lab["run"] == cloud.LAB_RUN and "make lab" in lab["run"]


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
    assert out.splitlines()[0] == "python -m helpers.check"
    assert "for suite in cloud/smoke.toml padding; do" in out
    sweep = re.search(r'sweep="python -m helpers.study.sweep \$suite ([^"]*)"', out).group(1).split()
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
    hours = 1800 / 3600  # cloud/smoke.toml's one quick point, at its timeout
    assert f"Cost: trn1.2xlarge at ${price:g}/h" in text and f"at most ${price * hours:.2f}" in text
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
