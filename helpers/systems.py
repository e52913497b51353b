"""A run's systems figures: FLOPs and bytes per step, achieved TFLOP/s, MFU and its roofline side."""
from __future__ import annotations

import torch

from helpers import roofline

CPU_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "bf16-pure": torch.bfloat16,
              "bf16-pure-sr": torch.bfloat16, "fp16": torch.float16}


def device_peak(dev, precision: str) -> dict:
    """Return the roof a run is measured against: published for GPUs/trn1, measured for the CPU."""
    if dev.type == "cuda":
        key = roofline.cuda_device_key(dev.name)
        if key is None:
            return {"peak_tflops": None, "mem_bw_gbps": None, "source": f"unknown GPU {dev.name!r}"}
        return roofline.device_roof(key, precision)
    if dev.type == "xla" and dev.neuron:
        return roofline.device_roof("trn1-core", precision)
    dtype = CPU_DTYPES.get(precision, torch.float32)
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
    peak = device_peak(run.dev, run.precision)
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
