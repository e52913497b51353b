"""Memory: the run's measured peak, and the training-memory model of a BERT classifier (a plain calculator).

    memory.reset_peak("cuda"); ... training ...; rec.memory = memory.peak("cuda")     # measured, GiB
    memory.estimate_train_memory(cfg, batch=32, seq_len=128, precision="bf16")       # modelled, bytes by term
    python -m helpers.memory --seq-len 32 128 --precision bf16                      # the largest batch per device

The model, after EleutherAI's `calc_transformer_mem.py`: weights, gradients, optimizer states and every activation
autograd keeps for backward, one commented line each. B batch, L sequence length, T = B*L, H hidden, I intermediate,
a heads, S = B*a*L^2 attention-probability elements, C labels. The saved tensors were read off HF
`BertForSequenceClassification` with `torch.autograd.graph.saved_tensors_hooks` on the CPU (tests/helpers/
test_memory.py checks them byte for byte): eager attention in every mode; SDPA matches it in fp32 with dropout (its
math path) and, without dropout, `fused_attention=True` (its flash kernel), but its bf16 math path on the CPU upcasts
to fp32 and keeps more. Dtypes follow torch's rules per device (the CUDA ones from torch's source, not measured):
- dropout masks are bool (1 byte) on CUDA (fused native_dropout) but the input's dtype on the CPU;
- CUDA autocast runs softmax in fp32, CPU autocast keeps it in bf16; both keep LayerNorm in fp32;
- autocast casts a matmul's input per call, so Q, K and V each save their own 16-bit copy of x.
"""

from __future__ import annotations

import argparse
import resource
from contextlib import suppress
from pathlib import Path

import pandas as pd
import torch

from helpers import flops, models, record

GIB = 1024**3
PROC = Path("/proc/self")
FACTS = Path(__file__).resolve().parent / "facts"


# ----------------------------------------------------------------------------- measured
def reset_peak(device_type: str) -> None:
    """Reset the peak counters of `device_type` and the host's: a second run in one process reports its own."""
    if device_type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    with suppress(OSError):
        (PROC / "clear_refs").write_text("5")  # Linux: resets VmHWM, the resident set's high-water mark


def host_peak_gib() -> tuple[float, str]:
    """Return the host's resident-set peak in GiB and what it covers (since the last reset, or the process)."""
    with suppress(OSError):
        for line in (PROC / "status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024**2, "VmHWM since the run's reset (/proc/self/status)"
    # ru_maxrss is KiB on Linux and covers the whole process: tokenization and model load included
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2, "ru_maxrss since the process started"


def peak(device_type: str) -> record.Memory:
    """Return the run's measured peak memory since reset_peak, in GiB: CUDA's allocator and the host's resident set."""
    host, source = host_peak_gib()
    if device_type == "cuda":
        return record.Memory(
            host_peak_rss_gib=host,
            host_source=source,
            cuda_max_allocated_gib=torch.cuda.max_memory_allocated() / GIB,
            cuda_max_reserved_gib=torch.cuda.max_memory_reserved() / GIB,
        )
    device = "not measured (XLA: see neuron-monitor in utilization)" if device_type == "xla" else "host"
    return record.Memory(host_peak_rss_gib=host, host_source=source, device=device)


# ----------------------------------------------------------------------------- modelled
def param_breakdown(cfg) -> dict:
    """Return the classifier's parameter counts by kind (flops.param_breakdown of a configuration object or dict)."""
    return flops.param_breakdown(cfg if isinstance(cfg, dict) else models.architecture(cfg))


def saved_activation_bytes(
    cfg,
    batch: int,
    seq_len: int,
    precision: str,
    device_type: str = "cuda",
    gradient_checkpointing: bool = False,
    fused_attention: bool = False,
) -> dict:
    """Return bytes of the tensors kept from forward for backward, by tensor, plus "total"."""
    b = flops.precision_bytes(precision)
    mm, resid = b["matmul"], b["resid"]
    autocast = precision in flops.AUTOCAST_PRECISIONS
    T, H, I = batch * seq_len, cfg.hidden_size, cfg.intermediate_size
    S = batch * cfg.num_attention_heads * seq_len * seq_len

    def mask(input_bytes: int) -> int:  # bytes per dropout-mask element
        return input_bytes if device_type == "cpu" else 1

    p_hidden, p_attn = cfg.hidden_dropout_prob > 0, cfg.attention_probs_dropout_prob > 0
    classifier_dropout = getattr(cfg, "classifier_dropout", None)
    if classifier_dropout is None:  # HF falls back to hidden_dropout_prob
        classifier_dropout = cfg.hidden_dropout_prob
    softmax = 4 if autocast and device_type != "cpu" else mm
    eager = not fused_attention
    layer = {
        # x, the layer input, saved by the Q/K/V linears (autocast saves one 16-bit cast per linear)
        "qkv_input": (3 if autocast else 1) * T * H * mm,
        # Q, saved by Q @ K^T
        "query": T * H * mm,
        # K, saved by Q @ K^T
        "key": T * H * mm,
        # V, saved by probs @ V
        "value": T * H * mm,
        # softmax output, saved by softmax backward: B*a*L^2
        "attention_probs": eager * S * softmax,
        # dropout mask on the probabilities: B*a*L^2
        "attention_dropout_mask": eager * p_attn * S * mask(softmax),
        # dropped (or 16-bit cast) probabilities, saved by probs @ V; the softmax output itself if neither
        "attention_probs_dropped": eager * (p_attn or softmax != mm) * S * mm,
        # fused kernels: the per-row logsumexp (fp32) replaces the probabilities
        "attention_logsumexp": fused_attention * batch * cfg.num_attention_heads * seq_len * 4,
        # context (heads merged), saved by the output projection (and by a fused kernel: same storage)
        "context": T * H * mm,
        # dropout mask after the attention output projection
        "attention_output_dropout_mask": p_hidden * T * H * mask(mm),
        # residual sum, saved by the first LayerNorm
        "layernorm1_input": T * H * resid,
        # its mean and rstd
        "layernorm1_stats": 2 * T * resid,
        # first LayerNorm output, saved by the FFN up-projection
        "ffn_input": T * H * mm,
        # FFN up-projection output, saved by GELU
        "gelu_input": T * I * mm,
        # GELU output, saved by the FFN down-projection
        "ffn_down_input": T * I * mm,
        # dropout mask after the FFN down-projection
        "ffn_output_dropout_mask": p_hidden * T * H * mask(mm),
        # residual sum, saved by the second LayerNorm
        "layernorm2_input": T * H * resid,
        # its mean and rstd
        "layernorm2_stats": 2 * T * resid,
    }
    # HF's per-layer checkpoint: backward recomputes one layer at a time
    n_kept = 1 if gradient_checkpointing else cfg.num_hidden_layers
    terms = {name: n_kept * value for name, value in layer.items()}
    # checkpointing: each layer's input (the residual stream) is all a layer keeps
    terms["checkpointed_layer_inputs"] = gradient_checkpointing * cfg.num_hidden_layers * T * H * resid
    # word + position + token-type sum, saved by the embedding LayerNorm
    terms["embedding_layernorm_input"] = T * H * resid
    # its mean and rstd
    terms["embedding_layernorm_stats"] = 2 * T * resid
    # dropout mask after the embedding LayerNorm (whose output is fp32 under autocast)
    terms["embedding_dropout_mask"] = p_hidden * T * H * mask(resid)
    # pooler input: the [CLS] slice is a view that keeps the whole last hidden state alive
    # (under autocast only the 16-bit cast copy of the slice is kept)
    terms["pooler_input"] = batch * H * mm if autocast else T * H * resid
    # tanh output, saved by tanh backward
    terms["pooler_tanh_output"] = batch * H * mm
    # dropout mask before the classifier
    terms["classifier_dropout_mask"] = (classifier_dropout > 0) * batch * H * mask(mm)
    # dropped pooled output, saved by the classifier
    terms["classifier_input"] = (classifier_dropout > 0) * batch * H * mm
    # log-softmax output, saved by the cross-entropy loss (fp32 under autocast)
    terms["log_softmax_output"] = batch * cfg.num_labels * resid
    terms["total"] = sum(terms.values())
    return terms


def estimate_train_memory(
    cfg,
    batch: int,
    seq_len: int,
    precision: str,
    optimizer: str = "adamw",
    gradient_checkpointing: bool = False,
    device_type: str = "cuda",
    fused_attention: bool = False,
    trainable: int | None = None,
) -> dict:
    """Return bytes held in a training step: weights, master weights, grads, AdamW states, activations, total."""
    # Activations are full fine-tuning's, an upper bound under LoRA (`trainable`: the parameters a LoRA run trains).
    # `total` is the live set at the end of forward with gradients kept between steps (set_to_none=True: up to the
    # gradients less). Not counted: short-lived buffers, the CUDA context, fragmentation (largest_batch's reserve).
    if optimizer not in ("adamw", "sgd"):
        raise ValueError(f"optimizer={optimizer!r}; expected 'adamw' or 'sgd' (plain, no momentum)")
    b, params = flops.precision_bytes(precision), param_breakdown(cfg)
    n = sum(params.values())
    t = n if trainable is None else trainable
    autocast, adamw = precision in flops.AUTOCAST_PRECISIONS, optimizer == "adamw"
    act = saved_activation_bytes(cfg, batch, seq_len, precision, device_type, gradient_checkpointing, fused_attention)
    terms = {
        # what the matmuls read: the parameters, or under autocast their 16-bit copies (kept for backward)
        "weights": params["matmul_weights"] * 2 if autocast else n * b["weight"],
        # fp32 master weights: under autocast the stored parameters; fp32 and pure modes keep no second copy
        "master_weights": n * 4 if autocast else 0,
        # one gradient per trainable parameter (fp32 under autocast, bf16 in pure modes)
        "gradients": t * b["grad"],
        # AdamW first moment, per trainable parameter
        "adamw_exp_avg": adamw * t * b["state"],
        # AdamW second moment
        "adamw_exp_avg_sq": adamw * t * b["state"],
        # tensors kept from forward for backward (see saved_activation_bytes)
        "activations": act["total"],
    }
    terms["total"] = sum(terms.values())
    return terms


def largest_batch_that_fits(
    cfg, capacity_gib: float, seq_len: int, precision: str, reserve_gib: float = 1.0, **kwargs
) -> int:
    """Return the largest batch whose estimated total (kwargs: estimate_train_memory's) fits, 0 if none."""
    budget = (capacity_gib - reserve_gib) * GIB  # the reserve: CUDA context, workspaces, fragmentation (0.5-1 GiB)

    def total(batch: int) -> float:
        return estimate_train_memory(cfg, batch, seq_len, precision, **kwargs)["total"]

    fixed, per_sample = total(0), total(1) - total(0)  # the estimate is affine in batch
    batch = max(0, int((budget - fixed) // per_sample))
    while total(batch + 1) <= budget:  # guard against float rounding at the edge
        batch += 1
    while batch > 0 and total(batch) > budget:
        batch -= 1
    return batch


def fit_table(cfg, seq_len: int, precision: str, reserve_gib: float = 1.0, **kwargs) -> pd.DataFrame:
    """Return per device of device_peaks.csv: its memory, the fixed and per-sample GiB, and the largest batch."""
    rows = []
    for _, dev in pd.read_csv(FACTS / "device_peaks.csv").dropna(subset=["memory_gib"]).iterrows():
        est = dict(device_type="cpu" if dev["key"] == "host" else "cuda", **kwargs)
        fixed = estimate_train_memory(cfg, 0, seq_len, precision, **est)["total"]
        per_sample = estimate_train_memory(cfg, 1, seq_len, precision, **est)["total"] - fixed
        rows.append(
            {
                "device": dev["device"],
                "key": dev["key"],
                "memory_gib": dev["memory_gib"],
                "fixed_gib": fixed / GIB,
                "per_sample_gib": per_sample / GIB,
                "largest_batch": largest_batch_that_fits(
                    cfg, dev["memory_gib"], seq_len, precision, reserve_gib, **est
                ),
            }
        )
    return pd.DataFrame(rows)


def main(argv: list[str] | None = None) -> None:
    """Print the largest bert-base batch that fits each device at the given lengths and precision (a model)."""
    from transformers import BertConfig

    parser = argparse.ArgumentParser(prog="python -m helpers.memory", description=main.__doc__)
    parser.add_argument("--seq-len", type=int, nargs="+", default=[32, 128])
    parser.add_argument("--precision", default="bf16", choices=list(flops.PRECISION_BYTES))
    args = parser.parse_args(argv)
    print(
        f"<!-- written by: python -m helpers.memory --seq-len {' '.join(map(str, args.seq_len))} "
        f"--precision {args.precision} -->"
    )
    for seq_len in args.seq_len:
        table = fit_table(BertConfig(num_labels=6), seq_len, args.precision)
        print(f"\nbert-base, L={seq_len}, {args.precision}, AdamW (model; 1 GiB reserved)\n")
        print(table.drop(columns="key").to_markdown(index=False, floatfmt=".2f"))


if __name__ == "__main__":
    main()
