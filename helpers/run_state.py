"""A run in progress, passed from step to step: arguments, device, precision, record, what each step hands on."""

from __future__ import annotations

import functools
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from helpers.measure.xla import CompileLog
from helpers.run.args import RunArgs
from helpers.run.ddp import Rank
from helpers.run.device import DeviceInfo
from helpers.run.records import failure_status
from helpers.run.schema import RunRecord
from helpers.run.train import FitResult


@dataclass(slots=True)  # slots: a misspelled field set by a step is refused (AttributeError), never added
class Run:
    """A run in progress: its arguments, device, precision, its record as the steps fill it, and where it reports."""

    args: RunArgs
    name: str
    dev: DeviceInfo
    precision: str
    compute_dtype: str  # what the matmuls run in (the precision choice's): the peak MFU is taken against
    record: RunRecord  # started by steps.start; each step sets its sections (checked as set); finish completes it
    record_path: Path
    model_config: object
    tokenizer: object = None
    rank: Rank | None = None  # this process's place in a torchrun launch (None: one process)
    fit: FitResult | None = None
    compiles: CompileLog | None = None  # XLA only
    step_model: torch.nn.Module | None = None  # what trained: the model, compiled or in DDP
    handover: dict | None = None  # the record of the torchrun launch that ran this run instead
    started_s: float = field(default_factory=time.perf_counter)  # perf_counter at start(): the phases' clock
    startup_s: float = 0.0  # process start -> start(); 0 for a later run of the same process
    eval_batches: dict = field(default_factory=dict)  # split -> its evaluation batches, built once per run
    # the latest periodic evaluation of the whole validation split: (its step, its metrics), which the final
    # evaluation reuses when training ended at that step (the same weights)
    last_validation: tuple[int, dict] | None = None
    shards: dict | None = None  # torchrun ranks: the shard check of the training sampler
    outcome: str | None = None  # how training ended (finished, diverged, oom...); None before it ends
    error: str | None = None
    claim: Path | None = None  # the exclusive claim on the record's name, released by finish
    finished: dict | None = None  # the record as written, once finish has written it

    @property
    def lead(self) -> bool:
        """True on the process that shows progress and writes the record (rank 0, or the only one)."""
        return self.rank is None or self.rank.rank == 0


def ranks_did(result: Callable[[Run], Any] = lambda run: None):
    """Make a step say that torchrun's ranks did it and return `result(run)` when the run was handed over."""

    def decorate(step: Callable) -> Callable:
        @functools.wraps(step)
        def guarded(run: Run, *args, **kwargs):
            if run.handover is None:
                return step(run, *args, **kwargs)
            print(
                f"{step.__name__}: done by the {run.args.train.num_devices} torchrun ranks (their output is "
                f"above); record: {run.record_path}"
            )
            return result(run)

        return guarded

    return decorate


def record_failures_in_notebook(run: Run, finish: Callable[..., dict], on: bool = True) -> None:
    """In a notebook, make an exception in any later cell write the run's failure record first."""
    try:
        shell = get_ipython()  # noqa: F821 - defined only inside IPython
    except NameError:
        return
    if not on:
        shell.set_custom_exc((), None)
        return

    def record_then_show(self, etype, value, tb, tb_offset=None):
        if run.finished is None:
            text = f"{etype.__name__}: {value}"
            interrupted = issubclass(etype, KeyboardInterrupt)  # the kernel's interrupt (SIGINT) mid-cell
            finish(
                run,
                "interrupted" if interrupted else failure_status(text),
                f"{etype.__name__}: the run was interrupted (SIGINT: the kernel's interrupt)" if interrupted else text,
            )
            print(
                f"the run's {'interruption' if interrupted else 'failure'} is recorded in {run.record_path}",
                file=sys.stderr,
            )
        self.showtraceback((etype, value, tb), tb_offset=tb_offset)

    shell.set_custom_exc((Exception, KeyboardInterrupt), record_then_show)
