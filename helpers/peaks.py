"""The CPU's matmul roof, measured once per machine, dtype and thread count, kept in <results>/_peaks/<device key>.json.

    peaks.ensure_cpu_roof(dev, "bf16", record_path, rec)       # a run, after training: it slows the steps after it
    peaks.cpu_roof(device_key, "bf16", threads, peaks_dir)     # the report: the kept roof, or None

GPUs and NeuronCores have published peaks (helpers/facts/device_peaks.csv); a CPU's depends on its vector units (AMX,
AVX512-BF16, AVX2) and the threads a run gets, so it is measured here on the shapes the models' linear layers use,
within a time cap (a dtype the CPU emulates, such as fp16, stops early), with the copy bandwidth beside it. Every run
on the machine and every table of the report divide by the same figure, so MFU compares across rows. A roof measured
while other processes kept the CPUs busy is never kept: the next run measures it again.
"""

from __future__ import annotations

import math
import os
import secrets
import time
from pathlib import Path
from typing import TYPE_CHECKING

import psutil
import torch

from helpers import record

if TYPE_CHECKING:
    from helpers import devices

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
# (name, m, k, n): a square, and the linear layers of bert-base and MiniLM at 2,048 tokens a step
SHAPES = (
    ("square 2048", 2048, 2048, 2048),
    ("bert-base FFN up, 2048 tokens", 2048, 768, 3072),
    ("bert-base attention projection, 2048 tokens", 2048, 768, 768),
    ("MiniLM FFN up, 2048 tokens", 2048, 384, 1536),
)
CAP_S = 8.0  # seconds a roof may take to measure in all
# cores other processes kept busy, on average, while a roof was measured, above which it is never kept: one of
# 0.0278 TFLOP/s measured under load (a quarter of the quiet one) made the next quiet run's MFU 0.81, not about 0.11
BUSY_CORES = 0.5


def cpu_mark() -> tuple[float, float, float]:
    """Return (now in seconds, CPU seconds every process has used, CPU seconds this one has used)."""
    t = psutil.cpu_times()
    busy = t.user + t.nice + t.system + sum(getattr(t, f, 0.0) for f in ("irq", "softirq", "steal"))
    own = psutil.Process().cpu_times()
    return time.perf_counter(), busy, own.user + own.system


def others_cores(mark: tuple[float, float, float]) -> float:
    """Return how many cores other processes kept busy, on average, from `mark` (cpu_mark()) to now."""
    wall, busy, own = cpu_mark()
    return max(0.0, ((busy - mark[1]) - (own - mark[2])) / max(wall - mark[0], 1e-9))


def matmul_tflops(m: int, k: int, n: int, dtype: torch.dtype, seconds: float = 0.5) -> float:
    """Return the median TFLOP/s of an (m,k) @ (k,n) matmul over about `seconds` of repeats, at torch's threads."""
    from torch.utils import benchmark  # imports setuptools (0.4-0.8 s), which a run with a kept roof skips

    # the Timer's first run (its block-size estimate) picks and JITs oneDNN's kernel; it runs at one thread unless told
    a, b = torch.randn(m, k).to(dtype), torch.randn(k, n).to(dtype)
    timer = benchmark.Timer("torch.mm(a, b)", globals={"a": a, "b": b}, num_threads=torch.get_num_threads())
    return 2 * m * k * n / timer.blocked_autorange(min_run_time=seconds).median / 1e12


def copy_gbps(n_bytes: int = 2**27, seconds: float = 0.5) -> float:
    """Return memory bandwidth in GB/s: the bytes read and written by a 128 MiB tensor copy (past any cache)."""
    from torch.utils import benchmark

    src = torch.ones(n_bytes // 4)
    timer = benchmark.Timer(
        "dst.copy_(src)", globals={"src": src, "dst": torch.empty_like(src)}, num_threads=torch.get_num_threads()
    )
    return 2 * n_bytes / timer.blocked_autorange(min_run_time=seconds).median / 1e9


def measure(dtype: str, cap_s: float = CAP_S) -> dict:
    """Return the best matmul TFLOP/s over SHAPES in `dtype` and the copy GB/s, measured within about `cap_s`."""
    start, load, mark = time.perf_counter(), os.getloadavg()[0], cpu_mark()
    probe_s = 2 * 256**3 / (matmul_tflops(256, 256, 256, DTYPES[dtype], seconds=0.0) * 1e12)
    by_shape = {}
    for name, m, k, n in SHAPES:
        # a slow 256^3 probe means an emulated dtype: a shape whose repeats would pass the cap is left out
        if time.perf_counter() - start + 4 * probe_s * (m * k * n) / 256**3 <= cap_s:
            by_shape[name] = matmul_tflops(m, k, n, DTYPES[dtype], seconds=min(0.5, cap_s / 10))
    if not by_shape:  # even one large matmul would pass the cap: the probe's own rate is the roof
        by_shape["square 256 (capped)"] = 2 * 256**3 / probe_s / 1e12
    best = max(by_shape, key=by_shape.get)
    rounds = [by_shape[best]]  # timed twice, the faster kept: another process can only slow a round down
    shape = next((s for s in SHAPES if s[0] == best), None)
    if shape and time.perf_counter() - start < cap_s / 2:
        rounds.append(matmul_tflops(*shape[1:], DTYPES[dtype], seconds=min(0.5, cap_s / 10)))
    return {
        "peak_tflops": max(rounds),
        "mem_bw_gbps": copy_gbps(),
        "shape": best,
        "by_shape": by_shape,
        "rounds_tflops": rounds,
        "threads": torch.get_num_threads(),
        "measured_at": record.now(),
        "load_1min": max(load, os.getloadavg()[0]),
        "others_cores": round(others_cores(mark), 3),
        "cpu_count": os.cpu_count(),
        "seconds": round(time.perf_counter() - start, 2),
    }


def problem(peak: object) -> str | None:
    """Return why a roof (kept or just measured) cannot be trusted, None when it can."""
    figures = ("peak_tflops", "mem_bw_gbps", "threads")
    if not isinstance(peak, dict) or not all(isinstance(peak.get(k), int | float) for k in figures):
        return "missing, cut short or incomplete"
    if not (isinstance(peak.get("shape"), str) and isinstance(peak.get("by_shape"), dict)):
        return "missing, cut short or incomplete"
    if not all(math.isfinite(peak[k]) and peak[k] > 0 for k in figures):
        return f"peak_tflops={peak['peak_tflops']!r}, mem_bw_gbps={peak['mem_bw_gbps']!r}: not positive finite numbers"
    if (peak.get("others_cores") or 0) > BUSY_CORES:
        return (
            f"measured while other processes kept {peak['others_cores']:.1f} of {peak.get('cpu_count') or '?'} cores "
            f"busy (more than {BUSY_CORES}): a busy machine"
        )
    return None


def read_kept(path: Path) -> dict:
    """Return what a _peaks file keeps, by "<dtype>, <threads> threads"; {} when none, cut short or not an object."""
    try:
        kept = record.read_json(path)
    except record.RecordError:
        return {}
    return kept if isinstance(kept, dict) else {}


def keep(path: Path, kept: dict) -> str:
    """Write `kept` whole to `path` (a temporary file renamed over it); return "" or "; not kept: why"."""
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(record.json_text(kept))
        os.replace(tmp, path)
    except OSError as err:  # a full disk costs the kept roof, never the run
        return f"; not kept: {err.strerror or type(err).__name__}"
    finally:
        tmp.unlink(missing_ok=True)
    return ""


def with_source(peak: dict, dtype: str, path: Path, note: str = "") -> dict:
    """Return `peak` with the source the report prints (the file relative: a report never names a checkout)."""
    return {
        **peak,
        "source": f"measured on this machine: best {dtype} matmul of {len(peak['by_shape'])} model shapes "
        f"({peak['shape']}) at {peak['threads']} threads ({record.PEAKS}/{path.name}{note})",
    }


def roof(device_key: str, dtype: str, peaks_dir: Path) -> dict:
    """Return this machine's `dtype` roof at torch's threads: kept in `peaks_dir`, else measured now and kept."""
    path, key = Path(peaks_dir) / f"{device_key}.json", f"{dtype}, {torch.get_num_threads()} threads"
    kept = read_kept(path)
    if problem(kept.get(key)) is None:
        return with_source(kept[key], dtype, path)
    fresh = measure(dtype)
    if why := problem(fresh):
        return {**fresh, "peak_tflops": None, "mem_bw_gbps": None, "reason": f"no trusted {dtype} roof: {why}"}
    return with_source(fresh, dtype, path, keep(path, {**kept, key: fresh}))


def ensure_cpu_roof(dev: devices.Device, dtype: str, record_path: Path, rec: record.RunRecord) -> None:
    """Have the CPU's `dtype` roof kept in <results>/_peaks (measured once); add its seconds to rec.phases.probes."""
    if dev.type == "cuda" or dev.neuron:  # published peaks
        return
    t0 = time.perf_counter()
    try:  # its random matrices come from a forked RNG: a run that measures the roof trains as one that reads it
        with torch.random.fork_rng():
            found = roof(dev.key, dtype, Path(record_path).parent.parent / record.PEAKS)
        if found["peak_tflops"] is None:
            print(f"the CPU roof was not kept, MFU will say why: {found['reason']}")
    except Exception as err:  # noqa: BLE001 - the report says why where there is no roof; the run goes on
        print(f"the CPU roof could not be measured ({type(err).__name__}: {err}); MFU will say why")
    rec.phases = rec.phases or record.Phases()
    rec.phases.probes = (rec.phases.probes or 0.0) + time.perf_counter() - t0


def cpu_roof(device_key: str, dtype: str, threads: int, peaks_dir: Path) -> dict | None:
    """Return the kept `dtype` roof of a CPU at `threads` (peak_tflops, mem_bw_gbps, source, ...), None if none."""
    path = Path(peaks_dir) / f"{device_key}.json"
    peak = read_kept(path).get(f"{dtype}, {threads} threads")
    return with_source(peak, dtype, path) if problem(peak) is None else None
