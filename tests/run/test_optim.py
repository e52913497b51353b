import pytest
import torch
from transformers import BertForSequenceClassification

from helpers.run import optim
from conftest import tiny_bert_config


@pytest.fixture(scope="module")
def model():
    return BertForSequenceClassification(tiny_bert_config(vocab_size=100))


def _lr_of(groups, name):
    return next(g["lr"] for g in groups if name in g["names"])


def test_llrd_lrs_for_two_layer_model(model):
    lr, d = 1e-3, 0.9
    groups = optim.llrd_param_groups(model, lr, d, 0.01)
    assert _lr_of(groups, "classifier.weight") == pytest.approx(lr)
    assert _lr_of(groups, "bert.pooler.dense.weight") == pytest.approx(lr)
    assert _lr_of(groups, "bert.encoder.layer.1.attention.self.query.weight") == pytest.approx(lr * d)
    assert _lr_of(groups, "bert.encoder.layer.0.output.dense.weight") == pytest.approx(lr * d ** 2)
    assert _lr_of(groups, "bert.embeddings.word_embeddings.weight") == pytest.approx(lr * d ** 3)


def test_every_parameter_in_exactly_one_group(model):
    for decay in (None, 0.95):
        groups = optim.llrd_param_groups(model, 1e-3, decay, 0.01)
        names = [n for g in groups for n in g["names"]]
        assert sorted(names) == sorted(n for n, _ in model.named_parameters())
        assert len(names) == len(set(names))


def test_bias_and_layernorm_have_no_weight_decay(model):
    for g in optim.llrd_param_groups(model, 1e-3, 0.9, 0.01):
        for n in g["names"]:
            expected = 0.0 if n.endswith("bias") or "LayerNorm" in n else 0.01
            assert g["weight_decay"] == expected, n


def test_flat_lr_when_decay_none(model):
    assert {g["lr"] for g in optim.llrd_param_groups(model, 3e-4, None, 0.01)} == {3e-4}


def test_optimizer_variants_and_schedule(model):
    opt = optim.build_optimizer(model, 1e-3, 0.9, 0.01, "adamw_torch_fused", "cpu")
    assert opt.defaults["fused"] is True
    opt = optim.build_optimizer(model, 1e-3, None, 0.01, "adamw_torch", "cpu")  # XLA's: test_xla.py
    sched = optim.build_scheduler(opt, total_steps=10, warmup_ratio=0.2)
    lrs = []
    for _ in range(10):
        lrs.append(opt.param_groups[0]["lr"])
        opt.step(); sched.step()
    assert lrs[0] == 0 and lrs[2] == pytest.approx(1e-3) and lrs[-1] < lrs[3]


def test_stochastic_rounding_on_xla_is_torch_xlas_adamw_for_the_runtime_to_round():
    from conftest import tiny_bert_config
    from transformers import BertForSequenceClassification

    model = BertForSequenceClassification(tiny_bert_config())
    built = []
    monkey = optim.xla_adamw
    optim.xla_adamw = lambda groups, lr: built.append(lr) or "xla adamw"
    try:
        xla = optim.build_optimizer(model, 1e-3, None, 0.0, device_type="xla", precision="bf16-pure-sr")
    finally:
        optim.xla_adamw = monkey
    assert xla == "xla adamw" and built == [1e-3]  # torchao's step is inductor code: not on XLA tensors
    cpu = optim.build_optimizer(model, 1e-3, None, 0.0, device_type="cpu", precision="bf16-pure-sr")
    assert type(cpu).__module__.startswith("torchao")
