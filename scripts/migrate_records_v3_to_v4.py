"""Rewrite the committed run records of schema versions 1-3 as version 4, in place (run once, #36).

The records of the older Xeon and XLA runs were schema 3: the reader upgraded them on every read, but the
committed JSON Schema (helpers/facts/record.schema.json, version 4) refused them. This script writes each
such file as the record writer writes a record today: the file's record upgraded and checked by
`schema.validate`, then written whole with sorted keys (`records.write_json_atomic`). What changes:

- `schema_version` 3 -> 4;
- a number field holding an "I have no figure" string ("not measured", "nan") -> null; the section's
  `reason`, which says why, is kept;
- `profile: null` is dropped (absent means not profiled);
- the loss curve's step numbers are written as the reader returns them (50 -> 50.0).

So the report reads each migrated file exactly as it read the old one. Files already at version 4 are not
touched, which makes a second run a no-op. Folders whose name starts with '_' hold no run records and are
skipped, as the reader skips them.

    PYTHONPATH=$PWD .venv/bin/python scripts/migrate_records_v3_to_v4.py [RESULTS_DIR]
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from helpers.run import records, schema

RESULTS_DIR = Path(__file__).resolve().parents[1] / "Experiment" / "results"


def record_files(root: Path) -> list[Path]:
    """Return the record files below `root`, skipping folders that hold no records ('_' or '.' first)."""
    return sorted(p for p in root.rglob("*.json")
                  if not any(part.startswith(("_", ".")) for part in p.relative_to(root).parts))


def migrate(path: Path) -> bool:
    """Rewrite the record in `path` as schema version 4 when it is older; return whether it was rewritten."""
    obj = json.loads(path.read_text(encoding="utf-8"))
    if obj.get("schema_version", 1) >= schema.SCHEMA_VERSION:
        return False
    valid, why = schema.validate(obj)
    if why:
        raise SystemExit(f"{path}: not a valid record ({why}); nothing more was migrated")
    records.write_json_atomic(path, valid)
    return True


def main(argv: list[str] | None = None) -> None:
    """Command line: migrate every older record below the results folder and name each one."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("results", nargs="?", type=Path, default=RESULTS_DIR, help="a results folder")
    root = parser.parse_args(argv).results
    done = [p for p in record_files(root) if migrate(p)]
    for path in done:
        print(f"migrated {path.relative_to(root)}")
    print(f"{len(done)} record(s) rewritten as schema version {schema.SCHEMA_VERSION}")


if __name__ == "__main__":
    main()
