"""Shared fixtures: a tiny BERT saved as a local model folder, a generated six-label dataset, the real data."""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SHARED_DATA = REPO.parent / "shared" / "data" / "emotion"
# one cue word per label, so a tiny model can learn the generated task and its loss falls
CUES = ("sad", "happy", "love", "angry", "afraid", "surprised")
FILLER = "i feel really quite so very today this morning at work with my friends when the news came".split()


def pytest_configure(config):
    """Tiny models gain nothing from threads, and spinning OpenMP threads starve the parallel workers."""
    import torch

    torch.set_num_threads(1)


def tiny_bert_config(**overrides):
    """Return a 2-layer, hidden-64 BertConfig with bert-base-uncased's vocabulary size."""
    from transformers import BertConfig

    kwargs = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128)
    return BertConfig(**{**kwargs, "max_position_embeddings": 128, "num_labels": 6, **overrides})


def write_split(path: Path, n: int, seed: int) -> None:
    """Write `n` generated rows of {"text", "label"} to `path`."""
    rng = random.Random(seed)
    with open(path, "w") as f:
        for _ in range(n):
            label = rng.randrange(6)
            words = rng.sample(FILLER, rng.randint(3, 12)) + [CUES[label]]
            rng.shuffle(words)
            f.write(json.dumps({"text": " ".join(words), "label": label}) + "\n")


@pytest.fixture(scope="session")
def tiny_data_dir(tmp_path_factory) -> Path:
    """A folder of generated train/validation/test.jsonl (256/64/64 rows)."""
    root = tmp_path_factory.mktemp("emotion-tiny")
    for i, (split, n) in enumerate((("train", 256), ("validation", 64), ("test", 64))):
        write_split(root / f"{split}.jsonl", n, seed=i)
    return root


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    """A local model folder: a random tiny BERT classifier and the uncased MiniLM tokenizer."""
    import torch
    from transformers import BertForSequenceClassification

    from helpers import models

    root = tmp_path_factory.mktemp("tiny-bert")
    torch.manual_seed(0)
    BertForSequenceClassification(tiny_bert_config()).save_pretrained(root)
    models.tokenizer("minilm").save_pretrained(root)
    return root


@pytest.fixture(scope="session")
def real_data_dir() -> Path:
    """The real dair-ai/emotion folder beside the checkout (skips where it is absent)."""
    path = Path(os.environ.get("EMOTION_DATA_DIR", SHARED_DATA))
    if not (path / "train.jsonl").exists():
        pytest.skip(f"real dataset not found at {path} (set EMOTION_DATA_DIR)")
    return path


def _stray_records() -> set[Path]:
    """Return the record files standing in the repository's root (where a refused record would be saved)."""
    return set(REPO.glob("*@*.json"))


def pytest_sessionstart(session):
    session.config._records_before = _stray_records()


def pytest_sessionfinish(session, exitstatus):
    stray = _stray_records() - getattr(session.config, "_records_before", set())
    if stray:
        print(f"\nrecords written to the working folder (refused where they belong): {sorted(map(str, stray))}")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
