"""Where a run's record goes, checked before any model is built: the exact folder, the file name's
length, and one run per name at a time (an exclusive lock on a claim file beside the record).

    check_destination(path)            # raises RecordWriteError / ConfigError naming the path
    claim = claim_name(path, replace)  # raises ConfigError when the name is taken; release(claim) at the end
"""

from __future__ import annotations

import fcntl
import json
import os
import secrets
import socket
import stat
from pathlib import Path

from helpers.run.args import ConfigError
from helpers.run.records import DONE, RecordWriteError, check_writable, now, read_record, unreadable

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
        raise RecordWriteError(
            f"a {kind} is at the record's path {path}: the record is a file written there "
            f"at the end; move the {kind} away or give another run_name"
        )
    folder = check_writable(path.parent)  # the suite's own folder, not just the results root
    tag = f".{os.getpid()}.{secrets.token_hex(4)}."  # its own name: torchrun's ranks probe the same folder at once
    probe = folder / (tag + "p" * max(0, len(path.name) + TEMP_EXTRA - len(tag)))
    try:
        probe.touch(exist_ok=False)
    except OSError as err:
        raise RecordWriteError(f"{folder} cannot hold the record {path.name} ({err.strerror or err})") from err
    finally:
        probe.unlink(missing_ok=True)


def _claim_path(path: Path) -> Path:
    """Return the claim file of a record path."""
    return path.with_name(f".{path.name}.claim")


# claim file -> (pid, the open, locked descriptor it is held by): a forked child inherits the dict, not the claim
_HELD: dict[Path, tuple[int, int]] = {}


def _holder(claim: Path) -> str:
    """Return who holds a claim, in words, from what its holder wrote into it."""
    try:
        held = json.loads(claim.read_text())
    except (OSError, ValueError, RecursionError):
        held = None
    if not isinstance(held, dict):
        return "a live process"
    return f"pid {held.get('pid')} on {held.get('host')} since {held.get('since')}"


def _lock(claim: Path) -> int | None:
    """Return a descriptor holding the exclusive lock of `claim` (the file created if missing), or None when
    a live process holds it. The lock, not the file, is the claim: the kernel drops it when its process dies."""
    while True:
        try:
            fd = os.open(claim, os.O_RDWR | os.O_CREAT, 0o644)
        except IsADirectoryError:
            try:
                claim.rmdir()  # an empty folder holds nothing; a full one is someone's and stays
            except OSError:
                raise ConfigError(f"a folder is at the claim path {claim}: remove it (it is not this code's)") from None
            continue
        except OSError as err:
            raise ConfigError(
                f"cannot open the claim file {claim} ({err.strerror or err}): remove it if no run "
                "holds it, or give another results_path"
            ) from err
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None
        except OSError as err:
            os.close(fd)
            raise ConfigError(
                f"cannot lock the claim file {claim} ({err.strerror or err}): give a results_path "
                "on a file system with locks (a local disk, EBS, EFS)"
            ) from err
        try:
            same = os.stat(claim).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if same:
            return fd
        os.close(fd)  # its holder released it (unlinked) between our open and our lock: try the new file


def claim_name(path: Path, replace: bool = False) -> Path:
    """Claim the record's name for this process, or refuse when another run holds or finished it.

    The claim is an exclusive lock on `.<record>.claim`, held until release or the process's end. A claim
    file nobody holds locked is stale (its run died, was killed or ran on another host, its pid may be
    reused, it may be empty) and is taken over; two processes taking one over at once get one lock."""
    done = read_record(path)
    if done is not None and done.get("status") in DONE and not replace:
        raise ConfigError(
            f"a {done['status']} run named {done['run_name']!r} is already recorded on this device "
            f"({path}): give another run_name, or replace_record=True to run it again"
        )
    why = None if replace else unreadable(path)
    if why:  # a newer commit's record (an unknown key) or a hand-edited one: kept, never replaced unasked
        raise ConfigError(
            f"the file at the record's path {path} is not a record this code reads ({why}); it is kept: "
            "move it away, give another run_name, or replace_record=True to replace it"
        )
    claim = _claim_path(path)
    if _HELD.get(claim, (None,))[0] == os.getpid():  # this process's own (a notebook cell run again)
        return claim
    fd = _lock(claim)
    if fd is None:
        raise ConfigError(
            f"a run named {path.stem.split('@')[0]!r} is running on this device now (claimed by "
            f"{_holder(claim)}; claim file {claim}): wait for it, or give another run_name"
        )
    mine = json.dumps({"host": socket.gethostname(), "pid": os.getpid(), "since": now()})
    os.ftruncate(fd, 0)
    os.pwrite(fd, mine.encode(), 0)
    _HELD[claim] = (os.getpid(), fd)
    return claim


def release(claim: Path | None) -> None:
    """Give a claim back (nothing when there is none): remove its file, then drop the lock."""
    if claim is None:
        return
    pid, fd = _HELD.get(claim, (None, None))
    if pid != os.getpid():
        return  # not this process's: another run's claim is never removed here
    del _HELD[claim]
    try:
        claim.unlink(missing_ok=True)
    except OSError:  # its folder is gone or became a file: nothing left to release
        pass
    os.close(fd)
