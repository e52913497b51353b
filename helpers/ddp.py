"""Data parallel inside one torchrun process: joining the process group, summing across ranks, what the record keeps.

torchrun starts one process per device (`torchrun --nproc_per_node=N Nvidia/train.py ...`); each trains on its own
shard (DistributedSampler, helpers.tokens) and rank 0 writes the record.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist

from helpers import record
from helpers.arguments import ConfigError


@dataclass
class Rank:
    """This process's place in a torchrun launch."""

    rank: int
    world_size: int
    local_rank: int
    nodes: int = 1


def join(backend: str, num_devices: int) -> Rank | None:
    """Join torchrun's process group over `backend` (nccl, gloo, xla); None outside torchrun (refused if > 1 asked)."""
    if "WORLD_SIZE" not in os.environ:
        if num_devices > 1:
            raise ConfigError(
                f"num_devices={num_devices}: start one process per device with torchrun (the notebook does)"
            )
        return None
    world, local = int(os.environ["WORLD_SIZE"]), int(os.environ["LOCAL_RANK"])
    rank = Rank(int(os.environ["RANK"]), world, local, world // max(int(os.environ.get("LOCAL_WORLD_SIZE", world)), 1))
    if backend == "nccl":
        torch.cuda.set_device(local)
    if backend == "xla":
        import torch_xla.distributed.xla_backend  # noqa: F401 - registers the "xla" backend

        dist.init_process_group("xla", init_method="xla://")
    else:
        dist.init_process_group(backend)
    if dist.get_world_size() != world:  # torch-xla's CPU backend cannot join processes: each is a world of one
        raise RuntimeError(f"the {backend} process group has {dist.get_world_size()} ranks, torchrun started {world}")
    return rank


def reducer(rank: Rank | None, device_type: str):
    """Return a function that sums a tensor over all ranks (None with one process)."""
    if rank is None or rank.world_size == 1:
        return None
    if device_type == "xla":
        import torch_xla.core.xla_model as xm

        return lambda t: xm.all_reduce(xm.REDUCE_SUM, t.float()).to(t.dtype)  # XLA collectives take float32

    def reduce(t: torch.Tensor) -> torch.Tensor:
        t = t.clone()
        dist.all_reduce(t)
        return t

    return reduce


def section(rank: Rank, args, timing: record.Timing | None, model) -> record.Distributed:
    """Return the record's `distributed` section: ranks, batches, rates and the all-reduce's share of a step."""
    allreduce = record.AllReduce(reason="inside the compiled XLA graph (a device profile shows it)")
    if hasattr(model, "_get_ddp_logging_data") and timing and timing.step_time_median_s:
        data = model._get_ddp_logging_data()  # a private API: sampled iterations, times in ns
        comm_s = data.get("avg_backward_comm_time", 0) / 1e9
        allreduce = record.AllReduce(
            source="DistributedDataParallel._get_ddp_logging_data (sampled steps)",
            comm_s=comm_s,
            overlap_with_backward_s=data.get("avg_backward_compute_comm_overlap_time", 0) / 1e9,
            backward_compute_s=data.get("avg_backward_compute_time", 0) / 1e9,
            share_of_step=comm_s / timing.step_time_median_s,
        )
    return record.Distributed(
        world_size=rank.world_size,
        nodes=rank.nodes,
        backend=dist.get_backend() if dist.is_initialized() else None,
        per_device_batch=args.batch,
        global_batch=args.batch * rank.world_size,
        global_samples_per_s=timing.samples_per_s if timing else None,
        per_device_samples_per_s=timing.samples_per_s_per_device if timing else None,
        allreduce=allreduce,
    )
