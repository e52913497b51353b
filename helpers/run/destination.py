"""Where a run's record goes, checked before any model is built: the exact folder, the file name's
length, and one run per name at a time (an exclusive claim file beside the record).

    check_destination(path)            # raises RecordWriteError / ConfigError naming the path
    claim = claim_name(path, replace)  # raises ConfigError when the name is taken; release(claim) at the end
"""
from __future__ import annotations

import json
import os
import secrets
import socket
from pathlib import Path

from helpers.run.coerce import ConfigError
from helpers.run.records import DONE, RecordWriteError, check_writable, now, read_record

NAME_MAX = 255  # bytes in one file name on ext4, xfs, tmpfs, EBS and EFS
TEMP_EXTRA = len("..12345678.tmp")  # write_json_atomic's temporary name: .<name>.<8 random chars>.tmp


def check_destination(path: Path) -> None:
    """Refuse a record path whose temporary file name is too long or whose folder cannot hold it."""
    longest = len(path.name.encode()) + TEMP_EXTRA
    if longest > NAME_MAX:
        name = path.name.split("@")[0]
        raise ConfigError(f"run_name is too long: the record file {path.name!r} needs a {longest}-byte "
                          f"temporary name, over the {NAME_MAX} a file system allows; give a run_name of at most "
                          f"{len(name.encode()) - (longest - NAME_MAX)} characters")
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


def _alive(pid: int) -> bool:
    """True when a process with this pid runs on this host."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def claim_name(path: Path, replace: bool = False) -> Path:
    """Claim the record's name for this process, or refuse when another run holds or finished it."""
    done = read_record(path)
    if done is not None and done.get("status") in DONE and not replace:
        raise ConfigError(f"a {done['status']} run named {done['run_name']!r} is already recorded on this device "
                          f"({path}): give another run_name, or replace_record=True to run it again")
    claim = _claim_path(path)
    mine = json.dumps({"host": socket.gethostname(), "pid": os.getpid(), "since": now()})
    for _ in range(2):
        try:
            fd = os.open(claim, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            try:
                held = json.loads(claim.read_text())
            except (OSError, ValueError):
                held = {}
            pid = int(held.get("pid", 0) or 0)
            # its process died without releasing it, or it is this process's own (a notebook cell run again)
            stale = held.get("host") == socket.gethostname() and (pid == os.getpid() or not _alive(pid))
            if not stale:
                raise ConfigError(f"a run named {path.stem.split('@')[0]!r} is running on this device now "
                                  f"(claimed by pid {held.get('pid')} on {held.get('host')} since "
                                  f"{held.get('since')}; claim file {claim}): wait for it, or give another "
                                  "run_name; delete the claim file only if that run is gone") from None
            claim.unlink(missing_ok=True)
            continue
        with os.fdopen(fd, "w") as f:
            f.write(mine)
        return claim
    raise ConfigError(f"could not claim {claim}: another run took it at the same moment")


def release(claim: Path | None) -> None:
    """Give a claim back (nothing when there is none)."""
    if claim is not None:
        try:
            claim.unlink(missing_ok=True)
        except OSError:  # its folder is gone or became a file: nothing left to release
            pass
