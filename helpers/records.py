"""Run records: one JSON object per run, appended to a JSONL file so that no crash loses earlier runs.

Each append takes a file lock (two sweeps can share a file), writes one whole line, flushes and
fsyncs. A line cut short by a kill mid-write is skipped (and counted) on reading, and the next
append starts on a fresh line, so earlier records are never corrupted.
"""
from __future__ import annotations

import datetime as dt
import json
import math
import os
import platform
import socket
import uuid
from importlib import metadata
from pathlib import Path
from typing import Any

from filelock import FileLock

SCHEMA_VERSION = 2
STATUSES = ("finished", "failed", "diverged", "oom", "timeout")
# how CUDA (OutOfMemoryError), the host (MemoryError) and XLA (RESOURCE_EXHAUSTED) say out of memory
OOM_MARKERS = ("out of memory", "memoryerror", "outofmemoryerror", "resource_exhausted")


def failure_status(error_text: str) -> str:
    """Return 'oom' when an error text says a device or the host ran out of memory, else 'failed'."""
    lower = error_text.lower()
    return "oom" if any(m in lower for m in OOM_MARKERS) else "failed"
LIBRARIES = ("torch", "transformers", "datasets", "torch-xla", "torch-neuronx", "neuronx-cc", "torchao")


def now() -> str:
    """Return the current UTC time as an ISO-8601 string."""
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def library_versions() -> dict[str, str]:
    """Return the installed versions of the libraries a result depends on."""
    out = {}
    for name in LIBRARIES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return out


def new_record(params: dict, **fields: Any) -> dict:
    """Return a record skeleton for a run with `params`; the loop fills in the rest."""
    record = {"schema_version": SCHEMA_VERSION, "run_id": uuid.uuid4().hex[:12],
              "run_name": params.get("run_name"), "suite": params.get("suite"), "status": "running",
              "started_at": now(), "host": socket.gethostname(), "python": platform.python_version(),
              "libraries": library_versions(), "params": params}
    record.update(fields)
    return record


def _jsonable(obj: Any) -> Any:
    """Return `obj` with NaN/inf turned into strings and numpy/torch scalars into Python numbers."""
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if hasattr(obj, "item") and callable(obj.item) and getattr(obj, "ndim", 0) == 0:
        obj = obj.item()
    if isinstance(obj, float) and not math.isfinite(obj):
        return str(obj)
    if isinstance(obj, (str, int, float, bool)) or obj is None:
        return obj
    return str(obj)


def append_record(path: str | Path, record: dict) -> None:
    """Append `record` as one JSON line to `path`, under a lock, flushed and fsynced."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    line = json.dumps(_jsonable(record), sort_keys=True) + "\n"
    with FileLock(str(path) + ".lock"):
        with open(path, "ab+") as f:
            # a kill mid-write can leave a line without its newline: start ours on a fresh line
            if f.tell() > 0:
                f.seek(-1, os.SEEK_END)
                if f.read(1) != b"\n":
                    f.write(b"\n")
            f.write(line.encode("utf-8"))
            f.flush()
            os.fsync(f.fileno())


def upgrade(record: dict) -> dict:
    """Return `record` in the current schema (older files keep loading)."""
    version = record.get("schema_version", 1)
    if version < 2:
        # schema 1 kept timings and metrics at top level; schema 2 nests them
        record = dict(record)
        record.setdefault("timing", {k: record.pop(k) for k in list(record)
                                     if k in ("train_time_s", "samples_per_s", "step_time_median_s")})
        record.setdefault("metrics", {k: record.pop(k) for k in list(record)
                                      if k in ("test_accuracy", "test_macro_f1", "final_loss")})
        record.setdefault("status", "finished")
        record["schema_version"] = 2
    return record


def read_records(path: str | Path) -> tuple[list[dict], int]:
    """Return the records in `path` (upgraded to this schema) and how many broken lines were skipped."""
    path = Path(path)
    if not path.exists():
        return [], 0
    records, broken = [], 0
    with open(path, "rb") as f:
        for raw in f:
            if not raw.strip():
                continue
            try:
                records.append(upgrade(json.loads(raw)))
            except (json.JSONDecodeError, UnicodeDecodeError):
                broken += 1
    return records, broken


def finished_run_names(path: str | Path) -> set[str]:
    """Return the run names recorded with a final status other than 'failed' (so resumes skip them)."""
    records, _ = read_records(path)
    return {r["run_name"] for r in records if r.get("status") in ("finished", "diverged", "oom")}


def main(argv: list[str] | None = None) -> None:
    """Print the headline figures of the last record (or of `--run NAME`) in a results file."""
    import argparse

    from helpers.config import repo_path

    parser = argparse.ArgumentParser(prog="python -m helpers.records", description=main.__doc__)
    parser.add_argument("results", nargs="?", default="Experiment/results/runs.jsonl")
    parser.add_argument("--run", help="run_name to show (default: the last record)")
    args = parser.parse_args(argv)
    found, _ = read_records(repo_path(args.results))
    found = [r for r in found if args.run in (None, r.get("run_name"))]
    if not found:
        raise SystemExit(f"no record{' named ' + args.run if args.run else ''} in {args.results}")
    rec = found[-1]
    t, m = rec.get("timing", {}), rec.get("metrics", {})
    print(f"{rec['run_name']}: {rec['status']} on {rec.get('device', {}).get('name')} "
          f"({rec.get('device', {}).get('cpu_capability')}), precision {rec.get('precision', {}).get('used')}")
    print(f"  train {t.get('train_time_s', 0):.1f} s, {t.get('samples_per_s') or 0:.1f} samples/s, "
          f"step {t.get('step_time_median_s') or 0:.3f} s (median)")
    print(f"  test accuracy {m.get('test_accuracy')}, macro-F1 {m.get('test_macro_f1')}, "
          f"final loss {m.get('final_loss')}")


if __name__ == "__main__":
    main()
