"""Hand a run to torchrun: `num_devices` processes run the same arguments; read the record rank 0 wrote.

    record = torchrun(args, name, record_path, device_type)    # what steps.start does for num_devices > 1

The ranks run Nvidia/train.py or Trainium/train.py (the ordinary run path, steps.run_all); rank 0 writes
the record to the path the launcher computed, tagged with the launch's id, so the launcher reads its
child's record by name. If no rank wrote one, the launcher writes the failed record, naming the rank that
died and why, and raises DistributedRunError so a sweep records the failure and goes on.
"""
from __future__ import annotations

import collections
import os
import re
import subprocess
import sys
import uuid
from pathlib import Path

from helpers.run import records
from helpers.run.args import REPO_ROOT, RunArgs
from helpers.run.argv import to_argv
from helpers.run.ddp import LAUNCH_ID, Rank, allreduce_share


class DistributedRunError(RuntimeError):
    """A torchrun launch ended without a finished record (a rank died or failed)."""


def torchrun(args: RunArgs, name: str, record_path: Path, device_type: str, tail_lines: int = 80) -> dict:
    """Run `args` under `torchrun --standalone --nproc_per_node=num_devices`; return rank 0's record."""
    script = REPO_ROOT / ("Trainium" if device_type == "xla" else "Nvidia") / "train.py"
    launch_id = uuid.uuid4().hex[:12]
    results = record_path.parent.parent
    # --standalone: a private rendezvous on a free port, so two launches on one host never collide
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone",
           f"--nproc_per_node={args.train.num_devices}", str(script), *to_argv(args),
           f"--run_name={name}", f"--results_path={results}"]
    tail: collections.deque = collections.deque(maxlen=tail_lines)
    print(f"num_devices={args.train.num_devices}: this run is handed over to torchrun, "
          f"{args.train.num_devices} processes; its record will be {record_path}", flush=True)
    print("launching:", " ".join(cmd), flush=True)
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1,
                          env={**os.environ, LAUNCH_ID: launch_id}) as proc:
        for line in proc.stdout:
            sys.stdout.write(line)
            tail.append(line)
        code = proc.wait()
    found = records.read_record(record_path)
    if found is not None and found.get("distributed", {}).get("launch_id") != launch_id:
        found = None  # an older run's record at the same name
    if code == 0 and found is not None:
        return found
    cause = failed_ranks(list(tail)) or f"torchrun exited with code {code}"
    if found is not None and found.get("error"):
        cause += f"; rank 0 recorded: {found['error']}"
    elif last_exception(list(tail)):
        # rank 0 was stopped by torchrun before it could record (another rank failed first)
        cause += f"; a rank raised {last_exception(list(tail))}"
    if found is None:
        record = records.new_record({**args.flat(), "run_name": name}, sorted(args.given), status="failed",
                                    world_size=args.train.num_devices,
                                    error=f"torchrun launch failed: {cause}",
                                    distributed={"world_size": args.train.num_devices, "launch_id": launch_id,
                                                 "exit_code": code, "output_tail": "".join(tail)[-4000:]})
        record["finished_at"] = records.now()
        records.write_record(record_path, record)
    raise DistributedRunError(f"distributed run {name!r} failed: {cause}. A failed record is in "
                              f"{record_path}. Last output lines:\n" + "".join(list(tail)[-15:]))


def distributed_section(rank: Rank, args: RunArgs, timing: dict | None, step_model) -> dict:
    """Return the record's `distributed` section of a torchrun rank (rank 0 writes it)."""
    timing = timing or {}
    out = {"world_size": rank.world_size, "nodes": rank.nodes, "backend": rank.backend,
           "per_device_batch": args.train.batch,
           "global_batch": args.train.batch * rank.world_size * args.train.gradient_accumulation_steps,
           "global_samples_per_s": timing.get("samples_per_s"),
           "per_device_samples_per_s": timing.get("samples_per_s_per_device"),
           "launch_id": os.environ.get(LAUNCH_ID)}
    if args.measure.profile:
        out["allreduce"] = allreduce_share(step_model, timing.get("step_time_median_s"),
                                           "xla" if rank.backend == "xla" else "cpu")
    return out


_FAILURE = re.compile(r"rank\s*:\s*(\d+).*?exitcode\s*:\s*(-?\d+).*?traceback\s*:\s*([^\n]*)", re.S)


def failed_ranks(lines: list[str]) -> str:
    """Return torchrun's failure summary, root cause first: rank, exit code, signal of each failed rank."""
    text = "".join(lines)
    root = text.find("Root Cause")
    # torchrun prints "Failures:" (the others) before "Root Cause": read the root cause first
    blocks = [text[root:], text[:root]] if root >= 0 else [text]
    out: dict[str, str] = {}
    for block in blocks:
        for rank, code, trace in _FAILURE.findall(block):
            trace = trace.strip()
            if trace.startswith("To enable traceback"):  # torchrun's placeholder without an error file
                trace = ""
            out.setdefault(rank, f"rank {rank} exited with code {code}" + (f" ({trace})" if trace else ""))
    return "; ".join(out.values())


_EXCEPTION = re.compile(r"^(?:\[rank\d+\]:)?\s*([A-Za-z_][\w.]*(?:Error|Exception)): (.+)$")


def last_exception(lines: list[str]) -> str:
    """Return the last 'SomeError: message' line the ranks printed (their own error, not torchrun's)."""
    found = [m.group(1) + ": " + m.group(2).strip() for line in lines
             if (m := _EXCEPTION.match(line.rstrip())) and "ChildFailedError" not in m.group(1)]
    return found[-1] if found else ""
