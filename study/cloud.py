"""A trn1 or a GPU in the cloud in one command (SkyPilot): the first-run check, the suites, the records home.

    make cloud TARGET=trn1|a10g|l4|a100|h100|local SUITES="cloud/smoke.toml padding" VARIANT=quick [DRY_RUN=yes]
    make cloud-lab TARGET=a10g        # JupyterLab on the instance, through an SSH tunnel
    python -m helpers.study.cloud trn1 --suites padding --variant quick --dry-run    # what make cloud runs

Refusals, the task checked against SkyPilot's schemas, the plan and the most the run can cost come before the user
is asked; SkyPilot's own command line does the rest (docs/HARDWARE.md). Its optimizer makes neither the plan nor
the bound: it prices from catalogs it downloads (the dry run contacts nothing) and knows no time limit.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shlex
import subprocess
import sys
import tempfile
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pydantic
import yaml

from helpers import check
from helpers.calc import prices
from helpers.calc.facts import load_instance_prices
from helpers.run.paths import REPO_ROOT
from helpers.study.sweep import plan, precompile
from helpers.study.sweep.suites import VARIANTS, Suite, expand, resolve_suite, retarget, timeout_of

CLOUD_BIN = Path(".venv-cloud/bin")  # `make cloud-venv` (requirements-cloud.txt); commands run from the root
VALIDATOR = "cloud/validate.py"
DEFAULT_SUITES = "cloud/smoke.toml"
REMOTE_WORKDIR = "sky_workdir"  # SkyPilot syncs the workdir to ~/sky_workdir and runs setup and run there
RESULTS, RUNS = "Experiment/results", "Experiment/runs"
RECORDS_ONLY = ["--prune-empty-dirs", "--include=*/", "--include=*.json", "--exclude=*"]  # rsync: every folder's JSON
IDLE_MINUTES = 15  # the task files' autostop
# assumed, not bounded here: SkyPilot's start of the instance (provisioning, its runtime, the workdir's sync),
# billed before setup begins
PROVISION_S = 900
RUN_START_S = 600  # the run's own start beyond its steps' limits: make, each sweep's start and plan
LAB_PORT = 8888
# an extra Jupyter config path (not the writable config folder): idle kernels are culled, then the server
# stops, so the instance goes idle and its autostop tears it down even when the laptop is gone
LAB_RUN = f"JUPYTER_CONFIG_PATH=$PWD/cloud/jupyter make lab LAB_XLA=0 LAB_PORT={LAB_PORT}\n"
# "Each Neuron DLAMI includes the SDK version in its description" (Neuron docs, deploy/environments/dlami.rst,
# "Finding a DLAMI for a specific Neuron SDK version"). Upstream: "starting with Neuron Release 2.30.0, PyTorch/XLA
# is no longer supported for training workloads on Trainium"; 2.31 ships the last torch-neuronx, with training
# unsupported (2.29 is the last release that supports it): requirements-neuron.txt says why the pin is 2.31
NEURON_SDK = "2.31"
# the multi-framework DLAMI ("Deep Learning AMI Neuron (Ubuntu 24.04) <date>"), not the single-framework
# PyTorch, JAX or vLLM ones ("Deep Learning AMI Neuron PyTorch 2.9 (Ubuntu 24.04) ...")
DLAMI_NAME = "Deep Learning AMI Neuron (Ubuntu 24.04) *"
AMI_ID = re.compile(r"ami-[0-9a-f]{8}([0-9a-f]{9})?")  # an AMI id: 8 or 17 hex digits
# the cards an offer of an accelerator name may be (as torch names them): SkyPilot's names differ by cloud (on
# RunPod "H100" is the PCIe card); each has its row in helpers/facts/device_peaks.csv
CARDS = {
    "A100": ("NVIDIA A100-SXM4-40GB", "NVIDIA A100-PCIE-40GB"),
    "H100": ("NVIDIA H100 80GB HBM3", "NVIDIA H100 PCIe", "NVIDIA H100 NVL"),
}


class CloudError(RuntimeError):
    """A cloud run cannot go on; the message says what to do."""


@dataclass(frozen=True)
class Target:
    """Where a cloud run goes: its task file, what is set over its resources, the instance the plan prices."""

    task: str
    resources: dict  # set over the file's resources; None removes the key
    instance: str  # the row of helpers/facts/instance_prices.csv the plan times and prices
    pinned: bool  # the run gets exactly that instance; else SkyPilot picks an offer and shows its price

    @property
    def offer(self) -> str:
        """Return what a launch gets: the instance, or one accelerator where SkyPilot picks the offer."""
        return self.instance if self.pinned else f"one {self.resources['accelerators']}, the offer SkyPilot picks"


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


def render(
    target: str,
    suites: str = DEFAULT_SUITES,
    variant: str = "quick",
    image_id: str | None = None,
    region: str | None = None,
    lab: bool = False,
) -> dict:
    """Return the task a target launches: resources, SUITES and VARIANT set; the lab's run is JupyterLab."""
    config = yaml.safe_load((REPO_ROOT / TARGETS[target].task).read_text())
    resources = config["resources"] | TARGETS[target].resources
    if region:
        resources["infra"] = f"aws/{region}"
    if image_id:
        resources["image_id"] = image_id
    config["resources"] = {key: value for key, value in resources.items() if value is not None}
    config["name"] = cluster_name(target, lab)
    config["envs"].update(SUITES=suites, VARIANT=variant)
    if lab:
        config["run"] = LAB_RUN
        if target == "trn1":  # JupyterLab runs from .venv: built in setup, before `sky launch` returns
            config["setup"] += 'timeout --kill-after=60 "$SETUP_TIMEOUT_S" make venv\n'
    else:
        config["envs"]["RUN_TIMEOUT_S"] = str(round(sum(seconds for _, seconds, _ in run_parts(config))))
    return config


def switch(text: str) -> bool:
    """Return True for what a user types for yes (1, y, yes, true, on), False for no ('', 0, n, no, false, off)."""
    try:
        return pydantic.TypeAdapter(bool).validate_python(text.strip() or "no")
    except pydantic.ValidationError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is neither yes (1, y, yes, true, on) nor no (0, n, no, false, off, or empty)"
        ) from None


def suite_file_problem(name: str) -> str | None:
    """Return why the instance would not get the suite file `name` (a .toml path), None when it would."""
    # the workdir SkyPilot syncs is this repository, less what git ignores
    if Path(name).is_absolute() or not (REPO_ROOT / name).resolve().is_relative_to(REPO_ROOT):
        return (
            f"the suite file {name} is not a path inside the repository, and the instance gets the repository "
            "only (the task's workdir): copy it into the repository (cloud/ holds smoke.toml) and name it by "
            "its path from the root"
        )
    if subprocess.run(["git", "check-ignore", "-q", name], cwd=REPO_ROOT, capture_output=True).returncode == 0:
        return f"the suite file {name} is ignored by git, so SkyPilot's sync of the repository leaves it behind"
    return None


def refusal(target: str, suites: str, image_id: str | None, region: str | None, lab: bool = False) -> str | None:
    """Return why a launch of `target` could not run as asked (None when it could)."""
    spec = TARGETS[target]
    if not lab and not suites.split():
        return (
            f"SUITES is empty: a launch would still rent {spec.instance} for setup and the check, and plan "
            "nothing; name a suite (cloud/smoke.toml is the cheapest; `python -m helpers.study.sweep all --list`)"
        )
    for name in suites.split() if not lab else ():
        if name.endswith(".toml") and (problem := suite_file_problem(name)):
            return problem
    if target == "local" and (image_id or region):
        return "local runs on this machine: IMAGE_ID and REGION name an AWS instance; leave them out"
    if not spec.pinned and (image_id or region):
        return (
            f"IMAGE_ID and REGION pin an AWS instance, and {target} takes the cheapest offer of one "
            f"{spec.resources['accelerators'].split(':')[0]} SkyPilot finds in the clouds `sky check` enables "
            f"(AWS sells them eight to a {spec.instance}): leave them out"
        )
    if image_id and not AMI_ID.fullmatch(image_id):
        return (
            f"IMAGE_ID={image_id!r} is not an AMI id (ami- and 8 or 17 hex digits, as `aws ec2 describe-images` prints)"
        )
    row = load_instance_prices().set_index("instance").loc[spec.instance]
    if region and region != row["region"]:
        return (
            f"REGION={region}: helpers/facts/instance_prices.csv prices {spec.instance} in {row['region']} only, "
            f"so the plan and the bound would price {region}'s instance at {row['region']}'s price; launch in "
            f"{row['region']} (leave REGION out), or add {region}'s price with its source to the facts first"
        )
    return None


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


def plan_text(config: dict, instance: str, gpus: int | None = None) -> str:
    """Return the sweep's plan of the task's suites and variant on `instance`, or on `gpus` of it."""
    env = config["envs"]
    command = (
        f"python -m helpers.study.sweep SUITE --variant {env['VARIANT']} --target "
        f"{env['SWEEP_TARGET']} --plan --instance {instance}` for each SUITE of `{env['SUITES']}"
    )
    return plan.plan_text(suites_of(config), env["VARIANT"], env["SWEEP_TARGET"], instance, command, gpus)


def run_parts(config: dict) -> list[tuple[str, float, str]]:
    """Return what the task's run may take, part by part: (name, seconds at its limit, what it is)."""
    env, suites = config["envs"], suites_of(config)
    variant, neuron = env["VARIANT"], env["SWEEP_TARGET"] == "trainium"
    parts = [("the check", check.bound_s(neuron), "python -m helpers.check, each run and its matmul at its limit")]
    if neuron:
        trials = precompile.trials(suites, variant)
        parts.append(("precompile", sum(t.timeout_s for t in trials), f"{len(trials)} neuron_parallel_compile trials"))
    points = sum(len(expand(s, variant)) for s in suites)
    seconds = sum(len(expand(s, variant)) * timeout_of(s, variant) for s in suites)
    parts.append(("the suites", seconds, f"{points} points, each at its timeout"))
    return parts + [("start-up", RUN_START_S, "make and each sweep's own start")]


def bound_parts(config: dict) -> list[tuple[str, float, str]]:
    """Return what a launch may bill, part by part: (name, seconds, why it ends there)."""
    env = config["envs"]
    run = " + ".join(f"{name} {seconds:,.0f} s ({what})" for name, seconds, what in run_parts(config))
    return [
        ("start", PROVISION_S, "SkyPilot provisions the instance and syncs the repository (assumed)"),
        ("setup", float(env["SETUP_TIMEOUT_S"]), f"killed at SETUP_TIMEOUT_S={env['SETUP_TIMEOUT_S']}"),
        ("run", float(env["RUN_TIMEOUT_S"]), f"killed at RUN_TIMEOUT_S={env['RUN_TIMEOUT_S']}: {run}"),
        ("idle", IDLE_MINUTES * 60.0, "autostop's idle minutes, should this command not get to `sky down`"),
    ]


def bound_text(config: dict, price_per_hour: float | None) -> str:
    """Return the bound as lines: each part's hours (and dollars at `price_per_hour`), then the total."""
    parts = bound_parts(config)
    usd = (lambda s: f"  ${price_per_hour * s / 3600:7.2f}") if price_per_hour is not None else (lambda s: "")
    lines = [f"  {s / 3600:5.2f} h{usd(s)}  {name}: {why}" for name, s, why in parts]
    total = sum(s for _, s, _ in parts)
    return "\n".join([*lines, f"  {total / 3600:5.2f} h{usd(total)}  in all, at most"])


def total_hours(config: dict) -> float:
    """Return the most hours a launch of the task may bill (every part at its limit)."""
    return sum(s for _, s, _ in bound_parts(config)) / 3600


def cost_text(target: str, config: dict) -> str:
    """Return the most the run can cost: every step at its limit (start, setup, the run, autostop's idle)."""
    spec = TARGETS[target]
    price = prices.instance_price(spec.instance)
    if target == "local":
        return (
            f"Cost: nothing, this machine (the plan prices {spec.instance}, the facts' 2-vCPU stand-in). At most "
            f"{total_hours(config) - (PROVISION_S + IDLE_MINUTES * 60) / 3600:.2f} h: setup and the run at their "
            "limits."
        )
    if spec.pinned:
        return (
            f"Cost: at most ${price * total_hours(config):.2f}, {spec.instance} at ${price:g}/h on demand "
            f"(helpers/facts/instance_prices.csv) with every step at its limit; the plan's dollars above are "
            f"a model of the suites alone:\n{bound_text(config, price)}\nThe instance's price only: its "
            f"{config['resources']['disk_size']} GB disk (EBS) bills apart while it exists, at the EBS price of "
            "its volume type."
        )
    name = spec.resources["accelerators"].split(":")[0]
    share = prices.price_per_accelerator_hour(spec.instance)
    gpus = round(price / share)
    lines = [
        f"Cost: SkyPilot picks the cheapest offer of one {name} among the clouds `sky check` enables and prints "
        f"its price before it asks again; its hours at most (every step at its limit):\n{bound_text(config, None)}",
        f"Priced at AWS's share of one GPU, ${share:.2f}/h (1/{gpus} of {spec.instance} at ${price:g}/h, as the plan "
        f"above prices it): ${share * total_hours(config):.2f}, an estimate, not a bound on "
        "the offer SkyPilot finds.",
        f"The offer may be any card sold as {name} ({', '.join(CARDS[name])}): each has its peak row "
        "(helpers/facts/device_peaks.csv), and check 7 records which one it got.",
    ]
    if name == "A100":
        lines.append(
            f"AWS sells A100s only eight to a {spec.instance} (${price:g}/h): with .venv-cloud as `make "
            "cloud-venv` builds it (SkyPilot's aws extra alone) no offer of one A100 exists, and the launch "
            "stops at SkyPilot's 'no resource satisfies the request'. Add a cloud that sells one "
            '(`.venv-cloud/bin/pip install "skypilot[gcp]==0.14.1"`, or lambda, runpod; then `sky check`), or '
            "run TARGET=a10g or l4."
        )
    return "\n".join(lines)


def ami_command(region: str) -> list[str]:
    """Return the AWS CLI call that prints the newest Neuron DLAMI of SDK 2.31 (Ubuntu 24.04) in `region`."""
    aws = [str(CLOUD_BIN / "aws"), "ec2", "describe-images", "--region", region, "--owners", "amazon"]
    filters = ["--filters", f"Name=name,Values={DLAMI_NAME}", f"Name=description,Values=*Neuron SDK {NEURON_SDK}*"]
    return [*aws, *filters, "--query", "sort_by(Images, &CreationDate)[-1].ImageId", "--output", "text"]


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


def commands(target: str, config: dict, task_file: str = "", lab: bool = False, yes: bool = False) -> dict:
    """Return the commands of a cloud run: launch, fetch (the records home), down, and the lab's tunnel."""
    cluster, sky, remote = config["name"], str(CLOUD_BIN / "sky"), f"{config['name']}:{REMOTE_WORKDIR}"
    # asked here already; where SkyPilot picks the offer, its own prompt shows the price of what it found
    asked = ["-y"] if yes or TARGETS[target].pinned else []
    return {
        "launch": [sky, "launch", "-c", cluster, task_file, *(["--detach-run"] if lab else []), *asked],
        "fetch": [
            ["rsync", "-avz", "--update", *RECORDS_ONLY, f"{remote}/{RESULTS}/", f"{RESULTS}/"],
            ["rsync", "-avz", "--update", f"{remote}/{RUNS}/", f"{RUNS}/"],  # notebooks and logs, the check's too
        ],
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
    """Copy the cluster's records, executed notebooks and logs (the check's too) here; say where they went."""
    for command in commands(target, config)["fetch"]:
        if subprocess.run(command, cwd=REPO_ROOT).returncode != 0:
            print(f"cloud: could not copy {command[-2]} (is the cluster gone?): {shlex.join(command)}", file=sys.stderr)
    print(f"cloud: records in {RESULTS}/<suite>/<run>@<device>.json; `python -m helpers.study.report` merges them")


def launch(target: str, config: dict, yes: bool, keep: bool, lab: bool) -> int:
    """Launch the task (the lab: hold its tunnel); however it ends, bring the records home and tear it down."""
    if target == "trn1" and "image_id" not in config["resources"]:
        config["resources"]["image_id"] = neuron_ami(region_of(config))
        print(f"cloud: Neuron DLAMI {config['resources']['image_id']}; {validate(config)}")
    try:
        with tempfile.NamedTemporaryFile("w", prefix=f"{config['name']}-", suffix=".yaml") as task:
            task.write(task_text(config))
            task.flush()
            status = subprocess.run(commands(target, config, task.name, lab, yes)["launch"], cwd=REPO_ROOT).returncode
        if lab and status == 0:
            print(
                f"cloud: JupyterLab at http://localhost:{LAB_PORT}/lab?token=... (the URL: `{CLOUD_BIN}/sky logs "
                f"{config['name']}`); Ctrl-C ends the tunnel, brings the records home, asks to tear it down",
                flush=True,
            )
            with contextlib.suppress(KeyboardInterrupt):
                subprocess.run(commands(target, config)["tunnel"], cwd=REPO_ROOT)
    finally:
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
            subprocess.run(commands(target, config)["down"], cwd=REPO_ROOT)
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
        gpus = None if spec.pinned else int(spec.resources["accelerators"].split(":")[1])
        print(f"{plan_text(config, spec.instance, gpus)}\n\n{cost_text(target, config)}\n")
    print(commands_text(target, config, lab), flush=True)


def parser() -> argparse.ArgumentParser:
    """Return the command line's parser."""
    p = argparse.ArgumentParser(prog="python -m helpers.study.cloud", description=__doc__.split("\n\n")[0])
    p.add_argument("target", choices=TARGETS)
    p.add_argument("--suites", default=DEFAULT_SUITES, help="suite names or .toml paths, space-separated")
    p.add_argument("--variant", choices=VARIANTS, default="quick")
    yes_no = {"nargs": "?", "const": True, "default": False, "type": switch, "metavar": "yes|no"}
    p.add_argument("--lab", **yes_no, help="JupyterLab on the instance through an SSH tunnel")
    p.add_argument("--dry-run", **yes_no, help="print the task, plan and cost; contact nothing (DRY_RUN=)")
    p.add_argument("--yes", **yes_no, help="launch without asking (no terminal needed)")
    p.add_argument("--image-id", help="trn1: this AMI instead of the newest Neuron DLAMI of SDK 2.31")
    p.add_argument("--region", help="the AWS region (default: the task file's, that of the price facts)")
    p.add_argument("--keep", **yes_no, help="leave the cluster up (its autostop still applies)")
    p.add_argument("--down", action="store_true", help="only bring the records home, then tear down")
    p.add_argument("--results", help="local: the folder the records go to (default Experiment/results)")
    return p


def main(argv: list[str] | None = None) -> int:
    """Command line: python -m helpers.study.cloud TARGET [--suites S] [--variant V] [--lab] [--dry-run]."""
    args = parser().parse_args(argv)
    if args.target == "local" and (args.lab or args.down):
        parser().error("local runs here: `make lab` is JupyterLab on this machine; nothing to tear down")
    try:
        refused = None if args.down else refusal(args.target, args.suites, args.image_id, args.region, args.lab)
        if refused:
            raise CloudError(refused)
        config = render(args.target, args.suites, args.variant, args.image_id, args.region, args.lab)
        if args.down:
            bring_home(args.target, config)
            return subprocess.run(commands(args.target, config)["down"], cwd=REPO_ROOT).returncode
        show(args.target, config, args.lab)
        if args.dry_run:
            print("\nDry run: nothing was launched, nothing was contacted.")
            return 0
        if args.target == "local":
            return run_local(config, args.results)
        if not confirm(f"\nLaunch {config['name']} ({TARGETS[args.target].offer})?", args.yes):
            print("cloud: not launched")
            return 1
        return launch(args.target, config, args.yes, args.keep, args.lab)
    except CloudError as err:
        print(f"cloud: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
