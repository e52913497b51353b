"""Hand a run to torchrun: `num_devices` processes run the same arguments; read the record rank 0 wrote.

    record = torchrun(args, name, record_path, device_type)    # what steps.start does for num_devices > 1

The ranks run the study's script (steps.run_all); rank 0 writes the record at the path the launcher computed,
tagged with the launch's id. If none finished, the launcher records which rank failed and why and raises
DistributedRunError, so a sweep records the failure and goes on. Why is read from the error files torch elastic's
`record` (around the scripts' entry point) writes, `<--log-dir>/<run id>_<random>/attempt_<n>/<rank>/error.json`;
a rank killed by a signal writes none: for those, torchrun's failure summary on stdout.
"""

from __future__ import annotations

import collections
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path

from helpers.run import records
from helpers.run.args import RunArgs
from helpers.run.argv import to_argv
from helpers.run.ddp import LAUNCH_ID, Rank, allreduce_share
from helpers.run.paths import REPO_ROOT
from helpers.run.schema import RunRecord, Timing


class DistributedRunError(RuntimeError):
    """A torchrun launch ended without a finished record (a rank died or failed)."""


def child_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """Return this environment with `extra` and the repository first on PYTHONPATH."""
    # a child imports this checkout's helpers, the launcher's (not whichever an editable install points to)
    path = os.pathsep.join([str(REPO_ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])
    return {**os.environ, **(extra or {}), "PYTHONPATH": path}


def torchrun(args: RunArgs, name: str, record_path: Path, device_type: str) -> dict:
    """Run `args` under `torchrun --standalone --nproc_per_node=num_devices`; return rank 0's record."""
    script = REPO_ROOT / ("Trainium" if device_type == "xla" else "Nvidia") / "train.py"
    launch_id = uuid.uuid4().hex[:12]
    results = record_path.parent.parent
    log_dir = Path(tempfile.mkdtemp(prefix=f"torchrun-{launch_id}-"))  # the ranks' error files
    # --standalone: a private rendezvous on a free port, so two launches on one host never collide
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        f"--nproc_per_node={args.train.num_devices}",
        f"--log-dir={log_dir}",
        str(script),
        *to_argv(args),
        f"--run_name={name}",
        f"--results_path={results}",
    ]
    tail: collections.deque = collections.deque(maxlen=80)  # the ranks' last lines
    print(
        f"num_devices={args.train.num_devices}: this run is handed over to torchrun, "
        f"{args.train.num_devices} processes; its record will be {record_path}",
        flush=True,
    )
    print("launching:", " ".join(cmd), flush=True)
    try:
        with subprocess.Popen(
            cmd,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            bufsize=1,
            env=child_env({LAUNCH_ID: launch_id}),
        ) as proc:
            for line in proc.stdout:
                sys.stdout.write(line)
                tail.append(line)
            code = proc.wait()
        errors = rank_errors(log_dir)
    finally:
        shutil.rmtree(log_dir, ignore_errors=True)
    return launch_outcome(args, name, record_path, launch_id, code, errors, list(tail))


def launch_outcome(
    args: RunArgs, name: str, record_path: Path, launch_id: str, code: int, errors: list[RankError], tail: list[str]
) -> dict:
    """Return rank 0's record of a launch; else record which rank failed and why, and raise DistributedRunError."""
    # rank 0's record: at its path, or aside where a more final record of the name is kept (records.write_record)
    where, found = next(
        (
            (path, rec)
            for path in (record_path, records.aside_path(record_path))
            if (rec := records.read_record(path)) and rec.get("distributed", {}).get("launch_id") == launch_id
        ),
        (record_path, None),  # none: an older run's record at the same name is not this launch's
    )
    if code == 0 and found is not None:
        return found
    cause = failure_cause(errors, tail) or f"torchrun exited with code {code}"
    if found is not None and found.get("error") and not any(e.rank == 0 for e in errors):
        cause += f"; rank 0 recorded: {found['error']}"
    elif not errors and last_exception(tail):
        # no error file (a rank that failed before its entry point ran): the last exception it printed
        cause += f"; a rank raised {last_exception(tail)}"
    if found is not None and found.get("status") != "finished":
        # rank 0 recorded what it saw (a peer's connection reset); the launch knows which rank failed first
        update = {"error": f"torchrun launch failed: {cause}"}
        where = records.write_record(where, RunRecord.model_validate(found).model_copy(update=update))
    if found is None:
        where = records.write_record(
            record_path,
            records.run_record(
                {**args.flat(), "run_name": name},
                sorted(args.given),
                status="failed",
                finished_at=records.now(),
                libraries=records.library_versions(),
                world_size=args.train.num_devices,
                error=f"torchrun launch failed: {cause}",
                distributed={
                    "world_size": args.train.num_devices,
                    "launch_id": launch_id,
                    "exit_code": code,
                    "rank_errors": [asdict(e) for e in errors],
                    "output_tail": "".join(tail)[-4000:],
                },
            ),
        )
    raise DistributedRunError(
        f"distributed run {name!r} failed: {cause}. A failed record is in "
        f"{where}. Last output lines:\n" + "".join(tail[-15:])
    )


def distributed_section(
    rank: Rank, args: RunArgs, timing: Timing | None, step_model, shards: dict | None = None
) -> dict:
    """Return the record's `distributed` section of a torchrun rank, with the sampler's shard check `shards`."""
    timing = timing or Timing()
    out = {
        "world_size": rank.world_size,
        "nodes": rank.nodes,
        "backend": rank.backend,
        "per_device_batch": args.train.batch,
        "global_batch": args.train.batch * rank.world_size * args.train.gradient_accumulation_steps,
        "global_samples_per_s": timing.samples_per_s,
        "per_device_samples_per_s": timing.samples_per_s_per_device,
        "launch_id": os.environ.get(LAUNCH_ID),
    }
    if shards is not None:
        out["shards"] = shards
    if args.measure.profile:
        out["allreduce"] = allreduce_share(
            step_model, timing.step_time_median_s, "xla" if rank.backend == "xla" else "cpu"
        )
    return out


@dataclass
class RankError:
    """What a rank's error file says: the exception it raised, where, and when the file was written."""

    rank: int
    exception: str  # the exception's type name
    message: str
    where: str | None  # the innermost frame: file:line in function
    written_ns: int

    def describe(self) -> str:
        """Return 'rank R raised Type: message (at file:line in f)'."""
        return (
            f"rank {self.rank} raised {self.exception}"
            + (f": {self.message}" if self.message else "")
            + (f" (at {self.where})" if self.where else "")
        )


_FRAME = re.compile(r'File "([^"]+)", line (\d+), in (\S+)')


def rank_errors(log_dir: Path) -> list[RankError]:
    """Return the exceptions the ranks recorded in torchrun's log dir (the latest attempt), earliest first."""
    attempts = sorted(Path(log_dir).glob("*/attempt_*"), key=lambda p: int(p.name.split("_")[1]))
    out = []
    # --standalone: one node, so a local rank is the global rank
    for path in sorted(attempts[-1].glob("*/error.json")) if attempts else ():
        try:
            message = json.loads(path.read_text())["message"]
        except (OSError, ValueError, KeyError, TypeError):
            continue  # a rank killed while writing it
        text, stack = (
            (message.get("message", ""), message.get("extraInfo", {}).get("py_callstack", ""))
            if isinstance(message, dict)
            else (str(message), "")
        )
        kind, _, said = text.partition(": ")
        frames = _FRAME.findall(stack)
        where = f"{frames[-1][0]}:{frames[-1][1]} in {frames[-1][2]}" if frames else None
        out.append(RankError(int(path.parent.name), kind, said, where, path.stat().st_mtime_ns))
    return sorted(out, key=lambda e: e.written_ns)


_FAILURE = re.compile(r"rank\s*:\s*(\d+).*?exitcode\s*:\s*(-?\d+).*?traceback\s*:\s*([^\n]*)", re.S)


def torchrun_failures(lines: list[str]) -> dict[int, str]:
    """Return torchrun's failure summary from its output, root cause first: rank -> exit code and signal."""
    text = "".join(lines)
    root = text.find("Root Cause")
    # torchrun prints "Failures:" (the others) before "Root Cause": read the root cause first
    blocks = [text[root:], text[:root]] if root >= 0 else [text]
    out: dict[int, str] = {}
    for block in blocks:
        for rank, code, trace in _FAILURE.findall(block):
            trace = trace.strip()
            if trace.startswith("To enable traceback"):  # torchrun's placeholder without an error file
                trace = ""
            out.setdefault(int(rank), f"rank {rank} exited with code {code}" + (f" ({trace})" if trace else ""))
    return out


def failure_cause(errors: list[RankError], lines: list[str]) -> str:
    """Return which ranks failed and why: those that died without an error file first, then the files' exceptions."""
    silent = [text for rank, text in torchrun_failures(lines).items() if rank not in {e.rank for e in errors}]
    # torchrun itself SIGTERMs the ranks still running once one failed: those follow the cause
    first = [t for t in silent if "SIGTERM" not in t]
    return "; ".join(first + [e.describe() for e in errors] + [t for t in silent if "SIGTERM" in t])


_EXCEPTION = re.compile(r"^(?:\[rank\d+\]:)?\s*([A-Za-z_][\w.]*(?:Error|Exception)): (.+)$")


def last_exception(lines: list[str]) -> str:
    """Return the last 'SomeError: message' line the ranks printed (their own error, not torchrun's)."""
    found = [
        m.group(1) + ": " + m.group(2).strip()
        for line in lines
        if (m := _EXCEPTION.match(line.rstrip())) and "ChildFailedError" not in m.group(1)
    ]
    return found[-1] if found else ""
