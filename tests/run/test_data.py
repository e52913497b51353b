import json

import pytest

from helpers.run import data


def test_local_folder_loads_all_splits(tiny_data_dir):
    ds, info = data.load_emotion(str(tiny_data_dir))
    assert [len(ds[s]) for s in data.SPLITS] == [256, 64, 64]
    assert set(ds["train"].column_names) == {"text", "label"}
    assert info["dropped_rows"] == {"train": 0, "validation": 0, "test": 0}


def test_env_var_is_used(tiny_data_dir, monkeypatch):
    monkeypatch.setenv("EMOTION_DATA_DIR", str(tiny_data_dir))
    ds, info = data.load_emotion()
    assert info["source"] == str(tiny_data_dir.resolve()) and len(ds["test"]) == 64


def test_subsets_first_rows_and_seeded_shuffle(tiny_data_dir):
    full, _ = data.load_emotion(str(tiny_data_dir))
    ds, _ = data.load_emotion(str(tiny_data_dir), train_subset=10, eval_subset=5)
    assert ds["train"]["text"] == full["train"]["text"][:10] and len(ds["validation"]) == 5
    a, _ = data.load_emotion(str(tiny_data_dir), train_subset=10, shuffle_subset=True, seed=1)
    b, _ = data.load_emotion(str(tiny_data_dir), train_subset=10, shuffle_subset=True, seed=1)
    c, _ = data.load_emotion(str(tiny_data_dir), train_subset=10, shuffle_subset=True, seed=2)
    assert a["train"]["text"] == b["train"]["text"] != c["train"]["text"]


def _folder(tmp_path, train_lines):
    for split in data.SPLITS:
        (tmp_path / f"{split}.jsonl").write_text('{"text": "ok", "label": 1}\n')
    (tmp_path / "train.jsonl").write_bytes(train_lines)
    return tmp_path


@pytest.mark.parametrize(
    "content,needle",
    [
        (b'{"text": "fine", "label": 0}\n{"label": 3}\n', "train.jsonl:2: row has no string 'text'"),
        (b'{"text": "fine", "label": 9}\n', "train.jsonl:1: label 9 is not an integer in 0..5"),
        (b'{"text": "fine", "label": 0}\n\xff\xfe bad\n', "train.jsonl:2: not UTF-8"),
        (b'{"text": "fine", "label": 0}\n{not json\n', "train.jsonl:2: not valid JSON"),
        (b"", "train.jsonl: no rows (empty file)"),
    ],
)
def test_malformed_rows_name_file_and_line(tmp_path, content, needle):
    with pytest.raises(data.DataError) as err:
        data.load_emotion(str(_folder(tmp_path, content)))
    assert needle in str(err.value)


def test_drop_bad_rows_counts_them(tmp_path):
    folder = _folder(tmp_path, b'{"text": "a", "label": 0}\n{"label": 3}\n{"text": "b", "label": 7}\n')
    ds, info = data.load_emotion(str(folder), drop_bad_rows=True)
    assert len(ds["train"]) == 1 and info["dropped_rows"]["train"] == 2


def test_missing_split_and_missing_folder(tmp_path):
    (tmp_path / "train.jsonl").write_text('{"text": "a", "label": 0}\n')
    with pytest.raises(data.DataError, match="validation.jsonl: split file missing"):
        data.load_emotion(str(tmp_path))
    with pytest.raises(data.DataError, match="EMOTION_DATA_DIR"):
        data.load_emotion(str(tmp_path / "nope"))


def test_hub_unreachable_says_how_to_provide_folder(monkeypatch):
    monkeypatch.delenv("EMOTION_DATA_DIR", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", "/nonexistent-hf-home")
    import datasets.config
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)  # read at import: the env is too late
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    with pytest.raises(data.DataError) as err:
        data.load_emotion()
    assert "dair-ai/emotion" in str(err.value) and "python -m helpers.run.data export" in str(err.value)


def test_the_majority_share_is_what_always_answering_joy_scores(real_data_dir):
    _, info = data.load_emotion(str(real_data_dir))
    assert info["majority_share"]["test"] == 695 / 2000  # joy: the commonest label of the test split
    _, small = data.load_emotion(str(real_data_dir), eval_subset=500)
    assert small["majority_share"]["test"] == 0.302  # the first 500 test rows: 151 of them joy


def test_real_dataset_shape_and_labels(real_data_dir):
    ds, _ = data.load_emotion(str(real_data_dir))
    assert [len(ds[s]) for s in data.SPLITS] == [16000, 2000, 2000]
    assert sorted(set(ds["train"]["label"])) == [0, 1, 2, 3, 4, 5]
    first = json.loads((real_data_dir / "train.jsonl").open().readline())
    assert ds["train"][0]["text"] == first["text"]
