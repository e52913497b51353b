"""helpers/calc/flops.py: FLOPs of a training step (checked against FlopCounterMode), parameters, MFU."""

import pytest
import torch
from conftest import tiny_bert_config
from torch.utils.flop_counter import FlopCounterMode
from transformers import BertConfig, BertForSequenceClassification

from helpers.calc import flops
from helpers.run.args import ConfigError


def counted_flops(model: torch.nn.Module, batch: int, seq_len: int, device: str = "cpu") -> tuple[int, int]:
    """Return (forward, forward+backward) FLOPs that FlopCounterMode counts for one training step."""
    ids = torch.zeros(batch, seq_len, dtype=torch.long, device=device)
    labels = torch.zeros(batch, dtype=torch.long, device=device)
    counter = FlopCounterMode(display=False)
    with counter:
        loss = model(input_ids=ids, labels=labels).loss
        forward = counter.get_total_flops()
        loss.backward()
    return forward, counter.get_total_flops()


# Eager attention: on the CPU, SDPA without dropout dispatches to
# aten._scaled_dot_product_flash_attention_for_cpu, which FlopCounterMode (torch 2.13) has no formula
# for, so the L^2 attention matmuls would go uncounted. Eager runs them as bmm, which it counts.
@pytest.mark.parametrize("batch,seq_len", [(1, 8), (4, 32), (8, 128)])
def test_flops_match_flop_counter_tiny(batch, seq_len):
    cfg = tiny_bert_config(attn_implementation="eager")
    model = BertForSequenceClassification(cfg).train()
    forward, total = counted_flops(model, batch, seq_len)
    assert flops.forward_flops(cfg, batch, seq_len) == pytest.approx(forward, rel=0.05)
    assert flops.model_flops(cfg, batch, seq_len) == pytest.approx(total, rel=0.05)


@pytest.fixture(scope="module")
def bert_base_meta():
    # meta tensors: shapes without storage, so a bert-base forward+backward at batch 64 costs nothing
    cfg = BertConfig(num_labels=6, attn_implementation="eager")
    with torch.device("meta"):
        model = BertForSequenceClassification(cfg).train()
    return cfg, model


@pytest.mark.parametrize("batch", [1, 64])
@pytest.mark.parametrize("seq_len", [16, 128])
def test_flops_match_flop_counter_bert_base(bert_base_meta, batch, seq_len):
    cfg, model = bert_base_meta
    forward, total = counted_flops(model, batch, seq_len, device="meta")
    assert flops.forward_flops(cfg, batch, seq_len) == pytest.approx(forward, rel=0.05)
    assert flops.model_flops(cfg, batch, seq_len) == pytest.approx(total, rel=0.05)


def test_param_count_matches_model(bert_base_meta):
    cfg = tiny_bert_config()
    model = BertForSequenceClassification(cfg)
    assert flops.param_count(cfg) == sum(p.numel() for p in model.parameters())
    cfg, model = bert_base_meta
    assert flops.param_count(cfg) == sum(p.numel() for p in model.parameters()) == 109_486_854


def test_param_breakdown_matches_the_models_tables_linears_and_the_rest(bert_base_meta):
    cfg, model = bert_base_meta
    kinds = flops.param_breakdown(cfg)
    tables = sum(m.weight.numel() for m in model.modules() if isinstance(m, torch.nn.Embedding))
    linears = sum(m.weight.numel() for m in model.modules() if isinstance(m, torch.nn.Linear))
    assert (kinds["embedding_tables"], kinds["matmul_weights"]) == (tables, linears)
    assert kinds["biases_and_norms"] == sum(p.numel() for p in model.parameters()) - tables - linears


def test_mfu_is_model_flops_over_the_peak():
    cfg = BertConfig(num_labels=6)
    assert flops.model_flops(cfg, 8, 32) == 3 * flops.forward_flops(cfg, 8, 32)
    # 1 TFLOP of model work in 0.5 s on a 4 TFLOP/s device: 2 TFLOP/s achieved, 50%
    assert flops.estimate_mfu(1e12, 0.5, 4.0) == pytest.approx(0.5)


def test_lora_targets_are_read_as_the_arguments_read_them():
    cfg = tiny_bert_config()
    assert flops.lora_trainable(cfg, 4, " value, query,") == flops.lora_trainable(cfg, 4, "query,value")
    assert flops.lora_model_flops(cfg, 2, 8, 4, "all-linear") > flops.lora_model_flops(cfg, 2, 8, 4, "query,value")
    for count in (flops.lora_trainable, lambda cfg, r, targets: flops.lora_model_flops(cfg, 2, 8, r, targets)):
        with pytest.raises(ConfigError, match="lora_targets='query,ffn' is invalid"):
            count(cfg, 4, "query,ffn")  # an unknown role is refused, not counted as no adapter
