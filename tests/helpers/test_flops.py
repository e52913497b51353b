"""helpers/flops.py: FLOPs of a training step (checked against FlopCounterMode), LoRA's, parameters, bytes, MFU and
the roof a record's device is held to."""

import types

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode
from transformers import AutoConfig, AutoModelForSequenceClassification, BertConfig

from helpers import flops, lora, models
from helpers.arguments import ConfigError

TINY = dict(
    hidden_size=64,
    num_hidden_layers=2,
    num_attention_heads=2,
    intermediate_size=128,
    vocab_size=500,
    max_position_embeddings=64,
    num_labels=6,
    attn_implementation="eager",
)


def tiny(model_type: str):
    """Return a tiny config of an encoder family (eager attention: FlopCounterMode counts its bmm)."""
    if model_type == "distilbert":
        return AutoConfig.for_model(
            "distilbert",
            dim=64,
            n_layers=2,
            n_heads=2,
            hidden_dim=128,
            vocab_size=500,
            max_position_embeddings=64,
            num_labels=6,
            attn_implementation="eager",
        )
    return AutoConfig.for_model(model_type, **TINY)


def counted(model, batch: int, seq_len: int, device: str = "cpu") -> int:
    """Return the forward + backward matmul FLOPs FlopCounterMode counts for one training step."""
    ids = torch.ones(batch, seq_len, dtype=torch.long, device=device)
    counter = FlopCounterMode(display=False)
    with counter:
        model(input_ids=ids, labels=torch.zeros(batch, dtype=torch.long, device=device)).loss.backward()
    return counter.get_total_flops()


@pytest.fixture(scope="module")
def bert_base_meta():
    # meta tensors: shapes without storage, so a bert-base forward+backward at batch 64 costs nothing
    cfg = BertConfig(num_labels=6, attn_implementation="eager")
    with torch.device("meta"):
        model = AutoModelForSequenceClassification.from_config(cfg).train()
    return models.architecture(cfg), model


@pytest.mark.parametrize("model_type", ["bert", "roberta", "distilbert"])
def test_a_step_is_counted_within_5_percent_of_flop_counter(model_type):
    cfg = tiny(model_type)
    model = AutoModelForSequenceClassification.from_config(cfg).train()
    config = models.architecture(cfg)
    assert flops.model_flops(config, 4, 16) == pytest.approx(counted(model, 4, 16), rel=0.05)
    assert sum(flops.param_breakdown(config).values()) == sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize("batch, seq_len", [(1, 16), (64, 128)])
def test_a_bert_base_step_is_counted_within_5_percent(bert_base_meta, batch, seq_len):
    config, model = bert_base_meta
    assert flops.model_flops(config, batch, seq_len) == pytest.approx(counted(model, batch, seq_len, "meta"), rel=0.05)
    assert flops.model_flops(config, batch, seq_len) == 3 * flops.forward_flops(config, batch, seq_len)


def test_the_parameters_are_bert_bases_by_kind(bert_base_meta):
    config, model = bert_base_meta
    kinds = flops.param_breakdown(config)
    tables = sum(m.weight.numel() for m in model.modules() if isinstance(m, torch.nn.Embedding))
    linears = sum(m.weight.numel() for m in model.modules() if isinstance(m, torch.nn.Linear))
    assert (kinds["embedding_tables"], kinds["matmul_weights"]) == (tables, linears)
    assert sum(kinds.values()) == 109_486_854


@pytest.mark.parametrize("model_type", ["bert", "roberta", "distilbert"])
@pytest.mark.parametrize("targets", ["query,value", "all-linear", "ffn_up"])
def test_a_lora_step_and_its_trainable_parameters_are_what_peft_runs(model_type, targets):
    cfg = tiny(model_type)
    torch.manual_seed(0)
    args = types.SimpleNamespace(lora_r=4, lora_alpha=8, lora_dropout=0.0, lora_targets=targets, model_name="tiny")
    model = lora.apply(AutoModelForSequenceClassification.from_config(cfg), args).train()
    config = models.architecture(cfg)
    ours = flops.model_flops(config, 4, 16, 4, targets)
    assert ours == pytest.approx(counted(model, 4, 16), rel=0.05)
    assert ours < 0.8 * flops.model_flops(config, 4, 16)  # frozen weights: no weight gradients
    assert flops.lora_trainable(config, 4, targets) == sum(p.numel() for p in model.parameters() if p.requires_grad)


def test_lora_targets_are_read_as_the_arguments_read_them():
    config = models.architecture(tiny("bert"))
    assert flops.lora_trainable(config, 4, " value, query,") == flops.lora_trainable(config, 4, "query,value")
    with pytest.raises(ConfigError, match="lora_targets='query,ffn' is invalid"):
        flops.lora_model_flops(config, 2, 8, 4, "query,ffn")  # an unknown role is refused, not counted as none


def test_a_records_shapes_sum_their_micro_batches_and_mfu_is_flops_over_the_peak():
    config = models.architecture(tiny("bert"))
    shapes = {"8x32": 3, "4x16": 2}
    assert flops.step_flops(config, shapes) == 3 * flops.model_flops(config, 8, 32) + 2 * flops.model_flops(
        config, 4, 16
    )
    assert flops.step_flops(config, shapes, 4, "all-linear") < flops.step_flops(config, shapes)
    assert flops.mfu(1e12, 0.5, 4.0) == pytest.approx(0.5)  # 2 TFLOP/s achieved on a 4 TFLOP/s device


def test_the_bytes_of_a_step_are_its_weights_gradients_optimizer_and_activations_by_hand():
    config = models.architecture(tiny("bert"))
    p = flops.param_breakdown(config)
    n = sum(p.values())
    saved = {"total": 1000, "attention_probs": 100, "attention_dropout_mask": 20}
    expected = (
        (p["matmul_weights"] + p["biases_and_norms"]) * 4  # weights read in forward
        + 3 * 2 * 8 * 64 * 4  # embedding rows gathered (T = 16 tokens)
        + p["matmul_weights"] * 4  # matmul weights read again in backward
        + n * 4  # gradients written
        + 7 * n * 4  # AdamW: read p, g, m, v; write p, m, v
        + 2 * 1000  # saved activations written, then read back
    )
    assert flops.step_bytes(config, 2, 8, "fp32", saved) == expected
    casts = flops.step_bytes(config, 2, 8, "bf16", saved) - expected
    assert casts == 4 * 2 * p["matmul_weights"] - 2 * p["matmul_weights"]  # 16-bit copies, dW casts; dX reads half


@pytest.mark.parametrize(
    "device, dtype, tflops",
    [
        ({"type": "cuda", "name": "NVIDIA H200"}, "bf16", 989.4),
        ({"type": "cuda", "name": "NVIDIA H200 NVL"}, "bf16", 835.5),
        ({"type": "cuda", "name": "NVIDIA A10G"}, "fp32", 31.2),
        ({"type": "xla", "neuron": True, "name": "AWS Trainium (trn1.2xlarge)"}, "bf16", 95.0),
        ({"type": "cuda", "name": "NVIDIA GH200 480GB"}, "bf16", None),  # another product: no borrowed roof
    ],
)
def test_a_gpu_or_neuroncore_is_held_to_its_published_peak(device, dtype, tflops):
    found, source = flops.peak(device, dtype)
    assert found == tflops and source
