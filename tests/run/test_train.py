import copy

import pytest
import torch
from conftest import tiny_bert_config
from transformers import BertForSequenceClassification

from helpers.measure.timing import StepTimer
from helpers.run import records, train
from helpers.run.device import resolve_device
from helpers.run.optim import build_optimizer, build_scheduler

CPU = resolve_device("cpu")


def _model(seed=0, **cfg):
    torch.manual_seed(seed)
    cfg.setdefault("hidden_dropout_prob", 0.0)
    cfg.setdefault("attention_probs_dropout_prob", 0.0)
    return BertForSequenceClassification(tiny_bert_config(vocab_size=200, **cfg))


def _batches(n, batch, length=12, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [
        {
            "input_ids": torch.randint(1, 200, (batch, length), generator=g),
            "attention_mask": torch.ones(batch, length, dtype=torch.long),
            "labels": torch.randint(0, 6, (batch,), generator=g),
        }
        for _ in range(n)
    ]


def _fit(model, loader, **kw):
    opt = build_optimizer(model, 1e-3, None, 0.0)
    sched = build_scheduler(opt, 100, 0.0)
    kw.setdefault("log_every", 1)
    timer = StepTimer(warmup_steps=0, window_steps=kw["log_every"])
    return train.fit(
        model, loader, opt, sched, CPU, kw.pop("precision", "fp32"), epochs=1, progress=False, timer=timer, **kw
    )


def test_gradient_accumulation_equals_bigger_batch():
    big = _batches(2, 8)
    small = [{k: v[i : i + 4] for k, v in b.items()} for b in big for i in (0, 4)]
    a, b = _model(), _model()
    _fit(a, big, max_grad_norm=None)
    _fit(b, small, grad_accum=2, max_grad_norm=None)
    for (name, pa), (_, pb) in zip(a.named_parameters(), b.named_parameters()):
        torch.testing.assert_close(pa, pb, rtol=1e-4, atol=1e-6, msg=name)
    c = _model()
    _fit(c, small, max_grad_norm=None)  # without accumulation: 4 smaller steps, different weights
    assert not torch.allclose(a.classifier.weight, c.classifier.weight, atol=1e-6)


def test_an_optimizer_step_never_spans_two_epochs():
    """5 batches an epoch, 2 per step, 2 epochs: 2 steps an epoch (the documented len // accumulation),
    each of one epoch's batches; the 5th batch of each epoch (a shape of its own here) is left out.
    Before, it was carried into a step with the next epoch's first batch."""
    epoch = _batches(4, 4) + _batches(1, 4, length=7)
    model = _model()
    opt = build_optimizer(model, 1e-3, None, 0.0)
    result = train.fit(
        model,
        epoch,
        opt,
        build_scheduler(opt, 100, 0.0),
        CPU,
        "fp32",
        epochs=2,
        grad_accum=2,
        progress=False,
        timer=StepTimer(warmup_steps=0),
        log_every=1,
    )
    assert result.steps == 2 * (len(epoch) // 2) == 4
    assert result.shapes == {(4, 12): 8}  # each step's micro-batches from one epoch, the leftover never run


def test_nan_loss_stops_within_one_logging_interval():
    model = _model()
    with torch.no_grad():
        model.classifier.bias.fill_(float("nan"))
    result = _fit(model, _batches(20, 4), log_every=5)
    assert result.status == "diverged" and result.diverged_at_step == 5 and result.steps == 5


def test_loss_falls_and_shapes_are_counted():
    model = _model()
    data = _batches(4, 8, length=10) * 10
    result = _fit(model, data, log_every=10)
    assert result.status == "finished" and result.steps == 40
    assert result.loss_curve[-1][1] < result.loss_curve[0][1]
    assert result.shapes == {(8, 10): 40}


def test_without_a_bar_each_window_prints_its_loss_line(capsys):
    _fit(_model(), _batches(6, 2), log_every=3)  # the default: quiet
    assert capsys.readouterr().out == ""
    result = _fit(_model(), _batches(6, 2), log_every=3, log_lines=True)  # papermill's log, rank 0
    lines = capsys.readouterr().out.splitlines()
    assert lines == [f"train: step {s}/6, loss {v:.4f}" for s, v in result.loss_curve] and len(lines) == 2


def test_max_steps_stops_early():
    assert _fit(_model(), _batches(10, 2), max_steps=3).steps == 3


def test_metrics_from_confusion_match_hand_computation():
    cm = torch.tensor([[3, 1], [0, 2]])  # true x pred
    m = train.metrics_from_confusion(cm)
    assert m["accuracy"] == pytest.approx(5 / 6)
    f1_0 = 2 * 1.0 * 0.75 / 1.75  # precision 3/3, recall 3/4
    f1_1 = 2 * (2 / 3) * 1.0 / (2 / 3 + 1)
    assert m["macro_f1"] == pytest.approx((f1_0 + f1_1) / 2)


def _saved_activation_bytes(model, batch):
    total = 0

    def pack(t):
        nonlocal total
        total += t.numel() * t.element_size()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        model(**batch).loss.backward()
    return total


def test_gradient_checkpointing_saves_activation_memory():
    batch = _batches(1, 8, length=64)[0]
    plain = _model()
    ckpt = copy.deepcopy(plain)
    ckpt.gradient_checkpointing_enable()
    ckpt.train()
    assert _saved_activation_bytes(ckpt, batch) < 0.6 * _saved_activation_bytes(plain, batch)


@pytest.mark.parametrize(
    "err,status",
    [
        (MemoryError(), "oom"),
        (torch.OutOfMemoryError("CUDA out of memory"), "oom"),
        (RuntimeError("RESOURCE_EXHAUSTED: XLA ran out of device memory"), "oom"),
        (ValueError("bad"), "failed"),
    ],
)
def test_error_classification(err, status):
    assert records.failure_status(f"{type(err).__name__}: {err}") == status


class SkippingScaler:
    """A GradScaler stand-in that skips (inf/NaN gradients) the steps listed, halving its scale, as torch's."""

    def __init__(self, skip: set[int]):
        self.skip, self.scale_value, self.calls = skip, 65536.0, 0

    def scale(self, loss):
        return loss

    def unscale_(self, optimizer):
        pass

    def get_scale(self):
        return self.scale_value

    def step(self, optimizer):
        self.calls += 1
        if self.calls not in self.skip:
            optimizer.step()

    def update(self):
        if self.calls in self.skip:
            self.scale_value /= 2


def test_gradscaler_skipped_steps_are_counted_and_do_not_advance_the_schedule(monkeypatch):
    model = _model()
    opt = build_optimizer(model, 1e-3, None, 0.0)
    sched = build_scheduler(opt, 100, 0.1)
    monkeypatch.setattr(train, "grad_scaler", lambda precision, device: SkippingScaler({1, 2}))
    result = train.fit(
        model,
        _batches(6, 4),
        opt,
        sched,
        CPU,
        "fp16",
        epochs=1,
        progress=False,
        timer=StepTimer(warmup_steps=0),
        log_every=3,
    )
    assert result.steps == 6 and result.skipped_steps == 2
    assert sched.last_epoch == 4  # 6 steps, 2 of them skipped by the scaler: 4 schedule steps


def test_evaluation_pads_the_last_batch_and_ignores_the_padding_rows():
    model = _model()
    batches = _batches(3, 8) + _batches(1, 3, seed=1)  # 27 rows: a last partial batch of 3
    plain = train.evaluate(model, batches, CPU, "fp32")
    padded = train.evaluate(model, [train.pad_rows(b, 8) for b in batches], CPU, "fp32")
    assert plain["rows"] == padded["rows"] == 27
    assert plain["accuracy"] == padded["accuracy"] and plain["loss"] == pytest.approx(padded["loss"])


def test_ddp_accumulation_syncs_only_on_the_last_micro_batch():
    model, entered = _model(), []

    class NoSync(torch.nn.Module):  # the part of DDP fit relies on: no_sync() on all but the last micro-batch
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, **batch):
            return self.inner(**batch)

        def no_sync(self):
            import contextlib

            entered.append(1)
            return contextlib.nullcontext()

    wrapped = NoSync(model)
    opt = build_optimizer(model, 1e-3, None, 0.0)
    train.fit(
        wrapped,
        _batches(8, 2),
        opt,
        build_scheduler(opt, 100, 0.0),
        CPU,
        "fp32",
        epochs=1,
        progress=False,
        timer=StepTimer(warmup_steps=0),
        grad_accum=4,
        log_every=1,
    )
    assert len(entered) == 2 * 3  # two steps, three of four micro-batches each without the all-reduce


def test_a_callback_ends_training_with_stop_training_as_a_finished_run():
    seen = []

    def stop_at_three(step):
        seen.append(step)
        if step == 3:
            raise train.StopTraining("enough at step 3")

    result = _fit(_model(), _batches(10, 4), log_every=2, callbacks=(stop_at_three,))
    assert (result.status, result.steps, result.stopped_early, seen) == ("finished", 3, "enough at step 3", [1, 2, 3])
    assert result.final_loss is not None and result.loss_curve[-1][0] == 3  # the last partial window is read
    assert _fit(_model(), _batches(10, 4), callbacks=(seen.append,)).stopped_early is None
