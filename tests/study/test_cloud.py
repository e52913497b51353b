"""`make cloud` (study/cloud.py, cloud/*.yaml): tasks and a boot deadline SkyPilot's own code accepts, a bound that
the deadline enforces, one switch for the Neuron image and pins, a failed setup's log home, and a launch that
brings the records home and tears down however it ends. No test contacts a cloud."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from helpers import check
from study import cloud

REPO = Path(__file__).resolve().parents[2]
needs_skypilot = pytest.mark.skipif(
    not (REPO / cloud.CLOUD_BIN / "python").exists(), reason="no .venv-cloud: `make cloud-venv` builds SkyPilot there"
)
LIMITS = [("smoke", 1, 1800.0), ("padding", 12, 900.0)]  # (suite, points, a point's limit) as the sweep gives them
PRICE = (1.25, "a test's price")


@pytest.fixture(autouse=True)
def sweep_and_price(monkeypatch):
    """The sweep's points and the report's price, given: this file tests what cloud.py does with them."""
    monkeypatch.setattr(cloud, "suite_limits", lambda suites, variant, target: LIMITS)
    monkeypatch.setattr(cloud, "instance_price", lambda instance: PRICE)


def fake_tool(folder: Path, name: str, script: str) -> None:
    """Write an executable `name` into `folder` that runs the shell `script` (its arguments logged to calls)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(f'#!/bin/sh\necho "{name} $*" >> "{folder}/calls"\n{script}\n')
    (folder / name).chmod(0o755)


# ----------------------------------------------------------------------------- the bound
def test_the_run_limit_is_the_sum_of_its_parts_and_the_deadline_covers_every_step():
    config = cloud.render("trn1", "cloud/smoke.toml padding", "full")
    run = dict((name, s) for name, s, _ in cloud.run_parts(config))
    assert run["the check"] == check.bound_s(neuron=True)
    assert run["padding"] == 2 * 12 * 900  # each point at its limit, and precompiled first within as long
    assert int(config["envs"]["RUN_TIMEOUT_S"]) == round(sum(run.values()))
    total_s = sum(s for _, s, _ in cloud.bound_parts(config))
    assert cloud.deadline_minutes(config) * 60 >= total_s > int(config["envs"]["RUN_TIMEOUT_S"])
    assert cloud.sky_config(config) == {"aws": {"post_provision_runcmd": [f"shutdown -h +{-(-total_s // 60):.0f}"]}}
    gpu = cloud.render("a10g", "cloud/smoke.toml")
    assert int(gpu["envs"]["RUN_TIMEOUT_S"]) < int(config["envs"]["RUN_TIMEOUT_S"])  # no cold compiles, no precompile


@needs_skypilot
def test_every_task_and_its_deadline_pass_skypilots_own_code_and_the_deadline_lands_in_cloud_init():
    configs = [cloud.render(target, "cloud/smoke.toml") for target in cloud.TARGETS]
    said = cloud.validate(*configs)
    minutes = cloud.deadline_minutes(configs[0])
    assert said.startswith(f"valid: SkyPilot 0.14.1's task and resources schemas ({len(configs)} task(s))")
    assert f"runs ['shutdown -h +{minutes}'] (cloud-init runcmd)" in said
    assert all(c["resources"]["autostop"] == {"idle_minutes": cloud.IDLE_MINUTES, "down": True} for c in configs)


@needs_skypilot
def test_a_task_skypilot_would_refuse_is_refused_here():
    config = cloud.render("a10g", "cloud/smoke.toml")
    config["resources"]["autostop"] = {"idle_minute": 15}
    with pytest.raises(cloud.CloudError, match="SkyPilot refuses the task.*idle_minute"):
        cloud.validate(config)


def test_the_dry_run_prints_the_bound_in_dollars_the_deadline_and_what_to_run_if_this_command_dies(capsys, monkeypatch):
    monkeypatch.setattr(cloud, "validate", lambda config: "valid")  # SkyPilot's own check: the test above
    assert cloud.main(["trn1", "--suites", "cloud/smoke.toml padding", "--dry-run"]) == 0
    out = capsys.readouterr().out
    config = cloud.render("trn1", "cloud/smoke.toml padding")
    hours = cloud.deadline_minutes(config) / 60
    assert f"{hours:5.2f} h  ${PRICE[0] * hours:8.2f}  in all, at most" in out
    assert f"halts itself {cloud.deadline_minutes(config)} minutes after its first boot" in out
    assert "make cloud-down TARGET=trn1" in out and "Dry run: nothing launched" in out
    a100 = cloud.main(["a100", "--dry-run"])
    out = capsys.readouterr().out
    assert a100 == 0 and "Not enforced before autostop: the offer may be outside AWS" in out


def test_a_pinned_instance_without_a_price_is_shown_in_hours_and_never_launched(monkeypatch, capsys):
    monkeypatch.setattr(cloud, "instance_price", lambda instance: (_ for _ in ()).throw(LookupError(instance)))
    config = cloud.render("h100", "cloud/smoke.toml")
    assert "no price on file" in cloud.cost_text("h100", config)
    with pytest.raises(cloud.CloudError, match="no price for p5.4xlarge"):
        cloud.launch("h100", config, yes=True, keep=False)


# ----------------------------------------------------------------------------- what each target rents
def test_h100_is_one_gpu_on_a_p5_4xlarge_and_a100_an_offer_skypilot_picks():
    h100 = cloud.render("h100", "cloud/smoke.toml")["resources"]
    assert (h100["instance_type"], h100["accelerators"], h100["infra"]) == ("p5.4xlarge", "H100:1", "aws/us-east-1")
    a100 = cloud.render("a100", "cloud/smoke.toml")["resources"]
    assert a100["accelerators"] == "A100:1" and "instance_type" not in a100 and "infra" not in a100


def test_the_dry_run_says_which_cuda_build_of_torch_setup_installs_and_the_driver_it_needs():
    pin = re.search(r"^torch==(\S+)", (REPO / "requirements.txt").read_text(), re.M)[1]
    assert pin in cloud.TORCH_CUDA, "a new torch pin: put its PyPI build's CUDA and least driver in TORCH_CUDA"
    config = cloud.render("l4", "cloud/smoke.toml")
    cuda, driver = cloud.TORCH_CUDA[pin]
    assert config["envs"]["DRIVER_MIN"] == driver
    said = cloud.setup_text("l4", config)
    assert f"torch {pin} from PyPI, its CUDA {cuda} build" in said and f"must be {driver} or newer" in said


def test_a_failed_setup_leaves_its_log_where_the_records_come_home_from(tmp_path):
    config = cloud.render("a10g", "cloud/smoke.toml")
    (tmp_path / "cloud").mkdir()
    (tmp_path / "cloud" / "setup_gpu.sh").write_text((REPO / "cloud" / "setup_gpu.sh").read_text())
    fake_tool(tmp_path / "bin", "nvidia-smi", "echo 535.104.05")  # a driver older than CUDA 13.0 takes
    env = {**os.environ, **config["envs"], "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}"}
    done = subprocess.run(["bash", "-c", config["setup"]], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert done.returncode != 0
    log = (tmp_path / "Experiment/runs/cloud/setup.log").read_text()
    assert f"NVIDIA driver 535.104.05 is older than {config['envs']['DRIVER_MIN']}" in log
    fetched = [c[-1] for c in cloud.commands(config)["fetch"]]
    assert "Experiment/runs/" in fetched and "Experiment/results/" in fetched


# ----------------------------------------------------------------------------- the Neuron SDK, one switch
@pytest.mark.parametrize("sdk, torch_neuronx", [("2.31", "2.9.0.2.15."), ("2.29", "2.9.0.2.13.")])
def test_one_switch_sets_the_neuron_image_and_the_pins_together(sdk, torch_neuronx):
    envs = cloud.render("trn1", "cloud/smoke.toml", neuron=sdk)["envs"]
    assert envs["NEURON_SDK"] == sdk
    pins = (REPO / envs["NEURON_REQUIREMENTS"]).read_text()
    assert f"torch-neuronx=={torch_neuronx}" in pins and "-r requirements-xla.txt" in pins
    assert f"Name=description,Values=*Neuron SDK {sdk}*" in cloud.ami_command(sdk)
    assert 'NEURON_REQUIREMENTS="$NEURON_REQUIREMENTS"' in cloud.render("trn1", "cloud/smoke.toml")["setup"]


def test_an_image_whose_sdk_is_not_said_or_does_not_match_is_refused(tmp_path, monkeypatch):
    ami = "ami-0123456789abcdef0"
    assert "say which Neuron SDK" in cloud.refusal("trn1", "cloud/smoke.toml", None, ami)
    assert cloud.refusal("trn1", "cloud/smoke.toml", "2.29", ami) is None
    assert "leave it out for a GPU" in cloud.refusal("a10g", "cloud/smoke.toml", "2.29", None)
    monkeypatch.setattr(cloud, "CLOUD_BIN", tmp_path)
    fake_tool(tmp_path, "aws", "echo 'Deep Learning AMI Neuron (Ubuntu 24.04), Neuron SDK 2.31.1'")
    with pytest.raises(cloud.CloudError, match="is not a Neuron SDK 2.29 image"):
        cloud.neuron_image(cloud.render("trn1", "cloud/smoke.toml", neuron="2.29", image_id=ami))
    assert cloud.neuron_image(cloud.render("trn1", "cloud/smoke.toml", neuron="2.31", image_id=ami)) == ami


# ----------------------------------------------------------------------------- suites
def test_all_is_accepted_and_an_unknown_suite_refused_naming_the_known_ones(capsys, monkeypatch):
    assert cloud.refusal("a10g", "all", None, None) is None
    refused = cloud.refusal("a10g", "cloud/smoke.toml no-such-suite", None, None)
    assert "no suite 'no-such-suite'" in refused and "padding" in refused
    assert "SUITES is empty" in cloud.refusal("a10g", " ", None, None)
    monkeypatch.setattr(cloud, "validate", lambda config: "valid")
    assert cloud.main(["a10g", "--suites", "all", "--dry-run"]) == 0
    assert "SUITES: all" in capsys.readouterr().out


# ----------------------------------------------------------------------------- the launch
@pytest.mark.parametrize("launch_status", [0, 1])
def test_a_launch_carries_its_deadline_and_however_it_ends_brings_the_records_home_and_tears_down(
    launch_status, tmp_path, monkeypatch
):
    monkeypatch.setattr(cloud, "CLOUD_BIN", tmp_path)
    fake_tool(tmp_path, "aws", "echo ami-0123456789abcdef0")
    saved = tmp_path / "config-seen.yaml"
    fake_tool(tmp_path, "sky", f'[ "$1" = launch ] && cp "$6" {saved} && exit {launch_status}; exit 0')
    fake_tool(tmp_path, "rsync", "exit 0")
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    config = cloud.render("trn1", "cloud/smoke.toml")
    assert cloud.launch("trn1", config, yes=True, keep=False) == launch_status
    calls = (tmp_path / "calls").read_text().splitlines()
    assert [c.split()[0] for c in calls] == ["aws", "sky", "rsync", "rsync", "sky"]
    assert calls[1].startswith("sky launch -c accelbench-trn1 ") and calls[1].endswith(" -y")
    assert calls[-1] == "sky down -y accelbench-trn1"
    assert yaml.safe_load(saved.read_text()) == cloud.sky_config(config)


@pytest.mark.parametrize("text, value", [("", False), ("0", False), ("no", False), ("1", True), ("yes", True)])
def test_yes_and_no_are_read_as_a_user_types_them(text, value):
    assert cloud.switch(text) is value
    with pytest.raises(Exception, match="neither yes"):
        cloud.switch("maybe")
