"""The original study's published figures (Experiment/published/*.csv, described in its README.md), read as
printed: the report shows them beside the records, the claims feed them through their rules."""

from __future__ import annotations

import pandas as pd

from helpers.calc.facts import load_devices
from helpers.calc.prices import accelerator_price
from helpers.run.paths import repo_path

PUBLISHED_DIR = "Experiment/published"
# the study's device names (cost.csv, speedup.csv) -> keys of helpers/facts/instance_prices.csv
STUDY_KEYS = {r.study_name: r.key for r in load_devices().query("studied == True").itertuples()}


def published(file: str, published_dir=PUBLISHED_DIR) -> pd.DataFrame:
    """Return one of the study's published tables (strings as printed)."""
    return pd.read_csv(repo_path(published_dir) / file, dtype=str, keep_default_na=False)


def study_price(device: str, instance_as_printed: str) -> tuple[str | None, float, str]:
    """Return (instance, USD per hour of one of the study's `device` on it, note) at our prices (cost.csv's row)."""
    printed = instance_as_printed.lower().replace("-", ".")  # the study printed trn1.2xlarge as Trn1-2xlarge
    return accelerator_price(printed, STUDY_KEYS.get(device))
