"""Precision modes: stochastic rounding is unbiased, every mode trains, SR moves weights RTN stalls."""

import pytest
import torch
from conftest import tiny_bert_config
from transformers import BertForSequenceClassification

from helpers.measure.timing import StepTimer
from helpers.run import precision, train
from helpers.run.device import resolve_device
from helpers.run.optim import build_optimizer, build_scheduler

CPU = resolve_device("cpu")
BF16_ULP_AT_1 = 2.0**-7


def test_stochastic_rounding_is_unbiased_where_nearest_is_not():
    from torchao.optim.quant_utils import _fp32_to_bf16_sr  # the rounding torchao's _AdamW applies

    x = torch.full((200_000,), 1.0 + 0.3 * BF16_ULP_AT_1)  # 30% of the way to the next bf16 value
    sr = _fp32_to_bf16_sr(x).float()
    assert set(sr.unique().tolist()) == {1.0, 1.0 + BF16_ULP_AT_1}  # only the two neighbours
    # std of the mean: ulp*sqrt(p(1-p)/n) = 7.8e-3*0.46/447 = 8e-6; bound at ~6 sigma
    assert abs(sr.mean().item() - x[0].item()) < 5e-5
    assert abs(x.to(torch.bfloat16).float().mean().item() - x[0].item()) > 2e-3  # RTN: 0.3 ulp off


def _batches(n=6, batch=8, length=12):
    g = torch.Generator().manual_seed(0)
    data = [
        {
            "input_ids": torch.randint(1, 200, (batch, length), generator=g),
            "attention_mask": torch.ones(batch, length, dtype=torch.long),
            "labels": torch.randint(0, 6, (batch,), generator=g),
        }
        for _ in range(n)
    ]
    return data * 8


@pytest.mark.parametrize("mode", ["fp32", "bf16", "fp16", "bf16-pure", "bf16-pure-sr"])
def test_every_mode_trains(mode):
    torch.manual_seed(0)
    model = precision.prepare_model(BertForSequenceClassification(tiny_bert_config(vocab_size=200)), mode)
    opt = build_optimizer(model, 2e-3, None, 0.0, precision=mode)
    sched = build_scheduler(opt, 48, 0.0)
    result = train.fit(
        model,
        _batches(),
        opt,
        sched,
        CPU,
        mode,
        epochs=1,
        log_every=12,
        timer=StepTimer(warmup_steps=0),
        progress=False,
    )
    first, last = result.loss_curve[0][1], result.loss_curve[-1][1]
    assert result.status == "finished" and last < 0.8 * first, result.loss_curve
    expected = torch.bfloat16 if mode.startswith("bf16-pure") else torch.float32
    assert next(model.parameters()).dtype == expected


def _steps_on_bf16_weights(mode: str, steps: int = 20) -> torch.Tensor:
    w = torch.nn.Parameter(torch.ones(4096, dtype=torch.bfloat16))
    opt = build_optimizer_for([w], mode)
    for _ in range(steps):
        w.grad = torch.ones_like(w)
        opt.step()
    return w.detach().float()


def build_optimizer_for(params, mode):
    groups = [{"params": params, "weight_decay": 0.0}]
    if mode == "bf16-pure-sr":
        return precision.sr_adamw(groups, lr=1e-4)
    return torch.optim.AdamW(groups, lr=1e-4)


def test_sr_moves_weights_where_round_to_nearest_stalls():
    # Adam's update is ~lr = 1e-4 per step, far below half a bf16 ulp at 1.0 (3.9e-3): the textbook case
    rtn = _steps_on_bf16_weights("bf16-pure")
    sr = _steps_on_bf16_weights("bf16-pure-sr")
    assert torch.equal(rtn, torch.ones_like(rtn))  # round-to-nearest: every update is lost
    moved = 1.0 - sr.mean().item()  # expected 20 steps x 1e-4 = 2e-3 on average
    assert 1e-3 < moved < 3e-3


def test_mechanism_names_the_implementation():
    assert "torchao" in precision.mechanism("bf16-pure-sr", "cpu")
    assert "NEURON_RT_STOCHASTIC_ROUNDING_EN" in precision.mechanism("bf16-pure-sr", "xla", neuron=True)
    assert precision.grad_scaler("fp16", "cpu").is_enabled() and not precision.grad_scaler("bf16", "cpu").is_enabled()
