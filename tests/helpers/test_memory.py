"""helpers/memory.py: the measured peak is the run's own; the model's saved tensors are autograd's, byte for byte."""

import contextlib

import pytest
import torch
from transformers import BertConfig, BertForSequenceClassification

from helpers import memory, record

BERT_BASE = BertConfig(num_labels=6)


def test_a_reset_forgets_the_peak_of_what_ran_before():
    """A second run in one process (a re-run notebook cell) reports its own peak."""
    buffer = bytearray(256 * 2**20)  # 256 MiB touched: the resident set's high-water mark rises past it
    del buffer
    before, source = memory.host_peak_gib()
    memory.reset_peak("cpu")
    after = memory.peak("cpu")
    assert source.startswith("VmHWM") and before - after.host_peak_rss_gib > 0.2
    assert isinstance(after, record.Memory) and after.device == "host" and after.cuda_max_allocated_gib is None


@pytest.mark.parametrize("precision", ["fp32", "bf16", "bf16-pure"])
def test_saved_activations_match_autograd_exactly(precision):
    """Every tensor autograd saves in forward, counted once per storage (parameters and token ids are not)."""
    cfg = BertConfig(
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=128,
        vocab_size=100,
        num_labels=6,
        attn_implementation="eager",
    )
    model = BertForSequenceClassification(cfg).train()
    if precision == "bf16-pure":
        model = model.to(torch.bfloat16)
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    saved: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        key = t.untyped_storage().data_ptr()
        if key not in params and t.dtype != torch.int64 and t.dim() > 0:
            saved[key] = t.untyped_storage().nbytes()
        return t

    autocast = torch.autocast("cpu", torch.bfloat16) if precision == "bf16" else contextlib.nullcontext()
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), autocast:
        model(input_ids=torch.randint(0, 100, (3, 16)), labels=torch.zeros(3, dtype=torch.long))
    est = memory.estimate_train_memory(cfg, 3, 16, precision, device_type="cpu")
    # under autocast the 16-bit weight copies are saved tensors too: the estimate's "weights" term
    assert sum(saved.values()) == est["activations"] + (est["weights"] if precision == "bf16" else 0)


def test_the_parameter_count_is_bert_bases():
    assert (
        sum(memory.param_breakdown(BERT_BASE).values())
        == sum(
            p.numel() for p in BertForSequenceClassification(BertConfig(num_labels=6, num_hidden_layers=1)).parameters()
        )
        + 11 * 7_087_872
    )  # one layer built (fast), the other 11 counted: 4 H^2 + 2 H I + 9 H + I each


def test_static_terms_by_precision():
    n = sum(memory.param_breakdown(BERT_BASE).values())
    fp32 = memory.estimate_train_memory(BERT_BASE, 8, 128, "fp32")
    assert fp32["weights"] + fp32["gradients"] + fp32["adamw_exp_avg"] + fp32["adamw_exp_avg_sq"] == 16 * n
    bf16 = memory.estimate_train_memory(BERT_BASE, 8, 128, "bf16")
    assert (
        bf16["master_weights"] == 4 * n and bf16["weights"] == 2 * memory.param_breakdown(BERT_BASE)["matmul_weights"]
    )
    pure = memory.estimate_train_memory(BERT_BASE, 8, 128, "bf16-pure-sr")
    assert pure["weights"] + pure["gradients"] + pure["adamw_exp_avg"] + pure["adamw_exp_avg_sq"] == 8 * n
    assert pure["activations"] < bf16["activations"] < fp32["activations"]
    sgd = memory.estimate_train_memory(BERT_BASE, 8, 128, "fp32", optimizer="sgd")
    assert sgd["adamw_exp_avg"] == sgd["adamw_exp_avg_sq"] == 0
    with pytest.raises(ValueError, match="precision='int8'"):
        memory.estimate_train_memory(BERT_BASE, 8, 128, "int8")


def test_checkpointing_keeps_one_layers_activations():
    full = memory.estimate_train_memory(BERT_BASE, 32, 128, "bf16")
    ckpt = memory.estimate_train_memory(BERT_BASE, 32, 128, "bf16", gradient_checkpointing=True)
    assert ckpt["activations"] < full["activations"] / 4
    assert ckpt["total"] - ckpt["activations"] == full["total"] - full["activations"]


def test_lora_keeps_gradients_and_adamw_moments_for_the_trainable_parameters_only():
    n, trainable = sum(memory.param_breakdown(BERT_BASE).values()), 300_000
    full = memory.estimate_train_memory(BERT_BASE, 32, 32, "bf16")
    lora = memory.estimate_train_memory(BERT_BASE, 32, 32, "bf16", trainable=trainable)
    assert lora["gradients"] == lora["adamw_exp_avg"] == 4 * trainable and full["gradients"] == 4 * n
    assert all(lora[same] == full[same] for same in ("weights", "master_weights", "activations"))
    assert full["total"] - lora["total"] == 12 * (n - trainable)  # about 1.3 GB of bert-base's: a larger batch fits
    assert memory.largest_batch_that_fits(BERT_BASE, 16, 32, "bf16", trainable=trainable) > (
        memory.largest_batch_that_fits(BERT_BASE, 16, 32, "bf16")
    )


def test_the_largest_batch_that_fits_is_the_edge():
    for capacity_gib, precision in ((16, "bf16"), (80, "fp32"), (16, "bf16-pure")):
        batch = memory.largest_batch_that_fits(BERT_BASE, capacity_gib, 128, precision, reserve_gib=1.0)
        budget = (capacity_gib - 1.0) * memory.GIB
        assert batch > 0 and memory.estimate_train_memory(BERT_BASE, batch, 128, precision)["total"] <= budget
        assert memory.estimate_train_memory(BERT_BASE, batch + 1, 128, precision)["total"] > budget
    assert memory.largest_batch_that_fits(BERT_BASE, 1.5, 128, "fp32", reserve_gib=1.0) == 0


def test_the_fit_table_takes_each_devices_memory_from_the_facts():
    table = memory.fit_table(BERT_BASE, 128, "bf16").set_index("key")
    assert {"t4", "a100-40gb", "h100", "h200", "trn1-core", "host"} <= set(table.index)
    assert table.loc["h200", "memory_gib"] == 141 and table.loc["trn1-core", "memory_gib"] == 16
    batch = table["largest_batch"]
    assert batch["h200"] > batch["h100"] > batch["t4"] > 0
