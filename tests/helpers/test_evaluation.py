"""Evaluation's arithmetic: metrics from the confusion matrix, padded rows, time to accuracy."""

from __future__ import annotations

import torch

from helpers import evaluation, record


def test_metrics_from_a_confusion_matrix():
    cm = torch.tensor([[3, 1], [0, 4]])  # [true, predicted]
    out = evaluation.confusion_metrics(cm)
    assert out["accuracy"] == 7 / 8 and out["rows"] == 8
    f1 = [2 * 1.0 * 0.75 / 1.75, 2 * 0.8 * 1.0 / 1.8]
    assert abs(out["macro_f1"] - sum(f1) / 2) < 1e-12


def test_padded_rows_are_labelled_to_be_ignored():
    batch = {"input_ids": torch.ones(3, 5, dtype=torch.long), "labels": torch.tensor([1, 2, 3])}
    padded = evaluation.pad_rows(batch, 8)
    assert padded["input_ids"].shape == (8, 5) and padded["labels"].tolist() == [1, 2, 3] + [-100] * 5


def test_time_to_accuracy_is_the_first_evaluation_at_or_above_each_target():
    curve = [
        record.CurvePoint(step=s, train_time_s=10.0 * s, val_accuracy=a) for s, a in ((1, 0.5), (2, 0.89), (3, 0.91))
    ]
    found = evaluation.crossings(curve)
    assert (found["0.88"].step, found["0.90"].train_time_s) == (2, 30.0)
    assert found["0.92"].train_time_s is None and "best 91.00% in 3 evaluations" in found["0.92"].reason
