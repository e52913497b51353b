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

from helpers.run.args import lora_roles

# Bytes per element of each tensor class. weight: stored parameters (the fp32 master under autocast);
# grad: parameter gradients; state: each AdamW moment; matmul: matmul inputs (autocast casts them to
# 16-bit); resid: residual stream and LayerNorm (autocast keeps LayerNorm in fp32).
PRECISION_BYTES = {
    "fp32": {"weight": 4, "grad": 4, "state": 4, "matmul": 4, "resid": 4},
    "bf16": {"weight": 4, "grad": 4, "state": 4, "matmul": 2, "resid": 4},
    "fp16": {"weight": 4, "grad": 4, "state": 4, "matmul": 2, "resid": 4},
    "bf16-pure": {"weight": 2, "grad": 2, "state": 2, "matmul": 2, "resid": 2},
    "bf16-pure-sr": {"weight": 2, "grad": 2, "state": 2, "matmul": 2, "resid": 2},
}
AUTOCAST_PRECISIONS = ("bf16", "fp16")


def precision_bytes(precision: str) -> dict:
    """Return bytes per element of weights, grads, optimizer states, matmul inputs and residuals."""
    if precision not in PRECISION_BYTES:
        raise ValueError(f"precision={precision!r}; expected one of {', '.join(PRECISION_BYTES)}")
    return PRECISION_BYTES[precision]


def intermediate(cfg) -> int:
    """Return the FFN width: `intermediate_size` (BERT, RoBERTa) or `hidden_dim` (DistilBERT)."""
    return getattr(cfg, "intermediate_size", None) or cfg.hidden_dim


def forward_flops(cfg, batch: int, seq_len: int) -> float:
    """Return the matmul FLOPs (2 per multiply-add) of one forward pass of the classifier."""
    T, H, I = batch * seq_len, cfg.hidden_size, intermediate(cfg)
    # BERT, RoBERTa and DistilBERT encoder layers do the same matmuls; so do their heads (H x H, then H x C).
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
    pooler = 2 * batch * H * H  # pooler (BERT) / head dense (RoBERTa) / pre_classifier (DistilBERT), [CLS] only
    classifier = 2 * batch * H * cfg.num_labels  # classification head
    return cfg.num_hidden_layers * per_layer + pooler + classifier


def param_breakdown(cfg) -> dict:
    """Return parameter counts by kind: embedding tables, matmul weights, biases and norms."""
    H, I, C, n = cfg.hidden_size, intermediate(cfg), cfg.num_labels, cfg.num_hidden_layers
    types = getattr(cfg, "type_vocab_size", 0)  # DistilBERT has no token-type table; RoBERTa's has 1 row
    tables = (cfg.vocab_size + cfg.max_position_embeddings + types) * H  # word, position, token type
    attention = 4 * H * H  # Q, K, V, attention output
    ffn = 2 * H * I  # FFN up and down
    head = H * H + H * C  # pooler, classifier
    matmul = n * (attention + ffn) + head
    embedding_norm = 2 * H  # embedding LayerNorm, weight and bias
    attention_biases = 4 * H  # Q, K, V, attention output
    ffn_biases = I + H  # FFN up and down
    layer_norms = 2 * 2 * H  # two LayerNorms, weight and bias
    head_biases = H + C  # pooler, classifier
    small = embedding_norm + n * (attention_biases + ffn_biases + layer_norms) + head_biases
    return {"embedding_tables": tables, "matmul_weights": matmul, "biases_and_norms": small}


def param_count(cfg) -> int:
    """Return the number of parameters of BertForSequenceClassification for `cfg`."""
    return sum(param_breakdown(cfg).values())


def model_flops(cfg, batch: int, seq_len: int, lora_r: int = 0, lora_targets: str = "query,value") -> float:
    """Return the model FLOPs of one training step: forward + backward matmuls (AdamW left out), LoRA's if lora_r."""
    if lora_r:
        return lora_model_flops(cfg, batch, seq_len, lora_r, lora_targets)
    # Each matmul's backward computes dX and dW, each as costly as the forward: 2x. Exact here because
    # the embeddings train, so even layer 0's Q/K/V need dX; frozen embeddings would save 2*T*3H*H.
    return 3 * forward_flops(cfg, batch, seq_len)


def lora_model_flops(cfg, batch: int, seq_len: int, r: int, targets: str) -> float:
    """Return forward + backward matmul FLOPs of a LoRA step of rank `r` on `targets`."""
    # frozen weights get no weight gradient; nothing below the first adapter needs an input gradient
    roles = lora_roles(targets)
    B, L, H, I = batch, seq_len, cfg.hidden_size, intermediate(cfg)
    T = B * L
    total = 0.0

    def linear(din: int, dout: int, role: str, grad_in: bool) -> bool:
        """Add one linear's forward and backward; return whether its output needs a gradient."""
        nonlocal total
        total += 2 * T * din * dout  # forward through the frozen weight
        total += 2 * T * din * dout if grad_in else 0  # dX through it (no dW: frozen)
        if role not in roles:
            return grad_in
        total += 2 * T * r * (din + dout)  # the adapter's forward: x @ A, then @ B
        total += 2 * T * din * r  # dW of A
        total += 2 * 2 * T * r * dout  # dW of B, and dX of B (the gradient at A's output)
        total += 2 * T * din * r if grad_in else 0  # dX of A, only when something below trains
        return True

    grad = False  # the embeddings' output: frozen, so layer 0's input needs no gradient
    attention = 2 * B * L * L * H  # each of Q @ K^T and P @ V
    for _ in range(cfg.num_hidden_layers):
        q, k, v = (linear(H, H, role, grad) for role in ("query", "key", "value"))
        total += attention * (1 + q + k)  # Q @ K^T forward, then dQ and dK where they need one
        p = q or k
        total += attention * (1 + p + v)  # P @ V forward, then dP and dV
        a = linear(H, H, "attention_output", p or v)
        h = a or grad  # the residual stream: x + attention
        u = linear(H, I, "ffn_up", h)
        grad = linear(I, H, "ffn_down", u) or h
    C = cfg.num_labels
    # the head: the first dense (BERT's pooler is frozen; RoBERTa's and DistilBERT's train, modules_to_save)
    head_trains = getattr(cfg, "model_type", "bert") != "bert"
    total += 2 * B * H * H * (1 + grad + head_trains)  # forward, dX, dW when it trains
    total += 2 * B * H * C * 3  # the classifier trains: forward, dX, dW
    return total


def lora_trainable(cfg, r: int, targets: str) -> int:
    """Return the parameters a LoRA run trains: r x (in + out) per adapted linear, and the head in full."""
    roles = lora_roles(targets)
    H, I, C = cfg.hidden_size, intermediate(cfg), cfg.num_labels
    shapes = {
        "query": (H, H),
        "key": (H, H),
        "value": (H, H),
        "attention_output": (H, H),
        "ffn_up": (H, I),
        "ffn_down": (I, H),
    }
    adapters = cfg.num_hidden_layers * sum(r * (din + dout) for role, (din, dout) in shapes.items() if role in roles)
    # the classifier; RoBERTa's and DistilBERT's first head linear too (run.lora's modules_to_save)
    head = H * C + C + (H * H + H) * (getattr(cfg, "model_type", "bert") != "bert")
    return adapters + head


def estimate_mfu(flops_per_step: float, step_time_s: float, peak_tflops: float) -> float:
    """Return MFU as a fraction: achieved model FLOP/s over the device's peak FLOP/s."""
    achieved_flops_per_s = flops_per_step / step_time_s  # model FLOPs (forward + backward) per second
    peak_flops_per_s = peak_tflops * 1e12  # dense peak of the dtype the matmuls run in
    return achieved_flops_per_s / peak_flops_per_s
