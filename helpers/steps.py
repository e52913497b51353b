"""One run, step by step: the notebooks' cells, the scripts, a torchrun rank, a sweep point and the
benchmark all call these.

    args = notebook_args(globals())       # or build_args({...}) in code, parse_cli(argv) in scripts
    handed = hand_over(args)              # num_devices > 1: torchrun runs the steps in its ranks
    run = start(args, handed)             # checks, device, destination, the claim on the record's name
    ds = load_data(run)
    splits = tokenize(run, ds)            # refuses a configuration that makes no optimizer step
    model = build_model(run)
    fit = train(run, model, splits)       # timing windows, utilization, energy, profile, loss
    metrics = evaluate(run, model, splits)
    save(run, model)                      # when save_dir is set
    record = finish(run)                  # <results>/<suite or adhoc>/<run_name>@<device>.json
    run_all(args)                         # all of the above; a failure is recorded, never lost
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import sys
import time
import traceback
import warnings
from pathlib import Path

import psutil
import torch

import helpers.run.train
from helpers import launch
from helpers.calc.roofline import systems_section
from helpers.measure import peak_memory, precision_probe, xla
from helpers.measured_training import drops_last, eval_batches, eval_loader, eval_settings, prepare_training, train
from helpers.run import data, ddp, device, lora, models, neuron, record_destination, records, schema, tokens
from helpers.run.args import ConfigError, RunArgs, build_args, results_dir
from helpers.run.argv import notebook_args, parse_cli
from helpers.run.paths import repo_path
from helpers.run.precision import prepare_model
from helpers.run.summary import summary
from helpers.run_state import Run, ranks_did, record_failures_in_notebook

__all__ = [
    "Run",
    "build_args",
    "notebook_args",
    "parse_cli",
    "hand_over",
    "start",
    "load_data",
    "tokenize",
    "build_model",
    "prepare_training",
    "train",
    "eval_loader",
    "eval_batches",
    "evaluate",
    "save",
    "finish",
    "run_all",
    "summary",
]


INTERRUPTED = "KeyboardInterrupt: the run was interrupted (SIGINT: Ctrl-C or a notebook's interrupt)"


def default_name(args: RunArgs, precision: str) -> str:
    """Return a run name built from the parameters that most often differ."""
    t = args.task
    model = re.sub(r"[^A-Za-z0-9._-]", "_", Path(t.model_name).name or "model")
    return f"{model}-b{args.train.batch}-L{t.max_length}-{t.padding}-{precision}-s{args.train.seed}"


def start(args: RunArgs, handed: dict | None = None) -> Run:
    """Check `args` (nothing is recorded when this raises) and claim the record's name; `handed`: hand_over's."""
    t0, startup_s = time.perf_counter(), startup_seconds()
    if args.train.device == "xla" or (args.train.device == "auto" and device.neuron_available()):
        neuron.apply_env(args)  # before torch_xla starts
    rank = ddp.torchrun_env()
    if rank and args.train.device in ("auto", "cuda") and torch.cuda.is_available():
        torch.cuda.set_device(rank.local_rank)  # before the device is named
    dev = device.resolve_device(args.train.device)
    args.train.check_device(dev.type)  # device=auto: checked once it is known
    model_config = models.load_config(args.task.model_name)
    args.task.check_positions(model_config.max_position_embeddings)
    lora.check_model(lora.spec_of(args.task), model_config, args.task.model_name)  # before anything is built
    check_data_dir(args.task.data_dir)
    if dev.type == "xla" and args.task.padding == "dynamic":
        warnings.warn(
            "padding='dynamic' on XLA: every new (batch, length) shape compiles a new graph "
            "(minutes each on Neuron); use padding='static' for speed",
            stacklevel=2,
        )
    if args.measure.profile:
        records.check_writable(repo_path(args.measure.profile_dir), "profile_dir")
    if args.measure.save_dir:
        records.check_writable(repo_path(args.measure.save_dir), "save_dir")
    if dev.type == "xla" and not dev.neuron and args.neuron.xla_cache_dir:
        records.check_writable(repo_path(args.neuron.xla_cache_dir), "xla_cache_dir")
    if dev.neuron and args.neuron.neuron_cache_dir and "://" not in args.neuron.neuron_cache_dir:  # s3:// is remote
        records.check_writable(repo_path(args.neuron.neuron_cache_dir), "neuron_cache_dir")
    # the destination before the probe: the name auto gets (bf16, fp32, fp16) is as long as the one it has now
    provisional = args.measure.run_name or default_name(args, args.train.precision)
    record_destination.check_destination(
        records.record_path(results_dir(args), args.measure.suite, provisional, dev.key)
    )
    # after the checks: auto on a CPU may probe bf16 against fp32 (seconds, once per machine and threads)
    probe_t0 = time.perf_counter()
    choice = precision_probe.resolve(args.train.precision, dev, args.neuron, results_dir(args) / records.PEAKS)
    probes_s = time.perf_counter() - probe_t0
    precision = choice.used
    name = args.measure.run_name or default_name(args, precision)
    path = records.record_path(results_dir(args), args.measure.suite, name, dev.key)
    record_destination.check_destination(path)  # the exact folder and file name, before any model is built
    from transformers import set_seed  # imports torch_xla where installed: after neuron.apply_env

    set_seed(args.train.seed)  # random, NumPy and torch, so a run repeats
    oversubscribed = device.oversubscribed(dev, args.train.num_devices, args.train.allow_oversubscribe)
    head = records.run_record(
        {**args.flat(), "run_name": name},
        sorted(args.given),
        oversubscribed=oversubscribed or None,
        libraries=records.library_versions(),
        device=dev.describe(),
        precision=choice,
        phases=schema.Phases(startup=startup_s, probes=probes_s),
        curve=[],
    )
    if choice.auto_reason and not (rank and rank.rank):
        print(f"precision auto: {choice.auto_reason}")
    run = Run(
        args,
        name,
        dev,
        precision,
        choice.compute_dtype,
        head,
        path,
        model_config,
        rank=rank,
        started_s=t0,
        startup_s=startup_s,
    )
    if rank is None and handed is None and not os.environ.get(ddp.LAUNCH_ID):  # ranks: their launcher's claim
        run.claim = record_destination.claim_name(path, args.measure.replace_record)
    try:
        if dev.type == "xla":
            run.compiles = xla.CompileLog(cache=xla.init_cache(args, dev))
    except BaseException:
        record_destination.release(run.claim)  # nothing was recorded: the name stays free
        raise
    if rank is not None:
        try:
            ddp.init_process_group(rank, dev.type)
        except Exception as err:  # noqa: BLE001 - the launcher reads this record
            finish(run, records.failure_status(repr(err)), f"rank {rank.rank}: {type(err).__name__}: {err}")
            raise
    run.handover = handed
    if handed is None:
        record_failures_in_notebook(run, finish)
    run.record.phases.start = time.perf_counter() - t0 - probes_s
    return run


def check_data_dir(given: str | None) -> None:
    """Raise ConfigError when the data folder given (or in $EMOTION_DATA_DIR) lacks a split file."""
    folder = given or os.environ.get(data.ENV_VAR)
    missing = [f"{s}.jsonl" for s in data.SPLITS if folder and not (Path(folder) / f"{s}.jsonl").is_file()]
    if missing:
        where = f"data_dir={folder!r}" if given else f"${data.ENV_VAR}={folder!r}"
        raise ConfigError(
            f"{where} holds no {', '.join(missing)}: a data folder holds "
            f"{', '.join(s + '.jsonl' for s in data.SPLITS)} "
            "(`python -m helpers.run.data export DIR` writes one); nothing was run or recorded"
        )


_first_start = True  # whether start() has not run yet in this process


def startup_seconds() -> float:
    """Return the seconds since this process started on its first start(); 0.0 on a later one (counted once)."""
    global _first_start
    if not _first_start:
        return 0.0
    _first_start = False
    return max(0.0, time.time() - psutil.Process().create_time())


def hand_over(args: RunArgs) -> dict | None:
    """Run a num_devices > 1 run under torchrun and return rank 0's record; None for one device or inside a rank."""
    if args.train.num_devices <= 1 or ddp.torchrun_env():
        return None
    run = start(args)  # the checks, the record's name and the claim on it, before any rank starts
    try:
        return launch.torchrun(args, run.name, run.record_path, run.dev.type)
    finally:
        record_destination.release(run.claim)  # the ranks wrote (or the launcher recorded) the outcome


@contextlib.contextmanager
def phase(run: Run, name: str):
    """Add the wall seconds of the block to the run's `phases` field `name` (where a run's time goes)."""
    t0 = time.perf_counter()
    try:
        yield
    finally:
        setattr(run.record.phases, name, (getattr(run.record.phases, name) or 0.0) + time.perf_counter() - t0)


@ranks_did()
def load_data(run: Run):
    """Return the dataset splits; their provenance goes to the record's `data`."""
    t = run.args.task
    with phase(run, "load_data"):
        ds, info = data.load_emotion(
            t.data_dir, t.train_subset, t.eval_subset, t.shuffle_subset, run.args.train.seed, t.drop_bad_rows
        )
    run.record.data = schema.Data(**info)
    print(
        f"data: {', '.join(f'{n:,} {s}' for s, n in info['rows'].items())} rows from {info['source']}"
        + (f"; dropped {info['dropped_rows']}" if any(info["dropped_rows"].values()) else "")
    )
    return ds


@ranks_did()
def tokenize(run: Run, ds, training: bool = True):
    """Return the tokenized splits; raise ConfigError when a training run would make no optimizer step."""
    t, tr = run.args.task, run.args.train
    with phase(run, "tokenize"):
        run.tokenizer = run.tokenizer or models.load_tokenizer(t.model_name)
        splits = tokens.tokenize(ds, run.tokenizer, t.max_length, t.padding)
    world = run.rank.world_size if run.rank else 1
    rows = math.ceil(len(splits["train"]) / world)  # DistributedSampler evens the shards out
    if training and tr.batch > rows:  # before the model is built: a batch never holds a row twice
        raise ConfigError(
            f"batch={tr.batch} is above the {rows} training rows per device: a batch takes each row "
            f"at most once, so every step would see all {rows}; give batch <= {rows} (or more rows)"
        )
    batches = rows // tr.batch if drops_last(run) else math.ceil(rows / tr.batch)
    steps = min(tr.max_steps or math.inf, batches // tr.gradient_accumulation_steps * tr.epochs)
    if steps == 0 and training:
        raise ConfigError(
            f"this run makes no optimizer step: {rows} training rows per device, batch "
            f"{tr.batch}, gradient_accumulation_steps={tr.gradient_accumulation_steps}"
            + (" and the last partial batch is left out (static graphs)" if drops_last(run) else "")
            + ": give more rows (train_subset) or a smaller batch"
        )
    if run.record.data is None:  # splits that load_data did not load
        run.record.data = schema.Data()
    run.record.data.optimizer_steps_planned = steps
    print(
        f"tokens: {t.padding} padding to {t.max_length}; {steps} optimizer steps planned "
        f"(batch {tr.batch} x {world} device(s), {tr.epochs} epoch(s){', max_steps' if tr.max_steps else ''})"
    )
    return splits


@ranks_did()
def build_model(run: Run) -> torch.nn.Module:
    """Return the model on the run's device, in the run's precision (seeded head)."""
    t, tr = run.args.task, run.args.train
    with phase(run, "build_model"):
        model = models.load_model(t.model_name, seed=tr.seed, gradient_checkpointing=tr.gradient_checkpointing)
        if tr.gradient_checkpointing and run.dev.type == "xla":
            models.use_xla_checkpointing(model)
        spec = lora.spec_of(t)
        model = lora.apply(model, spec)  # adapters before the precision cast, so they are cast alike
        model = prepare_model(model, run.precision).to(run.dev.torch_device)
    run.record.model = schema.ModelInfo(
        name=t.model_name,
        parameters=sum(p.numel() for p in model.parameters()),
        hidden_size=model.config.hidden_size,
        num_hidden_layers=model.config.num_hidden_layers,
        attention=model.config._attn_implementation,
        weights=models.weights_note(t.model_name),
        **lora.describe(model, spec),
    )
    print(
        f"model: {t.model_name}, {run.record.model.parameters / 1e6:.1f} M parameters on "
        f"{run.dev.name}, {run.precision}"
    )
    return model


@ranks_did(lambda run: {k: v for k, v in (run.handover.get("metrics") or {}).items() if not k.startswith("loss")})
def evaluate(run: Run, model: torch.nn.Module, splits) -> dict:
    """Return validation and test accuracy / macro-F1 (summed over ranks); the run keeps them."""
    out, t0 = {}, time.perf_counter()
    if run.outcome in (None, "finished"):
        world = run.rank.world_size if run.rank else 1
        reduce = ddp.reducer(world, run.dev.type)
        reused = last_validation(run)
        for split, short in (("validation", "val"), ("test", "test")):
            sampler = ddp.eval_shard(len(splits[split]), run.rank.rank, world) if run.rank else None
            if split == "validation" and reused is not None:
                metrics = reused
            else:
                batches = eval_batches(run, split, splits[split], sampler)
                metrics = helpers.run.train.evaluate(
                    model,
                    batches,
                    run.dev,
                    run.precision,
                    reduce=reduce,
                    rows_per_batch=batches.batch_size,
                    settings=eval_settings(run, model),
                )
            out.update({f"{short}_{k}": v for k, v in metrics.items()})
        again = f" (step {run.last_validation[0]}'s periodic evaluation: the same weights)" if reused else ""
        print(
            f"evaluation: validation accuracy {out['val_accuracy']:.4f}{again}"
            + f", test accuracy {out['test_accuracy']:.4f}, test macro-F1 {out['test_macro_f1']:.4f}"
        )
    run.record.phases.evaluate = time.perf_counter() - t0
    if out:
        run.record.metrics = (run.record.metrics or schema.Metrics()).model_copy(update=out)
    return out


def last_validation(run: Run) -> dict | None:
    """Return the whole split's periodic validation metrics at the step training ended on (None: none)."""
    if run.rank is not None or run.last_validation is None or run.fit is None:
        return None
    step, metrics = run.last_validation
    return metrics if step == run.fit.steps else None


@ranks_did()
def save(run: Run, model: torch.nn.Module) -> Path | None:
    """Save the model and tokenizer to save_dir (XLA weights copied to the host first); None if not asked."""
    folder = run.args.measure.save_dir
    if not folder or not run.lead or run.outcome not in (None, "finished"):
        return None
    with phase(run, "save"):
        model = lora.merged(model)  # adapters merged into plain weights (on the host): any transformers client reads it
        state = {k: v.cpu() for k, v in model.state_dict().items()} if run.dev.type == "xla" else None
        model.save_pretrained(repo_path(folder), state_dict=state)
        run.tokenizer.save_pretrained(repo_path(folder))
    run.record.saved_to = str(repo_path(folder))
    return repo_path(folder)


@ranks_did(lambda run: run.handover)
def finish(run: Run, status: str | None = None, error: str | None = None) -> dict:
    """Write the run's record (printed and saved in the working folder if its place refuses it); return it."""
    record_failures_in_notebook(run, finish, on=False)
    rec = assemble(run, status, error)
    written = records.as_json(rec)
    if run.lead:
        try:
            where = records.write_record(run.record_path, rec)
        except records.RecordWriteError as err:
            where = Path.cwd() / run.record_path.name
            print(records.json_text(written), file=sys.stderr)  # the whole record, wherever the output goes
            try:
                records.write_json_atomic(where, written)
            except records.RecordWriteError:
                where = None
            print(
                f"record NOT written to {run.record_path}: {err}; "
                + (f"saved to {where} instead" if where else "printed above (no folder took it)"),
                file=sys.stderr,
            )
        finally:
            record_destination.release(run.claim)
        kept = f" (the {records.status_in(run.record_path)} record at {run.record_path} is kept)"
        print(
            f"record: {rec.status}, written to {where}" + (kept if where == records.aside_path(run.record_path) else "")
        )
    run.finished = {**written, "_source": str(run.record_path)}  # _source: in memory only
    return run.finished


def assemble(run: Run, status: str | None, error: str | None) -> schema.RunRecord:
    """Return the run's record with what only the end knows (status, memory, roofline, XLA compiles, ranks)."""
    t0 = time.perf_counter()
    timing = run.record.timing
    systems = xla_section = distributed = None
    if run.fit is not None and timing:
        steady = run.fit.steady_shapes or run.fit.shapes
        t = run.args.task
        model = run.record.model
        fused = run.dev.type == "cuda" and model is not None and model.attention == "sdpa"
        systems = _measured(
            "systems",
            lambda: systems_section(
                run.model_config,
                steady,
                timing.steady_time_s,
                timing.steady_steps,
                run.precision,
                run.compute_dtype,
                run.dev.describe(),
                records.peaks_dir(run.record_path),
                t.lora_r,
                t.lora_targets,
                fused_attention=fused,
            ),
        )
    if run.compiles:
        xla_section = _measured(
            "xla",
            lambda: run.compiles.section(
                run.args.measure.timing_warmup_steps * run.args.train.gradient_accumulation_steps,
                timing,
                len(run.fit.shapes) if run.fit else None,
            ),
        )
    if run.rank is not None:
        distributed = launch.distributed_section(run.rank, run.args, timing, run.step_model, run.shards)
    memory = _measured("memory", lambda: peak_memory.peak(run.dev.type))
    return schema.RunRecord.model_validate(
        run.record.model_copy(
            update=dict(
                status=status or run.outcome or "finished",
                error=error or run.error,
                world_size=run.rank.world_size if run.rank else 1,
                memory=memory,
                systems=systems,
                xla=xla_section,
                distributed=distributed,
                finished_at=records.now(),
                phases=wall_split(run, time.perf_counter() - t0),
            )
        )
    )


def wall_split(run: Run, record_s: float) -> schema.Phases:
    """Return the run's phases (seconds) with the whole wall and `other`, the wall no step measured."""
    wall_s = run.startup_s + time.perf_counter() - run.started_s
    phases = run.record.phases.model_copy(update={"record": record_s})
    measured = sum(getattr(phases, name) or 0.0 for name in phases.model_fields_set)
    return phases.model_copy(
        update={"other": max(0.0, wall_s - measured), "wall": wall_s, "periodic_evals": len(run.record.curve)}
    )


def _measured(section: str, compute) -> dict:
    """Return compute()'s section, or the reason it could not be computed (the record is written anyway)."""
    try:
        return compute()
    except Exception as err:  # noqa: BLE001 - a figure we cannot compute must not cost the record
        return {"reason": f"{section} not computed: {type(err).__name__}: {err}"}


def run_all(args: RunArgs) -> dict:
    """Run every step for `args`; a failure (OOM, error) is recorded, never lost. Return the record."""
    handed = hand_over(args)  # num_devices > 1: torchrun's ranks run the steps below
    if handed is not None:
        return handed
    run = start(args)  # parameter errors raise here, before anything is recorded or built
    try:
        splits = tokenize(run, load_data(run))
        model = build_model(run)
        train(run, model, splits)
        evaluate(run, model, splits)
        save(run, model)
    except KeyboardInterrupt:  # SIGINT, Ctrl-C, a notebook's interrupt: recorded, then it stops the caller
        finish(run, "interrupted", INTERRUPTED)
        raise
    except Exception as err:  # noqa: BLE001 - every failure must reach the record
        traceback.print_exc(file=sys.stderr)
        text = f"{type(err).__name__}: {err}"
        rec = finish(run, records.failure_status(text), text)
        if run.rank is not None:
            raise  # a rank that failed exits non-zero, so torchrun stops the others
        return rec
    return finish(run)
