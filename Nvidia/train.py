"""Fine-tune BERT on dair-ai/emotion on an NVIDIA GPU, or the CPU where torch sees none: the CUDA recipe.

    python Nvidia/train.py --model_name minilm --batch 32 --max_length 64       # --help lists every argument
    torchrun --nproc_per_node=8 Nvidia/train.py --num_devices 8 ...            # data parallel: DDP over NCCL

`train(args)` is the whole run on one screen: bf16 autocast (fp16 with GradScaler on a T4), an eager, compiled or
CUDA-graphed step, the batch on the device, one device sync per timing window. Measurement is a few calls into
helpers; the record is written in `finally`, however the run ends, and `train` returns it.
"""

import contextlib
import sys
import time

import torch

from helpers import (
    arguments,
    data,
    ddp,
    devices,
    energy,
    evaluation,
    memory,
    models,
    monitor,
    optim,
    peaks,
    precision,
    profile,
    record,
    timing,
    tokens,
)


def train(args: arguments.NvidiaArgs) -> dict:
    """Train once as `args` say; return the record written (every status, a failure's too)."""
    t0, rank = time.perf_counter(), ddp.join("nccl" if torch.cuda.is_available() else "gloo", args.num_devices)
    cuda = args.device in ("auto", "cuda") and torch.cuda.is_available()
    if args.device == "cuda" and not cuda:
        raise arguments.ConfigError("device='cuda' but torch sees no CUDA GPU (CUDA_VISIBLE_DEVICES, the driver?)")
    dev = devices.cuda_device() if cuda else devices.cpu_device()
    choice = precision.choose(args.precision, dev)
    args.check_device(dev.type, choice.used, models.config(args.model_name).max_position_embeddings)
    rec = record.start(args.name(), args.flat(), args.given, dev.section(), args.suite)
    rec.precision, path = choice.section(), record.base_path(args.results_path, args.suite, args.name(), dev.key)
    record.check_folder(path.parent)  # before anything is built: a full disk is said now, not after training
    lead = rank is None or rank.rank == 0
    try:
        tok, splits = tokens.tokenize(rec, args, data.load(rec, args))
        model = models.build(rec, args, choice.used).to(dev.torch_device)
        loader = tokens.train_loader(splits["train"], args, tok, rank, drop_last=args.step_mode != "eager")
        if args.data_on_device:  # one copy of the split; each batch sliced on the device in the loader's order
            loader = tokens.DeviceBatches(splits["train"], args, tok, rank, args.step_mode != "eager", dev.torch_device)
        opt, steps = optim.adamw(model, args, dev.type, choice.used), optim.total_steps(args, len(loader))
        sched = optim.schedule(opt, steps, args.warmup_ratio)
        step_model, update = torch.nn.parallel.DistributedDataParallel(model) if rank else model, None
        if args.step_mode != "eager":  # two graphs: the forward-backward, and the clip + AdamW update
            step_model, update = optim.compiled_step(step_model, opt, args.max_grad_norm, args.step_mode)
        scaler = torch.amp.GradScaler(dev.type, enabled=choice.used == "fp16")  # fp16 underflows without it
        evaluator = evaluation.Evaluator(splits, tok, args, dev, choice.used)
        memory.reset_peak(dev.type)
        meters = (monitor.start(dev.type), energy.start(dev.type, rank)) if rank is None or rank.local_rank == 0 else ()
        profiler = profile.Profiler(dev.type, args, path) if cuda or args.profile else None  # CUDA: the busy share
        sync = torch.cuda.synchronize if cuda else lambda: None
        show = ("bar" if args.progress else "lines") if lead else "none"  # lines: papermill's log, torchrun
        timer = timing.Timer(
            sync, args.timing_warmup_steps, args.log_every, profiler, meters, "events" if cuda else "host", steps, show
        )
        graphs_before = torch._dynamo.utils.counters["stats"]["unique_graphs"]
        model.train()  # from_pretrained returns it in eval mode: dropout off
        for batch, micro, last in tokens.steps(loader, args.gradient_accumulation_steps, steps, args.epochs):
            if micro == 0:
                timer.start_step()
                if args.step_mode == "cudagraphs":  # the graphs' outputs of the last step may be overwritten now
                    torch.compiler.cudagraph_mark_step_begin()
            batch = {k: v.to(dev.torch_device, non_blocking=True) for k, v in batch.items()}
            if cuda:  # a 4D mask transformers never reads back (a sync); a CPU reads it free, and drops an all-ones one
                batch = models.static_mask(model, batch)
            no_sync = step_model.no_sync() if rank and not last else contextlib.nullcontext()  # all-reduce once
            with no_sync, precision.autocast(choice.used, dev.type):
                loss = step_model(**batch).loss / args.gradient_accumulation_steps
            scaler.scale(loss).backward()
            timer.micro_batch(batch["input_ids"].shape, loss.detach())
            if not last:
                continue
            if update is not None:
                update()  # clip and AdamW as one compiled graph
            else:
                scaler.unscale_(opt)
                if args.max_grad_norm:
                    torch.nn.utils.clip_grad_norm_(model.parameters(), args.max_grad_norm)
                scaler.step(opt)  # skipped where fp16 gradients overflowed
                scaler.update()
            sched.step()
            opt.zero_grad(set_to_none=True)
            window = timer.end_step()  # a window closed: one device sync, the mean loss read once
            if window and not timer.check(rec, window, args.diverge_factor):
                break  # diverged: the record says at which step and why
            if args.eval_every and timer.steps % args.eval_every == 0:
                with timer.paused():  # outside every timed window
                    point = evaluator.curve_point(rec, model, timer, t0)
                if args.stop_at_accuracy and point.val_accuracy >= args.stop_at_accuracy:
                    rec.stopped_early = f"validation accuracy {point.val_accuracy:.2%} at step {timer.steps}"
                    break
        timer.finish(rec, meters, skipped=timer.steps - optim.steps_taken(opt), world=rank.world_size if rank else 1)
        if args.step_mode != "eager":  # graphs made while training; CUDA graphs torch fell back from, silently
            counters = torch._dynamo.utils.counters
            rec.shapes.compiled_graphs = counters["stats"]["unique_graphs"] - graphs_before
            rec.shapes.cudagraph_skips = sum(
                counters["inductor"][k] for k in counters["inductor"] if "cudagraph_skip" in k
            )
        evaluator.final(rec, model, rank, ddp.reducer(rank, dev.type))
        if dev.type == "cpu":  # the roof the report's MFU divides by, once per machine: after training, which it slows
            peaks.ensure_cpu_roof(dev, choice.compute_dtype, path, rec)
        if rank:
            rec.distributed = ddp.section(rank, args, rec.timing, step_model)
        if args.save_dir and lead:
            models.save(rec, model, tok, args.save_dir)
        rec.status = "diverged" if rec.status == "diverged" else "finished"
    except BaseException as err:  # recorded, never lost, then raised: a notebook shows it, torchrun stops the ranks
        record.failed(rec, err)
        raise
    finally:
        rec.memory, rec.world_size = memory.peak(dev.type), rank.world_size if rank else 1
        written = record.finish(rec, path, t0, lead)
    return written


if __name__ == "__main__":
    train(arguments.from_cli(sys.argv[1:], arguments.NvidiaArgs))
