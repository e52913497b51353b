"""Check SkyPilot tasks (YAML on stdin) against SkyPilot's own schemas, offline; exit 1 with its message.

    .venv-cloud/bin/python cloud/validate.py < cloud/gpu.yaml

Run by helpers/study/cloud.py in .venv-cloud, where SkyPilot lives (never in .venv). `sky.Task.from_yaml`
goes on to resolve the resources against the clouds' catalogs, a download, so only the two schema checks it
starts with run here: the task's, then its resources' (the calls sky/task.py and sky/resources.py make), and
an AWS region's name against botocore's own list of EC2 regions (shipped with it: no call).
"""

import sys
from importlib.metadata import version

import boto3
import yaml
from sky.utils import common_utils, schemas


def region_problem(config: dict) -> str | None:
    """Return why the task's AWS region (infra: aws/REGION[/ZONE]) is no EC2 region, None when it is one."""
    cloud, _, where = str((config.get("resources") or {}).get("infra") or "").partition("/")
    region = where.split("/")[0]
    if cloud.lower() != "aws" or not region:
        return None
    regions = boto3.session.Session().get_available_regions("ec2")
    return None if region in regions else f"infra: {region!r} is not an AWS region (botocore's: {', '.join(regions)})"


def main() -> None:
    """Validate each task on stdin (YAML documents); print what passed, or exit 1 with SkyPilot's reason."""
    tasks = list(yaml.safe_load_all(sys.stdin))
    for config in tasks:
        try:
            common_utils.validate_schema(config, schemas.get_task_schema(), "Invalid task YAML: ")
            common_utils.validate_schema(
                config.get("resources") or {}, schemas.get_resources_schema(), "Invalid resources YAML: "
            )
        except ValueError as err:  # SkyPilot's InvalidSkyPilotConfigError is a ValueError
            sys.exit(f"{config.get('name')}: {err}")
        problem = region_problem(config)
        if problem:
            sys.exit(f"{config.get('name')}: {problem}")
    print(
        f"valid: SkyPilot {version('skypilot')}'s task and resources schemas"
        + (f" ({len(tasks)} tasks)" if len(tasks) > 1 else "")
    )


if __name__ == "__main__":
    main()
