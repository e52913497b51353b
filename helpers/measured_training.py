"""Training with its measurement around the loop (timing, utilization, energy, profile, time to accuracy), and the
loaders, optimizer and schedule it steps with (prepare_training, which the benchmark reuses)."""

from __future__ import annotations

import contextlib
import math
import time
from dataclasses import dataclass

import torch

import helpers.run.train
from helpers.calc.accuracy_time import crossings, describe
from helpers.calc.job_cost import samples_per_joule
from helpers.calc.roofline import device_peak
from helpers.measure import peak_memory, timing
from helpers.measure.energy_meter import node_totals, start_energy, sum_nodes
from helpers.measure.monitor import start_monitor
from helpers.measure.profile import StepProfiler
from helpers.run import ddp, device, inference, optim, records, schema, tokens
from helpers.run.paths import repo_path
from helpers.run_state import Run, ranks_did

HEADLINE = 0.90  # the target the headline (and make baseline) reports: time to 90% validation accuracy


class NotMeasured:
    """Stands in for a monitor or meter this process does not run: stop() says why, never 0."""

    def __init__(self, section: type[schema.Section], reason: str):
        self.section, self.reason = section, reason

    def mark_steady(self) -> None:
        """Nothing to mark."""

    def stop(self) -> schema.Section:
        """Return the section with the reason in place of figures."""
        return self.section(reason=self.reason)


@dataclass
class Training:
    """What train() runs: the loader, optimizer, schedule and the model as it steps (compiled, in DDP)."""

    loader: object
    sampler: object
    optimizer: torch.optim.Optimizer
    scheduler: object
    step_model: torch.nn.Module


def drops_last(run: Run) -> bool:
    """Return whether training leaves out a short last batch: static graphs (XLA, a compiled step) would add one."""
    return run.dev.type == "xla" or run.args.train.step_mode != "eager"


def prepare_training(run: Run, model: torch.nn.Module, splits) -> Training:
    """Return the loader, optimizer, schedule and stepping model of the run (the benchmark reuses it)."""
    t, tr = run.args.task, run.args.train
    sampler = ddp.train_sampler(splits["train"], run.rank, tr.seed) if run.rank else None
    if run.rank:
        run.shards = ddp.shard_check(sampler, run.rank, run.dev.type)
    if t.group_by_length and sampler is None:
        sampler = tokens.length_grouped_sampler(splits["train"], tr.batch, tr.seed)
    compiled = tr.step_mode != "eager"
    drop_last = drops_last(run)
    if tr.data_on_device:
        order = tokens.row_order(splits["train"], tr.batch, tr.seed, drop_last=drop_last, sampler=sampler)
        static = t.max_length if t.padding == "static" else None
        pad_id = run.tokenizer.pad_token_id
        loader = tokens.DeviceBatches(
            splits["train"], order, run.dev.torch_device, pad_id, static, t.pad_to_multiple_of
        )
    else:
        collate = tokens.collator(run.tokenizer, t.padding, t.pad_to_multiple_of)
        loader = tokens.loader(
            splits["train"],
            tr.batch,
            collate,
            shuffle=True,
            seed=tr.seed,
            drop_last=drop_last,
            sampler=sampler,
            pin_memory=run.dev.type == "cuda",
        )
    steps = min(tr.max_steps or math.inf, len(loader) // tr.gradient_accumulation_steps * tr.epochs)
    optimizer = optim.build_optimizer(
        model, tr.lr, tr.llrd_decay, tr.weight_decay, tr.optim, run.dev.type, run.precision, lr_on_device=compiled
    )
    scheduler = optim.build_scheduler(optimizer, steps, tr.warmup_ratio)
    step_model = ddp.wrap(model, run.rank, run.dev.type) if run.rank else model
    if tr.compile:
        step_model = torch.compile(step_model, backend="openxla" if run.dev.type == "xla" else "inductor")
    if compiled:  # the forward and backward; fit compiles the update (train.compiled_update)
        step_model = helpers.run.train.compile_model(step_model, tr.step_mode)
    return Training(device.device_loader(loader, run.dev), sampler, optimizer, scheduler, step_model)


# padded tokens per evaluation batch off XLA, by device type: on a CPU 64 rows at L=64 (timed paired on a Zen 5
# EPYC, the whole validation split sorted by length: 1.30x the speed of 256 rows, 1.18x of 128, 1.07x of 32);
# elsewhere 256 rows at L=64, 32 at L=512. No backward: a batch holds one layer's activations at a time
EVAL_TOKENS = {"cpu": 4_096}
EVAL_TOKENS_ELSEWHERE = 16_384


@dataclass
class EvalBatches:
    """A split's evaluation batches, collated once, rows sorted by token length (longest first)."""

    batches: list[dict]
    batch_size: int  # rows a batch; the last one may be short
    rows: list[list[int]]  # the row indices of each batch

    def __iter__(self):
        return iter(self.batches)

    def __len__(self) -> int:
        return len(self.batches)


def eval_rows_per_batch(run: Run) -> int:
    """Return the rows of an evaluation batch: the device type's EVAL_TOKENS at max_length, at least the batch."""
    tr, t = run.args.train, run.args.task
    if run.dev.type == "xla":
        return max(tr.batch, 32)  # the evaluation graphs sweep.graphs counts
    return max(tr.batch, EVAL_TOKENS.get(run.dev.type, EVAL_TOKENS_ELSEWHERE) // t.max_length)


def by_length(lengths: list[int], indices: list[int], rows: int) -> list[list[int]]:
    """Return `indices` cut into batches of `rows`, sorted by their `lengths` (longest first; ties keep the order)."""
    ordered = sorted(indices, key=lambda i: -lengths[i])
    return [ordered[k : k + rows] for k in range(0, len(ordered), rows)]


def eval_loader(run: Run, split, sampler=None, rows: int | None = None) -> EvalBatches:
    """Return the split's evaluation batches (`sampler`'s rows, else all) with the training padding."""
    t = run.args.task
    collate = tokens.collator(run.tokenizer, t.padding, t.pad_to_multiple_of)
    lengths = [len(ids) for ids in split["input_ids"]]
    rows = rows or eval_rows_per_batch(run)
    cut = by_length(lengths, list(sampler) if sampler is not None else list(range(len(split))), rows)
    return EvalBatches([collate(split.__getitems__(chunk)) for chunk in cut], rows, cut)


def eval_settings(run: Run, model: torch.nn.Module) -> inference.EvalSettings:
    """Return how the run evaluates (inference.choose) and set the record's `evaluation` section to it."""
    settings = inference.choose(run.precision, run.dev.type, run.dev.cpu_capability)
    section = inference.describe(model, settings, run.precision, run.dev.type, eval_rows_per_batch(run))
    run.record.evaluation = schema.Evaluation(**section)
    return settings


def eval_batches(run: Run, name: str, split, sampler=None) -> EvalBatches:
    """Return split `name`'s evaluation batches, built on the run's first evaluation of it and kept."""
    key = (name, len(split), sampler is not None)  # a rank's shard (final evaluation) is not the whole split
    if key not in run.eval_batches:
        run.eval_batches[key] = eval_loader(run, split, sampler)
    return run.eval_batches[key]


@ranks_did()
def train(run: Run, model: torch.nn.Module, splits) -> helpers.run.train.FitResult:
    """Train with the run's timing, utilization, energy and profile around the loop; record what they measured."""
    m, tr = run.args.measure, run.args.train
    step_t0 = time.perf_counter()
    t = prepare_training(run, model, splits)
    run.step_model = t.step_model
    loader = run.compiles.wrap(t.loader) if run.compiles else t.loader
    per_step = {"cpu": "host", "cuda": "events", "xla": "window"}[run.dev.type]
    event = (lambda: torch.cuda.Event(enable_timing=True)) if run.dev.type == "cuda" else None
    roof_s = 0.0
    if run.dev.type == "cpu":  # the CPU roof MFU is held against: measured now, before the clock starts
        roof_s = _measure_roof(run)
        run.record.phases.probes = (run.record.phases.probes or 0.0) + roof_s
    peak_memory.reset_peak(run.dev.type)
    # one monitor and one energy meter per node (local rank 0); its meter reads every GPU of the node's ranks
    # (local rank i trains on cuda:i), RAPL and Neuron counters are node-wide already
    node_lead = run.rank is None or run.rank.local_rank == 0
    local_gpus = range(run.rank.world_size // run.rank.nodes) if run.rank else None
    monitor, energy = (
        (start_monitor(run.dev.type), start_energy(run.dev.type, cuda_devices=local_gpus))
        if node_lead
        else (
            NotMeasured(schema.Utilization, "measured by local rank 0 of this node"),
            NotMeasured(schema.Energy, "measured by local rank 0 of this node"),
        )
    )
    # the meter reads its counters where the timer opens and closes a window: energy over the timed windows;
    # the monitor keeps only what it sampled inside them
    timer = timing.StepTimer(
        lambda: device.synchronize(run.dev),
        m.timing_warmup_steps,
        m.log_every,
        per_step,
        event=event,
        watchers=(energy, monitor) if node_lead else (),
    )
    # on CUDA always: its kernels over profile_steps steady steps give the device's busy share (host-bound?)
    profiler = StepProfiler(
        (m.profile or run.dev.type == "cuda") and run.lead,
        repo_path(m.profile_dir) / run.name,
        warmup_steps=m.timing_warmup_steps,
        profile_steps=m.profile_steps,
        device_type=run.dev.type,
        kernels_only=not m.profile,
    )
    callbacks = [
        lambda step: monitor.mark_steady() if step == m.timing_warmup_steps else None,
        lambda step: profiler.step(),
    ]
    if m.eval_every:
        callbacks.append(_curve_callback(run, model, splits, timer))
    graphs_before = compiled_graphs()
    try:
        result = helpers.run.train.fit(
            t.step_model,
            loader,
            t.optimizer,
            t.scheduler,
            run.dev,
            run.precision,
            tr.epochs,
            timer=timer,
            max_steps=tr.max_steps,
            grad_accum=tr.gradient_accumulation_steps,
            max_grad_norm=tr.max_grad_norm,
            log_every=m.log_every,
            diverge_factor=m.diverge_factor,
            progress=m.progress and run.lead,
            log_lines=run.lead and not m.progress,
            callbacks=tuple(callbacks),
            sampler=t.sampler,
            step_mode=tr.step_mode,
        )
    except BaseException:  # stopped inside the loop (Ctrl-C, an error): its seconds are training's, not `other`'s
        run.record.phases.train = time.perf_counter() - step_t0 - roof_s
        raise
    finally:
        measured_energy = energy.stop()  # the sections are kept when the loop raises
        run.record.utilization, run.record.energy = monitor.stop(), measured_energy
        profiler.close()
        if run.compiles:
            run.compiles.mark("train_end")
    world = run.rank.world_size if run.rank else 1
    run.fit = result
    times = schema.Timing(**timer.summary(ranks=world), skipped_steps=result.skipped_steps)
    run.record.timing = times
    # the step's wall: the timed windows (train), the periodic evaluations, the roof probe, and the rest
    step_s = time.perf_counter() - step_t0
    phases = run.record.phases
    phases.train = times.train_time_s
    phases.periodic_eval = phases.periodic_eval or 0.0
    phases.train_other = max(0.0, step_s - times.train_time_s - phases.periodic_eval - roof_s)
    run.outcome, run.error = result.status, result.reason
    run.record.stopped_early = result.stopped_early
    run.record.energy = job_energy(run, measured_energy, node_lead)
    run.record.profile = profiler.summary()
    run.record.optimizer = schema.Optimizer(
        **{
            "class": f"{type(t.optimizer).__module__}.{type(t.optimizer).__qualname__}",
            "implementation": tr.optim,
            **{k: t.optimizer.defaults[k] for k in ("fused", "foreach") if t.optimizer.defaults.get(k)},
        }
    )
    run.record.shapes = schema.Shapes(
        distinct=len(result.shapes),
        counts={f"{b}x{length}": n for (b, length), n in sorted(result.shapes.items())},
        compiled_graphs=compiled_graphs() - graphs_before if tr.step_mode != "eager" else None,
    )
    if run.record.curve:
        run.record.time_to_accuracy = crossings(
            run.record.curve,
            compile_s=(run.compiles.section(0, None, None).compile_time_s if run.compiles else None),
        )
    run.record.metrics = schema.Metrics(
        final_loss=result.final_loss, loss_curve=result.loss_curve, diverged_at_step=result.diverged_at_step
    )
    rate = times.samples_per_s
    print(
        f"training: {result.status}, {result.steps} steps in {times.train_time_s:.1f} s"
        + (f", {rate:.1f} samples/s steady" if rate else "")
        + (f", final loss {result.final_loss:.4f}" if result.final_loss is not None else "")
        + (f" ({result.reason})" if result.reason else "")
        + (f"; stopped early: {result.stopped_early}" if result.stopped_early else "")
    )
    if run.record.curve:
        print("time to accuracy (validation): " + describe(run.record.time_to_accuracy))
    return result


def compiled_graphs() -> int:
    """Return the graphs torch.compile has made in this process so far."""
    from torch._dynamo.utils import counters

    return counters["stats"]["unique_graphs"]


def job_energy(run: Run, section: schema.Energy, node_lead: bool) -> schema.Energy:
    """Return the whole job's energy section over the steady windows: every node's joules, every rank's samples."""
    world = run.rank.world_size if run.rank else 1
    if run.rank is not None and run.rank.nodes > 1:  # each node lead metered its node: add them up
        dtype = torch.float32 if run.dev.type == "xla" else torch.float64  # XLA collectives take float32
        mine = torch.tensor(node_totals(section) if node_lead else [0.0] * 3, dtype=dtype, device=run.dev.torch_device)
        section = sum_nodes(section, ddp.reducer(world, run.dev.type)(mine).tolist(), run.rank.nodes)
    # the ranks step in lockstep: the job's steady samples are rank 0's times the ranks (as samples_per_s)
    samples = run.record.timing.steady_samples * world
    per_joule = samples_per_joule(samples, section.model_dump())
    return section.model_copy(update={"samples": samples, "samples_per_joule": per_joule})


def _measure_roof(run: Run) -> float:
    """Measure the CPU roof finish() reads (once per machine, dtype, threads; never fatal); return its seconds."""
    t0 = time.perf_counter()
    try:  # its random matrices are drawn from a forked RNG: a run measuring the roof trains as one reading it
        with torch.random.fork_rng():
            device_peak(run.dev.describe(), run.compute_dtype, records.peaks_dir(run.record_path))
    except Exception as err:  # noqa: BLE001 - finish records the reason when it cannot find a roof either
        print(f"the CPU roof could not be measured ({type(err).__name__}: {err}); MFU will say why")
    return time.perf_counter() - t0


def _curve_callback(run: Run, model, splits, timer):
    """Return the callback that evaluates `curve_rows` validation rows every `eval_every` steps, between windows."""
    m = run.args.measure
    n = len(splits["validation"]) if m.curve_rows is None else min(m.curve_rows, len(splits["validation"]))
    rows = splits["validation"] if n == len(splits["validation"]) else splits["validation"].select(range(n))

    def curve(step: int) -> None:
        if step % m.eval_every:
            return
        # the window's sync runs what the step left pending as a graph of its own, which only this pause
        # causes: evaluation's, so it is counted inside (a training step runs one graph)
        with run.compiles.evaluating() if run.compiles else contextlib.nullcontext():
            timer.close_window()
            _evaluate_point(step)

    def _evaluate_point(step: int) -> None:
        t0 = time.perf_counter()
        val = eval_batches(run, "validation", rows)  # built at the first evaluation, reused by the others
        settings = eval_settings(run, model)
        metrics = helpers.run.train.evaluate(
            model, val, run.dev, run.precision, rows_per_batch=val.batch_size, settings=settings
        )
        if rows is splits["validation"]:  # the whole split: what the final evaluation measures too
            run.last_validation = (step, metrics)
        test_accuracy = None  # the test split at the first crossing of 90%: the checkpoint time-to-90% names
        if metrics["accuracy"] >= HEADLINE and not any(p.val_accuracy >= HEADLINE for p in run.record.curve):
            test = eval_batches(run, "test", splits["test"])
            test_accuracy = helpers.run.train.evaluate(
                model, test, run.dev, run.precision, rows_per_batch=test.batch_size, settings=settings
            )["accuracy"]
        now = time.perf_counter()
        # eval_s: this evaluation; wall_s: since start() (the seconds a user has waited,
        # less the process start-up)
        point = schema.CurvePoint(
            step=step,
            train_time_s=sum(w.seconds for w in timer.windows),
            samples=int(sum(timer.samples)),
            val_accuracy=metrics["accuracy"],
            rows=metrics["rows"],
            eval_s=now - t0,
            wall_s=now - run.started_s,
        )
        if test_accuracy is not None:  # the 90% checkpoint's alone
            point.test_accuracy = test_accuracy
        run.record.phases.periodic_eval = (run.record.phases.periodic_eval or 0.0) + point.eval_s
        run.record.curve.append(point)
        if run.lead:
            print(
                f"step {step}: validation accuracy {metrics['accuracy']:.1%} on {metrics['rows']} rows, "
                f"{point.train_time_s:.0f} s of training"
                + (f"; test accuracy of this checkpoint {test_accuracy:.1%}" if test_accuracy is not None else ""),
                flush=True,
            )
        if m.stop_at_accuracy is not None and metrics["accuracy"] >= m.stop_at_accuracy:
            raise helpers.run.train.StopTraining(
                f"validation accuracy {metrics['accuracy']:.2%} at step {step} reached "
                f"stop_at_accuracy={m.stop_at_accuracy}"
            )

    return curve
