"""Where a run's record goes, checked before any model is built: the exact folder, the file name's
length, and one run per name at a time (filelock's exclusive lock on a claim file beside the record).

    check_destination(path)            # raises RecordWriteError / ConfigError naming the path
    claim = claim_name(path, replace)  # raises ConfigError when the name is taken; release(claim) at the end
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import stat
from contextlib import suppress
from pathlib import Path

from filelock import FileLock, Timeout

from helpers.run import records
from helpers.run.args import ConfigError

NAME_MAX = 255  # bytes in one file name on ext4, xfs, tmpfs, EBS and EFS
TEMP_EXTRA = len("..12345678.tmp")  # write_json_atomic's temporary name: .<name>.<8 random chars>.tmp


def check_destination(path: Path) -> None:
    """Refuse a record path whose temporary file name is too long or whose folder cannot hold it."""
    longest = len(path.name.encode()) + TEMP_EXTRA
    if longest > NAME_MAX:
        name = path.name.split("@")[0]
        raise ConfigError(
            f"run_name is too long: the record file {path.name!r} needs a {longest}-byte "
            f"temporary name, over the {NAME_MAX} a file system allows; give a run_name of at most "
            f"{len(name.encode()) - (longest - NAME_MAX)} characters"
        )
    if path.exists() and not path.is_file():
        kind = "folder" if path.is_dir() else "FIFO" if stat.S_ISFIFO(path.lstat().st_mode) else "non-file"
        raise records.RecordWriteError(
            f"a {kind} is at the record's path {path}: the record is a file written there "
            f"at the end; move the {kind} away or give another run_name"
        )
    folder = records.check_writable(path.parent)  # the suite's own folder, not just the results root
    tag = f".{os.getpid()}.{secrets.token_hex(4)}."  # its own name: torchrun's ranks probe the same folder at once
    probe = folder / (tag + "p" * max(0, len(path.name) + TEMP_EXTRA - len(tag)))
    try:
        probe.touch(exist_ok=False)
    except OSError as err:
        raise records.RecordWriteError(f"{folder} cannot hold the record {path.name} ({err.strerror or err})") from err
    finally:
        probe.unlink(missing_ok=True)


def _claim_path(path: Path) -> Path:
    """Return the claim file of a record path."""
    return path.with_name(f".{path.name}.claim")


# claim file -> the lock holding it: a forked child inherits the dict, not the lock (filelock drops it there)
_HELD: dict[Path, FileLock] = {}


def _holder(claim: Path) -> str:
    """Return who holds a claim, in words, from what its holder wrote into it."""
    try:
        held = records.read_json(claim)
    except records.RecordReadError:
        held = None
    if not isinstance(held, dict):
        return "a live process"
    return f"pid {held.get('pid')} on {held.get('host')} since {held.get('since')}"


def _sign(fd: int) -> None:
    """Write this process's host, pid and start time into the claim file it has just locked."""
    os.ftruncate(fd, 0)
    os.pwrite(fd, json.dumps({"host": socket.gethostname(), "pid": os.getpid(), "since": records.now()}).encode(), 0)


def claim_name(path: Path, replace: bool = False) -> Path:
    """Claim the record's name for this process, or refuse when another run holds or finished it."""
    done = records.read_record(path)
    if done is not None and done.get("status") in records.DONE and not replace:
        raise ConfigError(
            f"a {done['status']} run named {done['run_name']!r} is already recorded on this device "
            f"({path}): give another run_name, or replace_record=True to run it again"
        )
    why = None if replace else records.unreadable(path)
    if why:  # a newer commit's record (an unknown key) or a hand-edited one: kept, never replaced unasked
        raise ConfigError(
            f"the file at the record's path {path} is not a record this code reads ({why}); it is kept: "
            "move it away, give another run_name, or replace_record=True to replace it"
        )
    claim = _claim_path(path)
    if claim in _HELD and _HELD[claim].is_locked:  # this process's own (a notebook cell run again)
        return claim
    if claim.is_dir():
        try:
            claim.rmdir()  # an empty folder holds nothing; a full one is someone's and stays
        except OSError:
            raise ConfigError(f"a folder is at the claim path {claim}: remove it (it is not this code's)") from None
    # held until release or the process's end; a claim file nobody holds is stale (its run died) and is taken over.
    # A short wait, not none: a holder that unlinks its claim as we open it leaves us the new file to lock
    lock = FileLock(claim, timeout=0.1, thread_local=False, fallback_to_soft=False, on_acquired=_sign)
    try:
        lock.acquire()
    except Timeout:
        raise ConfigError(
            f"a run named {path.stem.split('@')[0]!r} is running on this device now (claimed by "
            f"{_holder(claim)}; claim file {claim}): wait for it, or give another run_name"
        ) from None
    except OSError as err:
        raise ConfigError(
            f"cannot lock the claim file {claim} ({err.strerror or err}): remove it if no run holds it, or "
            "give a results_path on a file system with locks (a local disk, EBS, EFS)"
        ) from err
    _HELD[claim] = lock
    return claim


def release(claim: Path | None) -> None:
    """Give a claim back (nothing when this process holds none): remove its file, then drop the lock."""
    lock = _HELD.get(claim)
    if lock is None or not lock.is_locked:
        return  # not this process's: another run's claim is never removed here
    del _HELD[claim]
    with suppress(OSError):  # its folder is gone or became a file: nothing left to remove
        claim.unlink(missing_ok=True)
    lock.release()
