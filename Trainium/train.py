"""Fine-tune BERT on dair-ai/emotion on AWS Trainium with torch-xla (torch-xla's CPU backend where there is no Neuron).

    python Trainium/train.py --model_name minilm --batch 8 --max_length 64      # --help lists every argument
    torchrun --nproc_per_node=2 Trainium/train.py --num_devices 2 ...          # both NeuronCores of a trn1.2xlarge
    neuron_parallel_compile python Trainium/train.py ... --max_steps 10        # fill the compile cache first

`train(args)` is the XLA recipe as the Neuron docs teach it: the compiler's flags set before torch_xla starts, static
shapes (static padding, the short last batch dropped), the device loader copying batches while a step runs, the
gradients all-reduced across replicas, one graph cut (`torch_xla.sync()`) per step, and the compilations counted.
The record is written in `finally`, however the run ends, and `train` returns it.
"""

import importlib.util
import os
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
    precision,
    profile,
    record,
    timing,
    tokens,
    xla,
)


def train(args: arguments.TrainiumArgs) -> dict:
    """Train once as `args` say; return the record written (every status, a failure's too)."""
    t0, neuron = time.perf_counter(), importlib.util.find_spec("torch_neuronx") is not None
    os.environ.update(xla.environment(args, neuron))  # read once, when torch_xla starts: before its import
    import torch_xla
    import torch_xla.core.xla_model as xm
    from torch_xla.distributed.parallel_loader import MpDeviceLoader

    rank, dev = ddp.join("xla", args.num_devices), devices.xla_device(neuron)
    choice = precision.choose(args.precision, dev, args.bf16_mode, args.extra_cc_flags)
    args.check_device(dev.type, choice.used, models.config(args.model_name).max_position_embeddings)
    rec = record.start(args.name(), args.flat(), args.given, dev.section(), args.suite)
    rec.precision, path = choice.section(), record.base_path(args.results_path, args.suite, args.name(), dev.key)
    record.check_folder(path.parent)  # before anything compiles: a full disk is said now, not after training
    lead, compiles = rank is None or rank.rank == 0, xla.CompileLog(args, neuron)
    try:
        if args.padding == "dynamic":
            print("padding='dynamic' on XLA: every new batch shape compiles a graph (minutes each on Neuron)")
        tok, splits = tokens.tokenize(rec, args, data.load(rec, args))
        model = models.build(rec, args, choice.used)
        if args.gradient_checkpointing:  # torch.utils.checkpoint cannot find an RNG for XLA: torch_xla's own
            models.xla_checkpointing(model)
        model = model.to(torch_xla.device())
        loader = tokens.train_loader(splits["train"], args, tok, rank, drop_last=True)  # static shapes only
        # batches copied to the device while a step runs; the loop cuts the graph itself, once per optimizer step
        device_loader = MpDeviceLoader(loader, torch_xla.device(), batches_per_execution=sys.maxsize)
        opt = optim.XlaAdamW(optim.llrd_groups(model, args), lr=args.lr)  # fused AdamW fails on XLA
        steps = optim.total_steps(args, len(loader))
        sched = optim.schedule(opt, steps, args.warmup_ratio)
        evaluator = evaluation.Evaluator(splits, tok, args, dev, choice.used, sync=torch_xla.sync, fixed_rows=True)
        memory.reset_peak(dev.type)
        meters = (monitor.start(dev.type), energy.start(dev.type, rank)) if rank is None or rank.local_rank == 0 else ()
        profiler = profile.Profiler(dev.type, args, path) if args.profile else None
        show = ("bar" if args.progress else "lines") if lead else "none"  # lines: papermill's log, torchrun
        sync = lambda: (torch_xla.sync(), xm.wait_device_ops())  # the graph cut, then the device waited on
        timer = timing.Timer(sync, args.timing_warmup_steps, args.log_every, profiler, meters, "window", steps, show)
        model.train()
        batches = compiles.wrap(device_loader)
        for batch, micro, last in tokens.steps(batches, args.gradient_accumulation_steps, steps, args.epochs):
            if micro == 0:
                timer.start_step()
            with precision.autocast(choice.used, "xla"):
                loss = model(**models.static_mask(model, batch)).loss / args.gradient_accumulation_steps
            loss.backward()
            timer.micro_batch(batch["input_ids"].shape, loss.detach())
            if not last:
                continue
            xm.reduce_gradients(opt)  # all-reduce (mean) across replicas, a no-op with one: clipping sees the mean
            if args.max_grad_norm:
                torch.nn.utils.clip_grad_norm_(model.parameters(), args.max_grad_norm)
            opt.step()
            sched.step()
            opt.zero_grad(set_to_none=True)
            torch_xla.sync()  # the graph cut: one compiled graph per step shape, run while the host goes on
            window = timer.end_step()  # a window closed: the device waited on, the mean loss read once
            if window and not timer.check(rec, window, args.diverge_factor):
                break
            if args.eval_every and timer.steps % args.eval_every == 0:
                with compiles.evaluating(), timer.paused():  # its graphs are evaluation's, not a step's
                    point = evaluator.curve_point(rec, model, timer, t0)
                if args.stop_at_accuracy and point.val_accuracy >= args.stop_at_accuracy:
                    rec.stopped_early = f"validation accuracy {point.val_accuracy:.2%} at step {timer.steps}"
                    break
        timer.finish(rec, meters, skipped=0, world=rank.world_size if rank else 1)
        compiles.mark("train_end")
        evaluator.final(rec, model, rank, ddp.reducer(rank, "xla"))
        rec.xla = compiles.section(
            args.timing_warmup_steps * args.gradient_accumulation_steps, rec.timing, len(timer.shapes)
        )
        if rank:
            rec.distributed = ddp.section(rank, args, rec.timing, model)
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


def precompile_command(args: arguments.TrainiumArgs, steps: int = 10) -> list[str]:
    """Return the command that fills the Neuron compile cache: Neuron's tool over a short trial of this run."""
    trial = [*arguments.to_cli(args), f"--max_steps={steps}", "--results_path=/tmp/accelbench-precompile"]
    return ["neuron_parallel_compile", sys.executable, __file__, *trial]


if __name__ == "__main__":
    train(arguments.from_cli(sys.argv[1:], arguments.TrainiumArgs))
