"""The dair-ai/emotion dataset: from a local folder of JSONL files (offline), else from the hub by name.

python -m helpers.data export DIR     # on a machine with hub access: write DIR/{train,validation,test}.jsonl
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections import Counter
from pathlib import Path

from datasets import Dataset, DatasetDict

from helpers import record

HUB_ID = "dair-ai/emotion"
SPLITS = ("train", "validation", "test")
LABELS = ("sadness", "joy", "love", "anger", "fear", "surprise")
ENV_VAR = "EMOTION_DATA_DIR"
HOW = (
    f"offline, give a folder of {', '.join(s + '.jsonl' for s in SPLITS)} (fields text, label) as data_dir or in "
    f"${ENV_VAR}; `python -m helpers.data export DIR` writes one on a machine that reaches the hub"
)


class DataError(ValueError):
    """The dataset cannot be loaded, or a file holds a malformed row; the message says where."""


def parse_row(raw: bytes) -> dict | None:
    """Return one JSONL line as {text, label}, None for a blank line; raise DataError saying what is wrong."""
    try:
        row = json.loads(raw.decode("utf-8")) if raw.strip() else None
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise DataError(f"not UTF-8 JSON ({type(err).__name__})") from None
    if row is None:
        return None
    if not isinstance(row, dict) or not isinstance(row.get("text"), str) or not row["text"].strip():
        raise DataError("no non-empty string 'text'")
    label = row.get("label")
    if isinstance(label, bool) or not isinstance(label, int) or not 0 <= label < len(LABELS):
        raise DataError(f"label {label!r} is not an integer in 0..{len(LABELS) - 1}")
    return {"text": row["text"], "label": label}


def read_split(path: Path, drop_bad_rows: bool) -> tuple[list[dict], int]:
    """Return the valid rows of one JSONL split and how many bad rows were dropped."""
    if not path.is_file():
        raise DataError(f"{path}: split file missing; {HOW}")
    rows, dropped = [], 0
    with open(path, "rb") as f:
        for lineno, raw in enumerate(f, start=1):
            try:
                row = parse_row(raw)
            except DataError as err:
                if not drop_bad_rows:
                    raise DataError(f"{path}:{lineno}: {err} (drop_bad_rows=True drops and counts such rows)") from None
                dropped += 1
                continue
            rows += [row] if row else []
    if not rows:
        raise DataError(f"{path}: no valid rows")
    return rows, dropped


def subset(split: Dataset, n: int | None, shuffle: bool, seed: int) -> Dataset:
    """Return the first `n` rows of `split` (after a seeded shuffle when asked); all of it when n is None."""
    if shuffle and n is not None:
        split = split.shuffle(seed=seed)
    return split.select(range(min(n, len(split)))) if n is not None else split


def load(rec: record.RunRecord, args) -> DatasetDict:
    """Return the three splits as `args` ask (data_dir, else $EMOTION_DATA_DIR, else the hub); record `data`."""
    t0 = time.perf_counter()
    folder = args.data_dir or os.environ.get(ENV_VAR) or None
    if folder:
        if not Path(folder).is_dir():
            raise DataError(f"data folder {folder!r} is not a folder; {HOW}")
        read = {s: read_split(Path(folder) / f"{s}.jsonl", args.drop_bad_rows) for s in SPLITS}
        ds, dropped, source = DatasetDict({s: Dataset.from_list(r) for s, (r, _) in read.items()}), {}, str(folder)
        dropped = {s: n for s, (_, n) in read.items()}
    else:
        from datasets import load_dataset

        try:
            hub = load_dataset(HUB_ID)
        except Exception as err:  # noqa: BLE001 - the hub raises many types (ConnectionError, offline mode...)
            raise DataError(f"could not load {HUB_ID} from the hub ({type(err).__name__}); {HOW}") from err
        ds, dropped, source = DatasetDict({s: hub[s].select_columns(["text", "label"]) for s in SPLITS}), {}, HUB_ID
    sizes = {"train": args.train_subset, "validation": args.eval_subset, "test": args.eval_subset}
    ds = DatasetDict({s: subset(ds[s], sizes[s], args.shuffle_subset, args.seed) for s in SPLITS})
    counts = {s: Counter(ds[s]["label"]) for s in SPLITS}
    rec.data = record.Data(
        source=str(Path(source).resolve()) if folder else f"hub:{HUB_ID}",
        rows={s: len(ds[s]) for s in SPLITS},
        dropped_rows=dropped,
        subset_shuffled=args.shuffle_subset,
        # the accuracy of always answering the commonest label: what a run that learned nothing scores
        majority_share={s: max(c.values()) / len(ds[s]) for s, c in counts.items()},
    )
    rec.phases = (rec.phases or record.Phases()).model_copy(update={"load_data": time.perf_counter() - t0})
    print(f"data: {', '.join(f'{n:,} {s}' for s, n in rec.data.rows.items())} rows from {source}", flush=True)
    return ds


def export(folder: str) -> None:
    """Write dair-ai/emotion from the hub to `folder`/{split}.jsonl (on a machine that reaches the hub)."""
    from datasets import load_dataset

    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    ds = load_dataset(HUB_ID)
    for split in SPLITS:
        with open(out / f"{split}.jsonl", "w") as f:
            for row in ds[split]:
                f.write(json.dumps({"text": row["text"], "label": row["label"]}) + "\n")
    print(f"wrote {', '.join(f'{out / s}.jsonl' for s in SPLITS)}")


if __name__ == "__main__":
    if sys.argv[1:2] != ["export"] or len(sys.argv) != 3:
        raise SystemExit("usage: python -m helpers.data export DIR")
    export(sys.argv[2])
