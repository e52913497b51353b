"""Check SkyPilot tasks (YAML on stdin) against SkyPilot's own schemas, offline; exit 1 with its message.

    .venv-cloud/bin/python cloud/validate.py < cloud/gpu.yaml

Run by helpers/study/cloud.py in .venv-cloud, where SkyPilot lives (never in .venv). `sky.Task.from_yaml`
goes on to resolve the resources against the clouds' catalogs, a download, so only the two schema checks it
starts with run here: the task's, then its resources' (the calls sky/task.py and sky/resources.py make).
"""

import sys
from importlib.metadata import version

import yaml
from sky.utils import common_utils, schemas


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
    print(
        f"valid: SkyPilot {version('skypilot')}'s task and resources schemas"
        + (f" ({len(tasks)} tasks)" if len(tasks) > 1 else "")
    )


if __name__ == "__main__":
    main()
