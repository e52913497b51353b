"""A trn1 or a GPU in the cloud through SkyPilot, plus what SkyPilot does not do: the bound, the image, the records.

    make cloud TARGET=trn1|a10g|l4|a100|h100|local SUITES="cloud/smoke.toml padding" VARIANT=quick DRY_RUN=1
    python -m study.cloud trn1 --suites padding --variant quick --neuron 2.29 --dry-run

SkyPilot provisions the instance, syncs the repository, runs the task's setup and run, and tears an idle instance
down (autostop). This adds a time limit on every step and the most a launch can cost, printed before it asks; a
deadline the instance sets at its first boot, so it halts even when this laptop dies before SkyPilot has set its
autostop; the Neuron DLAMI of the SDK whose pins setup installs; and the records and logs copied home.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import shlex
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pydantic
import yaml

from helpers import check

REPO_ROOT = Path(__file__).resolve().parents[1]
CLOUD_BIN = Path(".venv-cloud/bin")  # `make cloud-venv` (requirements-cloud.txt); commands run from the root
SUITES_DIR = "Experiment/suites"
REMOTE = "sky_workdir"  # SkyPilot syncs the workdir to ~/sky_workdir and runs setup and run there
# what comes home: every record (JSON only), and the logs: setup's, the check's, the sweep's
HOME = {
    "Experiment/results": ["--prune-empty-dirs", "--include=*/", "--include=*.json", "--exclude=*"],
    "Experiment/runs": [],
}
IDLE_MINUTES = 15  # the task files' autostop
# SkyPilot 0.14.1 sets autostop at its PRE_EXEC stage: after provisioning, its runtime's install and the workdir's
# sync (setup then runs inside the job). Assumed to take at most this; the deadline covers it either way
START_S = 900
RUN_START_S = 600  # the run's own start beyond its steps' limits: make, each sweep's start
# Neuron SDK -> the pins setup installs. Upstream: no PyTorch/XLA training support from 2.30; 2.31 ships the last
# torch-neuronx (requirements-neuron.txt says why it is the default); 2.29 is the last release that supports it
NEURON = {"2.31": "requirements-neuron.txt", "2.29": "requirements-neuron-2.29.txt"}
DLAMI_NAME = "Deep Learning AMI Neuron (Ubuntu 24.04) *"  # the multi-framework DLAMI, not a single-framework one
AMI_ID = re.compile(r"ami-[0-9a-f]{8}([0-9a-f]{9})?")
# torch pin -> the CUDA its PyPI wheel for Linux x86_64 is built for (its cuda-toolkit requirement) and the oldest
# Linux driver that CUDA runs on (NVIDIA's CUDA 13.0 release notes)
TORCH_CUDA = {"2.13.0": ("13.0", "580.65.06")}


class TaskDumper(yaml.SafeDumper):
    """YAML as the task files are written: scripts (setup, run) as literal blocks."""


TaskDumper.add_representer(
    str, lambda d, text: d.represent_scalar("tag:yaml.org,2002:str", text, style="|" * ("\n" in text))
)


class CloudError(RuntimeError):
    """A cloud run cannot go on; the message says what to do."""


@dataclass(frozen=True)
class Target:
    """Where a run goes: its task file, the instance it rents (None: an offer SkyPilot picks), what it sets there."""

    task: str
    instance: str | None
    resources: dict  # set over the task file's resources; None removes the key


TARGETS = {
    "trn1": Target("cloud/trn1.yaml", "trn1.2xlarge", {}),
    "a10g": Target("cloud/gpu.yaml", "g5.xlarge", {}),
    "l4": Target("cloud/gpu.yaml", "g6.xlarge", {"instance_type": "g6.xlarge", "accelerators": "L4:1"}),
    # one H100: SkyPilot 0.14.1's AWS catalog maps p5.4xlarge to one (the p5.48xlarge holds eight)
    "h100": Target("cloud/gpu.yaml", "p5.4xlarge", {"instance_type": "p5.4xlarge", "accelerators": "H100:1"}),
    # AWS sells A100s eight to a p4d.24xlarge: one from whichever cloud SkyPilot reaches (`sky check`)
    "a100": Target("cloud/gpu.yaml", None, {"infra": None, "instance_type": None, "accelerators": "A100:1"}),
    "local": Target("cloud/gpu.yaml", None, {}),  # this machine: gpu.yaml's setup and run, no cloud
}


def instance_price(instance: str) -> tuple[float, str]:
    """Return the on-demand USD per hour of `instance` and its source (the report's cost module)."""
    from study import cost

    return cost.instance_price(instance)


def torch_build() -> tuple[str, str, str] | None:
    """Return the pinned torch and the CUDA and least driver its PyPI build needs (None: not on file)."""
    pin = re.search(r"^torch==(\S+)", (REPO_ROOT / "requirements.txt").read_text(), re.M)[1]
    return (pin, *TORCH_CUDA[pin]) if pin in TORCH_CUDA else None


def render(target: str, suites: str, variant: str = "quick", neuron: str = "2.31", image_id: str | None = None) -> dict:
    """Return the task a target launches: its instance, image, SUITES, VARIANT, pins and every step's limit."""
    spec, config = TARGETS[target], yaml.safe_load((REPO_ROOT / TARGETS[target].task).read_text())
    resources = config["resources"] | spec.resources | ({"image_id": image_id} if image_id else {})
    config["resources"], envs = {k: v for k, v in resources.items() if v is not None}, config["envs"]
    config["name"] = f"accelbench-{target}"
    envs.update(SUITES=suites, VARIANT=variant)
    if target == "trn1":
        envs.update(NEURON_SDK=neuron, NEURON_REQUIREMENTS=NEURON[neuron])
    elif build := torch_build():
        envs["DRIVER_MIN"] = build[2]
    envs["RUN_TIMEOUT_S"] = str(round(sum(seconds for _, seconds, _ in run_parts(config))))
    return config


def suite_limits(suites: str, variant: str, target: str) -> list[tuple[str, int, float]]:
    """Return each suite the run sweeps: its name, its points in `variant` on `target` and one point's limit."""
    from study.sweep import suites as sweep

    chosen = [s for s in sweep.find_suites() if not s.on_demand] if suites.split() == ["all"] else suites.split()
    found = [sweep.retarget(s if isinstance(s, sweep.Suite) else sweep.resolve_suite(s), target) for s in chosen]
    return [(s.name, len(sweep.expand(s, variant)), sweep.timeout_of(s, variant)) for s in found]


def run_parts(config: dict) -> list[tuple[str, float, str]]:
    """Return what the task's run may take, part by part: (name, seconds at its limit, what it is)."""
    envs = config["envs"]
    neuron = envs["SWEEP_TARGET"] == "trainium"
    parts = [("the check", check.bound_s(neuron), f"{len(check.MODES) + 2} runs and a matmul, each at its limit")]
    for name, points, limit_s in suite_limits(envs["SUITES"], envs["VARIANT"], envs["SWEEP_TARGET"]):
        # on trn1 each point may first be precompiled (--precompile): counted at the point's own limit again
        parts.append(
            (
                name,
                (1 + neuron) * points * limit_s,
                f"{points} points at {limit_s:,.0f} s" + " (x2: precompile)" * neuron,
            )
        )
    return parts + [("start-up", RUN_START_S, "make and each sweep's own start")]


def bound_parts(config: dict) -> list[tuple[str, float, str]]:
    """Return what a launch may bill, part by part: (name, seconds, why it ends there)."""
    envs = config["envs"]
    run = "; ".join(f"{name} {seconds:,.0f} s ({what})" for name, seconds, what in run_parts(config))
    return [
        ("start", START_S, "SkyPilot provisions, installs its runtime, syncs the repository (assumed)"),
        ("setup", float(envs["SETUP_TIMEOUT_S"]), f"killed at SETUP_TIMEOUT_S={envs['SETUP_TIMEOUT_S']}"),
        ("run", float(envs["RUN_TIMEOUT_S"]), f"killed at RUN_TIMEOUT_S={envs['RUN_TIMEOUT_S']}: {run}"),
        ("idle", IDLE_MINUTES * 60.0, "autostop's idle minutes, should nothing here get to `sky down`"),
    ]


def deadline_minutes(config: dict) -> int:
    """Return the minutes after its first boot at which the instance halts itself: every part at its limit."""
    return math.ceil(sum(seconds for _, seconds, _ in bound_parts(config)) / 60)


def sky_config(config: dict) -> dict:
    """Return the SkyPilot config a launch passes (`--config`): the deadline, run by cloud-init at first boot."""
    return {"aws": {"post_provision_runcmd": [f"shutdown -h +{deadline_minutes(config)}"]}}


def cost_text(target: str, config: dict) -> str:
    """Return the bound: each part's hours and dollars, the total, the deadline that enforces it, the hole."""
    spec, minutes = TARGETS[target], deadline_minutes(config)
    if target == "local":
        return "Cost: nothing, this machine (setup and the run each at their limit)."
    try:
        price, source = instance_price(spec.instance) if spec.instance else (None, "")
    except (LookupError, ValueError, ImportError) as err:  # no row, or no price module yet: hours only
        price, source = None, f"no price on file ({type(err).__name__}: {err}): a launch is refused until there is one"
    usd = (lambda s: f"  ${price * s / 3600:8.2f}") if price is not None else (lambda s: "")
    lines = [f"  {s / 3600:5.2f} h{usd(s)}  {name}: {why}" for name, s, why in bound_parts(config)]
    lines.append(f"  {minutes / 60:5.2f} h{usd(minutes * 60)}  in all, at most")
    head = f"{spec.instance} at ${price:g}/h ({source})" if price is not None else source
    if spec.instance is None:
        head = f"one {spec.resources['accelerators']} from the cloud SkyPilot picks: it prints its $/h before it asks"
    hole = [
        f"Enforced: the instance halts itself {minutes} minutes after its first boot (`shutdown -h +{minutes}`, run by",
        "cloud-init before SkyPilot connects), whatever happens to this laptop; halted, it bills its disk until `sky down`.",
        "SkyPilot's autostop exists only after the start above: should this command die before 'Job submitted', run",
    ]
    if spec.instance is None:  # the offer may be outside AWS, where no deadline is set
        hole = [
            "Not enforced before autostop: the offer may be outside AWS, where no boot deadline is set; should this",
            f"command die before 'Job submitted' (the start above, up to {START_S // 60} min), run",
        ]
    hole.append(f"  make cloud-down TARGET={target}    # the records home, then sky down")
    return "\n".join([f"Cost: {head}; every step at its limit:", *lines, *hole])


def setup_text(target: str, config: dict) -> str:
    """Return what setup installs: the Neuron SDK's image and pins, or torch's CUDA build and the driver it needs."""
    envs = config["envs"]
    if target == "trn1":
        image = config["resources"].get("image_id") or f"the newest '{DLAMI_NAME}' whose description names it"
        return f"Neuron SDK {envs['NEURON_SDK']}: image {image}; .venv-neuron from {envs['NEURON_REQUIREMENTS']}"
    build = torch_build()
    if build is None:
        return "Setup: .venv from requirements.txt; this torch pin's CUDA build is not on file (study/cloud.py)"
    torch, cuda, driver = build
    return (
        f"Setup: .venv with torch {torch} from PyPI, its CUDA {cuda} build: the NVIDIA driver must be {driver} or "
        "newer (setup stops first thing, saying so, when it is older)"
    )


def refusal(target: str, suites: str, neuron: str | None, image_id: str | None) -> str | None:
    """Return why a launch of `target` could not run as asked (None when it could)."""
    known = sorted(p.stem for p in (REPO_ROOT / SUITES_DIR).glob("*.toml"))
    for name in suites.split() if suites.split() != ["all"] else []:
        path = REPO_ROOT / (name if name.endswith(".toml") else f"{SUITES_DIR}/{name}.toml")
        if not path.resolve().is_relative_to(REPO_ROOT) or not path.is_file():
            return f"SUITES: no suite {name!r} in the repository (the instance gets the repository only); known: {', '.join(known)}, or all"
        if subprocess.run(["git", "check-ignore", "-q", str(path)], cwd=REPO_ROOT).returncode == 0:
            return f"SUITES: {name} is ignored by git, so SkyPilot's sync of the repository leaves it behind"
    if not suites.split():
        return "SUITES is empty: a launch would rent an instance for setup and the check alone; name a suite, or all"
    if (neuron or image_id) and target not in ("trn1", "a10g", "l4", "h100"):
        return f"NEURON and IMAGE_ID name an AWS image: {target} takes none"
    if neuron and target != "trn1":
        return "NEURON sets a trn1's Neuron SDK: leave it out for a GPU"
    if image_id and not AMI_ID.fullmatch(image_id):
        return f"IMAGE_ID={image_id!r} is not an AMI id (ami- and 8 or 17 hex digits)"
    if image_id and target == "trn1" and not neuron:
        return "IMAGE_ID alone on trn1: say which Neuron SDK that image carries (NEURON=2.29 or 2.31), so setup installs its pins"
    return None


def ami_command(sdk: str, image_id: str | None = None) -> list[str]:
    """Return the AWS CLI call that prints the newest Neuron DLAMI of `sdk`, or the description of `image_id`."""
    aws = [str(CLOUD_BIN / "aws"), "ec2", "describe-images", "--region", "us-east-1", "--output", "text"]
    if image_id:
        return [*aws, "--image-ids", image_id, "--query", "Images[0].Description"]
    wanted = [f"Name=name,Values={DLAMI_NAME}", f"Name=description,Values=*Neuron SDK {sdk}*"]
    return [*aws, "--owners", "amazon", "--filters", *wanted, "--query", "sort_by(Images, &CreationDate)[-1].ImageId"]


def neuron_image(config: dict) -> str:
    """Return the image a trn1 launch takes: the newest DLAMI of the SDK, or the one named, if its SDK matches."""
    sdk, named = config["envs"]["NEURON_SDK"], config["resources"].get("image_id")
    out = subprocess.run(ami_command(sdk, named), capture_output=True, text=True, cwd=REPO_ROOT)
    said = out.stdout.strip()
    if out.returncode != 0 or not said or said == "None":
        raise CloudError(f"no answer from AWS about the Neuron {sdk} image ({out.stderr.strip() or said})")
    if named and f"Neuron SDK {sdk}" not in said:
        raise CloudError(f"IMAGE_ID={named} is not a Neuron SDK {sdk} image ({said!r}): its pins would not match")
    return named or said


def commands(config: dict) -> dict[str, list]:
    """Return the commands of a cloud run: launch (TASK and CONFIG files), fetch (records and logs home), down."""
    name, sky = config["name"], str(CLOUD_BIN / "sky")
    fetch = [["rsync", "-avz", "--update", *flags, f"{name}:{REMOTE}/{d}/", f"{d}/"] for d, flags in HOME.items()]
    return {
        "launch": [sky, "launch", "-c", name, "TASK", "--config", "CONFIG"],
        "fetch": fetch,
        "down": [sky, "down", "-y", name],
    }


def commands_text(target: str, config: dict) -> str:
    """Return the commands a launch runs after asking, as shell lines (TASK, CONFIG: the task and the deadline)."""
    if target == "local":
        return "Then, here, from the repository's root: the task's setup, then its run."
    done = commands(config)
    lines = [shlex.join(done["launch"]), *map(shlex.join, done["fetch"]), shlex.join(done["down"])]
    if target == "trn1":  # the image first: the newest DLAMI of the SDK, or the named one's description
        lines.insert(0, shlex.join(ami_command(config["envs"]["NEURON_SDK"], config["resources"].get("image_id"))))
    return "Then:\n" + "\n".join(f"  {line}" for line in lines)


def bring_home(config: dict) -> None:
    """Copy the instance's records, executed notebooks and logs (setup's and the check's too) here."""
    for command in commands(config)["fetch"]:
        if subprocess.run(command, cwd=REPO_ROOT).returncode != 0:
            print(
                f"cloud: could not copy {command[-2]} (is the instance gone?): {shlex.join(command)}", file=sys.stderr
            )
    print("cloud: records in Experiment/results/<suite>/, logs in Experiment/runs/ (setup: Experiment/runs/cloud/)")


def launch(target: str, config: dict, yes: bool, keep: bool) -> int:
    """Launch the task with its deadline; however it ends, bring the records home and tear it down."""
    spec = TARGETS[target]
    try:  # a pinned instance without a price has no bound in dollars: never launched
        if spec.instance:
            instance_price(spec.instance)
    except (LookupError, ValueError, ImportError) as err:
        raise CloudError(f"no price for {spec.instance} ({err}): no bound, so no launch; add its row first") from None
    if target == "trn1":
        config["resources"]["image_id"] = neuron_image(config)
        print(f"cloud: Neuron SDK {config['envs']['NEURON_SDK']} image {config['resources']['image_id']}")
    try:
        with tempfile.TemporaryDirectory() as folder:
            task, settings = Path(folder) / "task.yaml", Path(folder) / "config.yaml"
            task.write_text(yaml.dump(config, Dumper=TaskDumper, sort_keys=False))
            settings.write_text(yaml.safe_dump(sky_config(config)))
            argv = [
                str(task) if a == "TASK" else str(settings) if a == "CONFIG" else a for a in commands(config)["launch"]
            ]
            status = subprocess.run(argv + (["-y"] if yes or spec.instance else []), cwd=REPO_ROOT).returncode
    finally:
        bring_home(config)
        if keep:
            print(f"cloud: {config['name']} stays up; autostop ends it {IDLE_MINUTES} idle minutes after its job")
        else:
            subprocess.run(commands(config)["down"], cwd=REPO_ROOT)
    return status


def validate(config: dict, *more: dict) -> str:
    """Check the tasks and the first's deadline against SkyPilot's own code (offline, in .venv-cloud); say what passed."""
    if not (REPO_ROOT / CLOUD_BIN / "python").exists():
        raise CloudError(f"{CLOUD_BIN}/python is missing: `make cloud-venv` builds it")
    with tempfile.NamedTemporaryFile("w", suffix=".yaml") as settings:
        settings.write(yaml.safe_dump(sky_config(config)))
        settings.flush()
        argv = [str(CLOUD_BIN / "python"), "cloud/validate.py", "--config", settings.name]
        out = subprocess.run(
            argv, input=yaml.safe_dump_all([config, *more]), capture_output=True, text=True, cwd=REPO_ROOT
        )
    if out.returncode != 0:
        raise CloudError(f"SkyPilot refuses the task: {out.stderr.strip()[-2000:]}")
    return out.stdout.strip()


def run_local(config: dict) -> int:
    """Run the task's setup, then its run, here with its envs (as SkyPilot does there); return the status."""
    for step in ("setup", "run"):
        print(f"local {step}: {config[step].strip()}", flush=True)
        env = {**os.environ, **config["envs"]}
        if status := subprocess.run(["bash", "-c", config[step]], cwd=REPO_ROOT, env=env).returncode:
            return status
    return 0


def switch(text: str) -> bool:
    """Return True for yes (1, y, yes, true, on), False for no ('', 0, n, no, false, off); refuse anything else."""
    try:
        return pydantic.TypeAdapter(bool).validate_python(text.strip() or "no")
    except pydantic.ValidationError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is neither yes (1, yes, true, on) nor no (0, no, false, off)"
        ) from None


def main(argv: list[str] | None = None) -> int:
    """Command line: python -m study.cloud TARGET [--suites S] [--variant V] [--neuron SDK] [--dry-run] ..."""
    p = argparse.ArgumentParser(prog="python -m study.cloud", description=__doc__.split("\n\n")[0])
    p.add_argument("target", choices=TARGETS)
    p.add_argument("--suites", default="cloud/smoke.toml", help="suite names or .toml paths, space-separated, or all")
    p.add_argument("--variant", choices=("quick", "full"), default="quick")
    p.add_argument("--neuron", choices=NEURON, help="trn1: the Neuron SDK, its image and pins together (default 2.31)")
    p.add_argument("--image-id", help="this AMI instead of the looked-up one (trn1: with --neuron, checked)")
    for flag, says in (("dry-run", "print the task and bound; contact nothing"), ("yes", "launch without asking")):
        p.add_argument(f"--{flag}", nargs="?", const=True, default=False, type=switch, metavar="yes|no", help=says)
    p.add_argument("--keep", nargs="?", const=True, default=False, type=switch, metavar="yes|no", help="leave it up")
    p.add_argument("--down", action="store_true", help="only bring the records home, then tear down")
    args = p.parse_args(argv)
    try:
        refused = None if args.down else refusal(args.target, args.suites, args.neuron, args.image_id)
        if refused:
            raise CloudError(refused)
        config = render(args.target, args.suites, args.variant, args.neuron or "2.31", args.image_id)
        if args.down:
            bring_home(config)
            return subprocess.run(commands(config)["down"], cwd=REPO_ROOT).returncode
        print(
            f"# {TARGETS[args.target].task}, as rendered\n{yaml.dump(config, Dumper=TaskDumper, sort_keys=False)}{validate(config)}"
        )
        print(f"\n{setup_text(args.target, config)}\n\n{cost_text(args.target, config)}\n")
        print(commands_text(args.target, config))
        if args.dry_run:
            print("Dry run: nothing launched, nothing contacted.")
            return 0
        if args.target == "local":
            return run_local(config)
        if not (
            args.yes or sys.stdin.isatty() and input(f"Launch {config['name']}? [y/N] ").strip().lower() in ("y", "yes")
        ):
            print("cloud: not launched (no terminal to ask? YES=1 launches without asking)")
            return 1
        return launch(args.target, config, args.yes, args.keep)
    except CloudError as err:
        print(f"cloud: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
