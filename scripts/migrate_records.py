"""Upgrade run records of schema 5 to schema 6 in place (run once per results folder; a second run changes nothing).

    PYTHONPATH=$PWD .venv/bin/python scripts/migrate_records.py [RESULTS_DIR]

What changes, and why:
- `systems` (MFU, TFLOP/s, bytes, the peak used) is dropped: the report computes them from the raw fields, so a
  corrected formula needs no migration; `model.config` gains the architecture those formulas read.
- `precision.probe` is dropped (the CPU precision probe is retired); `distributed.launch_id` with the launcher.
- A CPU's device key (a CPU's, or XLA's on a CPU) names its family and model since schema 6; these records never
  recorded them, so their key says `family-unknown` in that place, and the file names and `_peaks/` files follow.
A file that is no schema-5 record is named and left as it is (exit status 1); a missing folder is an error.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from helpers import models, record
from helpers.record import slug

RESULTS = Path(__file__).resolve().parents[1] / "Experiment" / "results"


def new_key(device: dict) -> str:
    """Return a schema-5 device section's key in schema 6's form (a CPU's family unknown)."""
    key, kind = device["key"], device.get("type")
    if kind == "cuda" or device.get("neuron") or "family-unknown" in key or not device.get("cpu_capability"):
        return key
    name = device.get("name", "")
    cpu = name[len("XLA CPU (") : -1] if name.startswith("XLA CPU (") else name
    own = "cpu-" + slug(f"{cpu}-family-unknown-{device['cpu_capability']}")
    return f"xla-{own}" if kind == "xla" else own


def upgrade(rec: dict, keys: dict[str, str]) -> dict:
    """Return a schema-5 record as schema 6 (see the module's text)."""
    rec = {k: v for k, v in rec.items() if k != "systems"}
    rec["schema_version"] = record.SCHEMA_VERSION
    if rec.get("precision"):
        rec["precision"] = {k: v for k, v in rec["precision"].items() if k != "probe"}
    if rec.get("distributed"):
        rec["distributed"] = {k: v for k, v in rec["distributed"].items() if k != "launch_id"}
    if rec.get("device"):
        rec["device"] = {**rec["device"], "key": keys.get(rec["device"]["key"], new_key(rec["device"]))}
    name = (rec.get("model") or {}).get("name") or (rec.get("params") or {}).get("model_name")
    if rec.get("model") is not None and name and not rec["model"].get("config"):
        rec["model"]["config"] = models.architecture(models.config(name))
    return rec


def main(argv: list[str]) -> int:
    """Upgrade every record below the folder given (default Experiment/results); return the exit status."""
    root = Path(argv[0]) if argv else RESULTS
    if not root.is_dir():
        print(f"{root}: no such folder of records", file=sys.stderr)
        return 2
    files = sorted(p for p in root.rglob("*.json") if not any(part.startswith((".", "_")) for part in p.parts[-2:]))
    loaded, bad = {}, 0
    for path in files:
        try:
            loaded[path] = json.loads(path.read_text())
        except (OSError, ValueError) as err:
            print(f"left as it is: {path} ({err})", file=sys.stderr)
            bad += 1
    keys = {
        r["device"]["key"]: new_key(r["device"]) for r in loaded.values() if isinstance(r, dict) and r.get("device")
    }
    changed = 0
    for path, rec in loaded.items():
        if not isinstance(rec, dict) or rec.get("schema_version") not in (5, record.SCHEMA_VERSION):
            print(f"left as it is: {path} (not a schema 5 or 6 record)", file=sys.stderr)
            bad += 1
            continue
        if rec["schema_version"] == record.SCHEMA_VERSION:
            continue
        valid, why = record.validate(upgrade(rec, keys))
        if why:
            print(f"left as it is: {path} ({why})", file=sys.stderr)
            bad += 1
            continue
        old = rec.get("device", {}).get("key")
        target = path.with_name(path.name.replace(f"@{old}", f"@{keys[old]}")) if old in keys else path
        target.write_text(record.json_text(valid))
        if target != path:
            path.unlink()
        changed += 1
    for old, new in keys.items():
        for peaks in (root / record.PEAKS).glob(f"{record.glob_escape(old)}.*json"):
            if peaks.name.endswith(".precision.json"):
                peaks.unlink()  # the precision probe is retired: nothing reads it
            elif old != new:
                peaks.rename(peaks.with_name(new + peaks.name[len(old) :]))
    print(f"{changed} of {len(files)} records upgraded to schema {record.SCHEMA_VERSION}; {bad} left as they were")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
