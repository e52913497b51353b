"""AdamW over LLRD groups, the schedule, the XLA update and the compiled one."""

from __future__ import annotations

import pytest
import torch
from transformers import BertForSequenceClassification

from helpers import arguments, optim
from tests.conftest import tiny_bert_config


def model():
    torch.manual_seed(0)
    return BertForSequenceClassification(tiny_bert_config()).eval()  # no dropout: both arms see one gradient


def test_llrd_rates_by_depth_and_no_decay_on_biases_and_norms():
    net, args = model(), arguments.build({"lr": 1e-3, "llrd_decay": 0.5, "weight_decay": 0.1}, arguments.NvidiaArgs)
    rate = {id(p): (g["lr"], g["weight_decay"]) for g in optim.llrd_groups(net, args) for p in g["params"]}
    params = dict(net.named_parameters())
    assert rate[id(params["classifier.weight"])] == (1e-3, 0.1)
    assert rate[id(params["bert.encoder.layer.1.output.dense.weight"])] == (1e-3 * 0.5, 0.1)  # N - i = 1
    assert rate[id(params["bert.encoder.layer.0.output.dense.weight"])] == (1e-3 * 0.25, 0.1)
    assert rate[id(params["bert.embeddings.word_embeddings.weight"])] == (1e-3 * 0.125, 0.1)  # N + 1 = 3
    assert rate[id(params["bert.encoder.layer.0.output.dense.bias"])][1] == 0.0
    assert rate[id(params["bert.embeddings.LayerNorm.weight"])][1] == 0.0
    flat = {g["lr"] for g in optim.llrd_groups(net, arguments.build({"lr": 1e-3}, arguments.NvidiaArgs))}
    assert flat == {1e-3}


def test_the_xla_update_is_torchs_adamw():
    args = arguments.build({"lr": 1e-2, "llrd_decay": 0.9}, arguments.NvidiaArgs)
    a, b = model(), model()
    ours, torchs = optim.XlaAdamW(optim.llrd_groups(a, args), lr=args.lr), torch.optim.AdamW(optim.llrd_groups(b, args))
    batch = {"input_ids": torch.randint(0, 1000, (4, 16)), "labels": torch.tensor([0, 1, 2, 3])}
    for _ in range(3):
        for net, opt in ((a, ours), (b, torchs)):
            net(**batch).loss.backward()
            opt.step()
            opt.zero_grad()
    for p, q in zip(a.parameters(), b.parameters()):
        torch.testing.assert_close(p, q, rtol=1e-4, atol=1e-5)  # fp32 arithmetic in another order
    assert optim.steps_taken(ours) == optim.steps_taken(torchs) == 3


def test_the_schedule_warms_up_rounded_up_then_decays_to_zero():
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    sched = optim.schedule(opt, 10, 0.25)  # 2.5 warm-up steps: 3, as Trainer rounds
    rates = [sched.get_last_lr()[0]] + [(opt.step(), sched.step(), sched.get_last_lr()[0])[2] for _ in range(10)]
    assert rates[3] == 1.0 and rates[2] < 1.0 and rates[10] == 0.0


def test_total_steps_count_whole_steps_of_each_epoch():
    args = arguments.build({"gradient_accumulation_steps": 4, "epochs": 3}, arguments.NvidiaArgs)
    assert optim.total_steps(args, 10) == 6
    assert optim.total_steps(arguments.build({"max_steps": 5}, arguments.NvidiaArgs), 100) == 5


@pytest.mark.parametrize("name, kwarg", [("adamw_torch_fused", "fused"), ("adamw_torch_foreach", "foreach")])
def test_the_implementation_asked_for(name, kwarg):
    opt = optim.adamw(model(), arguments.build({"optim": name}, arguments.NvidiaArgs), "cpu", "fp32")
    assert opt.defaults[kwarg] is True
