"""The steps of one run, as the notebooks call them cell by cell, and `run_all` that chains them.

    run = start_run(cfg)                 # validate, pick device and precision, open the record
    ds = load_data(run)                  # dair-ai/emotion (folder or hub)
    splits = tokenize_data(run, ds)      # static or dynamic padding
    model = build_model(run)
    fit_result = train_model(run, model, splits)
    metrics = evaluate_model(run, model, splits)
    record = finish_run(run, fit_result, metrics)   # appends the record to cfg.results_path
"""
from __future__ import annotations

import functools
import random
import resource
import sys
import time
import traceback
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from helpers import data, models, optim, precision as prec, records, tokens, train, xla
from helpers.config import ConfigError, RunConfig, repo_path
from helpers.device import DeviceInfo, resolve_device, resolve_precision


@dataclass
class Run:
    """A run in progress: its configuration, device, precision and the record being filled in."""

    cfg: RunConfig
    dev: DeviceInfo
    precision: str
    record: dict
    tokenizer: object = None
    model_config: object = None
    world_size: int = 1
    rank: int = 0
    extras: dict = field(default_factory=dict)
    delegated: dict | None = None  # the record of a torchrun launch that did the work instead


def _unless_delegated(step):
    """Make a step a no-op (returning None) once the run was handed to torchrun."""
    @functools.wraps(step)
    def wrapper(run: Run, *args, **kwargs):
        return None if run.delegated is not None else step(run, *args, **kwargs)
    return wrapper


def launch_if_distributed(run: Run) -> dict | None:
    """With num_devices > 1, run the training entry point under torchrun; return its record."""
    if run.cfg.num_devices > 1:
        from helpers import distributed

        run.delegated = distributed.launch(run.cfg)
    return run.delegated


def seed_everything(seed: int) -> None:
    """Seed Python, NumPy and torch so a run repeats."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def start_run(cfg: RunConfig) -> Run:
    """Validate `cfg` against the device and the model's limits; return the run with its open record."""
    cfg.validate()
    dev = resolve_device(cfg.device)
    precision = resolve_precision(cfg.precision, dev, cfg.bf16_mode)
    model_config = models.load_config(cfg.model_name)
    limit = model_config.max_position_embeddings
    if cfg.max_length > limit:
        raise ConfigError(f"max_length={cfg.max_length} is above {cfg.model_name}'s position limit "
                          f"({limit}): allowed 3..{limit}")
    if cfg.gradient_checkpointing and dev.type == "xla" and dev.neuron:
        raise ConfigError("gradient_checkpointing=True is not supported on Neuron (the study found the "
                          "compiler rejects it): use gradient_accumulation_steps or a smaller batch")
    if dev.type == "xla" and cfg.padding == "dynamic":
        warnings.warn("padding='dynamic' on XLA: every new (batch, length) shape compiles a new graph "
                      "(minutes each on Neuron); use padding='static' for speed", stacklevel=2)
    if cfg.run_name is None:
        cfg.run_name = f"{cfg.model_name.split('/')[-1]}-b{cfg.batch}-L{cfg.max_length}-{cfg.padding}-{precision}-s{cfg.seed}"
    seed_everything(cfg.seed)
    record = records.new_record(cfg.to_dict(), device={
        "type": dev.type, "name": dev.name, "cpu_capability": dev.cpu_capability,
        "bf16_fast": dev.bf16_fast, "neuron": dev.neuron, "torch_threads": torch.get_num_threads()},
        precision={"requested": cfg.precision, "used": precision,
                   "mechanism": prec.mechanism(precision, dev.type, dev.neuron)})
    run = Run(cfg, dev, precision, record, model_config=model_config)
    xla.mark(run, "start")
    return run


@_unless_delegated
def load_data(run: Run):
    """Return the dataset splits for the run and note their provenance in the record."""
    cfg = run.cfg
    ds, info = data.load_emotion(cfg.data_dir, cfg.train_subset, cfg.eval_subset, cfg.shuffle_subset,
                                 cfg.seed, cfg.drop_bad_rows)
    run.record["data"] = info
    return ds


@_unless_delegated
def tokenize_data(run: Run, ds):
    """Return the tokenized splits (static or dynamic padding)."""
    run.tokenizer = run.tokenizer or models.load_tokenizer(run.cfg.model_name)
    t0 = time.perf_counter()
    splits = tokens.tokenize(ds, run.tokenizer, run.cfg.max_length, run.cfg.padding)
    run.record.setdefault("data", {})["tokenize_s"] = time.perf_counter() - t0
    return splits


@_unless_delegated
def build_model(run: Run) -> torch.nn.Module:
    """Return the model on the run's device, in the run's precision (seeded head)."""
    cfg = run.cfg
    model = models.load_model(cfg.model_name, seed=cfg.seed,
                              gradient_checkpointing=cfg.gradient_checkpointing)
    if cfg.gradient_checkpointing and run.dev.type == "xla":
        xla.use_xla_checkpointing(model)
    model = prec.prepare_model(model, run.precision).to(run.dev.torch_device)
    run.record["model"] = {"name": cfg.model_name, "parameters": sum(p.numel() for p in model.parameters()),
                           "hidden_size": model.config.hidden_size,
                           "num_hidden_layers": model.config.num_hidden_layers}
    return model


def train_loader(run: Run, split, sampler=None):
    """Return the shuffled training loader; XLA drops the last partial batch (a new shape recompiles)."""
    cfg = run.cfg
    if cfg.group_by_length and sampler is None:
        sampler = tokens.length_grouped_sampler(split, cfg.batch, cfg.seed)
    elif cfg.group_by_length:
        warnings.warn("group_by_length is ignored under data parallelism (each rank's DistributedSampler "
                      "picks its rows)", stacklevel=2)
    collate = tokens.collator(run.tokenizer, cfg.padding, cfg.pad_to_multiple_of)
    return tokens.loader(split, cfg.batch, collate, shuffle=True, seed=cfg.seed,
                         drop_last=run.dev.type == "xla", sampler=sampler,
                         pin_memory=run.dev.type == "cuda")


@_unless_delegated
def train_model(run: Run, model: torch.nn.Module, splits, sampler=None, wrap=None) -> train.FitResult:
    """Build the optimizer and schedule, train, and store timings and loss in the record."""
    from helpers import monitor as mon, profile as prof

    cfg = run.cfg
    loader = xla.track_compiles(run, train_loader(run, splits["train"], sampler))
    steps = len(loader) // cfg.gradient_accumulation_steps * cfg.epochs
    total_steps = min(cfg.max_steps or steps, steps)
    optimizer = optim.build_optimizer(model, cfg.lr, cfg.llrd_decay, cfg.weight_decay, cfg.optim,
                                      run.dev.type, run.precision)
    scheduler = optim.build_scheduler(optimizer, total_steps, cfg.warmup_ratio)
    step_model = wrap(model) if wrap else model
    if cfg.compile:
        step_model = torch.compile(step_model, backend="openxla" if run.dev.type == "xla" else "inductor")
    monitor = mon.start_monitor(run.dev.type)
    profiler = prof.StepProfiler(cfg.profile and run.rank == 0,
                                 repo_path(cfg.profile_dir) / cfg.run_name,
                                 warmup_steps=cfg.timing_warmup_steps, profile_steps=cfg.profile_steps,
                                 device_type=run.dev.type)
    try:
        result = train.fit(step_model, loader, optimizer, scheduler, run.dev, run.precision, cfg.epochs,
                           max_steps=cfg.max_steps, grad_accum=cfg.gradient_accumulation_steps,
                           max_grad_norm=cfg.max_grad_norm, log_every=cfg.log_every,
                           timing_warmup_steps=cfg.timing_warmup_steps,
                           progress=cfg.progress and run.rank == 0, monitor=monitor,
                           profiler=profiler, sampler=sampler)
    finally:
        run.record["utilization"] = monitor.stop()
        profiler.close()
        xla.mark(run, "train_end")
    run.record["profile"] = profiler.summary()
    run.record["status"] = result.status
    run.record["timing"] = result.timer.summary()
    run.record["timing"]["optimizer_steps_planned"] = total_steps
    run.record["shapes"] = {"distinct": len(result.shapes),
                            "counts": {f"{b}x{length}": n for (b, length), n in sorted(result.shapes.items())}}
    run.record["metrics"] = {"final_loss": result.final_loss, "loss_curve": result.loss_curve,
                             "diverged_at_step": result.diverged_at_step}
    run.extras["fit"] = result
    return result


def eval_loader(run: Run, split, sampler=None):
    """Return the evaluation loader (no shuffling, same padding as training)."""
    collate = tokens.collator(run.tokenizer, run.cfg.padding, run.cfg.pad_to_multiple_of)
    return tokens.loader(split, max(run.cfg.batch, 32), collate, shuffle=False, seed=run.cfg.seed,
                         sampler=sampler)


@_unless_delegated
def evaluate_model(run: Run, model: torch.nn.Module, splits, reduce=None, samplers=None) -> dict:
    """Return validation and test accuracy / macro-F1, and store them in the record."""
    out = {}
    if run.record.get("status") != "diverged":
        for split in ("validation", "test"):
            loader = eval_loader(run, splits[split], (samplers or {}).get(split))
            for key, value in train.evaluate(model, loader, run.dev, run.precision, reduce=reduce).items():
                out[f"{'val' if split == 'validation' else split}_{key}"] = value
    run.record.setdefault("metrics", {}).update(out)
    return out


def peak_memory(dev: DeviceInfo) -> dict:
    """Return the measured peak memory of this process on its device, in GiB."""
    gib = 1024 ** 3
    if dev.type == "cuda":
        return {"cuda_max_allocated_gib": torch.cuda.max_memory_allocated() / gib,
                "cuda_max_reserved_gib": torch.cuda.max_memory_reserved() / gib}
    # ru_maxrss is KiB on Linux: the whole process's peak, tokenization and model load included
    return {"host_peak_rss_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 ** 2,
            "device": "not measured" if dev.type == "xla" else "host"}


def finish_run(run: Run, status: str | None = None, error: str | None = None) -> dict:
    """Complete the record (systems figures, memory, status) and append it to `results_path`."""
    from helpers import systems

    if run.delegated is not None:
        return run.delegated
    rec = run.record
    if status:
        rec["status"] = status
    if error:
        rec["error"] = error
    if rec["status"] == "running":
        rec["status"] = "finished"
    rec["memory"] = peak_memory(run.dev)
    fit = run.extras.get("fit")
    if fit is not None:
        rec["systems"] = systems.run_systems(run, fit)
    rec.update(run.extras.get("record_extra", {}))
    rec["finished_at"] = records.now()
    rec["world_size"] = run.world_size
    if run.dev.type == "xla":
        rec["xla"] = xla.section(run)
    if run.rank == 0:
        records.append_record(repo_path(run.cfg.results_path), rec)
    return rec


def classify_error(err: BaseException) -> str:
    """Return the record status for an exception: 'oom' for out-of-memory of any backend, else 'failed'."""
    return records.failure_status(f"{type(err).__name__}: {err}")


def save_model(run: Run, model: torch.nn.Module) -> None:
    """Save the model and tokenizer to cfg.save_dir (XLA weights copied to the host: safetensors needs it)."""
    state = {k: v.cpu() for k, v in model.state_dict().items()} if run.dev.type == "xla" else None
    model.save_pretrained(run.cfg.save_dir, state_dict=state)
    run.tokenizer.save_pretrained(run.cfg.save_dir)


def run_all(cfg: RunConfig, hooks=None) -> dict:
    """Run every step for `cfg`; a failure (OOM, error) is recorded, never lost. Return the record."""
    run = start_run(cfg)  # parameter errors raise here, before anything is recorded or built
    try:
        ds = load_data(run)
        splits = tokenize_data(run, ds)
        model = build_model(run)
        train_model(run, model, splits)
        evaluate_model(run, model, splits)
        if cfg.save_dir and run.record["status"] == "finished":
            save_model(run, model)
    except Exception as err:  # noqa: BLE001 - every failure must reach the record
        status = classify_error(err)
        traceback.print_exc(file=sys.stderr)
        return finish_run(run, status, f"{type(err).__name__}: {err}")
    return finish_run(run)


def summary(record: dict) -> "pd.DataFrame":
    """Return a one-column table of the record's headline figures for the notebook to show."""
    import pandas as pd

    t, m = record.get("timing", {}), record.get("metrics", {})
    s = record.get("systems", {})
    rows = {
        "status": record.get("status"), "device": record.get("device", {}).get("name"),
        "precision": record.get("precision", {}).get("used"),
        "train_time_s": t.get("train_time_s"), "first_step_s": t.get("first_step_s"),
        "step_time_median_s": t.get("step_time_median_s"), "samples_per_s": t.get("samples_per_s"),
        "val_accuracy": m.get("val_accuracy"), "test_accuracy": m.get("test_accuracy"),
        "test_macro_f1": m.get("test_macro_f1"), "final_loss": m.get("final_loss"),
        "achieved_tflops": s.get("achieved_tflops"), "mfu": s.get("mfu"),
        "arithmetic_intensity": s.get("arithmetic_intensity"), "results_path": record["params"]["results_path"],
    }
    return pd.DataFrame({"value": rows})
