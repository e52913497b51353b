"""Measured peak memory of this run: CUDA's allocator peak, or the host's resident-set peak.

Both are reset when a run starts training (`reset_peak`), so a second run in one process (the
benchmark's presets, a re-run notebook cell) reports its own peak, not the first one's.
"""

from __future__ import annotations

import resource
from contextlib import suppress
from pathlib import Path

import torch

from helpers.run.schema import Memory

GIB = 1024**3
PROC = Path("/proc/self")


def reset_peak(device_type: str) -> None:
    """Reset the peak counters of `device_type` and the host's."""
    if device_type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    with suppress(OSError):
        (PROC / "clear_refs").write_text("5")  # Linux: resets VmHWM, the resident-set high-water mark


def host_peak_gib() -> tuple[float, str]:
    """Return the host's resident-set peak in GiB and what it covers (since the last reset, or the process)."""
    with suppress(OSError):
        for line in (PROC / "status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024**2, "VmHWM since the run's reset (/proc/self/status)"
    # ru_maxrss is KiB on Linux and covers the whole process: tokenization and model load included
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2, "ru_maxrss since process start"


def peak(device_type: str) -> Memory:
    """Return the measured peak memory of this run on its device, in GiB."""
    host, source = host_peak_gib()
    if device_type == "cuda":
        return Memory(
            host_peak_rss_gib=host,
            host_source=source,
            cuda_max_allocated_gib=torch.cuda.max_memory_allocated() / GIB,
            cuda_max_reserved_gib=torch.cuda.max_memory_reserved() / GIB,
        )
    device = "not measured (XLA: see neuron-monitor in utilization)" if device_type == "xla" else "host"
    return Memory(host_peak_rss_gib=host, host_source=source, device=device)
