"""The facts that change, read from helpers/facts/*.csv: published device peaks and instance prices.

Each file has a `source` column (and prices a `date`); nothing here is a literal inside a function.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

import pandas as pd

FACTS = Path(__file__).resolve().parents[1] / "facts"

# torch.cuda.get_device_name() names -> device_peaks.csv key, matched whole: a name that only contains a
# known one (H200 NVL, GH200, A10 in A10G) is another product with other clocks, so it has its own row or
# stays unknown rather than borrow a roof. The PCIe and NVL cards are their own rows: a cloud's "H100" or
# "A100-80GB" offer may be one (SkyPilot's names differ by cloud: on RunPod "H100" is the PCIe card).
CUDA_NAME_KEYS = (
    (r"NVIDIA H200", "h200"),
    (r"NVIDIA H200 NVL", "h200-nvl"),
    (r"NVIDIA H100 80GB HBM3", "h100"),
    (r"NVIDIA H100 PCIe", "h100-pcie"),
    (r"NVIDIA H100 NVL", "h100-nvl"),
    (r"NVIDIA A100-SXM4-80GB", "a100-80gb"),
    (r"NVIDIA A100 80GB PCIe", "a100-80gb-pcie"),
    (r"NVIDIA A100-(SXM4|PCIE)-40GB", "a100-40gb"),
    (r"NVIDIA A10G", "a10g"),
    (r"NVIDIA A10", "a10"),
    (r"NVIDIA L4", "l4"),
    (r"(Tesla|NVIDIA) T4", "t4"),
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
        if re.fullmatch(pattern, name.strip()):
            return key
    return None
