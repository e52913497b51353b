"""The CPU's roofs, measured once per machine: matmul TFLOP/s per dtype and thread count, copy GB/s.

    peak = machine_peak("cpu-intel-xeon-...-avx512", "bf16", peaks_dir)   # measured on first use, then read

GPUs and NeuronCores have published peaks (helpers/facts/device_peaks.csv); a CPU's depend on its
vector units (AMX, AVX512-BF16, AVX2) and the threads a run gets, so they are measured here, on the
shapes the models' linear layers use, within a time cap (a dtype the CPU emulates slowly, such as fp16,
stops early instead of costing minutes), and kept in `<results>/_peaks/<device>.json`. Every run on
the machine, and every table of the report, divides by the same figure, so MFU compares across rows.
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import time
from pathlib import Path

import psutil
import torch

from helpers.run.records import RecordReadError, now, read_json, write_json_atomic

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
# (name, m, k, n): a square, and the linear layers of bert-base and MiniLM at 2,048 tokens a step
SHAPES = (
    ("square 2048", 2048, 2048, 2048),
    ("bert-base FFN up, 2048 tokens", 2048, 768, 3072),
    ("bert-base attention projection, 2048 tokens", 2048, 768, 768),
    ("MiniLM FFN up, 2048 tokens", 2048, 384, 1536),
)
CAP_S = 8.0  # seconds a peak measurement may take in all
FLOORS = Path(__file__).resolve().parents[1] / "facts" / "cpu_roof_floor.csv"
# cores other processes kept busy, on average, while a roof or the precision probe was measured, above which
# it is never kept: a roof of 0.0278 TFLOP/s measured under load (a quarter of the quiet one, above the
# floor) made the next quiet run's MFU 0.81 instead of about 0.11
BUSY_CORES = 0.5


def cpu_mark() -> tuple[float, float, float]:
    """Return (now in seconds, the CPU seconds every process has used, the CPU seconds this one has used)."""
    t = psutil.cpu_times()
    busy = t.user + t.nice + t.system + sum(getattr(t, f, 0.0) for f in ("irq", "softirq", "steal"))
    own = psutil.Process().cpu_times()
    return time.perf_counter(), busy, own.user + own.system


def others_cores(mark: tuple[float, float, float]) -> float:
    """Return how many cores other processes kept busy, on average, from `mark` (cpu_mark()) to now."""
    wall, busy, own = cpu_mark()
    return max(0.0, ((busy - mark[1]) - (own - mark[2])) / max(wall - mark[0], 1e-9))


def busy_problem(measured: dict) -> str | None:
    """Return why a measurement is not kept when other processes shared the CPUs while it ran, else None."""
    others = measured.get("others_cores")
    if isinstance(others, (int, float)) and not isinstance(others, bool) and others > BUSY_CORES:
        return (
            f"measured while other processes kept {others:.1f} of {measured.get('cpu_count') or '?'} cores busy "
            f"(more than {BUSY_CORES}): a busy machine"
        )
    return None


def timer(stmt: str, **operands: torch.Tensor):
    """Return torch.utils.benchmark's Timer of `stmt` over `operands`, at the process's torch threads."""
    from torch.utils import benchmark  # here: it imports setuptools (0.4-0.8 s), which a run with a kept roof skips

    return benchmark.Timer(stmt, globals=operands, num_threads=torch.get_num_threads())


def matmul_timer(m: int, k: int, n: int, dtype: torch.dtype):
    """Return the Timer of one (m,k)@(k,n) matmul in `dtype`."""
    return timer("torch.mm(a, b)", a=torch.randn(m, k).to(dtype), b=torch.randn(k, n).to(dtype))


# Timer's block-size estimate runs the statement first: oneDNN picks and JITs its kernel, a copy touches its pages
def matmul_tflops(m: int, k: int, n: int, dtype: torch.dtype, seconds: float = 0.5) -> float:
    """Return the median TFLOP/s of an (m,k)@(k,n) matmul over about `seconds` of repeats."""
    return 2 * m * k * n / matmul_timer(m, k, n, dtype).blocked_autorange(min_run_time=seconds).median / 1e12


def copy_gbps(n_bytes: int = 2**27, seconds: float = 0.5) -> float:
    """Return memory bandwidth in GB/s: bytes read + written by a 128 MiB tensor copy (past any cache)."""
    src = torch.ones(n_bytes // 4)
    copy = timer("dst.copy_(src)", src=src, dst=torch.empty_like(src))
    return 2 * n_bytes / copy.blocked_autorange(min_run_time=seconds).median / 1e9


def measure_peak(dtype: str, cap_s: float = CAP_S) -> dict:
    """Return the best matmul TFLOP/s over SHAPES in `dtype` and the copy GB/s, within `cap_s` seconds."""
    start, load, mark = time.perf_counter(), os.getloadavg()[0], cpu_mark()
    probe_tflops = matmul_tflops(256, 256, 256, DTYPES[dtype], seconds=0.0)  # warmed up, one block
    probe_s = 2 * 256**3 / (probe_tflops * 1e12)
    results: dict[str, float] = {}
    for name, m, k, n in SHAPES:
        # a 256^3 probe that took long means an emulated dtype: the big shapes would take minutes
        expected_s = probe_s * (m * k * n) / 256**3
        if time.perf_counter() - start + 4 * expected_s > cap_s:
            continue
        results[name] = matmul_tflops(m, k, n, DTYPES[dtype], seconds=min(0.5, cap_s / 10))
    if not results:  # even one big matmul would pass the cap: the probe's own rate is the roof
        results["square 256 (capped)"] = probe_tflops
    best = max(results, key=results.get)
    rounds = [results[best]]  # timed twice, the faster kept: another process can only slow a round down
    shape = next((s for s in SHAPES if s[0] == best), None)
    if shape and time.perf_counter() - start < cap_s / 2:
        rounds.append(matmul_tflops(*shape[1:], DTYPES[dtype], seconds=min(0.5, cap_s / 10)))
    bandwidth = copy_gbps()
    return {
        "peak_tflops": max(rounds),
        "mem_bw_gbps": bandwidth,
        "shape": best,
        "by_shape": results,
        "rounds_tflops": rounds,
        "threads": torch.get_num_threads(),
        "measured_at": now(),
        "load_1min": max(load, os.getloadavg()[0]),
        "others_cores": round(others_cores(mark), 3),
        "cpu_count": os.cpu_count(),
        "seconds": round(time.perf_counter() - start, 2),
    }


def _complete(peak: object) -> bool:
    """True when a stored roof has every figure a run reads (older or hand-edited files may not)."""
    return (
        isinstance(peak, dict)
        and all(
            isinstance(peak.get(k), (int, float)) and not isinstance(peak.get(k), bool)
            for k in ("peak_tflops", "mem_bw_gbps", "threads")
        )
        and isinstance(peak.get("shape"), str)
        and isinstance(peak.get("by_shape"), dict)
    )


def floor_tflops(device_key: str, dtype: str, threads: int) -> float | None:
    """Return the TFLOP/s below which a `dtype` roof of this CPU kind at `threads` threads was measured busy."""
    with open(FLOORS, newline="") as f:
        for row in csv.DictReader(f):
            if row["dtype"] == dtype and row["kind"] in device_key:  # the first row whose kind is in the key
                return float(row["min_tflops_per_thread"]) * max(1, threads)
    return None


def roof_problem(peak: object, device_key: str, dtype: str) -> str | None:
    """Return why a roof (stored or just measured) cannot be trusted, or None when it can."""
    if not _complete(peak):
        return "missing, cut short or incomplete"
    for name in ("peak_tflops", "mem_bw_gbps"):
        if not (math.isfinite(peak[name]) and peak[name] > 0):
            return f"{name}={peak[name]!r} is not a positive finite number"
    if busy := busy_problem(peak):
        return busy
    floor = floor_tflops(device_key, dtype, int(peak["threads"]))
    if floor is not None and peak["peak_tflops"] < floor:
        load = peak.get("load_1min")
        busy = f" at load {load:.1f} on {peak.get('cpu_count') or '?'} CPUs" if isinstance(load, (int, float)) else ""
        return (
            f"{peak['peak_tflops']:.4g} TFLOP/s{busy} is below the {floor:.4g} any CPU of this kind reaches at "
            f"{peak['threads']} threads (helpers/facts/cpu_roof_floor.csv): measured on a busy machine"
        )
    return None


def read_kept(path: Path | None) -> dict:
    """Return what a `_peaks/` file keeps, by key; {} when there is none, or it is cut short or not an object."""
    return read_cache(path)[0]


def read_cache(path: Path | None) -> tuple[dict, str | None]:
    """Return what a `_peaks/` file keeps, by key, and why it was unusable ({} and the reason), if it was."""
    if path is None or not path.exists():
        return {}, None
    try:
        known = read_json(path)
    except RecordReadError as err:
        return {}, str(err)
    return (known, None) if isinstance(known, dict) else ({}, f"{path}: not a JSON object")


def keep(path: Path | None, known: dict) -> str:
    """Write `known` to `path` atomically; return "" or, where it could not be kept, "; not kept: why"."""
    if path is None:
        return ""
    try:
        write_json_atomic(path, known)
    except OSError as err:  # a full disk costs the cache, never the run's figures
        # the reason without its file name: the text goes into the record, which never names a path
        return f"; not kept: {err.strerror or type(err).__name__}"
    return ""


def machine_peak(device_key: str, dtype: str, peaks_dir: str | Path | None) -> dict:
    """Return this machine's roof for `dtype` at the current threads: from `<peaks_dir>`, else measured now."""
    key = f"{dtype}, {torch.get_num_threads()} threads"
    path = Path(peaks_dir) / f"{device_key}.json" if peaks_dir else None
    known, kept = read_kept(path), ""
    if roof_problem(known.get(key), device_key, dtype):
        fresh = measure_peak(dtype)
        why = roof_problem(fresh, device_key, dtype)
        if why:  # never kept: None and the reason
            return {
                **fresh,
                "peak_tflops": None,
                "mem_bw_gbps": None,
                "source": f"measured on this machine now, not trusted and not kept: {why}",
                "reason": f"no trusted {dtype} roof: the one measured now, {why}; measure it on a quiet "
                "machine: python -m helpers.measure.peaks",
            }
        known[key] = fresh
        kept = keep(path, known)
    peak = known[key]
    where = f" (_peaks/{path.name}{kept})" if path else ""  # relative: a report never names a checkout's path
    return {
        **peak,
        "source": f"measured on this machine: best {dtype} matmul of {len(peak['by_shape'])} "
        f"model shapes ({peak['shape']}) at {peak['threads']} threads{where}",
    }


def forget(device_key: str, dtype: str, threads: int, peaks_dir: str | Path | None) -> None:
    """Drop a stored roof that a run beat (MFU above 1): the next run measures it again."""
    path = Path(peaks_dir) / f"{device_key}.json" if peaks_dir else None
    known = read_kept(path)
    if known.pop(f"{dtype}, {threads} threads", None) is not None:
        keep(path, known)


def main(argv: list[str] | None = None) -> None:
    """Measure this machine's roof now (on a quiet machine) and store it, replacing what was there."""
    from helpers.run.device import resolve_device
    from helpers.run.paths import RESULTS_DIR, repo_path

    parser = argparse.ArgumentParser(prog="python -m helpers.measure.peaks", description=main.__doc__)
    parser.add_argument("--dtype", nargs="+", default=["fp32", "bf16"], choices=list(DTYPES))
    parser.add_argument("--threads", type=int, nargs="+", default=[torch.get_num_threads()])
    parser.add_argument("--results", default=RESULTS_DIR, help="results folder (its _peaks/ keeps the roofs)")
    args = parser.parse_args(argv)
    dev = resolve_device("cpu")
    path = repo_path(args.results) / "_peaks" / f"{dev.key}.json"
    known, broken = read_cache(path)
    if broken:
        print(f"{broken}: replaced by the roofs measured now")
    untrusted = 0
    for threads in args.threads:
        torch.set_num_threads(threads)
        for dtype in args.dtype:
            peak = measure_peak(dtype)
            line = (
                f"{dtype}, {threads} threads: {peak['peak_tflops']:.3f} TFLOP/s ({peak['shape']}), "
                f"{peak['mem_bw_gbps']:.1f} GB/s, load {peak['load_1min']:.2f}"
            )
            why = roof_problem(peak, dev.key, dtype)
            if why:
                untrusted += 1
                known.pop(f"{dtype}, {threads} threads", None)  # a run measures it again, never trusts this
                print(f"{line}: NOT kept: {why}")
            else:
                known[f"{dtype}, {threads} threads"] = peak
                print(line)
    write_json_atomic(path, known)
    print(f"wrote {path}")
    if untrusted:
        raise SystemExit(f"{untrusted} roof(s) not kept: measure again on a quiet machine")


if __name__ == "__main__":
    main()
