"""The original study's published figures (Experiment/published/*.csv, described in its README.md), read as
printed: the report shows them beside the records, the claims feed them through their rules."""

from __future__ import annotations

import pandas as pd

from helpers import devices
from helpers.record import repo_path

PUBLISHED_DIR = "Experiment/published"
# the study's device names (cost.csv, speedup.csv) -> keys of helpers/facts/instance_prices.csv
STUDY_KEYS = {r.study_name: r.key for r in devices.facts().query("studied == True").itertuples()}


def published(file: str, published_dir=PUBLISHED_DIR) -> pd.DataFrame:
    """Return one of the study's published tables (strings as printed)."""
    return pd.read_csv(repo_path(published_dir) / file, dtype=str, keep_default_na=False)


def study_price(device: str, instance_as_printed: str) -> tuple[str | None, float, str]:
    """Return (instance, USD per hour of one of the study's `device` on it, note) at our prices (cost.csv's row)."""
    printed = instance_as_printed.lower().replace("-", ".")  # the study printed trn1.2xlarge as Trn1-2xlarge
    return accelerator_price(printed, STUDY_KEYS.get(device))


def accelerator_price(instance: str | None, device_key: str | None) -> tuple[str | None, float, str]:
    """Return (instance, USD per hour of one accelerator, note): the named instance, else the cheapest carrier."""
    # not-mine: study.cost's price lookup once the report lands it
    prices = pd.read_csv(devices.FACTS / "instance_prices.csv")
    named = prices[prices["instance"] == instance]
    if len(named) and named["device"].iloc[0] == device_key:
        row, note = named.iloc[0], ""
    else:
        carrying = prices[prices["device"] == device_key]
        if carrying.empty:
            return instance, float("nan"), f"no price for {device_key or 'this device'} in the facts"
        row = carrying.loc[(carrying["price_per_hour_usd"] / carrying["accelerators"]).idxmin()]
        note = (
            f"{instance} carries {named['device'].iloc[0]}, not {device_key}"
            if len(named)
            else ("stand-in: no instance recorded" if instance is None else f"{instance} not in the facts")
        )
    return row["instance"], float(row["price_per_hour_usd"] / row["accelerators"]), note
