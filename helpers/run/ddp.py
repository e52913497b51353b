"""Data parallel inside one torchrun rank: the process group, disjoint shards, summed metrics, DDP (NCCL, gloo; on
XLA no wrapper: train.fit all-reduces the gradients). Launching the ranks, on one node or several: helpers/launch.py.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch.utils.data import DistributedSampler

BACKENDS = {"cuda": "nccl", "cpu": "gloo", "xla": "xla"}
LAUNCH_ID = "ACCELBENCH_LAUNCH_ID"  # ties the ranks of one torchrun launch to its launcher


@dataclass
class Rank:
    """This process's place in a torchrun launch."""

    rank: int
    world_size: int
    local_rank: int
    backend: str | None = None  # set once the process group is joined
    nodes: int = 1


def torchrun_env() -> Rank | None:
    """Return rank, world size and local rank set by torchrun, or None outside torchrun."""
    if not all(k in os.environ for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK")):
        return None
    world = int(os.environ["WORLD_SIZE"])
    return Rank(
        int(os.environ["RANK"]),
        world,
        int(os.environ["LOCAL_RANK"]),
        nodes=world // max(int(os.environ.get("LOCAL_WORLD_SIZE", world)), 1),
    )


def init_process_group(rank: Rank, device_type: str) -> None:
    """Join torchrun's process group for `device_type`; raise when the backend cannot join processes."""
    backend = BACKENDS[device_type]
    if backend == "xla":
        import torch_xla.distributed.xla_backend  # noqa: F401 - registers the "xla" backend

        dist.init_process_group("xla", init_method="xla://")
    else:
        dist.init_process_group(backend)  # env:// from torchrun's MASTER_ADDR/PORT, RANK, WORLD_SIZE
    if dist.get_world_size() != rank.world_size:
        # torch-xla's CPU client (PJRT_DEVICE=CPU) has no cross-process collectives: under torchrun
        # every process gets its own world of one device, so gradients would silently not average.
        raise RuntimeError(
            f"the {backend!r} process group has world size {dist.get_world_size()} (this process is "
            f"rank {dist.get_rank()}) but torchrun started {rank.world_size} processes: with "
            f"PJRT_DEVICE={os.environ.get('PJRT_DEVICE')} torch-xla cannot join processes (its CPU "
            "backend is single-process). Use num_devices=1 on the CPU, or NeuronCores"
        )
    rank.backend = backend


def eval_shard(n: int, rank: int, world_size: int) -> range:
    """Return rows rank, rank+W, rank+2W, ... of `n`: every evaluation row counted once, none repeated."""
    return range(rank, n, world_size)


def train_sampler(split, rank: Rank, seed: int) -> DistributedSampler:
    """Return the training sampler: one seeded permutation per epoch, rank r takes rows r, r+W, ..."""
    # Global batch k of W ranks is rows [k*W*B, (k+1)*W*B) of the permutation: the same rows a
    # single process with batch W*B and this sampler (world_size=1) sees at step k.
    return DistributedSampler(split, num_replicas=rank.world_size, rank=rank.rank, shuffle=True, seed=seed)


def reducer(world_size: int, device_type: str):
    """Return a function that sums a tensor over all ranks (None with one rank)."""
    if world_size == 1:
        return None
    if device_type == "xla":
        import torch_xla.core.xla_model as xm

        # counts are summed as float32 (exact below 2**24 rows), the dtype every XLA collective takes
        return lambda t: xm.all_reduce(xm.REDUCE_SUM, t.float()).to(t.dtype)

    def reduce(t: torch.Tensor) -> torch.Tensor:
        t = t.clone()
        dist.all_reduce(t, op=dist.ReduceOp.SUM)
        return t

    return reduce


def wrap(model: torch.nn.Module, rank: Rank, device_type: str) -> torch.nn.Module:
    """Return `model` in DDP (CPU, CUDA); unchanged on XLA, where fit all-reduces the gradients itself."""
    if rank.world_size == 1 or device_type == "xla":
        return model
    from torch.nn.parallel import DistributedDataParallel as DDP

    return DDP(model, device_ids=[rank.local_rank] if device_type == "cuda" else None)


def shard_check(sampler, rank: Rank, device_type: str) -> dict:
    """Return rows per rank and rows seen by more than one rank in epoch 0 (gathered from every rank)."""
    if device_type == "xla":
        return {"status": "not checked on the xla process group (no object collectives)"}
    sampler.set_epoch(0)
    mine = list(sampler)
    gathered: list = [None] * rank.world_size
    dist.all_gather_object(gathered, mine)
    rows = [len(g) for g in gathered]
    return {
        "rows_per_rank": rows,
        "overlap_rows": sum(rows) - len(set().union(*map(set, gathered))),
        "padded_rows": sum(rows) - len(sampler.dataset),
    }  # DistributedSampler repeats rows to even out


def allreduce_share(model: torch.nn.Module, step_s: float | None, device_type: str) -> dict:
    """Return the gradient all-reduce time and its share of the median step, from DDP's own timers."""
    if not hasattr(model, "_get_ddp_logging_data"):
        reason = "inside the compiled XLA graph: see neuron-profile" if device_type == "xla" else "no DDP wrapper"
        return {"status": None, "reason": reason}
    try:
        data = model._get_ddp_logging_data()  # a private API: sampled iterations, times in ns
    except (AttributeError, RuntimeError) as err:
        return {"status": None, "reason": f"DDP logging data unavailable ({err})"}
    comm_s = data.get("avg_backward_comm_time", 0) / 1e9
    if not comm_s or not step_s:
        return {"status": None, "reason": "DDP recorded no sampled iteration"}
    return {
        "source": "DistributedDataParallel._get_ddp_logging_data (sampled steps)",
        "comm_s": comm_s,
        "overlap_with_backward_s": data.get("avg_backward_compute_comm_overlap_time", 0) / 1e9,
        "backward_compute_s": data.get("avg_backward_compute_time", 0) / 1e9,
        "share_of_step": comm_s / step_s,
    }
