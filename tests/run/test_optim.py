import pytest
import torch
from conftest import tiny_bert_config
from transformers import BertForSequenceClassification

from helpers.run import optim


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
    assert _lr_of(groups, "bert.encoder.layer.0.output.dense.weight") == pytest.approx(lr * d**2)
    assert _lr_of(groups, "bert.embeddings.word_embeddings.weight") == pytest.approx(lr * d**3)


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
        opt.step()
        sched.step()
    assert lrs[0] == 0 and lrs[2] == pytest.approx(1e-3) and lrs[-1] < lrs[3]


def test_stochastic_rounding_on_xla_is_the_xla_adamw_for_the_runtime_to_round():
    from conftest import tiny_bert_config
    from transformers import BertForSequenceClassification

    model = BertForSequenceClassification(tiny_bert_config())
    xla = optim.build_optimizer(model, 1e-3, None, 0.0, device_type="xla", precision="bf16-pure-sr")
    assert type(xla) is optim.XlaAdamW and xla.defaults["lr"] == 1e-3  # torchao's step is inductor code: not on XLA
    cpu = optim.build_optimizer(model, 1e-3, None, 0.0, device_type="cpu", precision="bf16-pure-sr")
    assert type(cpu).__module__.startswith("torchao")


def _train_copy(model, make_opt, steps, dtype=torch.float32):
    """Return the weights of a copy of `model` after `steps` real AdamW steps on fixed random batches."""
    import copy

    torch.manual_seed(0)
    m = copy.deepcopy(model).to(dtype)
    opt = make_opt(optim.llrd_param_groups(m, 1e-3, 0.9, 0.01))
    for _ in range(steps):
        ids = torch.randint(0, 100, (4, 8))
        loss = m(input_ids=ids, labels=torch.randint(0, 6, (4,))).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    return {n: p.detach().float() for n, p in m.named_parameters()}


def _no_names(groups):
    return [{k: v for k, v in g.items() if k != "names"} for g in groups]


def test_the_xla_adamw_is_torchs_adamw(model):
    """The same update as torch.optim.AdamW (LLRD groups, decoupled decay), computed with host-side step
    counts and bias corrections: checked on CPU tensors, where both run."""
    ours = _train_copy(model, lambda g: optim.XlaAdamW(_no_names(g), lr=1e-3), 5)
    torchs = _train_copy(model, lambda g: torch.optim.AdamW(_no_names(g), lr=1e-3), 5)
    assert max((ours[n] - torchs[n]).abs().max().item() for n in ours) < 1e-6


def test_the_xla_adamw_keeps_bf16_weights_moving_past_256_steps():
    """bf16 weights: the step count is the host's (a bf16 counter stops at 256) and the moments decay with
    beta2 = 0.999 computed in fp32 (0.999 is 1.0 in bf16): after 300 steps the update is finite and nonzero."""
    p = torch.nn.Parameter(torch.ones(4, dtype=torch.bfloat16))
    opt = optim.XlaAdamW([{"params": [p]}], lr=1e-2, weight_decay=0.0)
    for _ in range(300):
        p.grad = torch.full_like(p, 0.5)
        opt.step()
    before = p.detach().clone()
    p.grad = torch.full_like(p, 0.5)
    opt.step()
    assert opt.steps_done == 301 and p.dtype == torch.bfloat16 and torch.isfinite(p).all()
    assert (p.detach() < before).all()  # still stepping: lr 1e-2 against bf16 weights near -2


@pytest.mark.parametrize("variant", ["adamw_torch_fused", "adamw_torch_foreach"])
def test_fused_and_foreach_adamw_make_the_for_loop_update(variant):
    """Three real steps (LLRD groups, weight decay, a warm-up schedule) from one seeded model and batch: the
    fused / foreach AdamW leave every weight where the for-loop one does, to float32 tolerance."""
    g = torch.Generator().manual_seed(0)
    batch = {"input_ids": torch.randint(1, 100, (8, 12), generator=g), "labels": torch.randint(0, 6, (8,), generator=g)}
    config = tiny_bert_config(vocab_size=100, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    torch.manual_seed(0)
    start = BertForSequenceClassification(config).state_dict()
    weights = {}
    for name in ("adamw_torch", variant):
        torch.manual_seed(0)
        model = BertForSequenceClassification(config)
        opt = optim.build_optimizer(model, 1e-3, 0.9, 0.01, name, "cpu")
        sched = optim.build_scheduler(opt, total_steps=10, warmup_ratio=0.2)
        for _ in range(3):
            model(**batch).loss.backward()
            opt.step()
            sched.step()
            opt.zero_grad()
        weights[name] = {k: v.detach().clone() for k, v in model.state_dict().items()}
    moved = sum(not torch.equal(weights[variant][k], start[k]) for k in start)
    assert moved > len(start) // 2  # the steps changed the weights
    for k, w in weights["adamw_torch"].items():
        torch.testing.assert_close(weights[variant][k], w, rtol=1e-5, atol=1e-6, msg=k)


def _trainers_optimizer_and_schedule(model, tmp_path, total_steps: int, warmup_ratio: float):
    """Return the optimizer and schedule transformers' Trainer builds for `model` (lr 1e-3, weight decay 0.01)."""
    from transformers import Trainer, TrainingArguments

    targs = TrainingArguments(
        output_dir=str(tmp_path),
        learning_rate=1e-3,
        weight_decay=0.01,
        warmup_steps=warmup_ratio,  # below 1: a ratio of the steps
        use_cpu=True,
        report_to="none",
    )
    trainer = Trainer(model=model, args=targs)
    trainer.create_optimizer_and_scheduler(total_steps)
    return trainer.optimizer, trainer.lr_scheduler


def test_the_decay_groups_are_trainers_with_a_layernorm_named_norm(tmp_path):
    # a LayerNorm whose name holds no "LayerNorm"/"layer_norm" (ModernBERT's final_norm): the old name-suffix
    # list decayed its weight, Trainer does not
    model = BertForSequenceClassification(tiny_bert_config(vocab_size=100))
    model.final_norm = torch.nn.LayerNorm(64)
    groups = optim.llrd_param_groups(model, 1e-3, None, 0.01)
    ours = {n for g in groups if g["weight_decay"] for n in g["names"]}
    opt, _ = _trainers_optimizer_and_schedule(model, tmp_path, 10, 0.1)
    names = {id(p): n for n, p in model.named_parameters()}
    theirs = {names[id(p)] for g in opt.param_groups if g["weight_decay"] for p in g["params"]}
    assert "final_norm.weight" not in ours
    assert ours == theirs
    assert {n for g in groups for n in g["names"]} - ours >= {"final_norm.bias", "classifier.bias"}


@pytest.mark.parametrize("total_steps", [500, 437, 30])
def test_the_schedule_is_trainers_at_every_step(model, tmp_path, total_steps):
    # 10% of 437 steps is 43.7: Trainer warms up 44 steps (rounded up), the old schedule 43
    opt = optim.build_optimizer(model, 1e-3, None, 0.01, "adamw_torch", "cpu")
    ours = optim.build_scheduler(opt, total_steps, 0.1)
    _, theirs = _trainers_optimizer_and_schedule(model, tmp_path, total_steps, 0.1)
    for step in range(total_steps + 1):
        assert ours.lr_lambdas[0](step) == pytest.approx(theirs.lr_lambdas[0](step), abs=1e-12), step
