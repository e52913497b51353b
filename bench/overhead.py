"""Harness overhead: the platform's loop (Nvidia/train.py: its timer, monitor, meters, record) against a bare loop.

The bare loop is the bench's measuring stick, not a copy of the platform's: nanoGPT's loop over the same model,
batches, optimizer, schedule and step mode, built by the same helpers, with the batches already on the device and
nothing measured but its clock. Each round trains both from a fresh model (each compiles its own graphs, outside
the clock); a run's figure is its steady samples/s over the steps after the same warm-up.
"""

from __future__ import annotations

import time

import torch

from bench import rounds
from helpers import arguments, data, devices, models, optim, precision, record, tokens
from Nvidia import train

LOOP, BARE = "loop (Nvidia/train.py)", "bare loop"
GOAL = 0.97  # the loop at least this share of the bare loop's samples/s (the GPU goal: of the bare graphed loop)


def loop_args(values: dict, warmup: int, steps: int, cuda: bool) -> arguments.NvidiaArgs:
    """Return the loop's arguments for one run: `warmup` steps (and the profiled ones), then `steps` in one window."""
    base = {**values, "timing_warmup_steps": warmup, "log_every": steps, "epochs": 1, "progress": False}
    args = arguments.build(base, arguments.NvidiaArgs)
    total = warmup + (args.profile_steps if cuda or args.profile else 0) + steps  # CUDA: the busy share's steps
    rows = {"train_subset": total * args.batch, "max_steps": total, "eval_subset": args.batch, "shuffle_subset": True}
    return arguments.build(base | rows, arguments.NvidiaArgs)


def loop(args: arguments.NvidiaArgs) -> dict:
    """Train once through the platform's loop; return its steady samples/s from the record it wrote."""
    rec = train.train(args)
    t = rec["timing"]
    shapes = rec["shapes"] or {}
    return {
        "samples": t["samples_per_s"],
        "seconds": t["steady_time_s"],
        "precision": rec["precision"]["used"],
        "cudagraph_skips": shapes.get("cudagraph_skips"),  # CUDA graphs torch fell back from, silently
        "loss": rec["metrics"]["loss_curve"][-1][1],  # the steady window's mean loss: the same work as the bare loop's
    }


def bare(args: arguments.NvidiaArgs, steps: int) -> dict:
    """Train nanoGPT's way on `args`' model, batches, optimizer and step mode; return its last `steps`' samples/s."""
    dev = devices.cuda_device() if args.device == "cuda" else devices.cpu_device()
    used, rec = precision.choose(args.precision, dev).used, record.RunRecord(run_name="bare-loop")
    tok, splits = tokens.tokenize(rec, args, data.load(rec, args))
    model = models.build(rec, args, used).to(dev.torch_device)
    loader = tokens.train_loader(splits["train"], args, tok, drop_last=args.step_mode != "eager")
    batches = [{k: v.to(dev.torch_device) for k, v in b.items()} for b in loader]
    if dev.type == "cuda":  # as the loop: a 4D mask on CUDA only (a CPU drops an all-ones mask: a faster kernel)
        batches = [models.static_mask(model, b) for b in batches]
    opt = optim.adamw(model, args, dev.type, used)
    sched = optim.schedule(opt, len(batches), args.warmup_ratio)
    step_model, update = model, None
    if args.step_mode != "eager":
        step_model, update = optim.compiled_step(model, opt, args.max_grad_norm, args.step_mode)
    scaler = torch.amp.GradScaler(dev.type, enabled=used == "fp16")
    sync, losses = torch.cuda.synchronize if dev.type == "cuda" else lambda: None, []
    model.train()  # as the loop: dropout on
    for i, batch in enumerate(batches):
        if i == len(batches) - steps:
            sync()
            t0 = time.perf_counter()
        if args.step_mode == "cudagraphs":
            torch.compiler.cudagraph_mark_step_begin()
        with precision.autocast(used, dev.type):
            loss = step_model(**batch).loss
        scaler.scale(loss).backward()
        losses.append(loss.detach().clone())  # a copy: a CUDA graph's output is overwritten by its next replay
        if update is not None:
            update()
        else:
            scaler.unscale_(opt)
            if args.max_grad_norm:
                torch.nn.utils.clip_grad_norm_(model.parameters(), args.max_grad_norm)
            scaler.step(opt)
            scaler.update()
        sched.step()
        opt.zero_grad(set_to_none=True)
    sync()
    seconds = time.perf_counter() - t0
    loss = float(torch.stack(losses[-steps:]).mean())  # read after the clock stopped
    return {"samples": steps * args.batch / seconds, "seconds": seconds, "precision": used, "loss": loss}


def fresh(run, *args) -> dict:
    """Return `run(*args)` after dropping every compiled graph: each run compiles its own, as a user's would."""
    torch._dynamo.reset()
    return run(*args)


def section(values: dict, warmup: int, steps: int, n_rounds: int, gate=None) -> dict:
    """Return the loop's and the bare loop's steady samples/s, one run of each a round, and how they ran."""
    args = loop_args(values, warmup, steps, values.get("device") == "cuda")
    runs = {LOOP: lambda r: fresh(loop, args), BARE: lambda r: fresh(bare, args, steps)}
    results = rounds.alternate(runs, n_rounds, gate)
    return {"config": args.flat(), "steps_per_window": steps, "warmup_steps": warmup, "rates": results}
