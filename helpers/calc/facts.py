"""The facts that change, read from helpers/facts/*.csv: published device peaks, instance prices and the devices'
names, families and looks.

Each file of facts has a `source` column (and prices a `date`; devices.csv, names and looks, a `note`); nothing
here is a literal inside a function.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

import pandas as pd

FACTS = Path(__file__).resolve().parents[1] / "facts"


@functools.cache
def load_device_peaks() -> pd.DataFrame:
    """Return device_peaks.csv: published dense peaks (TFLOP/s), bandwidth (GB/s), memory (GiB)."""
    return pd.read_csv(FACTS / "device_peaks.csv")


@functools.cache
def load_devices() -> pd.DataFrame:
    """Return devices.csv by key (a device_peaks.csv device or a family of them): names, looks, peaks row."""
    # studied: the very device the study ran; rank_peaks_key: the row one process drives; cuda_name: a regex
    return pd.read_csv(FACTS / "devices.csv").set_index("key", drop=False)


@functools.cache
def device_column(column: str) -> dict:
    """Return one column of devices.csv as {key: value}, blanks left out."""
    return load_devices()[column].dropna().to_dict()


@functools.cache
def load_instance_prices() -> pd.DataFrame:
    """Return instance_prices.csv: on-demand USD per hour per instance, with date and source."""
    return pd.read_csv(FACTS / "instance_prices.csv")


def device_roof(key: str, dtype: str) -> dict:
    """Return {peak_tflops, mem_bw_gbps, source} for a device key; bf16/fp16 use the 16-bit peak."""
    rows = load_device_peaks().set_index("key")
    if key not in rows.index:
        raise ValueError(f"unknown device key {key!r}; known: {', '.join(rows.index)}")
    row = rows.loc[key]
    peak = row["peak_fp32_tflops"] if dtype == "fp32" else row["peak_bf16_tflops"]
    if pd.isna(peak):
        raise ValueError(f"{key!r} has no published peak; measure it (helpers.measure.peaks)")
    return {"peak_tflops": float(peak), "mem_bw_gbps": float(row["mem_bw_gbps"]), "source": row["source"]}


def cuda_device_key(name: str) -> str | None:
    """Return the device_peaks.csv key for a torch.cuda.get_device_name() string, None if unknown."""
    # matched whole: a name that only contains a known one (H200 NVL, GH200, A10 in A10G) is another product with
    # other clocks, so it has its own row or stays unknown rather than borrow a roof. The PCIe and NVL cards are
    # their own rows: a cloud's "H100" or "A100-80GB" offer may be one (SkyPilot's names differ by cloud: on
    # RunPod "H100" is the PCIe card).
    for key, pattern in device_column("cuda_name").items():
        if re.fullmatch(pattern, name.strip()):
            return key
    return None
