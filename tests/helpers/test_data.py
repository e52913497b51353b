"""The dataset: a local folder read strictly, subsets, and what the record keeps of where it came from."""

from __future__ import annotations

import json

import pytest

from helpers import arguments, data, record
from tests.conftest import write_split


def load(folder, **values):
    """Return (the splits, the record's data section) for `values` over `folder`."""
    rec = record.start("d", {}, [], {"key": "cpu-test"})
    ds = data.load(rec, arguments.build({"data_dir": str(folder), **values}, arguments.NvidiaArgs))
    return ds, rec.data


def test_subsets_and_the_majority_share(tiny_data_dir):
    ds, info = load(tiny_data_dir, train_subset=100, eval_subset=10)
    assert info.rows == {"train": 100, "validation": 10, "test": 10} and len(ds["train"]) == 100
    assert 0 < info.majority_share["test"] <= 1 and info.source.endswith(tiny_data_dir.name)


def test_a_malformed_row_is_named_by_file_and_line_or_dropped_and_counted(tmp_path):
    for i, split in enumerate(data.SPLITS):
        write_split(tmp_path / f"{split}.jsonl", 20, i)
    with open(tmp_path / "train.jsonl", "a") as f:
        f.write(json.dumps({"text": "fine", "label": 9}) + "\n")
    with pytest.raises(data.DataError, match=r"train.jsonl:21: label 9"):
        load(tmp_path)
    _, info = load(tmp_path, drop_bad_rows=True)
    assert info.dropped_rows["train"] == 1 and info.rows["train"] == 20


def test_a_missing_split_says_how_to_provide_one(tmp_path):
    write_split(tmp_path / "train.jsonl", 5, 0)
    with pytest.raises(data.DataError, match="validation.jsonl: split file missing.*export DIR"):
        load(tmp_path)


def test_the_real_data_has_the_studys_rows(real_data_dir):
    _, info = load(real_data_dir)
    assert info.rows == {"train": 16000, "validation": 2000, "test": 2000}
