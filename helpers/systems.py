"""A run's systems figures: FLOPs and bytes per step, achieved TFLOP/s, MFU and its roofline side."""
from __future__ import annotations

import json
import os
from pathlib import Path

import torch

from helpers import roofline
from helpers.device import cpu_capability, cpu_name

CPU_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "bf16-pure": torch.bfloat16,
              "bf16-pure-sr": torch.bfloat16, "fp16": torch.float16}


def cpu_roof(dtype: torch.dtype, path: str | Path) -> dict:
    """Return this CPU's roof: the best matmul TFLOP/s and copy GB/s observed by any run so far with the
    same CPU, torch threads and dtype (measured now, the best kept in the JSON file `path`)."""
    from filelock import FileLock

    threads = torch.get_num_threads()
    key = f"{cpu_name()} | {cpu_capability()} | {threads} threads | {dtype}"
    now = {"peak_tflops": roofline.measure_cpu_matmul_tflops(dtype, n=2048, seconds=0.5),
           "mem_bw_gbps": roofline.measure_cpu_copy_gbps(seconds=0.5)}
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(f"{path}.lock"):
        known = json.loads(path.read_text()) if path.exists() else {}
        best = {k: max(v, known.get(key, {}).get(k, 0.0)) for k, v in now.items()}
        path.write_text(json.dumps(known | {key: best}, indent=1, sort_keys=True))
    return best | {"source": f"measured on this CPU: best over runs with {threads} torch threads of a "
                             f"2048^3 {dtype} matmul and a 128 MiB tensor copy ({path.name})"}


def device_peak(dev, precision: str, roofs_path: str | Path | None = None) -> dict:
    """Return the roof a run is measured against: published for GPUs/trn1, measured for the CPU
    (best observed, kept in `roofs_path` when given)."""
    if dev.type == "cuda":
        key = roofline.cuda_device_key(dev.name)
        if key is None:
            return {"peak_tflops": None, "mem_bw_gbps": None, "source": f"unknown GPU {dev.name!r}"}
        return roofline.device_roof(key, precision)
    if dev.type == "xla" and dev.neuron:
        return roofline.device_roof("trn1-core", precision)
    dtype = CPU_DTYPES.get(precision, torch.float32)
    if roofs_path:
        return cpu_roof(dtype, roofs_path)
    return {"peak_tflops": roofline.measure_cpu_matmul_tflops(dtype),
            "mem_bw_gbps": roofline.measure_cpu_copy_gbps(),
            "source": f"measured on this CPU ({dtype} matmul, tensor copy)"}


def run_systems(run, fit) -> dict:
    """Return FLOPs/step, bytes/step, arithmetic intensity, achieved TFLOP/s and MFU for a finished fit."""
    shapes = fit.steady_shapes or fit.shapes
    times = fit.timer.step_times_s
    warm = fit.timer.warmup_steps if len(times) > fit.timer.warmup_steps else 0
    steady_s, steady_steps = sum(times[warm:]), len(times) - warm
    if not shapes or steady_steps == 0 or steady_s <= 0:
        return {"status": "not measured", "reason": "no steady-state steps"}
    cfg = run.model_config
    flops = sum(n * roofline.train_step_flops(cfg, b, length) for (b, length), n in shapes.items())
    nbytes = sum(n * roofline.step_bytes(cfg, b, length, run.precision, run.dev.type)["total"]
                 for (b, length), n in shapes.items())
    results = run.cfg.results_path
    roofs = None if not results or results == os.devnull else Path(results).parent / "cpu_roofs.json"
    peak = device_peak(run.dev, run.precision, roofs)
    out = {"flops_per_step": flops / steady_steps, "bytes_per_step": nbytes / steady_steps,
           "peak_source": peak["source"], "peak_tflops": peak["peak_tflops"],
           "mem_bw_gbps": peak["mem_bw_gbps"]}
    if peak["peak_tflops"]:
        out.update(roofline.roofline_point(flops / steady_steps, nbytes / steady_steps,
                                           steady_s / steady_steps, peak["peak_tflops"],
                                           peak["mem_bw_gbps"]))
    else:
        out["achieved_tflops"] = flops / steady_s / 1e12
        out["arithmetic_intensity"] = flops / nbytes
        out["mfu"] = "not measured"
    return out
