"""FLOPs and bytes of a BERT classifier's training step, model FLOPs utilization (MFU) and the roof it is held to.

Plain calculators in the style of the EleutherAI cookbook (`calc_transformer_flops.py`): every term on its own line,
so the arithmetic can be checked by hand. `config` is a record's `model.config` (the architecture fields,
helpers/models.py ARCHITECTURE) of BERT, RoBERTa or DistilBERT. Notation: B batch, L sequence length (padded),
T = B*L tokens, H hidden, I intermediate, C labels.

MFU, the one definition every table uses (as nanoGPT's `estimate_mfu`): model FLOPs of the steps (forward and
backward matmuls, `model_flops`) per second, over the device's dense peak for the dtype the matmuls run in
(published for GPUs and NeuronCores, helpers/facts/device_peaks.csv; a CPU's is measured, helpers/peaks.py).
"""

from __future__ import annotations

import functools

import pandas as pd

from helpers import arguments, devices

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
# activations that grow with L^2 (helpers/memory.py's names for them); the rest grow with L
QUADRATIC_ACTIVATIONS = ("attention_probs", "attention_dropout_mask", "attention_probs_dropped")


def precision_bytes(precision: str) -> dict:
    """Return bytes per element of weights, grads, optimizer states, matmul inputs and residuals."""
    if precision not in PRECISION_BYTES:
        raise ValueError(f"precision={precision!r}; expected one of {', '.join(PRECISION_BYTES)}")
    return PRECISION_BYTES[precision]


def intermediate(config: dict) -> int:
    """Return the FFN width: `intermediate_size` (BERT, RoBERTa) or `hidden_dim` (DistilBERT)."""
    return config.get("intermediate_size") or config["hidden_dim"]


def forward_flops(config: dict, batch: int, seq_len: int) -> float:
    """Return the matmul FLOPs (2 per multiply-add) of one forward pass of the classifier."""
    T, H, I = batch * seq_len, config["hidden_size"], intermediate(config)
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
    classifier = 2 * batch * H * config["num_labels"]  # classification head
    return config["num_hidden_layers"] * per_layer + pooler + classifier


def param_breakdown(config: dict) -> dict:
    """Return parameter counts by kind: embedding tables, matmul weights, biases and norms."""
    H, I, C, n = config["hidden_size"], intermediate(config), config["num_labels"], config["num_hidden_layers"]
    types = config.get("type_vocab_size", 0)  # DistilBERT has no token-type table; RoBERTa's has 1 row
    tables = (config["vocab_size"] + config["max_position_embeddings"] + types) * H  # word, position, token type
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


def model_flops(config: dict, batch: int, seq_len: int, lora_r: int = 0, lora_targets: str = "query,value") -> float:
    """Return the model FLOPs of one training step: forward + backward matmuls (AdamW left out), LoRA's if lora_r."""
    if lora_r:
        return lora_model_flops(config, batch, seq_len, lora_r, lora_targets)
    # Each matmul's backward computes dX and dW, each as costly as the forward: 2x. Exact here because
    # the embeddings train, so even layer 0's Q/K/V need dX; frozen embeddings would save 2*T*3H*H.
    return 3 * forward_flops(config, batch, seq_len)


def lora_model_flops(config: dict, batch: int, seq_len: int, r: int, targets: str) -> float:
    """Return forward + backward matmul FLOPs of a LoRA step of rank `r` on `targets`."""
    # frozen weights get no weight gradient; nothing below the first adapter needs an input gradient
    roles = arguments.lora_roles(targets)
    B, L, H, I = batch, seq_len, config["hidden_size"], intermediate(config)
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
    for _ in range(config["num_hidden_layers"]):
        q, k, v = (linear(H, H, role, grad) for role in ("query", "key", "value"))
        total += attention * (1 + q + k)  # Q @ K^T forward, then dQ and dK where they need one
        p = q or k
        total += attention * (1 + p + v)  # P @ V forward, then dP and dV
        a = linear(H, H, "attention_output", p or v)
        h = a or grad  # the residual stream: x + attention
        u = linear(H, I, "ffn_up", h)
        grad = linear(I, H, "ffn_down", u) or h
    # the head: the first dense (BERT's pooler is frozen; RoBERTa's and DistilBERT's train, modules_to_save)
    head_trains = config.get("model_type", "bert") != "bert"
    total += 2 * B * H * H * (1 + grad + head_trains)  # forward, dX, dW when it trains
    total += 2 * B * H * config["num_labels"] * 3  # the classifier trains: forward, dX, dW
    return total


def lora_trainable(config: dict, r: int, targets: str) -> int:
    """Return the parameters a LoRA run trains: r x (in + out) per adapted linear, and the head in full."""
    H, I, C = config["hidden_size"], intermediate(config), config["num_labels"]
    shapes = {"query": (H, H), "key": (H, H), "value": (H, H), "attention_output": (H, H), "ffn_up": (H, I)}
    shapes["ffn_down"] = (I, H)
    per_layer = sum(r * (din + dout) for role, (din, dout) in shapes.items() if role in arguments.lora_roles(targets))
    # the classifier; RoBERTa's and DistilBERT's first head linear too (helpers/lora.py's modules_to_save)
    head = H * C + C + (H * H + H) * (config.get("model_type", "bert") != "bert")
    return config["num_hidden_layers"] * per_layer + head


def micro_batches(shapes: dict[str, int]) -> list[tuple[int, int, int]]:
    """Return a record's shapes ({"32x64": micro-batches}) as (batch, padded length, micro-batches)."""
    return [(*map(int, shape.split("x")), n) for shape, n in shapes.items()]


def step_flops(config: dict, shapes: dict[str, int], lora_r: int = 0, lora_targets: str = "query,value") -> float:
    """Return the model FLOPs of all the micro-batches in `shapes` ({"32x64": count}): forward + backward."""
    return sum(n * model_flops(config, b, length, lora_r, lora_targets) for b, length, n in micro_batches(shapes))


def mfu(flops: float, seconds: float, peak_tflops: float) -> float:
    """Return MFU as a fraction: achieved model FLOP/s over the device's peak FLOP/s."""
    achieved_flops_per_s = flops / seconds  # model FLOPs (forward + backward) per second
    peak_flops_per_s = peak_tflops * 1e12  # dense peak of the dtype the matmuls run in
    return achieved_flops_per_s / peak_flops_per_s


def step_bytes(config: dict, batch: int, seq_len: int, precision: str, saved: dict) -> float:
    """Return bytes one training step moves to and from memory; `saved`: helpers.memory.saved_activation_bytes."""
    # no cache reuse: each tensor crosses memory once per use. Not counted: transient intermediates (pre-softmax
    # scores, activation gradients), which unfused kernels also stream: a lower bound, its intensity an upper one
    b, p = precision_bytes(precision), param_breakdown(config)
    n = sum(p.values())
    T, H = batch * seq_len, config["hidden_size"]
    cast = 2 if precision in AUTOCAST_PRECISIONS else 0  # autocast's 16-bit weight copies
    quadratic = sum(saved.get(k, 0) for k in QUADRATIC_ACTIVATIONS)
    terms = (
        (p["matmul_weights"] + p["biases_and_norms"]) * b["weight"],  # forward reads every weight once, as stored
        3 * T * H * b["weight"],  # forward reads the looked-up rows of the word, position and token-type tables
        p["matmul_weights"] * cast,  # autocast writes a 16-bit copy of each matmul weight (cached for the step)
        p["matmul_weights"] * cast,  # ... and the forward matmuls read that copy
        p["matmul_weights"] * b["matmul"],  # backward reads each matmul weight again for dX
        n * b["grad"],  # backward writes every gradient once; embedding gradients are dense
        2 * p["matmul_weights"] * cast,  # autocast: dW leaves in 16-bit, is written, then read by the cast to fp32
        n * b["weight"],  # AdamW reads each parameter (the fp32 master under autocast)
        n * b["grad"],  # ... and its gradient
        2 * n * b["state"],  # ... reads and writes exp_avg
        2 * n * b["state"],  # ... reads and writes exp_avg_sq
        n * b["weight"],  # ... and writes the updated parameter
        2 * quadratic,  # activations that grow with L^2 (attention probabilities): written forward, read backward
        2 * (saved["total"] - quadratic),  # every other saved activation: written forward, read back once
    )
    return float(sum(terms))


@functools.cache
def published_peaks() -> pd.DataFrame:
    """Return helpers/facts/device_peaks.csv by key: dense peaks (TFLOP/s), bandwidth (GB/s), memory (GiB)."""
    return pd.read_csv(devices.FACTS / "device_peaks.csv").set_index("key", drop=False)


def roof(device: dict, dtype: str) -> dict:
    """Return the published roof of a record's GPU or NeuronCore: peak_tflops, mem_bw_gbps (None unknown), source.
    A CPU's roof is measured on its machine (helpers.peaks.cpu_roof, which the report reads beside this)."""
    key = devices.kind(device)
    if key not in published_peaks().index:
        return {"peak_tflops": None, "mem_bw_gbps": None, "source": f"no published peak of {device.get('name')}"}
    row = published_peaks().loc[key]
    tflops = row["peak_fp32_tflops"] if dtype == "fp32" else row["peak_bf16_tflops"]
    return {"peak_tflops": float(tflops), "mem_bw_gbps": float(row["mem_bw_gbps"]), "source": row["source"]}


def peak(device: dict, dtype: str) -> tuple[float | None, str]:
    """Return the dense peak (TFLOP/s) a record's GPU or NeuronCore reaches in `dtype`, and where it is published."""
    found = roof(device, dtype)
    return found["peak_tflops"], found["source"]
