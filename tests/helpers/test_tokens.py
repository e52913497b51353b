"""Tokens and batches: static and dynamic padding, the steps of an epoch, the batches on the device."""

from __future__ import annotations

import pytest
import torch

from helpers import arguments, data, models, record, tokens


@pytest.fixture(scope="module")
def splits(tiny_data_dir):
    """Return (tokenizer, the tiny splits tokenized dynamically to 32)."""
    args = arguments.build(
        {"model_name": "minilm", "data_dir": str(tiny_data_dir), "padding": "dynamic", "max_length": 32},
        arguments.NvidiaArgs,
    )
    rec = record.start("t", {}, [], {"key": "cpu-test"})
    return tokens.tokenize(rec, args, data.load(rec, args))


def args(**values):
    return arguments.build({"padding": "dynamic", "max_length": 32, "batch": 16, **values}, arguments.NvidiaArgs)


def test_static_padding_pads_every_row_to_max_length(tiny_data_dir):
    a = arguments.build(
        {"model_name": "minilm", "data_dir": str(tiny_data_dir), "max_length": 24}, arguments.NvidiaArgs
    )
    rec = record.start("t", {}, [], {"key": "cpu-test"})
    _, out = tokens.tokenize(rec, a, data.load(rec, a))
    assert {len(ids) for ids in out["train"]["input_ids"]} == {24}


def test_dynamic_batches_pad_to_their_longest_row_rounded_up(splits):
    tok, out = splits
    loader = tokens.train_loader(out["train"], args(pad_to_multiple_of=4, batch=4), tok)
    widths = {batch["input_ids"].shape[1] for batch in loader}
    assert len(widths) > 1 and all(w % 4 == 0 for w in widths)


def test_steps_never_span_an_epoch_and_stop_at_the_total(splits):
    tok, out = splits
    loader = tokens.train_loader(out["train"], args(batch=48), tok)  # 256 rows: 6 batches, the last short
    marks = list(tokens.steps(loader, 4, total=10, epochs=3))
    assert [(m, last) for _, m, last in marks][:5] == [(0, False), (1, False), (2, False), (3, True), (0, False)]
    assert sum(last for *_, last in marks) == 3  # one whole step an epoch (6 // 4), three epochs


def test_a_run_that_would_make_no_step_is_refused_before_the_model(splits):
    tok, out = splits
    with pytest.raises(arguments.ConfigError, match="no optimizer step"):
        tokens.train_loader(out["train"], args(batch=128, gradient_accumulation_steps=4), tok)


def test_device_batches_are_the_host_loaders_batches(splits):
    tok, out = splits
    a = args(group_by_length=True)
    host = list(tokens.train_loader(out["train"], a, tok))
    device = list(tokens.DeviceBatches(out["train"], a, tok, None, False, "cpu"))
    assert len(host) == len(device)
    for h, d in zip(host, device):
        assert all(torch.equal(h[k], d[k]) for k in ("input_ids", "attention_mask", "labels"))


def test_length_statistics_cover_the_share_they_name():
    stats = tokens.length_stats(list(range(1, 101)))
    assert (stats["p90"], stats["p95"], stats["chosen_pow2"], stats["max"]) == (90, 95, 128, 100)


def test_token_lengths_count_cls_and_sep():
    assert list(tokens.token_lengths(["i feel happy"], models.tokenizer("minilm"))) == [5]
