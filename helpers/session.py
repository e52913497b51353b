"""A run in progress: its arguments, device, precision, record, and what each step hands to the next.

helpers/steps.py and helpers/training.py pass a Run from step to step; every field is typed (no
string-keyed side channel), and `handover` marks a run that torchrun's ranks ran instead.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import torch

from helpers.measure.xla import CompileLog
from helpers.run.args import RunArgs
from helpers.run.ddp import Rank
from helpers.run.device import DeviceInfo
from helpers.run.train import FitResult


@dataclass
class Run:
    """A run in progress: its arguments, device, precision, record and what the steps hand on."""

    args: RunArgs
    name: str
    dev: DeviceInfo
    precision: str
    record: dict
    record_path: Path
    model_config: object
    tokenizer: object = None
    rank: Rank | None = None  # this process's place in a torchrun launch (None: one process)
    fit: FitResult | None = None
    timing: dict | None = None
    compiles: CompileLog | None = None  # XLA only
    step_model: torch.nn.Module | None = None  # what trained: the model, compiled or in DDP
    handover: dict | None = None  # the record of the torchrun launch that ran this run instead
    curve: list[dict] = field(default_factory=list)  # periodic validation: time to accuracy

    @property
    def lead(self) -> bool:
        """True on the process that shows progress and writes the record (rank 0, or the only one)."""
        return self.rank is None or self.rank.rank == 0


def handed_over(run: Run, step: str) -> bool:
    """Say (once per step) that torchrun's ranks did `step`; True when the run was handed over."""
    if run.handover is not None:
        print(f"{step}: done by the {run.args.train.num_devices} torchrun ranks (their output is above); "
              f"record: {run.record_path}")
    return run.handover is not None
