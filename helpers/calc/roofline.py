"""Bytes moved, arithmetic intensity and roofs of one training step of a BERT classifier, and a run's
systems figures (FLOPs, bytes, intensity, achieved TFLOP/s, MFU, which roof bounds it).

Every term on its own commented line, as in `helpers.calc.flops` (its notation, its `cfg`).

    python -m helpers.calc.roofline --model bert-base --batch 8 64 --seq-len 32 128 --precision bf16
prints how arithmetic intensity grows with batch as a Markdown table.
"""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path

from helpers.calc.facts import cuda_device_key, device_roof
from helpers.calc.flops import (
    AUTOCAST_PRECISIONS,
    PRECISION_BYTES,
    estimate_mfu,
    model_flops,
    param_breakdown,
    param_count,
    precision_bytes,
)
from helpers.calc.memory import QUADRATIC_ACTIVATIONS, saved_activation_bytes
from helpers.measure.peaks import forget, machine_peak
from helpers.run.schema import Systems


def step_bytes(
    cfg, batch: int, seq_len: int, precision: str, device_type: str = "cuda", fused_attention: bool = False
) -> dict:
    """Return bytes moved to/from device memory by one training step, by term, plus "total"."""
    # no cache reuse: each tensor crosses memory once per use. Not counted: transient intermediates (pre-softmax
    # scores, activation gradients), which unfused kernels also stream: a lower bound, its intensity an upper one
    b = precision_bytes(precision)
    p = param_breakdown(cfg)
    n = param_count(cfg)
    T, H = batch * seq_len, cfg.hidden_size
    cast = 2 if precision in AUTOCAST_PRECISIONS else 0  # autocast's 16-bit weight copies
    act = saved_activation_bytes(
        cfg, batch, seq_len, precision, device_type=device_type, fused_attention=fused_attention
    )
    quadratic = sum(act[k] for k in QUADRATIC_ACTIVATIONS)
    terms = {
        # forward reads every matmul weight, bias and norm once, as stored
        "weights_read_forward": (p["matmul_weights"] + p["biases_and_norms"]) * b["weight"],
        # forward reads only the looked-up rows of the word, position and token-type tables
        "embedding_rows_read_forward": 3 * T * H * b["weight"],
        # autocast writes a 16-bit copy of each matmul weight (cached for the step) ...
        "weight_casts_written_forward": p["matmul_weights"] * cast,
        # ... and the forward matmuls read that copy
        "weight_casts_read_forward": p["matmul_weights"] * cast,
        # backward reads each matmul weight again for dX (the 16-bit copy under autocast)
        "weights_read_backward": p["matmul_weights"] * b["matmul"],
        # backward writes every gradient once; embedding gradients are dense (nn.Embedding sparse=False)
        "gradients_written": n * b["grad"],
        # autocast: dW leaves the matmul in 16-bit, is written, then read by the cast to the fp32 grad
        "weight_grad_casts": 2 * p["matmul_weights"] * cast,
        # AdamW reads each parameter (the fp32 master under autocast) ...
        "optimizer_params_read": n * b["weight"],
        # ... and its gradient ...
        "optimizer_grads_read": n * b["grad"],
        # ... reads and writes exp_avg ...
        "optimizer_exp_avg_read_written": 2 * n * b["state"],
        # ... reads and writes exp_avg_sq ...
        "optimizer_exp_avg_sq_read_written": 2 * n * b["state"],
        # ... and writes the updated parameter
        "optimizer_params_written": n * b["weight"],
        # activations that grow with L^2 (attention probabilities, their dropout mask): forward writes
        "attention_probs_written_forward": quadratic,
        # ... and backward reads them
        "attention_probs_read_backward": quadratic,
        # every other saved activation (per layer: Q, K, V, FFN, LayerNorm inputs, dropout masks ...)
        "activations_written_forward": act["total"] - quadratic,
        # ... read back once in backward
        "activations_read_backward": act["total"] - quadratic,
    }
    terms["total"] = sum(terms.values())
    return terms


def neuron_core_key(instance: str | None) -> str:
    """Return the device_peaks.csv key of one NeuronCore of an instance family (trn1 when not known)."""
    family = (instance or "trn1").split(".")[0].rstrip("n")  # trn1n is trn1's network variant
    return {"trn2": "trn2-core", "inf2": "inf2-core"}.get(family, "trn1-core")


def device_peak(device: dict, dtype: str, peaks_dir: str | Path | None = None) -> dict:
    """Return the roof a run on `device` (a record's section) is held against: published, or this CPU's measured."""
    if device.get("type") == "cuda":
        key = cuda_device_key(device.get("name", ""))
        if key is None:
            return {"peak_tflops": None, "mem_bw_gbps": None, "source": f"unknown GPU {device.get('name')!r}"}
        return device_roof(key, dtype)
    if device.get("neuron"):
        return device_roof(neuron_core_key(device.get("instance")), dtype)
    return machine_peak(device["key"], dtype, peaks_dir)


def roofline_point(
    flops_per_step: float, bytes_per_step: float, step_time_s: float, peak_tflops: float, mem_bw_gbps: float
) -> dict:
    """Return achieved TFLOP/s, MFU (fraction of peak), AI and ridge (FLOP/byte), roof and bound side."""
    ai = flops_per_step / bytes_per_step
    ridge = peak_tflops * 1e12 / (mem_bw_gbps * 1e9)  # AI at which the two roofs meet
    achieved_tflops = flops_per_step / step_time_s / 1e12
    return {
        "achieved_tflops": achieved_tflops,
        "mfu": estimate_mfu(flops_per_step, step_time_s, peak_tflops),
        "arithmetic_intensity": ai,
        "ridge_point": ridge,
        "bound": "memory" if ai < ridge else "compute",
        "attainable_tflops": min(peak_tflops, ai * mem_bw_gbps * 1e9 / 1e12),
    }


def systems_section(
    cfg,
    shapes: Counter,
    steady_s: float,
    steps: int,
    precision: str,
    dtype: str,
    device: dict,
    peaks_dir: str | Path | None,
    lora_r: int = 0,
    lora_targets: str = "query,value",
    fused_attention: bool = False,
) -> Systems:
    """Return a run's FLOPs and bytes per step, arithmetic intensity, achieved TFLOP/s and MFU."""
    # `shapes`: the steady micro-batches by (batch, padded length), `steady_s` long over `steps` optimizer steps;
    # `dtype`: what the matmuls ran in, so the peak they are held against
    if not shapes or steps <= 0 or steady_s <= 0:
        return Systems(mfu=None, reason="no steady-state steps")
    flops = sum(n * model_flops(cfg, b, length, lora_r, lora_targets) for (b, length), n in shapes.items()) / steps
    nbytes = (
        sum(
            n * step_bytes(cfg, b, length, precision, device.get("type", "cpu"), fused_attention)["total"]
            for (b, length), n in shapes.items()
        )
        / steps
    )
    peak = device_peak(device, dtype, peaks_dir)
    out = {
        "flops_per_step": flops,
        "bytes_per_step": nbytes,
        "flops_definition": "model FLOPs: forward + backward matmuls (calc.flops.model_flops)",
        "fused_attention": fused_attention,
        "compute_dtype": dtype,
        "peak_source": peak["source"],
        "peak_measured_at": peak.get("measured_at"),
        "peak_tflops": peak["peak_tflops"],
        "mem_bw_gbps": peak["mem_bw_gbps"],
    }
    if not peak["peak_tflops"]:
        return Systems(
            **out,
            achieved_tflops=flops * steps / steady_s / 1e12,
            arithmetic_intensity=flops / nbytes,
            mfu=None,
            reason=peak.get("reason") or f"no {dtype} peak known for this device",
        )
    point = roofline_point(flops, nbytes, steady_s / steps, peak["peak_tflops"], peak["mem_bw_gbps"])
    if point["mfu"] <= 1:
        return Systems(**out, **point)
    # a run cannot beat its device's peak: the roof is wrong (a CPU's measured on a busy machine)
    if device.get("type") != "cuda" and not device.get("neuron"):
        forget(device["key"], dtype, int(peak.get("threads") or 0), peaks_dir)  # the next run measures again
    reason = (
        f"MFU {point['mfu']:.3g} is above 1: the run's {point['achieved_tflops']:.4g} TFLOP/s beat the "
        f"{peak['peak_tflops']:.4g} TFLOP/s roof ({peak['source']}), so the roof is wrong and is not used; "
        "measure it on a quiet machine: python -m helpers.measure.peaks"
    )
    return Systems(**out, **{**point, "mfu": None}, reason=reason)


def intensity_table(cfg, batches: list[int], seq_lens: list[int], precision: str) -> str:
    """Return a Markdown table of TFLOP/step, GB/step and arithmetic intensity per (batch, L)."""
    lines = ["| batch | L | model TFLOP/step | GB/step | AI (FLOP/byte) |", "|---:|---:|---:|---:|---:|"]
    for seq_len in seq_lens:
        for batch in batches:
            flops = model_flops(cfg, batch, seq_len)
            nbytes = step_bytes(cfg, batch, seq_len, precision)["total"]
            lines.append(f"| {batch} | {seq_len} | {flops / 1e12:.3f} | {nbytes / 1e9:.3f} | {flops / nbytes:.1f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    """Print the arithmetic-intensity table for a model over batches and sequence lengths."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--model",
        default="bert-base",
        help="bert-base (BertConfig(), 6 labels), or any name helpers.run.models resolves",
    )
    parser.add_argument("--batch", type=int, nargs="+", default=[8, 64])
    parser.add_argument("--seq-len", type=int, nargs="+", default=[32, 128])
    parser.add_argument("--precision", default="bf16", choices=list(PRECISION_BYTES))
    args = parser.parse_args(argv)
    from helpers.run import models

    cfg = models.load_config("bert-base-random" if args.model == "bert-base" else args.model)
    print(
        f"<!-- written by: python -m helpers.calc.roofline --model {args.model} --batch "
        f"{' '.join(map(str, args.batch))} --seq-len {' '.join(map(str, args.seq_len))} "
        f"--precision {args.precision} -->"
    )
    print(f"{args.model}: {param_count(cfg) / 1e6:.1f} M parameters, precision {args.precision}\n")
    print(intensity_table(cfg, args.batch, args.seq_len, args.precision))


if __name__ == "__main__":
    main()
