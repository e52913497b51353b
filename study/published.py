"""The original study's published figures (Experiment/published/*.csv, described in its README.md), read as
printed: the report shows them beside the records, the claims feed them through their rules."""

from __future__ import annotations

import pandas as pd

from helpers import devices, record

PUBLISHED_DIR = "Experiment/published"
# the study's device names (cost.csv, speedup.csv) -> keys of helpers/facts/instance_prices.csv
STUDY_KEYS = {r.study_name: r.key for r in devices.facts().query("studied == True").itertuples()}


def published(file: str, published_dir=PUBLISHED_DIR) -> pd.DataFrame:
    """Return one of the study's published tables (strings as printed)."""
    return pd.read_csv(record.repo_path(published_dir) / file, dtype=str, keep_default_na=False)
