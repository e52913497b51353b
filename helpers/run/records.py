"""Run records: one JSON file per run, written whole, so a run is finished when its file says so.

    Experiment/results/<suite or adhoc>/<run_name>@<device>.json

A crash or a full disk leaves the old file or none, never half of one; two machines' results merge by copying.

    python -m helpers.run.records [PATH]     # headline figures of a record (default: the newest)
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import platform
import re
import secrets
import socket
import tempfile
import time
import uuid
from collections import Counter
from importlib import metadata
from pathlib import Path
from typing import Any

from helpers.run import schema

DONE = ("finished", "diverged", "oom")  # final: a resumed sweep does not run these again
# what a record at a path is replaced by: only one of an outcome as final (a finished record only by a finished one)
FINALITY = {"finished": 2, "diverged": 1, "oom": 1}
ASIDE = "_reruns"  # beside the suite's records: a rerun's record that did not replace a more final one
ADHOC = "adhoc"  # the folder of runs that belong to no suite
PEAKS = "_peaks"  # the per-machine roofs and precision probe, beside the suites' folders
# how CUDA (OutOfMemoryError), the host (MemoryError) and XLA (RESOURCE_EXHAUSTED) say out of memory
OOM_MARKERS = ("out of memory", "memoryerror", "outofmemoryerror", "resource_exhausted")
LIBRARIES = (
    "torch",
    "transformers",
    "datasets",
    "peft",
    "torch-xla",
    "torch-neuronx",
    "neuronx-cc",
    "libneuronxla",
    "torchao",
    "nvidia-ml-py",
)
MIN_FREE_BYTES = 1 << 20  # room for a record (a few KiB) with a wide margin


class RecordWriteError(OSError):
    """A record or results file could not be written; the message names the path and why."""


class RecordReadError(ValueError):
    """A file cannot be read as JSON; the message says why (empty, cut short, nested too deeply)."""


def load_json(path: Path) -> Any:
    """Return the JSON value in the regular file `path`; raise RecordReadError saying why it holds none."""
    if not path.is_file():  # a FIFO or a folder is never opened: reading a FIFO would wait forever
        raise RecordReadError("missing" if not path.exists() else "not a regular file")
    try:
        raw = path.read_bytes()
    except OSError as err:
        raise RecordReadError(f"unreadable ({err.strerror or err})") from err
    if not raw.strip():
        raise RecordReadError(f"empty ({len(raw)} bytes)")
    try:
        return json.loads(raw)
    except RecursionError:
        raise RecordReadError("nested too deeply: not a record") from None
    except (ValueError, UnicodeDecodeError):
        raise RecordReadError("cut short or not JSON") from None


def read_json(path: str | Path) -> Any:
    """Return the JSON value in the regular file `path`; raise RecordReadError naming the file and why not."""
    try:
        return load_json(Path(path))
    except RecordReadError as err:
        raise RecordReadError(f"{path}: {err}") from err.__cause__


def failure_status(error_text: str) -> str:
    """Return 'oom' when an error text says a device or the host ran out of memory, else 'failed'."""
    lower = error_text.lower()
    return "oom" if any(m in lower for m in OOM_MARKERS) else "failed"


def now() -> str:
    """Return the current UTC time as an ISO-8601 string."""
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def library_versions() -> dict[str, str]:
    """Return the installed versions of the libraries a result depends on."""
    out = {}
    for name in LIBRARIES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return out


def slug(text: str) -> str:
    """Return `text` as a file-name-safe lower-case slug."""
    return re.sub(r"[^a-z0-9.]+", "-", text.lower().replace("(r)", "").replace("(tm)", "")).strip("-.")


def record_path(results_dir: str | Path, suite: str | None, run_name: str, device_key: str) -> Path:
    """Return where the record of `run_name` on `device_key` lives: <results>/<suite>/<name>@<device>.json."""
    return Path(results_dir) / (suite or ADHOC) / f"{run_name}@{device_key}.json"


def peaks_dir(record_file: str | Path) -> Path:
    """Return the per-machine peaks folder of the results tree a record file sits in."""
    return Path(record_file).parent.parent / PEAKS


def run_record(params: dict, given: list[str], status: schema.Status = "failed", **fields: Any) -> schema.RunRecord:
    """Return the record of a run of `params` starting now (id, host, Python; failed until it says otherwise)."""
    return schema.RunRecord(
        run_id=uuid.uuid4().hex[:12],
        run_name=params.get("run_name"),
        suite=params.get("suite"),
        status=status,
        started_at=now(),
        host=socket.gethostname(),
        python=platform.python_version(),
        params=params,
        params_given=sorted(given),
        **fields,
    )


def jsonable(obj: Any) -> Any:
    """Return `obj` with NaN/inf turned into None (no figure) and numpy/torch scalars into Python numbers."""
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if hasattr(obj, "item") and callable(obj.item) and getattr(obj, "ndim", 0) == 0:
        obj = obj.item()
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, (str, int, float, bool)) or obj is None:
        return obj
    return str(obj)


def check_writable(folder: str | Path, what: str = "results_path") -> Path:
    """Create `folder` and check that a file can be written there with room to spare; raise naming it."""
    folder = Path(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".probe-"):
            pass
        free = os.statvfs(folder).f_bavail * os.statvfs(folder).f_frsize
    except OSError as err:
        raise RecordWriteError(
            f"{what}={str(folder)!r} cannot hold run records ({err.strerror or err}): give a writable folder"
        ) from err
    if free < MIN_FREE_BYTES:
        raise RecordWriteError(
            f"{what}={str(folder)!r} has {free} bytes free, below the "
            f"{MIN_FREE_BYTES} a record needs: free some space or give another folder"
        )
    return folder


def json_text(obj: Any) -> str:
    """Return `obj` as the JSON text a record file holds (sorted keys, NaN as null)."""
    return (
        json.dumps(
            jsonable({k: v for k, v in obj.items() if not k.startswith("_")} if isinstance(obj, dict) else obj),
            indent=1,
            sort_keys=True,
        )
        + "\n"
    )


def write_json_atomic(path: str | Path, obj: Any, mode: int | None = None) -> Path:
    """Write `obj` to `path` as JSON, whole (temporary file, fsync, rename), with the bits `mode` or the umask's."""
    path = Path(path)
    text = json_text(obj)
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(tmp, "x", encoding="utf-8") as f:
            if mode is not None:
                os.fchmod(f.fileno(), mode)
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as err:
        if tmp.exists():
            tmp.unlink()
        raise RecordWriteError(
            f"could not write {path} ({err.strerror or err}); the file there, if any, is unchanged"
        ) from err
    return path


def as_json(record: schema.RunRecord) -> dict:
    """Return `record` as its file's JSON data: the version and the sections set, NaN as None, scalars as numbers."""
    # no serializer warnings: a figure of the wrong type is named by the schema check that follows
    data = record.model_dump(exclude_unset=True, by_alias=True, warnings=False)
    # the version always: a file without one is refused by its readers
    sections = {k: v for k, v in data.items() if v is not None}
    return jsonable({"schema_version": record.schema_version, **sections})


def write_record(path: str | Path, record: schema.RunRecord) -> Path:
    """Write `record`, checked by the schema, to `path` (aside when `path` holds a more final one); return where."""
    valid, why = schema.validate(as_json(record))
    if why:
        raise RecordWriteError(f"the record for {path} does not match the schema ({why}); nothing was written")
    if FINALITY.get(valid["status"], 0) < FINALITY.get(status_in(path), 0):
        path = aside_path(path)
    return write_json_atomic(path, valid)


def aside_path(path: str | Path) -> Path:
    """Return where a rerun's record goes when the record at `path` is more final: `_reruns/`, which no reader reads."""
    return Path(path).parent / ASIDE / Path(path).name


def status_in(path: str | Path) -> str | None:
    """Return the status the file at `path` states, valid record or not (a newer code's finished one is finished)."""
    try:
        obj = read_json(path)
    except RecordReadError:
        return None
    return obj.get("status") if isinstance(obj, dict) and isinstance(obj.get("status"), str) else None


def unreadable(path: str | Path) -> str | None:
    """Return why the file at `path` is not a record this code reads, or None when there is none or it is one."""
    path = Path(path)
    if not path.exists() and not path.is_symlink():
        return None
    try:
        return schema.validate(read_json(path))[1]
    except RecordReadError as err:
        return str(err)


def read_record(path: str | Path) -> dict | None:
    """Return the record in `path` (checked), or None when it is missing, cut short or invalid."""
    try:
        obj = read_json(path)
    except RecordReadError:
        return None
    return schema.validate(obj)[0]


def read_records(root: str | Path) -> tuple[list[dict], Counter]:
    """Return every valid record below `root`, each with its path in `_source`, and the skipped ('<file>: <why>')."""
    root = Path(root)
    found: list[dict] = []
    skipped: Counter = Counter()
    # folders whose name starts with '_' (per-machine peaks, caches) hold no records
    files = (
        [root]
        if root.is_file()
        else sorted(
            p
            for p in root.rglob("*")
            if p.suffix == ".json"
            and p.is_file()
            and not any(part.startswith(("_", ".")) for part in p.relative_to(root).parts)
        )
    )
    for path in files:
        name = path.name if root.is_file() else str(path.relative_to(root))
        try:
            obj = load_json(path)
        except RecordReadError as err:
            skipped[f"{name}: {err}"] += 1
            continue
        valid, why = schema.validate(obj)
        if why:
            skipped[f"{name}: {why}"] += 1
            continue
        found.append({**valid, "_source": str(path)})
    return found, skipped


def unix_seconds(text: str) -> float:
    """Return `text` as Unix seconds; argparse's error for nan, inf, a negative time or one after tomorrow."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a Unix time in seconds (from `date +%s`)")
    if value > time.time() + 86400:
        raise argparse.ArgumentTypeError(
            f"{text} is after tomorrow: a Unix time in seconds is expected (milliseconds? divide by 1000)"
        )
    return value


def main(argv: list[str] | None = None) -> None:
    """Print the headline figures of a record file, or of the newest record below a folder."""
    from helpers.run.paths import RESULTS_DIR, repo_path

    parser = argparse.ArgumentParser(prog="python -m helpers.run.records", description=main.__doc__)
    parser.add_argument("path", nargs="?", default=RESULTS_DIR, help="a record file or a results folder")
    parser.add_argument("--run", help="only records of this run name")
    parser.add_argument(
        "--since",
        type=unix_seconds,
        help="only records whose file was written after this Unix time "
        "(`make baseline`: its own start, so another machine's older record is never shown)",
    )
    args = parser.parse_args(argv)
    path = repo_path(args.path)
    found, skipped = read_records(path)
    found = [
        r
        for r in found
        if args.run in (None, r["run_name"])
        and (args.since is None or Path(r["_source"]).stat().st_mtime >= args.since)
    ]
    if not found:
        unread = "".join(f"\n  skipped {what}" for what in skipped)
        since = " written by this run" if args.since is not None else ""
        raise SystemExit(f"no record{' of ' + args.run if args.run else ''}{since} in {path}{unread}")
    newest = max(found, key=lambda r: (str(r.get("finished_at") or r.get("started_at")), r["_source"]))
    from helpers.run.summary import headline  # display only

    print(headline(newest))
    print(f"  record: {newest['_source']}")


if __name__ == "__main__":
    main()
