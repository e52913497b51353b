"""FLOPs, bytes moved, arithmetic intensity and roofs for one training step of a BERT classifier.

Plain calculators in the style of the EleutherAI cookbook (`calc_transformer_flops.py`): every term on
its own line, so the arithmetic can be checked by hand. `cfg` is a transformers `BertConfig` (or any
object with the same fields) for `BertForSequenceClassification`. Notation: B batch, L sequence
length (padded), T = B*L tokens, H hidden, I intermediate, a heads, N parameters, C labels.

    python -m helpers.roofline --model bert-base --batch 8 64 --seq-len 32 128 --precision bf16
prints how arithmetic intensity grows with batch as a Markdown table.
"""
from __future__ import annotations

import argparse
import functools
import re
import statistics
import time
from pathlib import Path

import pandas as pd
import torch

FACTS = Path(__file__).resolve().parent / "facts"

# AdamW's elementwise work per parameter (torch.optim.AdamW, one step): decoupled weight decay 1,
# exp_avg lerp 3, exp_avg_sq mul+addcmul 3, sqrt and bias-correction divide 2, add eps 1, addcdiv 2.
ADAMW_FLOPS_PER_PARAM = 12

# Bytes per element of each tensor class. weight: stored parameters (the fp32 master under autocast);
# grad: parameter gradients; state: each AdamW moment; matmul: matmul inputs (autocast casts them to
# 16-bit); resid: residual stream and LayerNorm (autocast keeps LayerNorm in fp32).
PRECISION_BYTES = {
    "fp32":         {"weight": 4, "grad": 4, "state": 4, "matmul": 4, "resid": 4},
    "bf16":         {"weight": 4, "grad": 4, "state": 4, "matmul": 2, "resid": 4},
    "fp16":         {"weight": 4, "grad": 4, "state": 4, "matmul": 2, "resid": 4},
    "bf16-pure":    {"weight": 2, "grad": 2, "state": 2, "matmul": 2, "resid": 2},
    "bf16-pure-sr": {"weight": 2, "grad": 2, "state": 2, "matmul": 2, "resid": 2},
}
AUTOCAST_PRECISIONS = ("bf16", "fp16")

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


def precision_bytes(precision: str) -> dict:
    """Return bytes per element of weights, grads, optimizer states, matmul inputs and residuals."""
    if precision not in PRECISION_BYTES:
        raise ValueError(f"precision={precision!r}; expected one of {', '.join(PRECISION_BYTES)}")
    return PRECISION_BYTES[precision]


def forward_flops(cfg, batch: int, seq_len: int) -> float:
    """Return the matmul FLOPs (2 per multiply-add) of one forward pass of the classifier."""
    T, H, I = batch * seq_len, cfg.hidden_size, cfg.intermediate_size
    # Embedding lookups are gathers (0 matmul FLOPs); softmax, LayerNorm, GELU, dropout, residual adds
    # and biases are elementwise and left out, as torch.utils.flop_counter.FlopCounterMode does.
    # Eager and SDPA attention do the same matmuls; padding tokens count (L is the padded length).
    qkv = 2 * T * H * (3 * H)  # Q, K and V projections
    scores = 2 * batch * seq_len * seq_len * H  # Q @ K^T over all heads: grows with L^2
    attend = 2 * batch * seq_len * seq_len * H  # softmax(scores) @ V: grows with L^2
    out_proj = 2 * T * H * H  # attention output projection
    ffn_up = 2 * T * H * I  # FFN up-projection
    ffn_down = 2 * T * I * H  # FFN down-projection
    per_layer = qkv + scores + attend + out_proj + ffn_up + ffn_down
    pooler = 2 * batch * H * H  # pooler dense on the [CLS] token only
    classifier = 2 * batch * H * cfg.num_labels  # classification head
    return cfg.num_hidden_layers * per_layer + pooler + classifier


def param_breakdown(cfg) -> dict:
    """Return parameter counts by kind: embedding tables, matmul weights, biases and norms."""
    H, I, C, n = cfg.hidden_size, cfg.intermediate_size, cfg.num_labels, cfg.num_hidden_layers
    tables = (cfg.vocab_size + cfg.max_position_embeddings + cfg.type_vocab_size) * H  # word, pos, type
    matmul = (n * (4 * H * H  # Q, K, V, attention output
                   + 2 * H * I)  # FFN up and down
              + H * H  # pooler
              + H * C)  # classifier
    small = (2 * H  # embedding LayerNorm
             + n * (4 * H  # Q, K, V, attention-output biases
                    + I + H  # FFN biases
                    + 2 * 2 * H)  # two LayerNorms
             + H + C)  # pooler and classifier biases
    return {"embedding_tables": tables, "matmul_weights": matmul, "biases_and_norms": small}


def param_count(cfg) -> int:
    """Return the number of parameters of BertForSequenceClassification for `cfg`."""
    return sum(param_breakdown(cfg).values())


def train_step_flops_breakdown(cfg, batch: int, seq_len: int) -> dict:
    """Return FLOPs of one training step: forward, backward, optimizer and total."""
    fwd = forward_flops(cfg, batch, seq_len)
    # Each matmul's backward computes dX and dW, each as costly as the forward: 2x. Exact here because
    # the embeddings train, so even layer 0's Q/K/V need dX; frozen embeddings would save 2*T*3H*H.
    bwd = 2 * fwd
    opt = ADAMW_FLOPS_PER_PARAM * param_count(cfg)  # elementwise, not matmul: not in MFU by convention
    return {"forward": fwd, "backward": bwd, "optimizer": opt, "total": fwd + bwd + opt}


def train_step_flops(cfg, batch: int, seq_len: int) -> float:
    """Return FLOPs of one training step (forward + backward + AdamW)."""
    return train_step_flops_breakdown(cfg, batch, seq_len)["total"]


def step_bytes(cfg, batch: int, seq_len: int, precision: str, device_type: str = "cuda",
               fused_attention: bool = False) -> dict:
    """Return bytes moved to/from device memory by one training step, by term, plus "total".

    Assumptions: no cache reuse (each tensor crosses memory once per use); weights are read once in
    forward and the matmul weights once more in backward (dX = dY @ W); gradients are written once;
    AdamW reads params, grads and both moments and writes params and moments once; every activation
    saved for backward is written once in forward and read once in backward. Not counted: transient
    intermediates (pre-softmax scores, activation gradients), which unfused kernels also stream, so
    this is a lower bound on traffic and the arithmetic intensity an upper bound.
    """
    from helpers import memory  # here, not at the top: memory imports this module

    b = precision_bytes(precision)
    p = param_breakdown(cfg)
    n = param_count(cfg)
    T, H = batch * seq_len, cfg.hidden_size
    cast = 2 if precision in AUTOCAST_PRECISIONS else 0  # autocast's 16-bit weight copies
    act = memory.saved_activation_bytes(cfg, batch, seq_len, precision, device_type=device_type,
                                        fused_attention=fused_attention)
    quadratic = sum(act[k] for k in memory.QUADRATIC_ACTIVATIONS)
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


def arithmetic_intensity(cfg, batch: int, seq_len: int, precision: str) -> float:
    """Return training-step FLOPs per byte moved (FLOP/byte)."""
    return train_step_flops(cfg, batch, seq_len) / step_bytes(cfg, batch, seq_len, precision)["total"]


@functools.cache
def load_device_peaks() -> pd.DataFrame:
    """Return facts/device_peaks.csv: published dense peaks (TFLOP/s), bandwidth (GB/s), memory (GiB)."""
    return pd.read_csv(FACTS / "device_peaks.csv")


def device_roof(key: str, precision: str) -> dict:
    """Return {peak_tflops, mem_bw_gbps, source} for a device key; 16-bit modes use the 16-bit peak."""
    precision_bytes(precision)  # validates the name
    rows = load_device_peaks().set_index("key")
    if key not in rows.index:
        raise ValueError(f"unknown device key {key!r}; known: {', '.join(rows.index)}")
    row = rows.loc[key]
    peak = row["peak_fp32_tflops"] if precision == "fp32" else row["peak_bf16_tflops"]
    if pd.isna(peak):
        raise ValueError(f"{key!r} has no published peak; measure it (measure_cpu_matmul_tflops)")
    return {"peak_tflops": float(peak), "mem_bw_gbps": float(row["mem_bw_gbps"]), "source": row["source"]}


def cuda_device_key(name: str) -> str | None:
    """Return the device_peaks.csv key for a torch.cuda.get_device_name() string, None if unknown."""
    for pattern, key in CUDA_NAME_KEYS:
        if re.search(pattern, name):
            return key
    return None


@functools.cache
def measure_cpu_matmul_tflops(dtype: torch.dtype = torch.float32, n: int = 1024,
                              seconds: float = 1.0) -> float:
    """Return this CPU's measured square-matmul throughput in TFLOP/s (median of repeats, all threads)."""
    a, b = torch.randn(n, n).to(dtype), torch.randn(n, n).to(dtype)
    torch.mm(a, b)  # warm-up: the first call pays oneDNN/MKL initialisation
    times_s: list[float] = []
    deadline = time.perf_counter() + seconds
    while len(times_s) < 3 or (time.perf_counter() < deadline and len(times_s) < 100):
        start = time.perf_counter()
        torch.mm(a, b)
        times_s.append(time.perf_counter() - start)
    return 2 * n ** 3 / statistics.median(times_s) / 1e12


@functools.cache
def measure_cpu_copy_gbps(n_bytes: int = 2 ** 27, seconds: float = 1.0) -> float:
    """Return this host's measured memory bandwidth in GB/s: bytes read + written by a tensor copy."""
    src = torch.ones(n_bytes // 4)  # 128 MiB by default: far beyond any last-level cache
    dst = torch.empty_like(src)
    dst.copy_(src)  # warm-up: touches the pages of dst
    times_s: list[float] = []
    deadline = time.perf_counter() + seconds
    while len(times_s) < 3 or (time.perf_counter() < deadline and len(times_s) < 100):
        start = time.perf_counter()
        dst.copy_(src)
        times_s.append(time.perf_counter() - start)
    return 2 * n_bytes / statistics.median(times_s) / 1e9


def roofline_point(flops_per_step: float, bytes_per_step: float, step_time_s: float,
                   peak_tflops: float, mem_bw_gbps: float) -> dict:
    """Return achieved TFLOP/s, MFU (fraction of peak), AI and ridge (FLOP/byte), roof and bound side."""
    ai = flops_per_step / bytes_per_step
    ridge = peak_tflops * 1e12 / (mem_bw_gbps * 1e9)  # AI at which the two roofs meet
    achieved_tflops = flops_per_step / step_time_s / 1e12
    return {"achieved_tflops": achieved_tflops,
            "mfu": achieved_tflops / peak_tflops,
            "arithmetic_intensity": ai,
            "ridge_point": ridge,
            "bound": "memory" if ai < ridge else "compute",
            "attainable_tflops": min(peak_tflops, ai * mem_bw_gbps * 1e9 / 1e12)}


def intensity_table(cfg, batches: list[int], seq_lens: list[int], precision: str) -> str:
    """Return a Markdown table of TFLOP/step, GB/step and arithmetic intensity per (batch, L)."""
    lines = ["| batch | L | TFLOP/step | GB/step | AI (FLOP/byte) |", "|---:|---:|---:|---:|---:|"]
    for seq_len in seq_lens:
        for batch in batches:
            flops = train_step_flops(cfg, batch, seq_len)
            nbytes = step_bytes(cfg, batch, seq_len, precision)["total"]
            lines.append(f"| {batch} | {seq_len} | {flops / 1e12:.3f} | {nbytes / 1e9:.3f} | "
                         f"{flops / nbytes:.1f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    """Print the arithmetic-intensity table for a model over batches and sequence lengths."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="bert-base",
                        help="bert-base (BertConfig(), 6 labels), or any name helpers.models resolves")
    parser.add_argument("--batch", type=int, nargs="+", default=[8, 64])
    parser.add_argument("--seq-len", type=int, nargs="+", default=[32, 128])
    parser.add_argument("--precision", default="bf16", choices=list(PRECISION_BYTES))
    args = parser.parse_args(argv)
    from helpers import models

    cfg = models.load_config("bert-base-random" if args.model == "bert-base" else args.model)
    print(f"<!-- written by: python -m helpers.roofline --model {args.model} --batch "
          f"{' '.join(map(str, args.batch))} --seq-len {' '.join(map(str, args.seq_len))} "
          f"--precision {args.precision} -->")
    print(f"{args.model}: {param_count(cfg) / 1e6:.1f} M parameters, precision {args.precision}\n")
    print(intensity_table(cfg, args.batch, args.seq_len, args.precision))


if __name__ == "__main__":
    main()
