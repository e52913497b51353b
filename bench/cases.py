"""The benchmark's sections: overhead, presets with their MFU, accuracy, data, levers and evaluation."""

from __future__ import annotations

import math
import statistics
import sys
import tempfile
import time
import timeit
from collections.abc import Callable

import torch
from torch.utils.benchmark.utils.common import set_torch_threads

from bench.harness import (
    alternate,
    bare_window,
    fit_window,
    matmul_window,
    median_rate,
    paired_ratios,
    prepare,
    trainer_window,
)
from helpers import steps
from helpers.measure import peaks
from helpers.measured_training import EVAL_TOKENS, EVAL_TOKENS_ELSEWHERE, EvalBatches
from helpers.run import inference, record_destination, tokens
from helpers.run.args import PRESETS, build_args
from helpers.run.precision import autocast
from helpers.run.train import evaluate, evaluate_batches

# --sections names that run a few of the levers each; their rows join the levers block
LEVER_SECTIONS = {
    "compile": ("torch.compile",),
    "optim": ("AdamW",),
    "attention": ("attention",),
    "threads": ("threads",),
}
# tta: trainer_tta.py
SECTIONS = ("overhead", "speedup", "accuracy", "data", "levers", "tta", "eval", *LEVER_SECTIONS)
PEAK = "matmul peak"  # the speedup section's workload timing the device's peak in the same rounds
ON_REQUEST = ("levers", "tta", "eval", *LEVER_SECTIONS)  # long: run only when named in --sections
# Section 1/2's configuration: bert-base with the harness's plain AdamW.
OVERHEAD_CFG = dict(
    model_name="bert-base-random", batch=32, max_length=32, padding="static", precision="auto", optim="adamw_torch"
)
# Levers start from the study's optimized configuration and change one thing each:
# (name, control overrides, variant overrides); `attn` is a bench-only knob.
REFERENCE = dict(
    model_name="bert-base-random",
    batch=64,
    max_length=32,
    padding="static",
    precision="auto",
    optim="adamw_torch_fused",
    lr=1.5e-4,
    llrd_decay=0.95,
    log_every=100,
)
DYNAMIC, GROUPED = dict(padding="dynamic", pad_to_multiple_of=8), dict(group_by_length=True)
# make baseline's padding in buckets of 16 tokens: a few compiled shapes (16 .. 64), not one per length
BUCKETS = dict(max_length=64, padding="dynamic", pad_to_multiple_of=16, group_by_length=True)
LEVERS = (
    ("bf16 autocast vs fp32", dict(precision="fp32"), dict(precision="bf16")),
    ("bf16 weights vs bf16 autocast", dict(precision="bf16"), dict(precision="bf16-pure")),
    ("fused vs for-loop AdamW", dict(optim="adamw_torch"), dict(optim="adamw_torch_fused")),
    ("foreach vs for-loop AdamW", dict(optim="adamw_torch"), dict(optim="adamw_torch_foreach")),
    ("loss read every 100 steps vs every step", dict(log_every=1), dict(log_every=100)),
    ("SDPA vs eager attention", dict(attn="eager"), dict(attn="sdpa")),
    ("batch 64 vs 32", dict(batch=32), dict(batch=64)),
    ("batch 128 vs 64", dict(batch=64), dict(batch=128)),
    ("batch 32 x 2 accumulation vs batch 64", dict(batch=64), dict(batch=32, gradient_accumulation_steps=2)),
    ("L=32 vs L=64, static", dict(max_length=64), dict(max_length=32)),
    ("dynamic padding vs static, L<=64", dict(max_length=64), dict(max_length=64) | DYNAMIC),
    ("length-grouped dynamic vs static, L<=64", dict(max_length=64), dict(max_length=64) | DYNAMIC | GROUPED),
    ("dynamic padding vs static, L<=32", dict(), DYNAMIC),
    ("length-grouped dynamic vs static, L<=32", dict(), DYNAMIC | GROUPED),
    ("torch.compile vs eager", dict(compile=False), dict(compile=True)),
    (
        "torch.compile vs eager, length-grouped dynamic padding in buckets of 16, L<=64",
        BUCKETS,
        BUCKETS | dict(compile=True),
    ),
    ("torch threads: all vs half of them", dict(threads="half"), dict(threads="all")),
)
# evaluation before and after the sorted, built-once loader, on make baseline's model and padding
# (Makefile BASELINE_PARAMS)
EVAL_CFG = dict(model_name="minilm", max_length=64, padding="dynamic", group_by_length=True, batch=32, lr=2e-4)


def overhead_section(args, sync) -> dict:
    """Return the rates of `fit`, the bare loop and `Trainer` on the same configuration, alternated."""
    config = OVERHEAD_CFG | {"model_name": args.model, "step_mode": args.step_mode}
    make = lambda: prepare(args.data_dir, args.device, args.steps, **config)  # noqa: E731
    harness, bare = make(), make()  # copies of the same seeded model
    hf = prepare(args.data_dir, args.device, args.steps, **(config | {"step_mode": "eager"}))  # Trainer compiles
    with tempfile.TemporaryDirectory() as tmp:
        rates = alternate(
            {
                "fit (harness)": fit_window(harness, args.steps),
                "bare loop": bare_window(bare, args.steps),
                "Trainer": trainer_window(hf, args.steps, tmp, args.step_mode),
            },
            args.windows,
            args.warmup,
            sync,
            gate=args.gate,
        )
    return {
        "config": config,
        "precision": harness.run.precision,
        "rates": rates,
        "steps_per_window": args.steps,
    }


def peak_shapes(hidden: int, intermediate: int, tokens_per_step: int) -> dict[str, tuple]:
    """Return candidate shapes for the matmul peak: squares and the model's own linear layers."""
    t = tokens_per_step
    return {
        "square 1024": (1024, 1024, 1024),
        "square 2048": (2048, 2048, 2048),
        f"attention proj {t}x{hidden}x{hidden}": (t, hidden, hidden),
        f"FFN up {t}x{hidden}x{intermediate}": (t, hidden, intermediate),
        f"FFN down {t}x{intermediate}x{hidden}": (t, intermediate, hidden),
    }


def speedup_section(args, sync) -> dict:
    """Return baseline vs optimized preset rates, the matmul peak timed in the same rounds, and stalls."""
    base = prepare(args.data_dir, args.device, args.steps, model_name=args.model, preset="baseline")
    opt = prepare(args.data_dir, args.device, args.steps, model_name=args.model, preset="optimized")
    workloads = {"baseline preset": fit_window(base, args.steps), "optimized preset": fit_window(opt, args.steps)}
    mcfg, precision = opt.run.model_config, opt.run.precision
    peak: dict = {"precision": precision}
    if opt.run.dev.type == "cuda":
        from helpers.calc.facts import cuda_device_key, device_roof

        key = cuda_device_key(opt.run.dev.name)
        dtype = opt.run.compute_dtype
        peak.update(device_roof(key, dtype) if key else {"source": "unknown GPU"})
    else:
        dtype = torch.bfloat16 if precision.startswith("bf16") else torch.float32
        tokens_per_step = opt.run.args.train.batch * opt.run.args.task.max_length
        shapes = peak_shapes(mcfg.hidden_size, mcfg.intermediate_size, tokens_per_step)
        # each candidate's TFLOP/s: the median of Timer's blocks of repeats over 0.5 s
        peak["scan"] = {name: peaks.matmul_tflops(*shape, dtype) for name, shape in shapes.items()}
        peak["shape"] = max(peak["scan"], key=peak["scan"].get)
        shape = shapes[peak["shape"]]
        reps = max(1, round(2e12 * peak["scan"][peak["shape"]] / (2 * math.prod(shape))))
        workloads[PEAK] = matmul_window(shape, dtype, reps)  # ~2 s a window
        peak["source"] = f"measured: {peak['shape']} {dtype} matmul, timed in the same rounds"
    rates = alternate(workloads, args.windows, args.warmup, sync, gate=args.gate)
    timed = opt.fits[args.warmup :]
    n_micro = sum(sum(f.shapes.values()) for f, _ in timed)
    waits = opt.loader.wait_s[-n_micro:]
    step_s = [t for _, timer in timed for t in timer.step_times_s]
    stall = {
        "micro_batches": n_micro,
        "wait_median_ms": 1e3 * statistics.median(waits),
        "wait_max_ms": 1e3 * max(waits),
        "step_median_ms": 1e3 * statistics.median(step_s),
        "stall_fraction": sum(waits) / (sum(waits) + sum(step_s)),
    }
    return {
        "model": args.model,
        "baseline": PRESETS["baseline"],
        "optimized": PRESETS["optimized"],
        "precision": precision,
        "rates": rates,
        "peak": peak,
        "stall": stall,
        "steps_per_window": args.steps,
    }


def accuracy_section(args) -> dict:
    """Return test accuracy and throughput of the baseline and optimized presets on MiniLM."""
    runs = {}
    with tempfile.TemporaryDirectory() as tmp:
        for preset in ("baseline", "optimized"):
            run_args = build_args(
                {
                    "model_name": "minilm",
                    "preset": preset,
                    "data_dir": args.data_dir,
                    "device": args.device,
                    "train_subset": args.acc_rows,
                    "epochs": args.acc_epochs,
                    "progress": False,
                    "results_path": tmp,
                }
            )
            rec = steps.run_all(run_args)
            m, t = rec.get("metrics", {}), rec.get("timing", {})
            runs[preset] = (
                {"status": rec["status"]}
                | {k: m.get(k) for k in ("test_accuracy", "test_macro_f1", "val_accuracy")}
                | {k: t.get(k) for k in ("samples_per_s", "train_time_s", "steps")}
                | {"precision": rec["precision"]["used"]}
            )
    return {"rows": args.acc_rows, "epochs": args.acc_epochs, "runs": runs}


def data_section(args) -> dict:
    """Return the seconds to tokenize the full training split with the optimized preset's padding."""
    from datasets import DatasetDict

    from helpers.run import data, models

    ds, _ = data.load_emotion(args.data_dir)
    train_only = DatasetDict(train=ds["train"])
    tokenizer = models.load_tokenizer("minilm")
    task = build_args({"preset": "optimized"}).task
    tokenize = lambda: tokens.tokenize(train_only, tokenizer, task.max_length, task.padding)  # noqa: E731
    times_s = timeit.repeat(tokenize, setup="gc.enable()", number=1, repeat=3)  # gc on, as in a run
    return {"rows": len(ds["train"]), "max_length": task.max_length, "padding": task.padding, "tokenize_s": times_s}


def with_threads(window, threads: int | None):
    """Return `window` run with `threads` torch threads (None: as set), the process's count restored after."""

    def run() -> dict:
        with set_torch_threads(threads or torch.get_num_threads()):
            return window()

    return run


def levers_section(args, sync, only: tuple[str, ...] = ()) -> dict:
    """Return each lever's variant / control samples/s, alternated (only levers named by `only`, when given)."""
    out = []
    full = torch.get_num_threads()
    threads = {None: None, "all": full, "half": max(1, full // 2)}  # the bench-only `threads` knob
    for name, control, variant in LEVERS:
        if not all(any(s.lower() in name.lower() for s in asked) for asked in (args.lever, only) if asked):
            continue
        ref = REFERENCE | {"model_name": args.model}
        control, variant = dict(control), dict(variant)
        n_control, n_variant = threads[control.pop("threads", None)], threads[variant.pop("threads", None)]
        a = prepare(args.data_dir, args.device, args.steps, **(ref | control))
        b = prepare(args.data_dir, args.device, args.steps, **(ref | variant))
        rates = alternate(
            {
                "control": with_threads(fit_window(a, args.steps), n_control),
                "variant": with_threads(fit_window(b, args.steps), n_variant),
            },
            args.windows,
            args.warmup,
            sync,
            gate=args.gate,
        )
        control |= {"threads": n_control} if n_control else {}
        variant |= {"threads": n_variant} if n_variant else {}
        out.append(
            {
                "name": name,
                "control": control,
                "variant": variant,
                "control_samples_per_s": median_rate(rates, "control"),
                "variant_samples_per_s": median_rate(rates, "variant"),
                "ratio": statistics.median(paired_ratios(rates, "variant", "control")),
                "rates": rates,
                "warmup_s": b.fits[0][1].summary()["train_time_s"],
            }
        )
        print(f"{name}: {out[-1]['ratio']:.3f}x", file=sys.stderr, flush=True)
        del a, b
    return {"steps_per_window": args.steps, "reference": REFERENCE | {"model_name": args.model}, "levers": out}


def eval_section(args, sync) -> dict:
    """Return the validation split's rows/s and predictions before and after the sorted loader, and per lever."""
    with tempfile.TemporaryDirectory() as tmp:
        train_steps = max(1, args.eval_train_steps)
        run = steps.start(
            build_args(
                EVAL_CFG
                | {
                    "model_name": args.eval_model,
                    "precision": getattr(args, "eval_precision", "auto"),
                    "data_dir": args.data_dir,
                    "device": args.device,
                    "train_subset": train_steps * EVAL_CFG["batch"],
                    "max_steps": train_steps,
                    "epochs": 1,
                    "progress": False,
                    "results_path": tmp,
                }
            )
        )
        splits = steps.tokenize(run, steps.load_data(run))
        model = steps.build_model(run)
        if args.eval_train_steps:  # a model that tells the labels apart: its predictions mean something
            steps.train(run, model, splits)
        record_destination.release(run.claim)  # nothing is recorded under the run's name
    split, t, task = splits["validation"], run.args.train, run.args.task
    collate = tokens.collator(run.tokenizer, task.padding, task.pad_to_multiple_of)
    # before: the loader evaluation used (file order, collated at every evaluation, no_grad)
    old = tokens.loader(split, max(t.batch, 32), collate, shuffle=False, seed=t.seed)
    t0 = time.perf_counter()
    new = steps.eval_loader(run, split)
    build_s = time.perf_counter() - t0
    # the batch the device type does not take: a CPU's against CUDA's rows, or the reverse
    other_tokens = EVAL_TOKENS_ELSEWHERE if run.dev.type == "cpu" else EVAL_TOKENS["cpu"]
    other = steps.eval_loader(run, split, rows=max(t.batch, other_tokens // task.max_length))
    figures = {}

    def old_window() -> dict:
        with torch.no_grad():
            figures["before"] = evaluate_batches(model, old, run.dev, run.precision)
        return {"samples": figures["before"]["rows"]}

    def window(name: str, settings: inference.EvalSettings, batches: EvalBatches) -> Callable[[], dict]:
        def evaluate_once() -> dict:
            figures[name] = evaluate(
                model, batches, run.dev, run.precision, rows_per_batch=batches.batch_size, settings=settings
            )
            return {"samples": figures[name]["rows"]}

        return evaluate_once

    levers = {name: (settings, new) for name, settings in eval_levers(run.precision, torch.get_num_threads()).items()}
    if other.batch_size != new.batch_size:
        levers[f"{other.batch_size} rows a batch"] = (inference.EvalSettings(), other)
    rates = alternate(
        {
            "before: loader, no_grad": old_window,
            AFTER: window("after", inference.EvalSettings(), new),
            **{name: window(name, *lever) for name, lever in levers.items()},
        },
        args.windows,
        args.warmup,
        sync,
        gate=args.gate,
    )
    predicted = lambda batches, rows, settings=None: predictions(model, batches, rows, run, settings)
    before, after = predicted(old, torch.arange(len(split)).split(old.batch_size)), predicted(new, new.rows)
    apart = {name: int((predicted(b, b.rows, settings) != after).sum()) for name, (settings, b) in levers.items()}
    return {
        "config": EVAL_CFG | {"model_name": args.eval_model},
        "rows": len(split),
        "precision": run.precision,
        "rates": rates,
        "batch_rows": {"before": old.batch_size, "after": new.batch_size},
        "build_s": build_s,
        "train_steps": args.eval_train_steps,
        "figures": figures,
        "same_predictions": bool(torch.equal(before, after)),
        "rows_predicted_apart": int((before != after).sum()),
        "labels_predicted": len(set(after.tolist())),
        # each lever against `after`: its rows/s ratio is in `rates`, its per-row predictions that differ here
        "levers": {name: {"rows_predicted_apart": apart[name]} for name in levers},
    }


AFTER = "after: sorted, built once, inference mode"


def eval_levers(precision: str, threads: int) -> dict[str, inference.EvalSettings]:
    """Return the evaluation levers timed against `AFTER`: eager attention, bf16 weights, half the threads."""
    levers = {"eager attention": inference.EvalSettings(attention="eager")}
    if precision == "bf16":
        levers["bf16 weights (a copy)"] = inference.EvalSettings(weights="bf16")
    if threads > 1:
        levers["half the threads"] = inference.EvalSettings(threads=threads // 2)
    return levers


def predictions(
    model: torch.nn.Module, batches, rows, run: steps.Run, settings: inference.EvalSettings | None = None
) -> torch.Tensor:
    """Return each row's predicted label at its row index, from `batches` whose row indices are `rows`."""
    out = torch.full((sum(map(len, rows)),), -1)
    with inference.applied(model, settings or inference.EvalSettings(), run.precision) as (eval_model, precision):
        eval_model.eval()
        with torch.inference_mode():
            for batch, index in zip(batches, rows):
                with autocast(precision, run.dev.type):
                    logits = eval_model(**{k: v.to(run.dev.torch_device) for k, v in batch.items()}).logits
                out[index] = logits.argmax(-1).cpu()
    return out
