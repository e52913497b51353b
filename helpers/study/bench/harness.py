"""The harness benchmark: configurations timed side by side, alternated, in one process.

    python -m helpers.bench --threads 2 --data-dir ../shared/data/emotion     # CPU, all sections
    python -m helpers.bench --device cuda --data-dir ../shared/data/emotion   # H100 / H200
    python -m helpers.bench --sections levers                                 # one lever at a time

Every figure is a ratio of medians over >= 5 timed windows per configuration, after warm-up windows
(compilation, allocator, oneDNN kernel choice). Within a round every configuration runs one window,
and the order rotates each round, so load from other processes hits all sides alike. Sections:
overhead (`fit` vs a bare loop vs Hugging Face `Trainer`), speedup (optimized vs baseline preset,
MFU against the measured matmul peak run in the same rounds, data-loader stalls), accuracy (both
presets on MiniLM), data (tokenization of the full training split), levers. The Markdown goes into
BENCHMARKS.md between `<!-- bench:NAME begin/end -->` markers; the text around them is kept.
"""
from __future__ import annotations

import argparse
import contextlib
import datetime
import itertools
import json
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import torch

from helpers import monitor, optim, roofline, run as steps, tokens, train
from helpers.config import PRESET_VALUES, RunConfig, repo_path
from helpers.device import cpu_capability, cpu_name, resolve_device, synchronize

SECTIONS = ("overhead", "speedup", "accuracy", "data", "levers")
# Section 1/2's configuration: the issue's bert-base shape with the harness's plain AdamW.
OVERHEAD_CFG = dict(model_name="bert-base-random", batch=32, max_length=32, padding="static",
                    precision="auto", optim="adamw_torch")
# Levers start from the study's optimized configuration and change one thing each:
# (name, control overrides, variant overrides); `attn` is a bench-only knob.
REFERENCE = dict(model_name="bert-base-random", batch=64, max_length=32, padding="static",
                 precision="auto", optim="adamw_torch_fused", lr=1.5e-4, llrd_decay=0.95, log_every=100)
LEVERS = (
    ("bf16 autocast vs fp32", dict(precision="fp32"), dict(precision="bf16")),
    ("bf16 weights vs bf16 autocast", dict(precision="bf16"), dict(precision="bf16-pure")),
    ("fused vs for-loop AdamW", dict(optim="adamw_torch"), dict(optim="adamw_torch_fused")),
    ("foreach vs for-loop AdamW", dict(optim="adamw_torch"), dict(optim="adamw_torch_foreach")),
    ("loss read every 100 steps vs every step", dict(log_every=1), dict(log_every=100)),
    ("SDPA vs eager attention", dict(attn="eager"), dict(attn="sdpa")),
    ("batch 64 vs 32", dict(batch=32), dict(batch=64)),
    ("batch 128 vs 64", dict(batch=64), dict(batch=128)),
    ("batch 32 x 2 accumulation vs batch 64", dict(batch=64),
     dict(batch=32, gradient_accumulation_steps=2)),
    ("L=32 vs L=64, static", dict(max_length=64), dict(max_length=32)),
    ("dynamic padding vs static, L<=64", dict(max_length=64),
     dict(max_length=64, padding="dynamic", pad_to_multiple_of=8)),
    ("length-grouped dynamic vs static, L<=64", dict(max_length=64),
     dict(max_length=64, padding="dynamic", pad_to_multiple_of=8, group_by_length=True)),
    ("dynamic padding vs static, L<=32", dict(), dict(padding="dynamic", pad_to_multiple_of=8)),
    ("length-grouped dynamic vs static, L<=32", dict(),
     dict(padding="dynamic", pad_to_multiple_of=8, group_by_length=True)),
    ("torch.compile vs eager", dict(compile=False), dict(compile=True)),
)


def other_cpu_cores(interval_s: float = 1.0) -> float:
    """Return how many cores processes other than this one kept busy over the next `interval_s` (Linux)."""
    def read() -> tuple[float, float]:
        with open("/proc/stat") as f:
            ticks = [int(x) for x in f.readline().split()[1:]]
        busy = ticks[0] + ticks[1] + ticks[2] + ticks[5] + ticks[6]  # user nice system irq softirq
        return busy / os.sysconf("SC_CLK_TCK"), sum(os.times()[:2])  # host busy s, this process's s
    b0, m0 = read()
    time.sleep(interval_s)
    b1, m1 = read()
    return max(0.0, (b1 - b0) - (m1 - m0)) / interval_s


def wait_quiet(max_cores: float, timeout_s: float) -> float:
    """Wait until other processes use < `max_cores` cores (or `timeout_s` passes); return their last use."""
    deadline = time.perf_counter() + timeout_s
    while (busy := other_cpu_cores()) >= max_cores and time.perf_counter() < deadline:
        time.sleep(4.0)
    return busy


def alternate(workloads: dict[str, Callable[[], dict]], windows: int = 5, warmup: int = 1,
              sync: Callable[[], None] = lambda: None,
              clock: Callable[[], float] = time.perf_counter,
              gate: Callable[[], float] | None = None) -> dict[str, list[dict]]:
    """Run every workload once per round, order rotated each round; return per-window rates (count/s).

    A workload runs one window and returns what it did ({"samples": n, "flops": f}), and may return the
    "seconds" of its own training loop (excluding per-call setup); else the window's wall time counts,
    read with the device synced. The warm-up rounds are run but not returned. `gate` (e.g. `wait_quiet`)
    runs before each window and its value is kept as the window's "other_cores".
    """
    names, rates = list(workloads), {name: [] for name in workloads}
    for r in range(warmup + windows):
        for name in names[r % len(names):] + names[:r % len(names)]:
            other = gate() if gate else None
            sync()
            t0 = clock()
            counts = workloads[name]()
            sync()
            seconds = counts.pop("seconds", clock() - t0)
            if r >= warmup:
                rates[name].append({k: v / seconds for k, v in counts.items()}
                                   | {"seconds": seconds, "other_cores": other})
    return rates


def median_rate(rates: dict[str, list[dict]], name: str, key: str = "samples") -> float:
    """Return the median over windows of `name`'s rate of `key` (per second)."""
    return statistics.median(w[key] for w in rates[name])


def paired_ratios(rates: dict[str, list[dict]], num: str, den: str, key: str = "samples") -> list[float]:
    """Return `num` / `den` rate per round: windows of one round ran back to back, so a drift of the
    machine's speed (other VMs on the host, clock changes) cancels in each ratio."""
    return [a[key] / b[key] for a, b in zip(rates[num], rates[den])]


def paired_text(rates: dict[str, list[dict]], num: str, den: str, key: str = "samples") -> tuple[float, str]:
    """Return the median per-round ratio and a line giving it with its range and the ratio of medians."""
    per_round = paired_ratios(rates, num, den, key)
    med = statistics.median(per_round)
    return med, (f"{med:.3f}x (median of {len(per_round)} per-round ratios, range {min(per_round):.3f} .. "
                 f"{max(per_round):.3f}; ratio of medians {ratio(rates, num, den, key):.3f}x)")


def ratio(rates: dict[str, list[dict]], num: str, den: str, key: str = "samples") -> float:
    """Return median rate of `num` / median rate of `den` (>1: `num` is faster)."""
    return median_rate(rates, num, key) / median_rate(rates, den, key)


class TimedLoader:
    """A loader wrapper that records the seconds each `next()` blocks the training loop."""

    def __init__(self, loader):
        self.loader, self.wait_s = loader, []

    def __len__(self) -> int:
        return len(self.loader)

    def __iter__(self):
        it = iter(self.loader)
        while True:
            t0 = time.perf_counter()
            try:
                batch = next(it)
            except StopIteration:
                return
            self.wait_s.append(time.perf_counter() - t0)
            yield batch


def bare_loop(model: torch.nn.Module, batches: list[dict], optimizer, scheduler,
              autocast_dtype: torch.dtype | None, device_type: str, max_grad_norm: float | None) -> None:
    """Train on `batches` (already on the device) with nothing but the step: the reference loop."""
    for batch in batches:
        with (torch.autocast(device_type, autocast_dtype) if autocast_dtype else contextlib.nullcontext()):
            loss = model(**batch).loss
        loss.backward()
        if max_grad_norm:
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)


@dataclass
class Setup:
    """One configuration ready to train: its run, model (compiled if asked), loader and optimizer."""

    run: steps.Run
    model: torch.nn.Module
    splits: object
    loader: TimedLoader
    optimizer: torch.optim.Optimizer
    scheduler: object
    fits: list = field(default_factory=list)  # the FitResult of every window

    def flops(self, shapes) -> float:
        """Return the matmul FLOPs (forward + backward, no optimizer) of micro-batches by shape."""
        cfg = self.run.model_config
        return sum(n * 3 * roofline.forward_flops(cfg, b, length) for (b, length), n in shapes.items())


def prepare(data_dir: str | None, device: str, n_steps: int, attn: str | None = None,
            **overrides) -> Setup:
    """Build a configuration the way `run.train_model` does (once), for timing in windows.

    It trains on `n_steps` batches' worth of (shuffled) rows, so a window of `n_steps` optimizer steps is
    one epoch: dynamic padding and length grouping then see the rows' whole length distribution.
    """
    cfg = RunConfig(data_dir=data_dir, device=device, shuffle_subset=True, eval_subset=1,
                    progress=False, results_path=os.devnull, **overrides).validate()
    cfg.train_subset = n_steps * cfg.batch * cfg.gradient_accumulation_steps
    run = steps.start_run(cfg)
    splits = steps.tokenize_data(run, steps.load_data(run))
    model = steps.build_model(run)
    if attn:
        model.set_attn_implementation(attn)
    loader = TimedLoader(steps.train_loader(run, splits["train"]))
    optimizer = optim.build_optimizer(model, cfg.lr, cfg.llrd_decay, cfg.weight_decay, cfg.optim,
                                      run.dev.type, run.precision)
    scheduler = optim.build_scheduler(optimizer, 10_000, cfg.warmup_ratio)
    step_model = torch.compile(model, backend="inductor") if cfg.compile else model
    return Setup(run, step_model, splits, loader, optimizer, scheduler)


class StepClock:
    """Reads the clock (device synced) at each `step()`: `fit` calls it after every optimizer step."""

    def __init__(self, sync: Callable[[], None]):
        self.sync, self.t = sync, None

    def step(self) -> None:
        self.sync()
        self.t = time.perf_counter()


def fit_window(s: Setup, n_steps: int) -> Callable[[], dict]:
    """Return a window: `n_steps` optimizer steps of the project's `fit`, hooks as a real run has them.

    The window's seconds run from entering `fit` (first batch fetch included) to the end of its last
    optimizer step, as `trainer_window`'s run from entering Trainer's loop.
    """
    def window() -> dict:
        mon = monitor.start_monitor(s.run.dev.type)
        clock = StepClock(lambda: synchronize(s.run.dev))
        t0 = time.perf_counter()
        try:
            result = train.fit(s.model, s.loader, s.optimizer, s.scheduler, s.run.dev, s.run.precision,
                               epochs=n_steps, max_steps=n_steps,
                               grad_accum=s.run.cfg.gradient_accumulation_steps,
                               max_grad_norm=s.run.cfg.max_grad_norm, log_every=s.run.cfg.log_every,
                               timing_warmup_steps=s.run.cfg.timing_warmup_steps, progress=False,
                               monitor=mon, profiler=clock)  # fit calls profiler.step() after each step
        finally:
            mon.stop()
        s.fits.append(result)
        return {"samples": sum(result.timer.samples), "flops": s.flops(result.shapes),
                "seconds": clock.t - t0}
    return window


def bare_window(s: Setup, n_steps: int) -> Callable[[], dict]:
    """Return a window: `n_steps` of `bare_loop` over batches moved to the device beforehand."""
    dev = s.run.dev
    batches = [{k: v.to(dev.torch_device) for k, v in b.items()}
               for b in itertools.islice(iter(s.loader.loader), n_steps)]
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(s.run.precision)
    shapes = {tuple(b["input_ids"].shape): 1 for b in batches}
    flops = s.flops(shapes) * n_steps / len(shapes)

    def window() -> dict:
        bare_loop(s.model, batches, s.optimizer, s.scheduler, dtype, dev.type, s.run.cfg.max_grad_norm)
        return {"samples": sum(len(b["labels"]) for b in batches), "flops": flops}
    return window


def trainer_window(s: Setup, n_steps: int, output_dir: str) -> Callable[[], dict]:
    """Return a window: `Trainer.train()` for `n_steps` on the same pre-tokenized split, no logging.

    The window's seconds run from Trainer's `on_train_begin` (after its per-call setup: accelerate's
    prepare, optimizer and schedule) to the last `on_step_end`; a real run pays that setup once.
    """
    from transformers import Trainer, TrainerCallback, TrainingArguments, default_data_collator

    class LoopClock(TrainerCallback):
        def on_train_begin(self, *a, **k):
            synchronize(s.run.dev)
            self.t0 = time.perf_counter()

        def on_step_end(self, *a, **k):
            synchronize(s.run.dev)
            self.t1 = time.perf_counter()

    cfg = s.run.cfg
    args = TrainingArguments(
        output_dir=output_dir, per_device_train_batch_size=cfg.batch, max_steps=n_steps,
        learning_rate=cfg.lr, weight_decay=cfg.weight_decay, max_grad_norm=cfg.max_grad_norm,
        bf16=s.run.precision == "bf16", optim=cfg.optim, eval_strategy="no", save_strategy="no",
        logging_strategy="no", report_to="none", disable_tqdm=True, dataloader_num_workers=0,
        use_cpu=s.run.dev.type == "cpu", seed=cfg.seed)
    loop = LoopClock()
    trainer = Trainer(model=s.model, args=args, train_dataset=s.splits["train"],
                      data_collator=default_data_collator, callbacks=[loop])
    flops = s.flops({(cfg.batch, cfg.max_length): n_steps})

    def window() -> dict:
        trainer.train()
        # accelerate wraps model.forward in autocast on every train(); unwrap so windows don't nest
        s.model.__dict__.pop("forward", None)
        return {"samples": n_steps * cfg.batch, "flops": flops, "seconds": loop.t1 - loop.t0}
    return window


def matmul_tflops(m: int, k: int, n: int, dtype: torch.dtype, seconds: float = 1.0) -> float:
    """Return the median TFLOP/s of an (m,k)@(k,n) matmul on this CPU over `seconds` of repeats."""
    a, b = torch.randn(m, k).to(dtype), torch.randn(k, n).to(dtype)
    for _ in range(3):  # oneDNN picks and JITs its kernel on the first calls
        torch.mm(a, b)
    times_s, deadline = [], time.perf_counter() + seconds
    while len(times_s) < 5 or time.perf_counter() < deadline:
        t0 = time.perf_counter()
        torch.mm(a, b)
        times_s.append(time.perf_counter() - t0)
    return 2 * m * k * n / statistics.median(times_s) / 1e12


def peak_shapes(hidden: int, intermediate: int, tokens_per_step: int) -> dict[str, tuple]:
    """Return candidate shapes for the matmul peak: squares and the model's own linear layers."""
    t = tokens_per_step
    return {"square 1024": (1024, 1024, 1024), "square 2048": (2048, 2048, 2048),
            "square 4096": (4096, 4096, 4096), f"attention proj {t}x{hidden}x{hidden}": (t, hidden, hidden),
            f"FFN up {t}x{hidden}x{intermediate}": (t, hidden, intermediate),
            f"FFN down {t}x{intermediate}x{hidden}": (t, intermediate, hidden)}


def matmul_window(shape: tuple, dtype: torch.dtype, reps: int) -> Callable[[], dict]:
    """Return a window of `reps` matmuls of `shape`, timed in the same rounds as training."""
    m, k, n = shape
    a, b = torch.randn(m, k).to(dtype), torch.randn(k, n).to(dtype)

    def window() -> dict:
        for _ in range(reps):
            torch.mm(a, b)
        return {"flops": 2 * m * k * n * reps}
    return window


def overhead_section(args, sync) -> dict:
    """Return the rates of `fit`, the bare loop and `Trainer` on the same configuration, alternated."""
    make = lambda: prepare(args.data_dir, args.device, args.steps,  # noqa: E731
                           **(OVERHEAD_CFG | {"model_name": args.model}))
    harness, bare, hf = make(), make(), make()  # three copies of the same seeded model
    with tempfile.TemporaryDirectory() as tmp:
        rates = alternate({"fit (harness)": fit_window(harness, args.steps),
                           "bare loop": bare_window(bare, args.steps),
                           "Trainer": trainer_window(hf, args.steps, tmp)},
                          args.windows, args.warmup, sync, gate=args.gate)
    return {"config": OVERHEAD_CFG | {"model_name": args.model}, "precision": harness.run.precision, "rates": rates,
            "steps_per_window": args.steps}


def cpu_peak_scan(dtype: torch.dtype, hidden: int, intermediate: int, tokens_per_step: int) -> dict:
    """Return each candidate shape's matmul TFLOP/s, and roofline's default n=1024 figure."""
    scan = {name: matmul_tflops(*shape, dtype, seconds=0.5)
            for name, shape in peak_shapes(hidden, intermediate, tokens_per_step).items()}
    return {"scan": scan, "roofline_default_n1024": roofline.measure_cpu_matmul_tflops(dtype)}


def speedup_section(args, sync) -> dict:
    """Return baseline vs optimized preset rates, the matmul peak timed in the same rounds, and stalls."""
    base = prepare(args.data_dir, args.device, args.steps, model_name=args.model, preset="baseline")
    opt = prepare(args.data_dir, args.device, args.steps, model_name=args.model, preset="optimized")
    workloads = {"baseline preset": fit_window(base, args.steps),
                 "optimized preset": fit_window(opt, args.steps)}
    mcfg, precision = opt.run.model_config, opt.run.precision
    peak: dict = {"precision": precision}
    if opt.run.dev.type == "cuda":
        key = roofline.cuda_device_key(opt.run.dev.name)
        peak.update(roofline.device_roof(key, precision) if key else {"source": "unknown GPU"})
    else:
        dtype = torch.bfloat16 if precision.startswith("bf16") else torch.float32
        peak.update(cpu_peak_scan(dtype, mcfg.hidden_size, mcfg.intermediate_size,
                                  opt.run.cfg.batch * opt.run.cfg.max_length))
        peak["shape"] = max(peak["scan"], key=peak["scan"].get)
        shape = peak_shapes(mcfg.hidden_size, mcfg.intermediate_size,
                            opt.run.cfg.batch * opt.run.cfg.max_length)[peak["shape"]]
        reps = max(1, round(2e12 * peak["scan"][peak["shape"]] / (2 * shape[0] * shape[1] * shape[2])))
        workloads["matmul peak"] = matmul_window(shape, dtype, reps)  # ~2 s a window
        peak["source"] = f"measured: {peak['shape']} {dtype} matmul, timed in the same rounds"
    rates = alternate(workloads, args.windows, args.warmup, sync, gate=args.gate)
    timed = opt.fits[args.warmup:]
    n_micro = sum(sum(f.shapes.values()) for f in timed)
    waits = opt.loader.wait_s[-n_micro:]
    step_s = [t for f in timed for t in f.timer.step_times_s]
    stall = {"micro_batches": n_micro, "wait_median_ms": 1e3 * statistics.median(waits),
             "wait_max_ms": 1e3 * max(waits), "step_median_ms": 1e3 * statistics.median(step_s),
             "stall_fraction": sum(waits) / (sum(waits) + sum(step_s))}
    return {"model": args.model, "baseline": PRESET_VALUES["baseline"], "optimized": PRESET_VALUES["optimized"],
            "precision": precision, "rates": rates, "peak": peak, "stall": stall,
            "steps_per_window": args.steps}


def accuracy_section(args) -> dict:
    """Return test accuracy and throughput of the baseline and optimized presets on MiniLM."""
    runs = {}
    with tempfile.TemporaryDirectory() as tmp:
        for preset in ("baseline", "optimized"):
            cfg = RunConfig(model_name="minilm", preset=preset, data_dir=args.data_dir,
                            device=args.device, train_subset=args.acc_rows, epochs=args.acc_epochs,
                            progress=False, results_path=str(Path(tmp) / "runs.jsonl"))
            rec = steps.run_all(cfg)
            m, t = rec.get("metrics", {}), rec.get("timing", {})
            runs[preset] = {"status": rec["status"], "test_accuracy": m.get("test_accuracy"),
                            "test_macro_f1": m.get("test_macro_f1"), "val_accuracy": m.get("val_accuracy"),
                            "samples_per_s": t.get("samples_per_s"), "train_time_s": t.get("train_time_s"),
                            "steps": t.get("steps"), "precision": rec["precision"]["used"]}
    return {"rows": args.acc_rows, "epochs": args.acc_epochs, "runs": runs}


def data_section(args) -> dict:
    """Return the seconds to tokenize the full training split with the optimized preset's padding."""
    from datasets import DatasetDict

    from helpers import data, models

    ds, _ = data.load_emotion(args.data_dir)
    train_only = DatasetDict(train=ds["train"])
    tokenizer = models.load_tokenizer("minilm")
    cfg = RunConfig(preset="optimized").validate()
    times_s = []
    for _ in range(3):
        t0 = time.perf_counter()
        tokens.tokenize(train_only, tokenizer, cfg.max_length, cfg.padding)
        times_s.append(time.perf_counter() - t0)
    return {"rows": len(ds["train"]), "max_length": cfg.max_length, "padding": cfg.padding,
            "tokenize_s": times_s}


def levers_section(args, sync) -> dict:
    """Return, for each lever, the variant / control samples/s ratio, alternated in one process."""
    out = []
    for name, control, variant in LEVERS:
        if args.lever and not any(s.lower() in name.lower() for s in args.lever):
            continue
        ref = REFERENCE | {"model_name": args.model}
        a = prepare(args.data_dir, args.device, args.steps, **(ref | control))
        b = prepare(args.data_dir, args.device, args.steps, **(ref | variant))
        rates = alternate({"control": fit_window(a, args.steps), "variant": fit_window(b, args.steps)},
                          args.windows, args.warmup, sync, gate=args.gate)
        out.append({"name": name, "control": control, "variant": variant,
                    "control_samples_per_s": median_rate(rates, "control"),
                    "variant_samples_per_s": median_rate(rates, "variant"),
                    "ratio": statistics.median(paired_ratios(rates, "variant", "control")), "rates": rates,
                    "warmup_s": b.fits[0].timer.summary()["train_time_s"]})
        print(f"{name}: {out[-1]['ratio']:.3f}x", file=sys.stderr, flush=True)
        del a, b
    return {"steps_per_window": args.steps, "reference": REFERENCE, "levers": out}


def _verdict(value: float | None, target: float) -> str:
    return "not measured" if value is None else ("met" if value >= target else "**not met**")


def _rate_table(rates: dict[str, list[dict]], key: str = "samples", unit: str = "samples/s") -> list[str]:
    lines = [f"| configuration | median {unit} | min .. max | windows |", "|---|---:|---:|---:|"]
    for name, windows in rates.items():
        if key in windows[0]:
            values = [w[key] for w in windows]
            lines.append(f"| {name} | {statistics.median(values):.3g} | {min(values):.3g} .. "
                         f"{max(values):.3g} | {len(values)} |")
    return lines


def _windows(results: dict):
    """Yield every timed window of every section."""
    for sec in results.values():
        for rates in [sec.get("rates")] + [x.get("rates") for x in sec.get("levers", [])]:
            for windows in (rates or {}).values():
                yield from windows


def _head(results: dict, meta: dict) -> str:
    """Return the italic line naming the command, date, machine and load of the windows in `results`."""
    gate = ""
    if meta.get("max_other_cores"):
        others = [w["other_cores"] for w in _windows(results) if w.get("other_cores") is not None]
        late = sum(o >= meta["max_other_cores"] for o in others)
        gate = (f" Each window waited until other processes used < {meta['max_other_cores']} cores; "
                f"{late} of {len(others)} windows started without that (wait timed out).")
    return (f"_Written by `{meta['command']}` on {meta['date']}. Machine: {meta['machine']}; "
            f"torch {meta['torch']}, transformers {meta['transformers']}, {meta['threads']} torch "
            f"threads; 1-minute load average {meta['load_start']:.2f} at start, "
            f"{meta['load_end']:.2f} at end.{gate}_")


def render(results: dict, meta: dict) -> dict[str, str]:
    """Return the Markdown blocks ('main', 'levers') for the sections in `results`."""
    head = _head(results, meta)
    md = [head, ""]
    o = results.get("overhead")
    md += ["### 1. Harness overhead: `fit` vs a bare PyTorch loop", ""]
    md += ["### 2. `fit` vs Hugging Face `Trainer`", ""] if not o else []
    if o:
        r_bare, t_bare = paired_text(o["rates"], "fit (harness)", "bare loop")
        r_hf, t_hf = paired_text(o["rates"], "fit (harness)", "Trainer")
        md += [f"{o['config']['model_name']}, batch {o['config']['batch']}, L={o['config']['max_length']}, "
               f"precision {o['precision']}, {o['config']['optim']}; {o['steps_per_window']} "
               "optimizer steps a window.", "", *_rate_table(o["rates"]), "",
               f"**fit / bare loop = {t_bare}** (target >= 0.97x: {_verdict(r_bare, 0.97)}).", "",
               "### 2. `fit` vs Hugging Face `Trainer`", "",
               f"Same rounds as section 1. **fit / Trainer = {t_hf}** "
               f"(target >= 1.0x: {_verdict(r_hf, 1.0)}).", ""]
    else:
        md += ["Not measured in this run (`--sections overhead`).", ""]
    s = results.get("speedup")
    md += ["### 3. Optimized preset vs the study's baseline preset", ""]
    if s:
        x, t_x = paired_text(s["rates"], "optimized preset", "baseline preset")
        md += [f"{s['model']}; baseline `{s['baseline']}`; optimized `{s['optimized']}`; "
               f"{s['steps_per_window']} optimizer steps a window.", "", *_rate_table(s["rates"]), "",
               f"**optimized / baseline samples/s = {t_x}** (target >= 10x: {_verdict(x, 10)}).", ""]
    else:
        md += ["Not measured in this run (`--sections speedup`).", ""]
    md += ["### 4. MFU of the optimized preset", ""]
    if s:
        p = s["peak"]
        achieved = median_rate(s["rates"], "optimized preset", "flops") / 1e12
        peak = median_rate(s["rates"], "matmul peak", "flops") / 1e12 if "matmul peak" in s["rates"] \
            else p.get("peak_tflops")
        mfu = achieved / peak if peak else None
        mfu_rounds = ""
        if "matmul peak" in s["rates"]:  # timed in the same rounds: the per-round MFU cancels drift
            mfu, text = paired_text(s["rates"], "optimized preset", "matmul peak", "flops")
            mfu_rounds = f" Per round, optimized FLOP/s / peak FLOP/s = {text}."
        md += [f"Model FLOPs = forward + backward matmuls (3 x `roofline.forward_flops`, padded length; "
               f"AdamW's elementwise work left out). Peak: {p.get('source')}.", ""]
        if "scan" in p:
            md += ["| matmul shape | TFLOP/s (0.5 s scan) |", "|---|---:|",
                   *[f"| {k} | {v:.3f} |" for k, v in p["scan"].items()],
                   f"| `roofline.measure_cpu_matmul_tflops` default (n=1024) | "
                   f"{p['roofline_default_n1024']:.3f} |", ""]
        md += [f"Achieved {achieved:.3f} TFLOP/s (median) against a {p['precision']} peak of "
               f"{peak or float('nan'):.3f} TFLOP/s: **MFU = "
               f"{'%.1f%%' % (100 * mfu) if mfu else 'not measured'}** "
               f"(target >= 40%: {_verdict(mfu, 0.40)}).{mfu_rounds}", ""]
    else:
        md += ["Not measured in this run (`--sections speedup`).", ""]
    md += ["### 5. Data pipeline", ""]
    d = results.get("data")
    if d:
        t = statistics.median(d["tokenize_s"])
        md += [f"Tokenizing the full training split ({d['rows']} rows, max_length {d['max_length']}, "
               f"{d['padding']} padding, `tokens.tokenize`): median of {len(d['tokenize_s'])} = "
               f"**{t:.2f} s** ({d['rows'] / t:,.0f} rows/s).", ""]
    if s:
        st = s["stall"]
        md += [f"Loader stalls in the optimized windows ({st['micro_batches']} micro-batches): wait on "
               f"`next(loader)` median {st['wait_median_ms']:.2f} ms, max {st['wait_max_ms']:.2f} ms, "
               f"against a median step of {st['step_median_ms']:.0f} ms: **{100 * st['stall_fraction']:.2f}% "
               "of the loop waits on data**.", ""]
    if not d and not s:
        md += ["Not measured in this run (`--sections data speedup`).", ""]
    md += ["### Accuracy: baseline vs optimized preset (MiniLM)", ""]
    a = results.get("accuracy")
    if a:
        md += [f"`model_name=minilm`, first {a['rows']} training rows, {a['epochs']} epoch(s), full "
               "test split.", "", "| preset | precision | steps | test accuracy | test macro-F1 | "
               "samples/s | train time (s) |", "|---|---|---:|---:|---:|---:|---:|"]
        for preset, r in a["runs"].items():
            md.append(f"| {preset} | {r['precision']} | {r['steps']} | {r['test_accuracy']:.4f} | "
                      f"{r['test_macro_f1']:.4f} | {r['samples_per_s']:.1f} | {r['train_time_s']:.0f} |")
        b, o2 = a["runs"]["baseline"]["test_accuracy"], a["runs"]["optimized"]["test_accuracy"]
        md += ["", f"Optimized - baseline test accuracy = **{o2 - b:+.4f}** (target >= 0: "
               f"{_verdict(o2 - b, 0)}).", ""]
    else:
        md += ["Not measured in this run (`--sections accuracy`).", ""]
    blocks = {"main": "\n".join(md)}
    lv = results.get("levers")
    if lv:
        rows = [head, "", f"Reference `{lv['reference']}`; {lv['steps_per_window']} optimizer steps a "
                "window; control and variant alternate round by round; ratio = variant / control "
                "samples/s, the median of the per-round ratios (their range beside).", "",
                "| lever | control | variant | control samples/s | variant samples/s | ratio | per-round range | "
                "variant's first window (s) |", "|---|---|---|---:|---:|---:|---:|---:|"]
        for x in lv["levers"]:
            per_round = paired_ratios(x["rates"], "variant", "control")
            rows.append(f"| {x['name']} | `{x['control']}` | `{x['variant']}` | "
                        f"{x['control_samples_per_s']:.2f} | {x['variant_samples_per_s']:.2f} | "
                        f"{statistics.median(per_round):.3f}x | {min(per_round):.3f} .. {max(per_round):.3f} | "
                        f"{x['warmup_s']:.1f} |")
        blocks["levers"] = "\n".join(rows)
    return blocks


def render_raw(raw: Path) -> dict[str, str]:
    """Return the Markdown blocks from the raw windows file (`--render`): the latest record of each main
    section, and the latest measurement of each lever, each run named with its own command line."""
    rows = [json.loads(line) for line in raw.read_text().splitlines() if line.strip()]
    latest = {r["section"]: r for r in rows if r["section"] != "levers"}
    blocks = {}
    if latest:
        runs: dict[tuple, list[str]] = {}  # one head line per run (command, date) that wrote a section
        for name, r in latest.items():
            runs.setdefault((r["meta"]["command"], r["meta"]["date"]), []).append(name)
        metas = {key: {"load_end": latest[names[-1]]["meta"]["load_start"]} | latest[names[-1]]["meta"]
                 for key, names in runs.items()}
        heads = [_head({n: latest[n]["result"] for n in names}, metas[key])
                 .replace("_Written by", f"_{', '.join(names)}: written by", 1) for key, names in runs.items()]
        body = render({n: r["result"] for n, r in latest.items()}, next(iter(metas.values())))["main"]
        blocks["main"] = "\n\n".join(heads) + "\n" + body.split("\n", 1)[1]
    levers, seen = [], set()
    for r in reversed([r for r in rows if r["section"] == "levers"]):  # newest first
        fresh = [x for x in r["result"]["levers"] if x["name"] not in seen]
        seen |= {x["name"] for x in fresh}
        if fresh:
            result = {"levers": {**r["result"], "levers": fresh}}
            levers.insert(0, render(result, {"load_end": r["meta"]["load_start"]} | r["meta"])["levers"])
    if levers:
        blocks["levers"] = "\n\n".join(levers)
    return blocks


def write_blocks(path: Path, blocks: dict[str, str]) -> None:
    """Replace each `<!-- bench:NAME begin -->...<!-- bench:NAME end -->` block in `path` (append if absent)."""
    text = path.read_text() if path.exists() else "# Benchmarks\n"
    for name, body in blocks.items():
        begin, end = f"<!-- bench:{name} begin -->", f"<!-- bench:{name} end -->"
        block = f"{begin}\n{body}\n{end}"
        if begin in text and end in text:
            text = text[:text.index(begin)] + block + text[text.index(end) + len(end):]
        else:
            text = text.rstrip("\n") + f"\n\n{block}\n"
    path.write_text(text)


def machine(dev_type: str) -> str:
    """Return the machine in words: the GPU name, or the CPU model with its bf16 capability."""
    if dev_type == "cuda":
        return f"{torch.cuda.get_device_name()} (host {cpu_name()}, {cpu_capability()})"
    return f"{cpu_name()} ({cpu_capability()}), {os.cpu_count()} cores"


def main(argv: list[str] | None = None) -> dict:
    """Run the chosen sections, write their Markdown into `--out`, return the raw results."""
    import transformers

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    parser.add_argument("--model", default="bert-base-random",
                        help="model of the timed sections (a tiny local folder for smoke runs)")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (CPU); default: all")
    parser.add_argument("--data-dir", default=None, help="emotion folder; else $EMOTION_DATA_DIR/hub")
    parser.add_argument("--sections", nargs="+", default=[s for s in SECTIONS if s != "levers"],
                        choices=SECTIONS)
    parser.add_argument("--lever", nargs="*", default=None, help="only levers whose name contains one")
    parser.add_argument("--windows", type=int, default=5, help="timed windows per configuration")
    parser.add_argument("--warmup", type=int, default=1, help="untimed warm-up windows")
    parser.add_argument("--steps", type=int, default=4,
                        help="optimizer steps a window: one epoch over steps x batch rows")
    parser.add_argument("--acc-rows", type=int, default=4000, help="training rows of the accuracy runs")
    parser.add_argument("--acc-epochs", type=int, default=1)
    parser.add_argument("--max-other-cores", type=float, default=0.5,
                        help="CPU: before each window, wait while other processes use this many cores")
    parser.add_argument("--quiet-timeout", type=float, default=300, help="...but at most this many s")
    parser.add_argument("--out", default="BENCHMARKS.md")
    parser.add_argument("--render", metavar="RAW", default=None,
                        help="run nothing: rewrite --out from the raw windows in RAW (Experiment/results/bench.jsonl)")
    args = parser.parse_args(argv)
    if args.render:
        blocks = render_raw(repo_path(args.render))
        write_blocks(repo_path(args.out), blocks)
        print("\n\n".join(blocks.values()))
        return {}
    if args.threads:
        torch.set_num_threads(args.threads)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")  # as `make`: rayon threads fight torch's
    dev = resolve_device(args.device)
    args.device = dev.type
    args.gate = None if dev.type != "cpu" or args.max_other_cores <= 0 else \
        (lambda: wait_quiet(args.max_other_cores, args.quiet_timeout))
    sync = lambda: synchronize(dev)  # noqa: E731
    meta = {"command": "python -m helpers.bench " + " ".join(sys.argv[1:] if argv is None else argv),
            "date": datetime.datetime.now().strftime("%Y-%m-%d %H:%M"), "machine": machine(dev.type),
            "torch": torch.__version__, "transformers": transformers.__version__,
            "threads": torch.get_num_threads(), "load_start": os.getloadavg()[0],
            "max_other_cores": args.max_other_cores if args.gate else None}
    results: dict = {}
    for section in args.sections:
        print(f"bench: {section} ...", file=sys.stderr, flush=True)
        if section == "overhead":
            results["overhead"] = overhead_section(args, sync)
        elif section == "speedup":
            results["speedup"] = speedup_section(args, sync)
        elif section == "accuracy":
            results["accuracy"] = accuracy_section(args)
        elif section == "data":
            results["data"] = data_section(args)
        elif section == "levers":
            results["levers"] = levers_section(args, sync)
        raw = repo_path("Experiment/results/bench.jsonl")  # raw windows, kept if a later section dies
        raw.parent.mkdir(parents=True, exist_ok=True)
        meta["load_end"] = os.getloadavg()[0]
        with open(raw, "a") as f:
            f.write(json.dumps({"meta": meta, "section": section, "result": results[section]}, default=str) + "\n")
    meta["load_end"] = os.getloadavg()[0]
    blocks = render(results, meta)
    if set(args.sections) <= {"levers"}:
        blocks.pop("main")
    write_blocks(repo_path(args.out), blocks)
    print("\n\n".join(blocks.values()))
    return results


if __name__ == "__main__":
    main()
