"""Hourly prices of instances and of the accelerators in them, from on-demand instance prices.

Prices live in facts/instance_prices.csv (on-demand, Linux, us-east-1, with the date they were taken
and their source); multi-accelerator instances also get a per-accelerator hourly price.
"""

from __future__ import annotations

import math

import pandas as pd

from helpers.calc.facts import load_instance_prices


def _row(instance: str) -> pd.Series:
    prices = load_instance_prices().set_index("instance")
    if instance not in prices.index:
        raise ValueError(f"no price for {instance!r}; known: {', '.join(prices.index)}")
    return prices.loc[instance]


def instance_price(instance: str) -> float:
    """Return the on-demand price of the whole instance in USD per hour."""
    return float(_row(instance)["price_per_hour_usd"])


def price_per_accelerator_hour(instance: str) -> float:
    """Return the instance price divided by its accelerators (GPUs or Trainium chips), in USD per hour."""
    row = _row(instance)
    return float(row["price_per_hour_usd"]) / int(row["accelerators"])


def accelerator_price(instance: str | None, device_key: str | None, units: int = 1) -> tuple[str | None, float, str]:
    """Return (instance, USD per hour of `units` accelerators, note): the named instance, else the cheapest carrier."""
    prices = load_instance_prices()
    named = prices[prices["instance"] == instance]
    if len(named) and named["device"].iloc[0] == device_key:
        row, note = named.iloc[0], ""
    else:
        carrying = prices[prices["device"] == device_key]
        if carrying.empty:
            return instance, float("nan"), f"no price for {device_key or 'this device'} in the facts"
        row = carrying.loc[(carrying["price_per_hour_usd"] / carrying["accelerators"]).idxmin()]
        if instance is None:
            note = "stand-in: no instance recorded"
        elif len(named):  # e.g. the study's "L4 (g5.xlarge)": g5.xlarge carries the A10G
            note = f"{instance} carries {named['device'].iloc[0]}, not {device_key}"
        else:
            note = f"{instance} not in the facts"
    # the share of the instance one accelerator is, times the accelerators used
    per_accelerator = row["price_per_hour_usd"] / row["accelerators"]
    return row["instance"], float(per_accelerator * units), note


def whole_instances_price(instance: str | None, units: int = 1) -> float:
    """Return USD per hour of the whole instances that hold `units` accelerators (what a single user pays)."""
    prices = load_instance_prices()
    row = prices[prices["instance"] == instance]
    if row.empty:
        return float("nan")
    return float(row["price_per_hour_usd"].iloc[0] * math.ceil(units / row["accelerators"].iloc[0]))
