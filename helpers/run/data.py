"""The dair-ai/emotion dataset: from the hub by name, or from a local folder of JSONL files.

python -m helpers.run.data export DIR      # on a machine with hub access: write DIR/{split}.jsonl
python -m helpers.run.data check [DIR]     # validate a folder and print row and label counts
"""

from __future__ import annotations

import argparse
import json
import os
from collections import Counter
from pathlib import Path

from datasets import Dataset, DatasetDict

HUB_ID = "dair-ai/emotion"
SPLITS = ("train", "validation", "test")
LABELS = ("sadness", "joy", "love", "anger", "fear", "surprise")
ENV_VAR = "EMOTION_DATA_DIR"


class DataError(ValueError):
    """The dataset cannot be loaded or a file holds a malformed row; the message says where."""


def read_split(path: Path, drop_bad_rows: bool = False) -> tuple[list[dict], int]:
    """Return the valid rows of one JSONL split and how many bad rows were dropped."""
    if not path.is_file():
        raise DataError(f"{path}: split file missing (a data folder needs {', '.join(s + '.jsonl' for s in SPLITS)})")
    rows, dropped = [], 0
    with open(path, "rb") as f:
        for lineno, raw in enumerate(f, start=1):
            try:
                row = _parse_row(raw)
            except DataError as err:
                if drop_bad_rows:
                    dropped += 1
                    continue
                raise DataError(
                    f"{path}:{lineno}: {err} (pass drop_bad_rows=True to drop and count such rows)"
                ) from None
            if row is not None:
                rows.append(row)
    if not rows:
        raise DataError(
            f"{path}: every one of its {dropped} rows was malformed and dropped (drop_bad_rows=True)"
            if dropped
            else f"{path}: no rows (empty file)"
        )
    return rows, dropped


def _parse_row(raw: bytes) -> dict | None:
    try:
        line = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise DataError(f"not UTF-8 ({err.reason} at byte {err.start})") from None
    if not line.strip():
        return None
    try:
        row = json.loads(line)
    except json.JSONDecodeError as err:
        raise DataError(f"not valid JSON ({err.msg})") from None
    if not isinstance(row, dict) or not isinstance(row.get("text"), str):
        raise DataError("row has no string 'text'")
    if not row["text"].strip():
        raise DataError("row has an empty 'text'")  # nothing to classify: [CLS] [SEP] alone
    label = row.get("label")
    if isinstance(label, bool) or not isinstance(label, int) or not 0 <= label < len(LABELS):
        raise DataError(f"label {label!r} is not an integer in 0..{len(LABELS) - 1}")
    return {"text": row["text"], "label": label}


def load_local(data_dir: str | Path, drop_bad_rows: bool = False) -> tuple[DatasetDict, dict[str, int]]:
    """Return the splits read from `data_dir/{split}.jsonl` and the dropped-row count per split."""
    data_dir = Path(data_dir)
    if not data_dir.is_dir():
        raise DataError(f"data_dir={str(data_dir)!r} is not a folder. {_how_to_provide()}")
    splits, dropped = {}, {}
    for split in SPLITS:
        rows, dropped[split] = read_split(data_dir / f"{split}.jsonl", drop_bad_rows)
        splits[split] = Dataset.from_list(rows)
    return DatasetDict(splits), dropped


def load_hub() -> DatasetDict:
    """Return dair-ai/emotion from the Hugging Face hub (the path users on a connected machine take)."""
    from datasets import load_dataset

    try:
        ds = load_dataset(HUB_ID)
    except Exception as err:  # the hub raises many types (ConnectionError, OfflineModeIsEnabled, ...)
        raise DataError(
            f"could not load {HUB_ID} from the hub ({type(err).__name__}: {err}). {_how_to_provide()}"
        ) from err
    return DatasetDict({s: ds[s].select_columns(["text", "label"]) for s in SPLITS})


def _how_to_provide() -> str:
    return (
        f"Offline, give a folder with {', '.join(s + '.jsonl' for s in SPLITS)} (fields text, label) "
        f"as data_dir or in ${ENV_VAR}; write one on a connected machine with "
        "`python -m helpers.run.data export DIR`."
    )


def load_emotion(
    data_dir: str | None = None,
    train_subset: int | None = None,
    eval_subset: int | None = None,
    shuffle_subset: bool = False,
    seed: int = 42,
    drop_bad_rows: bool = False,
) -> tuple[DatasetDict, dict]:
    """Return the emotion splits (local folder, else $EMOTION_DATA_DIR, else hub) and a provenance dict."""
    data_dir = data_dir or os.environ.get(ENV_VAR) or None
    if data_dir:
        ds, dropped = load_local(data_dir, drop_bad_rows)
        source = str(Path(data_dir).resolve())
    else:
        ds, dropped, source = load_hub(), {s: 0 for s in SPLITS}, f"hub:{HUB_ID}"
    ds = DatasetDict(
        {
            split: _subset(part, train_subset if split == "train" else eval_subset, shuffle_subset, seed)
            for split, part in ds.items()
        }
    )
    counts = {s: Counter(ds[s]["label"]) for s in SPLITS}
    info = {
        "source": source,
        "rows": {s: len(ds[s]) for s in SPLITS},
        "dropped_rows": dropped,
        "subset_shuffled": shuffle_subset,
        # the accuracy of always answering the commonest label: what a run that learned nothing scores
        "majority_share": {s: max(c.values()) / len(ds[s]) for s, c in counts.items()},
    }
    return ds, info


def _subset(part: Dataset, n: int | None, shuffle: bool, seed: int) -> Dataset:
    if n is None or n >= len(part):
        return part
    if shuffle:
        part = part.shuffle(seed=seed)
    return part.select(range(n))


def export(out_dir: str | Path) -> None:
    """Write the hub dataset to `out_dir/{split}.jsonl` for offline machines."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    ds = load_hub()
    for split in SPLITS:
        ds[split].to_json(out_dir / f"{split}.jsonl", lines=True, force_ascii=False)
        print(f"wrote {out_dir / (split + '.jsonl')} ({len(ds[split])} rows)")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m helpers.run.data", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("export", help="write the hub dataset as JSONL").add_argument("out_dir")
    check = sub.add_parser("check", help="validate a data folder")
    check.add_argument("data_dir", nargs="?", default=os.environ.get(ENV_VAR))
    args = parser.parse_args(argv)
    if args.command == "export":
        export(args.out_dir)
    else:
        ds, _ = load_local(args.data_dir or ".")
        for split in SPLITS:
            counts = Counter(ds[split]["label"])
            print(split, len(ds[split]), {LABELS[k]: counts[k] for k in range(len(LABELS))})


if __name__ == "__main__":
    main()
