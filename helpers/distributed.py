"""Data parallel under torchrun: one process per device, disjoint data, averaged gradients, one record.

    torchrun --nproc_per_node=N Nvidia/train.py --num_devices N ...   # every rank runs run_worker(cfg)
    record = launch(cfg)                                                # the same, from a notebook

Backends: DistributedDataParallel over NCCL (CUDA) or gloo (CPU); on XLA the "xla" process group,
where train.fit's `xm.reduce_gradients` all-reduces the gradients (no DDP wrapper). Every rank
loads the same seeded weights (and DDP broadcasts rank 0's at wrap time); a DistributedSampler
gives each rank a disjoint shard (train.fit calls set_epoch); evaluation sums the confusion matrix
over ranks; only rank 0 shows progress and appends the record.

Several nodes need nothing extra: torchrun sets RANK, WORLD_SIZE and LOCAL_RANK on every node, e.g.
`torchrun --nnodes 2 --nproc_per_node 8 --rdzv-backend c10d --rdzv-endpoint HOST:29500 ...`.
"""
from __future__ import annotations

import collections
import os
import re
import subprocess
import sys
import uuid

import torch
import torch.distributed as dist
from torch.utils.data import DistributedSampler, Sampler

from helpers import records
from helpers.config import REPO_ROOT, RunConfig, repo_path

BACKENDS = {"cuda": "nccl", "cpu": "gloo", "xla": "xla"}
LAUNCH_ID = "ACCELBENCH_LAUNCH_ID"  # ties the record a torchrun launch writes to its launcher


class DistributedRunError(RuntimeError):
    """A torchrun launch ended without a finished record (a rank died or failed)."""


def torchrun_env() -> dict | None:
    """Return rank, world_size and local_rank set by torchrun, or None outside torchrun."""
    if not all(k in os.environ for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK")):
        return None
    return {"rank": int(os.environ["RANK"]), "world_size": int(os.environ["WORLD_SIZE"]),
            "local_rank": int(os.environ["LOCAL_RANK"])}


def init_process_group(run) -> str:
    """Join torchrun's process group for the run's device, set run.rank/world_size; return the backend."""
    backend = BACKENDS[run.dev.type]
    if backend == "xla":
        import torch_xla.distributed.xla_backend  # noqa: F401 - registers the "xla" backend

        dist.init_process_group("xla", init_method="xla://")
    else:
        dist.init_process_group(backend)  # env:// from torchrun's MASTER_ADDR/PORT, RANK, WORLD_SIZE
    expected = int(os.environ.get("WORLD_SIZE", dist.get_world_size()))
    if dist.get_world_size() != expected:
        # torch-xla's CPU client (PJRT_DEVICE=CPU) has no cross-process collectives: under torchrun
        # every process gets its own world of one device, so gradients would silently not average.
        raise RuntimeError(
            f"the {backend!r} process group has world size {dist.get_world_size()} (this process is "
            f"rank {dist.get_rank()}) but torchrun started {expected} processes: with "
            f"PJRT_DEVICE={os.environ.get('PJRT_DEVICE')} torch-xla cannot join processes (its CPU "
            "backend is single-process). Use num_devices=1 on the CPU, or NeuronCores")
    run.rank, run.world_size = dist.get_rank(), dist.get_world_size()
    return backend


class ShardSampler(Sampler):
    """Rows rank, rank+W, rank+2W, ... in order: every evaluation row counted once, none repeated."""

    def __init__(self, n: int, rank: int, world_size: int):
        self.indices = list(range(rank, n, world_size))

    def __iter__(self):
        return iter(self.indices)

    def __len__(self) -> int:
        return len(self.indices)


def train_sampler(split, rank: int, world_size: int, seed: int) -> DistributedSampler:
    """Return the training sampler: one seeded permutation per epoch, rank r takes rows r, r+W, ..."""
    # Global batch k of W ranks is rows [k*W*B, (k+1)*W*B) of the permutation: the same rows a
    # single process with batch W*B and this sampler (world_size=1) sees at step k.
    return DistributedSampler(split, num_replicas=world_size, rank=rank, shuffle=True, seed=seed)


def reducer(run):
    """Return a function that sums a tensor over all ranks (None with one rank)."""
    if run.world_size == 1:
        return None
    if run.dev.type == "xla":
        import torch_xla.core.xla_model as xm

        # counts are summed as float32 (exact below 2**24 rows), the dtype every XLA collective takes
        return lambda t: xm.all_reduce(xm.REDUCE_SUM, t.float()).to(t.dtype)

    def reduce(t: torch.Tensor) -> torch.Tensor:
        t = t.clone()
        dist.all_reduce(t, op=dist.ReduceOp.SUM)
        return t
    return reduce


def ddp_wrapper(run, local_rank: int):
    """Return the function train_model uses to wrap the model in DDP (None on XLA or with one rank)."""
    if run.world_size == 1 or run.dev.type == "xla":
        return None
    from torch.nn.parallel import DistributedDataParallel as DDP

    def wrap(model: torch.nn.Module) -> torch.nn.Module:
        ddp = DDP(model, device_ids=[local_rank] if run.dev.type == "cuda" else None)
        run.extras["ddp"] = ddp
        return ddp
    return wrap


def shard_check(run, sampler) -> dict:
    """Return rows per rank and rows seen by more than one rank in epoch 0 (gathered from every rank)."""
    if run.dev.type == "xla":
        return {"status": "not checked on the xla process group (no object collectives)"}
    sampler.set_epoch(0)
    mine = list(sampler)
    gathered: list = [None] * run.world_size
    dist.all_gather_object(gathered, mine)
    rows = [len(g) for g in gathered]
    return {"rows_per_rank": rows, "overlap_rows": sum(rows) - len(set().union(*map(set, gathered))),
            "padded_rows": sum(rows) - len(sampler.dataset)}  # DistributedSampler repeats rows to even out


def allreduce_share(run) -> dict:
    """Return the gradient all-reduce time and its share of the median step, from DDP's own timers."""
    ddp = run.extras.get("ddp")
    if ddp is None:
        reason = ("inside the compiled XLA graph: see neuron-profile" if run.dev.type == "xla"
                  else "no DDP wrapper")
        return {"status": "not measured", "reason": reason}
    try:
        data = ddp._get_ddp_logging_data()  # a private API: sampled iterations, times in ns
    except (AttributeError, RuntimeError) as err:
        return {"status": "not measured", "reason": f"DDP logging data unavailable ({err})"}
    comm_s = data.get("avg_backward_comm_time", 0) / 1e9
    step_s = run.record.get("timing", {}).get("step_time_median_s")
    if not comm_s or not step_s:
        return {"status": "not measured", "reason": "DDP recorded no sampled iteration"}
    return {"source": "DistributedDataParallel._get_ddp_logging_data (sampled steps)",
            "comm_s": comm_s,
            "overlap_with_backward_s": data.get("avg_backward_compute_comm_overlap_time", 0) / 1e9,
            "backward_compute_s": data.get("avg_backward_compute_time", 0) / 1e9,
            "share_of_step": comm_s / step_s}


def distributed_section(run, backend: str, checks: dict) -> dict:
    """Return the record's `distributed` section."""
    cfg = run.cfg
    timing = run.record.get("timing", {})
    local = int(os.environ.get("LOCAL_WORLD_SIZE", run.world_size))
    out = {"world_size": run.world_size, "nodes": run.world_size // max(local, 1), "backend": backend,
           "per_device_batch": cfg.batch,
           "global_batch": cfg.batch * run.world_size * cfg.gradient_accumulation_steps,
           # every rank steps in lockstep, so the global rate is rank 0's times the ranks
           "global_samples_per_s": (timing["samples_per_s"] * run.world_size
                                    if timing.get("samples_per_s") else None),
           "shards": checks, "launch_id": os.environ.get(LAUNCH_ID)}
    if cfg.profile:
        out["allreduce"] = allreduce_share(run)
    return out


def run_worker(cfg: RunConfig) -> dict:
    """Run one torchrun rank end to end; rank 0 appends the record; return it (re-raise on failure)."""
    import traceback

    from helpers import run as steps

    env = torchrun_env()
    if cfg.device in ("auto", "cuda") and torch.cuda.is_available():
        torch.cuda.set_device(env["local_rank"])  # before start_run names the device
    run = steps.start_run(cfg)
    run.rank, run.world_size = env["rank"], env["world_size"]  # so a failed init is recorded once
    extra = run.extras.setdefault("record_extra", {})
    extra["distributed"] = {"world_size": run.world_size, "launch_id": os.environ.get(LAUNCH_ID)}
    try:
        backend = init_process_group(run)
        ds = steps.load_data(run)
        splits = steps.tokenize_data(run, ds)
        model = steps.build_model(run)
        sampler = train_sampler(splits["train"], run.rank, run.world_size, cfg.seed)
        checks = shard_check(run, sampler)
        steps.train_model(run, model, splits, sampler=sampler, wrap=ddp_wrapper(run, env["local_rank"]))
        samplers = {s: ShardSampler(len(splits[s]), run.rank, run.world_size)
                    for s in ("validation", "test")}
        steps.evaluate_model(run, model, splits, reduce=reducer(run), samplers=samplers)
        extra["distributed"] = distributed_section(run, backend, checks)
        if cfg.save_dir and run.rank == 0 and run.record["status"] == "finished":
            steps.save_model(run, model)
    except Exception as err:  # noqa: BLE001 - rank 0 records the failure, then the rank exits non-zero
        traceback.print_exc(file=sys.stderr)
        steps.finish_run(run, steps.classify_error(err), f"rank {run.rank}: {type(err).__name__}: {err}")
        raise
    record = steps.finish_run(run)
    dist.destroy_process_group()
    return record


_FAILURE = re.compile(r"rank\s*:\s*(\d+).*?exitcode\s*:\s*(-?\d+).*?traceback\s*:\s*([^\n]*)", re.S)


def _failed_ranks(lines: list[str]) -> str:
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


def _last_exception(lines: list[str]) -> str:
    """Return the last 'SomeError: message' line the ranks printed (their own error, not torchrun's)."""
    found = [m.group(1) + ": " + m.group(2).strip() for line in lines
             if (m := _EXCEPTION.match(line.rstrip())) and "ChildFailedError" not in m.group(1)]
    return found[-1] if found else ""


def launch(cfg: RunConfig, tail_lines: int = 80) -> dict:
    """Run the training entry point under `torchrun --nproc_per_node=cfg.num_devices`; return its record.

    If a rank dies, append a failed record (unless rank 0 already wrote one) and raise
    DistributedRunError naming the rank, so a sweep records the failure and goes on.
    """
    from helpers.entry import config_to_argv

    cfg.validate()
    script = REPO_ROOT / ("Trainium" if cfg.device == "xla" else "Nvidia") / "train.py"
    launch_id = uuid.uuid4().hex[:12]
    # --standalone: a private rendezvous on a free port, so two launches on one host never collide
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone",
           f"--nproc_per_node={cfg.num_devices}", str(script), *config_to_argv(cfg)]
    env = {**os.environ, LAUNCH_ID: launch_id}
    tail: collections.deque = collections.deque(maxlen=tail_lines)
    print("launching:", " ".join(cmd), flush=True)
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                          bufsize=1) as proc:
        for line in proc.stdout:
            sys.stdout.write(line)
            tail.append(line)
        code = proc.wait()
    path = repo_path(cfg.results_path)
    found = [r for r in records.read_records(path)[0] if r.get("run_name") == cfg.run_name
             and r.get("distributed", {}).get("launch_id") == launch_id]
    if code == 0 and found:
        return found[-1]
    cause = _failed_ranks(list(tail)) or f"torchrun exited with code {code}"
    if found and found[-1].get("error"):
        cause += f"; rank 0 recorded: {found[-1]['error']}"
    elif _last_exception(list(tail)):
        # rank 0 was stopped by torchrun before it could record (another rank failed first)
        cause += f"; a rank raised {_last_exception(list(tail))}"
    if not found:
        record = records.new_record(cfg.to_dict(), status="failed", world_size=cfg.num_devices,
                                    error=f"torchrun launch failed: {cause}",
                                    distributed={"world_size": cfg.num_devices, "launch_id": launch_id,
                                                 "exit_code": code, "output_tail": "".join(tail)[-4000:]})
        record["finished_at"] = records.now()
        records.append_record(path, record)
    raise DistributedRunError(f"distributed run {cfg.run_name!r} failed: {cause}. A failed record is in "
                              f"{path}. Last output lines:\n" + "".join(list(tail)[-15:]))
