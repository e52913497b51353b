"""What torch-xla compiled during a run: graph compilations, compile time, shapes, first vs steady step.

Every new graph (a new input shape, a new precision, a different step such as the optimizer's first)
is a cache miss that compiles: `UncachedCompile` counts them, `CompileTime` sums their seconds
(torch_xla.debug.metrics; NEURON.md "Measuring"). The counters are process-wide, so the run takes
snapshots at its start, after training and at its end, and the record carries the differences.
"""
from __future__ import annotations

import functools
import os

XLA_ENV = ("PJRT_DEVICE", "NEURON_CC_FLAGS", "NEURON_RT_STOCHASTIC_ROUNDING_EN",
           "NEURON_RT_STOCHASTIC_ROUNDING_SEED", "XLA_USE_BF16", "NEURON_COMPILE_CACHE_URL",
           "NEURON_RT_NUM_CORES", "NEURON_RT_VISIBLE_CORES")


def use_xla_checkpointing(model) -> None:
    """Make a model's activation checkpointing use torch_xla's implementation (re-entrant).

    transformers uses torch.utils.checkpoint, which looks up a `torch.xla` device module for the RNG
    state and fails on XLA; torch_xla's version saves the XLA RNG state instead.
    """
    from torch_xla.utils.checkpoint import checkpoint

    model._set_gradient_checkpointing(enable=True, gradient_checkpointing_func=functools.partial(
        checkpoint, use_reentrant=True))  # torch_xla supports only the re-entrant variant


def compile_snapshot() -> dict:
    """Return the process's compile/execute counters so far: counts and seconds."""
    import torch_xla.debug.metrics as met

    out = {"uncached_compiles": met.counter_value("UncachedCompile") or 0,
           "cached_compiles": met.counter_value("CachedCompile") or 0}
    for metric, key in (("CompileTime", "compile"), ("ExecuteTime", "execute")):
        data = met.metric_data(metric)  # (count, accumulated ns, samples), None before first use
        out[f"{key}_count"] = data[0] if data else 0
        out[f"{key}_time_s"] = data[1] / 1e9 if data else 0.0
    return out


def _delta(before: dict, after: dict) -> dict:
    return {k: round(after[k] - before[k], 6) for k in before}


def mark(run, name: str) -> None:
    """Store a compile snapshot under `name` in the run (a no-op off XLA)."""
    if run.dev.type == "xla":
        run.extras.setdefault("xla_marks", {})[name] = compile_snapshot()


class CompileCountingLoader:
    """Wraps the training loader; before handing out each batch it notes how many graphs compiled so far.

    Batch k+1 is requested only after step k ended with torch_xla.sync(), so the difference between
    two notes is what step k compiled.
    """

    def __init__(self, loader):
        self.loader = loader
        self.counts: list[int] = []  # UncachedCompile before each batch, over all epochs

    def __len__(self) -> int:
        return len(self.loader)

    def __iter__(self):
        import torch_xla.debug.metrics as met

        for batch in self.loader:
            self.counts.append(met.counter_value("UncachedCompile") or 0)
            yield batch

    def per_batch(self, final: int) -> list[int]:
        """Return the graphs compiled during each batch's step (`final`: the counter after the last)."""
        counts = self.counts + [final]
        return [b - a for a, b in zip(counts, counts[1:])]


def track_compiles(run, loader):
    """Return `loader` wrapped to count compilations per step on XLA; unchanged elsewhere."""
    if run.dev.type != "xla":
        return loader
    run.extras["xla_loader"] = CompileCountingLoader(loader)
    return run.extras["xla_loader"]


def section(run) -> dict:
    """Return the record's `xla` section: compilations and compile seconds (whole run, training,
    evaluation, after warm-up), distinct input shapes, first vs steady step seconds, the Neuron env."""
    marks = run.extras.get("xla_marks", {})
    end = compile_snapshot()
    start = marks.get("start", end)
    train_end = marks.get("train_end", end)
    # model set-up before training only transfers weights (no graph), so start..train_end is training
    out = {"graph_compilations": end["uncached_compiles"] - start["uncached_compiles"],
           "compile_time_s": round(end["compile_time_s"] - start["compile_time_s"], 6),
           "run": _delta(start, end), "train": _delta(start, train_end),
           "eval": _delta(train_end, end)}
    loader = run.extras.get("xla_loader")
    warmup = run.cfg.timing_warmup_steps * run.cfg.gradient_accumulation_steps
    if loader is not None:
        per_batch = loader.per_batch(final=train_end["uncached_compiles"])
        out["compilations_per_step"] = {i: n for i, n in enumerate(per_batch) if n}  # zeros left out
        out["compilations_after_warmup"] = sum(per_batch[warmup:])
        out["warmup_batches"] = warmup
    fit = run.extras.get("fit")
    if fit is not None:
        timing = fit.timer.summary()
        out["distinct_input_shapes"] = len(fit.shapes)
        out["first_step_s"] = timing["first_step_s"]
        out["steady_step_s"] = timing["step_time_median_s"]  # median after the warm-up steps
        if timing["first_step_s"] and timing["step_time_median_s"]:
            out["first_over_steady"] = round(timing["first_step_s"] / timing["step_time_median_s"], 2)
    out["bf16_mode"] = run.cfg.bf16_mode
    out["neuron_cc_flags"] = os.environ.get("NEURON_CC_FLAGS")  # exactly what the compiler saw
    out["env"] = {k: os.environ[k] for k in XLA_ENV if k in os.environ}
    return out
