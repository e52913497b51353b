"""The facts that change, read from helpers/facts/*.csv: published device peaks and instance prices.

Each file has a `source` column (and prices a `date`); nothing here is a literal inside a function.
"""
from __future__ import annotations

import functools
import re
from pathlib import Path

import pandas as pd

FACTS = Path(__file__).resolve().parents[1] / "facts"

# torch.cuda.get_device_name() patterns -> device_peaks.csv key; first match wins (H200 before H100).
# PCIe/NVL variants have other clocks and bandwidths, so they stay unknown rather than borrow SXM roofs.
CUDA_NAME_KEYS = (
    (r"H200", "h200"),
    (r"H100(?!.*(PCIe|NVL))", "h100"),
    (r"A100-SXM4-80GB", "a100-80gb"),
    (r"A100-(SXM4|PCIE)-40GB", "a100-40gb"),
    (r"A10G", "a10g"),
    (r"\bL4\b", "l4"),
    (r"\bT4\b", "t4"),
)


@functools.cache
def load_device_peaks() -> pd.DataFrame:
    """Return device_peaks.csv: published dense peaks (TFLOP/s), bandwidth (GB/s), memory (GiB)."""
    return pd.read_csv(FACTS / "device_peaks.csv")


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
    for pattern, key in CUDA_NAME_KEYS:
        if re.search(pattern, name):
            return key
    return None
