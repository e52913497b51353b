"""Rewrite committed run records in place as the record writer writes them (run when the schema changes).

Every committed record is schema 5 (the records of schema 3 and 4 were migrated by this script, and the
reader's upgrades of them then deleted). At the next change of the schema, write the upgrade of the older
version here and run it once. This script writes each file whose text is not what the writer would write
as the writer writes it: the record checked by `schema.validate`, then written whole with sorted keys
(`records.write_json_atomic`). What changes:

- a number field holding an "I have no figure" string ("not measured", "nan") -> null; the section's
  `reason`, which says why, is kept (the reader refuses such a string: this is the one place that converts it);
- the loss curve's step numbers are written as the reader returns them (50 -> 50.0).

So the report reads each migrated file as it read the old one before the reader stopped converting. A file already as the writer writes
it, or of a newer schema than this code's, is not touched, which makes a second run a no-op. A file that holds
no record this code reads (not JSON, cut short, a list, a schema_version that is not a number, a FIFO or
another file that is not a regular one) is named and left as it is, and the rest are migrated; the command
then exits 1. A record keeps its permission bits, and a symbolic link stays a link (its target is rewritten).
The peaks folder holds no run records and is skipped.

    PYTHONPATH=$PWD .venv/bin/python scripts/migrate_records.py [RESULTS_DIR]
"""

from __future__ import annotations

import argparse
import functools
import operator
import stat
import sys
from pathlib import Path

from pydantic import ValidationError

from helpers.run import records, schema

RESULTS_DIR = Path(__file__).resolve().parents[1] / "Experiment" / "results"
# the strings older records put in number fields for "no figure" (the reader refuses them)
SENTINELS = {"not measured", "nan", "-nan", "inf", "-inf", "infinity", "-infinity", "n/a", "none", ""}


def record_files(root: Path) -> list[Path]:
    """Return the record files below `root`, skipping the peaks folder and hidden ones."""
    return sorted(
        p
        for p in root.rglob("*.json")
        if records.PEAKS not in p.relative_to(root).parts
        and not any(part.startswith(".") for part in p.relative_to(root).parts)
    )


def null_sentinels(obj: object) -> object:
    """Return `obj` with each "no figure" string the schema refuses in a number field set to null, in place."""
    try:
        schema.RunRecord.model_validate(obj)
    except ValidationError as err:
        for error in err.errors():
            if error["type"] in ("float_parsing", "int_parsing") and error["input"].strip().lower() in SENTINELS:
                *parents, key = error["loc"]
                functools.reduce(operator.getitem, parents, obj)[key] = None
    except (TypeError, ValueError, AttributeError, RecursionError):
        pass  # no record at all: schema.validate says why
    return obj


def migrate(path: Path) -> bool:
    """Rewrite the record in `path` as the writer writes it where its text differs; return whether it did.
    Raise RecordReadError naming the file when it holds no record this code reads."""
    target = path.resolve()  # a link's record is rewritten where it lies: the link stays a link
    obj = records.read_json(target)  # never opens a FIFO or a folder
    version = obj.get("schema_version", 1) if isinstance(obj, dict) else None
    if isinstance(version, int) and not isinstance(version, bool) and version > schema.SCHEMA_VERSION:
        return False
    valid, why = schema.validate(null_sentinels(obj))
    if why:
        raise records.RecordReadError(f"{path}: not a valid record ({why})")
    if records.json_text(valid) == target.read_text(encoding="utf-8"):
        return False
    records.write_json_atomic(target, valid, mode=stat.S_IMODE(target.stat().st_mode))
    return True


def main(argv: list[str] | None = None) -> None:
    """Command line: migrate every older record below the results folder and name each one; name each file
    that holds no record, go on, and exit 1 if there was one."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("results", nargs="?", type=Path, default=RESULTS_DIR, help="a results folder")
    root = parser.parse_args(argv).results
    done, unread = [], []
    for path in record_files(root):
        try:
            if migrate(path):
                done.append(path)
        except records.RecordReadError as err:
            unread.append(path)
            print(f"not migrated: {err}", file=sys.stderr)
    for path in done:
        print(f"migrated {path.relative_to(root)}")
    print(f"{len(done)} record(s) rewritten as the writer writes schema version {schema.SCHEMA_VERSION}")
    if unread:
        raise SystemExit(f"{len(unread)} file(s) not migrated: they hold no record this code reads (named above)")


if __name__ == "__main__":
    main()
