"""Evaluation batches (helpers/measured_training.py): sorted by length, built once, measuring what the
loader did."""

import random

import pytest
import torch

from helpers import measured_training, steps
from helpers.run import ddp, tokens
from helpers.run.args import build_args
from helpers.run.device import resolve_device
from helpers.run.train import _to_device, evaluate

CPU = resolve_device("cpu")


@pytest.fixture()
def tiny_run(tiny_model_dir, tiny_data_dir, tmp_path):
    """A started run with its tokenized splits and model (dynamic padding: batches pad to their longest row)."""
    args = build_args(
        dict(
            model_name=str(tiny_model_dir),
            data_dir=str(tiny_data_dir),
            batch=8,
            max_length=32,
            padding="dynamic",
            results_path=str(tmp_path),
            progress=False,
        )
    )
    run = steps.start(args)
    splits = steps.tokenize(run, steps.load_data(run))
    yield run, splits, steps.build_model(run)
    steps.record_destination.release(run.claim)


def _learn(model, split, tokenizer, epochs: int = 3) -> None:
    """Train `model` a few real AdamW steps on `split` (the generated labels have one cue word each)."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=5e-3)
    model.train()
    for _ in range(epochs):
        for batch in tokens.loader(split, 32, tokens.collator(tokenizer, "dynamic"), shuffle=True, seed=0):
            model(**batch).loss.backward()
            optimizer.step()
            optimizer.zero_grad()


def _predictions(model, batches, rows_of_batches, n: int) -> torch.Tensor:
    """Return each row's predicted label, placed at its row index."""
    out = torch.full((n,), -1)
    model.eval()
    with torch.inference_mode():
        for batch, rows in zip(batches, rows_of_batches):
            out[torch.tensor(rows)] = model(**_to_device(batch, model, CPU)).logits.argmax(-1)
    return out


def test_sorted_batches_measure_what_the_loader_measured(tiny_run):
    """The batches sorted by length give the old loader's accuracy, macro-F1 and every row's prediction."""
    run, splits, model = tiny_run
    _learn(model, splits["train"], run.tokenizer)  # a model that tells rows apart
    split = splits["validation"]
    collate = tokens.collator(run.tokenizer, "dynamic")
    old = tokens.loader(split, 32, collate, shuffle=False, seed=0)  # the loader evaluation used before
    new = steps.eval_loader(run, split)
    assert new.batch_size > 32 or len(new) < len(old)  # fewer, larger batches
    before = evaluate(model, old, run.dev, run.precision)
    after = evaluate(model, new, run.dev, run.precision)
    same = ("accuracy", "macro_f1", "rows")
    assert {k: before[k] for k in same} == {k: after[k] for k in same}
    assert after["loss"] == pytest.approx(before["loss"], rel=1e-5)
    old_rows = [list(range(k, min(k + 32, len(split)))) for k in range(0, len(split), 32)]
    old_pred = _predictions(model, old, old_rows, len(split))
    assert torch.equal(_predictions(model, new, new.rows, len(split)), old_pred)
    assert len(set(old_pred.tolist())) > 1  # the model tells rows apart: equal predictions are not all one label


def test_by_length_visits_every_row_once_longest_first():
    """Every index of a shard lands in exactly one batch, batches are full but the last, lengths never grow."""
    rng = random.Random(0)
    lengths = [rng.randint(3, 64) for _ in range(1003)]
    for rank in range(3):
        shard = list(ddp.eval_shard(len(lengths), rank, 3))
        cut = measured_training.by_length(lengths, shard, 64)
        flat = [i for batch in cut for i in batch]
        assert sorted(flat) == sorted(shard) and len(flat) == len(set(flat))
        assert all(len(b) == 64 for b in cut[:-1]) and 0 < len(cut[-1]) <= 64
        assert all(lengths[a] >= lengths[b] for a, b in zip(flat, flat[1:]))


def test_evaluation_batches_are_built_once_per_run(tiny_run):
    """A second evaluation of a split reuses its collated batches; a rank's shard is kept apart from the split."""
    run, splits, _ = tiny_run
    first = steps.eval_batches(run, "validation", splits["validation"])
    assert steps.eval_batches(run, "validation", splits["validation"]) is first
    shard = steps.eval_batches(run, "validation", splits["validation"], ddp.eval_shard(64, 0, 2))
    assert shard is not first and sum(len(r) for r in shard.rows) == 32
