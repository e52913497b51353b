"""A trn1 or a GPU in the cloud in one command (SkyPilot): the first-run check, the suites, the records home.

    make cloud TARGET=trn1|a10g|l4|a100|h100|local SUITES="cloud/smoke.toml padding" VARIANT=quick [DRY_RUN=1]
    make cloud-lab TARGET=a10g        # JupyterLab on the instance, through an SSH tunnel
    python -m helpers.study.cloud trn1 --suites padding --variant quick --dry-run    # what make cloud runs

A target is a task file (cloud/trn1.yaml, cloud/gpu.yaml) and what is set in it here: the accelerator
and instance, the suites and variant (its envs), on trn1 the Neuron DLAMI of SDK 2.31, looked up at launch
the way the Neuron docs say. Before launching, the task is printed and checked against SkyPilot's own
schemas (offline, in .venv-cloud), then the sweep's plan for that instance and what it costs; then the user
is asked. On the instance `setup` builds the environment with the repository's make targets and `run` is
`make cloud-run` (the check, then the sweep). When the job ends, however it ends, the records are copied
home with rsync over the SSH alias SkyPilot writes (into Experiment/results/<suite>/, as
`<run>@<device>.json`) and the cluster is torn down; the task's autostop tears it down anyway 15 idle
minutes after its job ends. `local` runs the same setup and run on this machine.
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import tempfile
import textwrap
from dataclasses import dataclass
from pathlib import Path

import yaml

from helpers.calc import prices
from helpers.run.paths import REPO_ROOT
from helpers.study.sweep import plan
from helpers.study.sweep.runner import DEFAULT_TIMEOUT_S
from helpers.study.sweep.suites import VARIANTS, Suite, expand, resolve_suite, retarget

CLOUD_BIN = Path(".venv-cloud/bin")  # `make cloud-venv` (requirements-cloud.txt); commands run from the root
VALIDATOR = "cloud/validate.py"
DEFAULT_SUITES = "cloud/smoke.toml"
REMOTE_WORKDIR = "sky_workdir"  # SkyPilot syncs the workdir to ~/sky_workdir and runs setup and run there
RESULTS, RUNS = "Experiment/results", "Experiment/runs"
IDLE_MINUTES = 15  # the task files' autostop
LAB_PORT = 8888
# an extra Jupyter config path (not the writable config folder): idle kernels are culled, then the server
# stops, so the instance goes idle and its autostop tears it down even when the laptop is gone
LAB_RUN = f"JUPYTER_CONFIG_PATH=$PWD/cloud/jupyter make lab LAB_XLA=0 LAB_PORT={LAB_PORT}\n"
# "Each Neuron DLAMI includes the SDK version in its description" (Neuron docs, deploy/environments/dlami.rst,
# "Finding a DLAMI for a specific Neuron SDK version"); 2.31 is the last SDK with torch-neuronx training
NEURON_SDK = "2.31"
DLAMI_NAME = "Deep Learning AMI Neuron*(Ubuntu 24.04)*"


class CloudError(RuntimeError):
    """A cloud run cannot go on; the message says what to do."""


@dataclass(frozen=True)
class Target:
    """Where a cloud run goes: its task file, what is set over its resources, the instance the plan prices."""

    task: str
    resources: dict  # set over the file's resources; None removes the key
    instance: str  # the row of helpers/facts/instance_prices.csv the plan times and prices
    pinned: bool  # the run gets exactly that instance; else SkyPilot picks an offer and shows its price


TARGETS = {
    "trn1": Target("cloud/trn1.yaml", {}, "trn1.2xlarge", True),
    "a10g": Target("cloud/gpu.yaml", {}, "g5.xlarge", True),
    "l4": Target("cloud/gpu.yaml", {"instance_type": "g6.xlarge", "accelerators": "L4:1"}, "g6.xlarge", True),
    # AWS sells A100s and H100s eight to an instance (the facts' rows): one GPU from whichever cloud SkyPilot
    # reaches (`sky check`)
    "a100": Target(
        "cloud/gpu.yaml", {"infra": None, "instance_type": None, "accelerators": "A100:1"}, "p4d.24xlarge", False
    ),
    "h100": Target(
        "cloud/gpu.yaml", {"infra": None, "instance_type": None, "accelerators": "H100:1"}, "p5.48xlarge", False
    ),
    # this machine: gpu.yaml's setup and run, no cloud; m6i.large is the facts' stand-in for a 2-vCPU CPU
    "local": Target("cloud/gpu.yaml", {}, "m6i.large", True),
}


def cluster_name(target: str, lab: bool = False) -> str:
    """Return the SkyPilot cluster name (also its SSH alias) of a target's run or lab."""
    return f"accelbench-{target}" + ("-lab" if lab else "")


def load_task(target: str) -> dict:
    """Return the target's task file as written."""
    return yaml.safe_load((REPO_ROOT / TARGETS[target].task).read_text())


def render(
    target: str,
    suites: str = DEFAULT_SUITES,
    variant: str = "quick",
    image_id: str | None = None,
    region: str | None = None,
    lab: bool = False,
) -> dict:
    """Return the task a target launches: resources, SUITES and VARIANT set; the lab's run is JupyterLab."""
    config = load_task(target)
    resources = config["resources"]
    for key, value in TARGETS[target].resources.items():
        if value is None:
            resources.pop(key, None)
        else:
            resources[key] = value
    if region:
        resources["infra"] = f"aws/{region}"
    if image_id:
        resources["image_id"] = image_id
    config["name"] = cluster_name(target, lab)
    config["envs"].update(SUITES=suites, VARIANT=variant)
    if lab:
        config["run"] = LAB_RUN
    return config


class _TaskDumper(yaml.SafeDumper):
    """YAML as the task files are written: scripts (setup, run) as literal blocks."""


_TaskDumper.add_representer(
    str,
    lambda dumper, text: dumper.represent_scalar("tag:yaml.org,2002:str", text, style="|" if "\n" in text else None),
)


def task_text(*configs: dict) -> str:
    """Return the tasks as SkyPilot YAML (one document each)."""
    return yaml.dump_all(configs, Dumper=_TaskDumper, sort_keys=False, width=110)


def validate(*configs: dict) -> str:
    """Check the tasks against SkyPilot's own schemas (offline, in .venv-cloud); return what passed."""
    if not (REPO_ROOT / CLOUD_BIN / "python").exists():
        raise CloudError(f"{CLOUD_BIN}/python is missing: `make cloud-venv` builds it")
    out = subprocess.run(
        [str(CLOUD_BIN / "python"), VALIDATOR], input=task_text(*configs), capture_output=True, text=True, cwd=REPO_ROOT
    )
    if out.returncode != 0:
        raise CloudError(f"the task fails SkyPilot's schema: {out.stderr.strip()[-2000:]}")
    return out.stdout.strip()


def suites_of(config: dict) -> list[Suite]:
    """Return the task's suites as the sweep on the instance runs them (its --target)."""
    env = config["envs"]
    return [retarget(resolve_suite(name), env["SWEEP_TARGET"]) for name in env["SUITES"].split()]


def plan_text(config: dict, instance: str) -> str:
    """Return the sweep's plan of the task's suites and variant on `instance` (a model: nothing runs)."""
    env = config["envs"]
    command = (
        f"python -m helpers.study.sweep SUITE --variant {env['VARIANT']} --target "
        f"{env['SWEEP_TARGET']} --plan --instance {instance}` for each SUITE of `{env['SUITES']}"
    )
    return plan.plan_text(suites_of(config), env["VARIANT"], env["SWEEP_TARGET"], instance, command)


def timeout_hours(config: dict) -> tuple[int, float]:
    """Return the points the task runs and their hours if each ran until its timeout (an upper bound)."""
    variant, points, seconds = config["envs"]["VARIANT"], 0, 0.0
    for suite in suites_of(config):
        found = len(expand(suite, variant))
        points += found
        seconds += found * suite.variants.get(variant, {}).get("timeout_s", DEFAULT_TIMEOUT_S)
    return points, seconds / 3600


def cost_text(target: str, config: dict) -> str:
    """Return what the run costs: the instance's price, and at most what the points' timeouts allow."""
    spec, (points, hours) = TARGETS[target], timeout_hours(config)
    price = prices.instance_price(spec.instance)
    bound = f"{hours:.1f} h, should each of its {points} points run until its timeout"
    if target == "local":
        return (
            f"Cost: nothing, this machine (the plan prices {spec.instance}, the facts' 2-vCPU stand-in). "
            f"At most {bound}."
        )
    if spec.pinned:
        return (
            f"Cost: {spec.instance} at ${price:g}/h on demand (helpers/facts/instance_prices.csv): the "
            f"plan's dollars above (a model), and at most ${price * hours:.2f}, {bound}, plus the "
            f"instance's start and `setup` (not estimated). The task tears itself down {IDLE_MINUTES} "
            "idle minutes after its job ends, should this command not get to `sky down`."
        )
    gpus = round(price / prices.price_per_accelerator_hour(spec.instance))
    return (
        f"Cost: SkyPilot picks the cheapest {spec.resources['accelerators']} offer among the clouds `sky "
        f"check` enables and prints its price before it asks again. The plan's dollars price AWS's "
        f"{spec.instance}, the whole {gpus}-GPU instance at ${price:g}/h: an upper bound. At most "
        f"{bound}."
    )


def ami_command(region: str) -> list[str]:
    """Return the AWS CLI call that prints the newest Neuron DLAMI of SDK 2.31 (Ubuntu 24.04) in `region`."""
    return [
        str(CLOUD_BIN / "aws"),
        "ec2",
        "describe-images",
        "--region",
        region,
        "--owners",
        "amazon",
        "--filters",
        f"Name=name,Values={DLAMI_NAME}",
        f"Name=description,Values=*Neuron SDK {NEURON_SDK}*",
        "--query",
        "sort_by(Images, &CreationDate)[-1].ImageId",
        "--output",
        "text",
    ]


def region_of(config: dict) -> str:
    """Return the AWS region the task names (infra: aws/REGION)."""
    return config["resources"].get("infra", "aws/us-east-1").split("/")[1]


def neuron_ami(region: str) -> str:
    """Return the id of the newest Neuron DLAMI of SDK 2.31 in `region` (asks AWS)."""
    out = subprocess.run(ami_command(region), capture_output=True, text=True, cwd=REPO_ROOT)
    ami = out.stdout.strip()
    if out.returncode != 0 or not ami.startswith("ami-"):
        raise CloudError(
            f"no Neuron DLAMI of SDK {NEURON_SDK} found in {region} "
            f"({out.stderr.strip() or ami}); name one with IMAGE_ID=ami-... (docs/HARDWARE.md, "
            '"First run in the cloud")'
        )
    return ami


def commands(target: str, config: dict, task_file: str, lab: bool = False, yes: bool = False) -> dict:
    """Return the commands of a cloud run: launch, fetch (the records home), down, and the lab's tunnel."""
    cluster, sky = config["name"], str(CLOUD_BIN / "sky")
    # asked here already; where SkyPilot picks the offer, its own prompt shows the price of what it found
    launch = [
        sky,
        "launch",
        "-c",
        cluster,
        task_file,
        *(["--detach-run"] if lab else []),
        *(["-y"] if yes or TARGETS[target].pinned else []),
    ]
    remote = f"{cluster}:{REMOTE_WORKDIR}"
    fetch = [
        [
            "rsync",
            "-avz",
            "--update",
            "--prune-empty-dirs",
            "--include=*/",
            "--include=*.json",
            "--exclude=*",
            f"{remote}/{RESULTS}/",
            f"{RESULTS}/",
        ],
        ["rsync", "-avz", "--update", f"{remote}/{RUNS}/", f"{RUNS}/"],
    ]
    return {
        "launch": launch,
        "fetch": fetch,
        "down": [sky, "down", "-y", cluster],
        "tunnel": ["ssh", "-N", "-L", f"{LAB_PORT}:localhost:{LAB_PORT}", cluster],
    }


def commands_text(target: str, config: dict, lab: bool) -> str:
    """Return what the command does after asking, as the shell lines it runs."""
    if target == "local":
        return "Runs here, from the repository's root, as SkyPilot runs it on the instance:\n" + "\n".join(
            f"  {step}:\n{textwrap.indent(config[step].rstrip(), '    ')}" for step in ("setup", "run")
        )
    cmd = commands(target, config, "TASK.yaml", lab)
    lines = ["Then (TASK.yaml: the task above, in a temporary file):"]
    if target == "trn1" and "image_id" not in config["resources"]:
        lines.append(f"  image_id=$({shlex.join(ami_command(region_of(config)))})")
    lines.append(f"  {shlex.join(cmd['launch'])}")
    if lab:
        lines.append(
            f"  {shlex.join(cmd['tunnel'])}  # http://localhost:{LAB_PORT}/lab?token=... (the URL: "
            f"`sky logs {config['name']}`); Ctrl-C ends it"
        )
    return "\n".join(lines + [f"  {shlex.join(c)}" for c in [*cmd["fetch"], cmd["down"]]])


def confirm(question: str, yes: bool, default: bool = False) -> bool:
    """Return the answer read from the terminal (True when `yes`); refuse without a terminal."""
    if yes:
        return True
    if not sys.stdin.isatty():
        raise CloudError("no terminal to ask: YES=1 launches without asking, DRY_RUN=1 only prints")
    answer = input(f"{question} [{'Y/n' if default else 'y/N'}] ").strip().lower()
    return default if not answer else answer in ("y", "yes")


def run_local(config: dict, results: str | None = None) -> int:
    """Run the task's setup, then its run, here with its envs (as SkyPilot does there); return the status."""
    env = {**os.environ, **config["envs"], **({"SWEEP_RESULTS": results} if results else {})}
    for step in ("setup", "run"):
        print(f"local {step}: {config[step].strip()}", flush=True)
        status = subprocess.run(["bash", "-c", config[step]], cwd=REPO_ROOT, env=env).returncode
        if status:
            return status
    return 0


def bring_home(target: str, config: dict) -> None:
    """Copy the cluster's records (and executed notebooks) into this repository; say where they went."""
    for command in commands(target, config, "")["fetch"]:
        if subprocess.run(command, cwd=REPO_ROOT).returncode != 0:
            print(f"cloud: could not copy {command[-2]} (is the cluster gone?): {shlex.join(command)}", file=sys.stderr)
    print(f"cloud: records in {RESULTS}/<suite>/<run>@<device>.json; `python -m helpers.study.report` merges them")


def tunnel(target: str, config: dict) -> None:
    """Hold the SSH tunnel to the instance's JupyterLab until Ctrl-C."""
    print(
        f"cloud: JupyterLab at http://localhost:{LAB_PORT}/lab?token=... (the URL: `{CLOUD_BIN}/sky logs "
        f"{config['name']}`); Ctrl-C ends the tunnel, brings the records home, asks to tear it down",
        flush=True,
    )
    try:
        subprocess.run(commands(target, config, "")["tunnel"], cwd=REPO_ROOT)
    except KeyboardInterrupt:
        pass


def launch(target: str, config: dict, yes: bool, keep: bool, lab: bool) -> int:
    """Launch the task; however it ends, bring the records home and tear the cluster down (unless kept)."""
    if target == "trn1" and "image_id" not in config["resources"]:
        config["resources"]["image_id"] = neuron_ami(region_of(config))
        print(f"cloud: Neuron DLAMI {config['resources']['image_id']}; {validate(config)}")
    with tempfile.NamedTemporaryFile("w", prefix=f"{config['name']}-", suffix=".yaml", delete=False) as task:
        task.write(task_text(config))
    status = 1
    try:
        status = subprocess.run(commands(target, config, task.name, lab, yes)["launch"], cwd=REPO_ROOT).returncode
        if lab and status == 0:
            tunnel(target, config)
    finally:
        Path(task.name).unlink(missing_ok=True)
        bring_home(target, config)
        keep = keep or (
            lab and not confirm(f"tear {config['name']} down now?", yes or not sys.stdin.isatty(), default=True)
        )
        if keep:
            print(
                f"cloud: {config['name']} is up; it tears itself down {IDLE_MINUTES} idle minutes after "
                f"its job ends; now: make cloud-down TARGET={target}{' LAB=1' if lab else ''}"
            )
        else:
            subprocess.run(commands(target, config, "")["down"], cwd=REPO_ROOT)
    return status


def show(target: str, config: dict, lab: bool) -> None:
    """Print the task (validated), the plan and its cost (the lab: the hourly price) and what runs next."""
    spec = TARGETS[target]
    print(f"# The task ({spec.task}, as rendered)\n{task_text(config)}{validate(config)}\n")
    if lab:
        price = (
            f"{spec.instance} at ${prices.instance_price(spec.instance):g}/h on demand"
            if spec.pinned
            else f"the {spec.resources['accelerators']} offer SkyPilot picks, at the price it shows"
        )
        print(
            f"Cost: {price} while it is up: kernels idle for 60 min are culled, the server stops after 30 "
            f"min without one, and the instance tears itself down {IDLE_MINUTES} idle minutes later.\n"
        )
    else:
        print(f"{plan_text(config, spec.instance)}\n\n{cost_text(target, config)}\n")
    print(commands_text(target, config, lab), flush=True)


def what_launches(target: str) -> str:
    """Return the instance a target launches, or the accelerator where SkyPilot picks the offer."""
    spec = TARGETS[target]
    return spec.instance if spec.pinned else f"one {spec.resources['accelerators']}, the offer SkyPilot picks"


def parser() -> argparse.ArgumentParser:
    """Return the command line's parser."""
    p = argparse.ArgumentParser(prog="python -m helpers.study.cloud", description=__doc__.split("\n\n")[0])
    p.add_argument("target", choices=TARGETS)
    p.add_argument("--suites", default=DEFAULT_SUITES, help="suite names or .toml paths, space-separated")
    p.add_argument("--variant", choices=VARIANTS, default="quick")
    p.add_argument("--lab", action="store_true", help="JupyterLab on the instance through an SSH tunnel")
    p.add_argument("--dry-run", action="store_true", help="print the task, plan and cost; contact nothing")
    p.add_argument("--yes", action="store_true", help="launch without asking (no terminal needed)")
    p.add_argument("--image-id", help="trn1: this AMI instead of the newest Neuron DLAMI of SDK 2.31")
    p.add_argument("--region", help="the AWS region (default: the task file's, that of the price facts)")
    p.add_argument("--keep", action="store_true", help="leave the cluster up (its autostop still applies)")
    p.add_argument("--down", action="store_true", help="only bring the records home, then tear down")
    p.add_argument("--results", help="local: the folder the records go to (default Experiment/results)")
    return p


def main(argv: list[str] | None = None) -> int:
    """Command line: python -m helpers.study.cloud TARGET [--suites S] [--variant V] [--lab] [--dry-run]."""
    args = parser().parse_args(argv)
    if args.target == "local" and (args.lab or args.down):
        parser().error("local runs here: `make lab` is JupyterLab on this machine; nothing to tear down")
    config = render(args.target, args.suites, args.variant, args.image_id, args.region, args.lab)
    try:
        if args.down:
            bring_home(args.target, config)
            return subprocess.run(commands(args.target, config, "")["down"], cwd=REPO_ROOT).returncode
        show(args.target, config, args.lab)
        if args.dry_run:
            print("\nDry run: nothing was launched, nothing was contacted.")
            return 0
        if args.target == "local":
            return run_local(config, args.results)
        if not confirm(f"\nLaunch {config['name']} ({what_launches(args.target)})?", args.yes):
            print("cloud: not launched")
            return 1
        return launch(args.target, config, args.yes, args.keep, args.lab)
    except CloudError as err:
        print(f"cloud: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
