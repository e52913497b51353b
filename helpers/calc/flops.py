"""FLOPs of one training step of a BERT classifier, and model FLOPs utilization (MFU).

Plain calculators in the style of the EleutherAI cookbook (`calc_transformer_flops.py`): every term on
its own line, so the arithmetic can be checked by hand. `cfg` is a transformers `BertConfig` (or any
object with the same fields) for `BertForSequenceClassification`. Notation: B batch, L sequence
length (padded), T = B*L tokens, H hidden, I intermediate, a heads, N parameters, C labels.

MFU, the one definition every record, table and benchmark uses (as nanoGPT's `estimate_mfu`): model
FLOPs of a training step (forward + backward matmuls, `model_flops`, checked against
`torch.utils.flop_counter`) per second, over the device's peak for the dtype the matmuls run in.
"""
from __future__ import annotations

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


def model_flops(cfg, batch: int, seq_len: int) -> float:
    """Return the model FLOPs of one training step: forward + backward matmuls (AdamW left out)."""
    return 3 * forward_flops(cfg, batch, seq_len)


def estimate_mfu(flops_per_step: float, step_time_s: float, peak_tflops: float) -> float:
    """Return MFU as a fraction: achieved model FLOP/s over the device's peak FLOP/s."""
    achieved_flops_per_s = flops_per_step / step_time_s  # model FLOPs (forward + backward) per second
    peak_flops_per_s = peak_tflops * 1e12  # dense peak of the dtype the matmuls run in
    return achieved_flops_per_s / peak_flops_per_s
