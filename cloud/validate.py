"""Check SkyPilot tasks (YAML on stdin) and a SkyPilot config file against SkyPilot's own code, offline.

    .venv-cloud/bin/python cloud/validate.py [--config DEADLINE.yaml] < cloud/gpu.yaml

Run by study/cloud.py in .venv-cloud, where SkyPilot lives (never in .venv). `sky.Task.from_yaml` would go on to
resolve the resources against the clouds' catalogs, a download, so only the schema checks it starts with run here:
the task's and its resources'. The config file (the instance's deadline) is checked as `sky launch --config FILE`
reads it: against SkyPilot's config schema, loaded the way the command line loads it, read back with the call its
AWS provisioner makes, and rendered into the cloud-init user data of SkyPilot's AWS template, where the
deadline must land in `runcmd` (run at the instance's first boot, before SkyPilot connects).
"""

import argparse
import re
import sys
import textwrap
from importlib.metadata import version
from pathlib import Path

import jinja2
import sky
import yaml
from sky import skypilot_config
from sky.utils import common_utils, schemas

AWS_TEMPLATE = Path(sky.__file__).parent / "templates" / "aws-ray.yml.j2"


def boot_commands(config_file: str) -> list[str]:
    """Return the commands SkyPilot's AWS template puts in an instance's cloud-init runcmd for this config."""
    common_utils.validate_schema(yaml.safe_load(Path(config_file).read_text()), schemas.get_config_schema(), "")
    skypilot_config.apply_cli_config([config_file])  # what `sky launch --config FILE` does
    runcmd = skypilot_config.get_effective_region_config(cloud="aws", region=None, keys=("post_provision_runcmd",))
    block = re.search(r"\n( +)UserData: \|\n(.*?)\n\1\w", AWS_TEMPLATE.read_text(), re.S)
    user_data = jinja2.Template(textwrap.dedent(block.group(2))).render(runcmd=runcmd)
    return yaml.safe_load(user_data).get("runcmd") or []


def main() -> None:
    """Validate each task on stdin and the config file; print what passed, or exit 1 with SkyPilot's reason."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", help="a SkyPilot config file (the deadline), as `sky launch --config` takes")
    args = parser.parse_args()
    tasks = list(yaml.safe_load_all(sys.stdin))
    try:
        for config in tasks:
            common_utils.validate_schema(config, schemas.get_task_schema(), f"{config.get('name')}: task: ")
            common_utils.validate_schema(config.get("resources") or {}, schemas.get_resources_schema(), "resources: ")
        boot = boot_commands(args.config) if args.config else []
    except ValueError as err:  # SkyPilot's InvalidSkyPilotConfigError is a ValueError
        sys.exit(str(err))
    said = f"valid: SkyPilot {version('skypilot')}'s task and resources schemas ({len(tasks)} task(s))"
    if args.config:
        said += f"; at the instance's first boot its AWS template runs {boot} (cloud-init runcmd)"
    print(said)


if __name__ == "__main__":
    main()
