"""FLOPs and parameters of a LoRA step and of the other encoders, against torch.utils.flop_counter."""

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode
from transformers import AutoConfig, AutoModelForSequenceClassification

from helpers.calc import flops
from helpers.run import encoders, lora
from helpers.run.args import build_args

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


@pytest.mark.parametrize("model_type", ["bert", "roberta", "distilbert"])
@pytest.mark.parametrize("targets", ["query,value", "all-linear", "ffn_up"])
def test_a_lora_step_is_counted_within_5_percent(model_type, targets):
    cfg = tiny(model_type)
    torch.manual_seed(0)
    model = AutoModelForSequenceClassification.from_config(cfg)
    task = build_args({"lora_r": 4, "lora_targets": targets}).task
    model = lora.apply(model, lora.spec_of(task)).train()
    ours, theirs = flops.model_flops(cfg, 4, 16, task.lora_r, task.lora_targets), counted(model, 4, 16)
    assert ours == pytest.approx(theirs, rel=0.05)
    assert ours < 0.8 * 3 * flops.forward_flops(cfg, 4, 16)  # frozen weights: no weight gradients


@pytest.mark.parametrize("alias", sorted(encoders.RANDOM))
def test_each_offline_encoder_is_its_exact_architecture_and_counted_within_5_percent(alias):
    from helpers.run import models

    cfg = models.load_config(alias)
    cfg._attn_implementation = "eager"
    with torch.device("meta"):
        model = AutoModelForSequenceClassification.from_config(cfg).train()
    assert sum(p.numel() for p in model.parameters()) == flops.param_count(cfg)
    assert flops.model_flops(cfg, 2, 32) == pytest.approx(counted(model, 2, 32, "meta"), rel=0.05)


def test_the_offline_encoders_have_the_published_sizes():
    from helpers.run import models

    millions = {alias: flops.param_count(models.load_config(alias)) / 1e6 for alias in encoders.RANDOM}
    assert millions["bert-base-random"] == pytest.approx(109.5, abs=0.5)
    assert millions["bert-large-random"] == pytest.approx(335.1, abs=0.5)
    assert millions["distilbert-base-random"] == pytest.approx(67.0, abs=0.5)
    assert millions["roberta-base-random"] == pytest.approx(124.6, abs=0.5)


@pytest.mark.parametrize("model_type", ["bert", "roberta", "distilbert"])
@pytest.mark.parametrize("targets", ["query,value", "all-linear", "ffn_down"])
def test_lora_trainable_parameters_are_what_peft_trains(model_type, targets):
    cfg = tiny(model_type)
    model = AutoModelForSequenceClassification.from_config(cfg)
    model = lora.apply(model, lora.spec_of(build_args({"lora_r": 4, "lora_targets": targets}).task))
    assert flops.lora_trainable(cfg, 4, targets) == sum(p.numel() for p in model.parameters() if p.requires_grad)
