"""The XLA side of a run: the environment torch-xla and the Neuron compiler read at start-up, and what they compiled.

    os.environ.update(xla.environment(args))   # before torch_xla starts: NEURON_CC_FLAGS, rounding, XLA_FLAGS
    compiles = xla.CompileLog(args, neuron)    # counters at marks: per step, training against evaluation
    for batch in compiles.wrap(loader): ...    # with compiles.evaluating(): a periodic evaluation, counted apart
    rec.xla = compiles.section(warmup_batches, rec.timing, distinct_shapes)

Every new graph (a new input shape, precision or step) is a cache miss that compiles: `UncachedCompile` counts them,
`CompileTime` sums their seconds, `ExecuteTime` counts executions (torch_xla.debug.metrics; NEURON.md "Measuring").
"""

from __future__ import annotations

import contextlib
import os
import shlex

from helpers import record

FAST_COMPILE = "--xla_backend_optimization_level=0"
NEURON_CACHE = "/var/tmp/neuron-compile-cache"
WATCHED = (
    "PJRT_DEVICE",
    "XLA_FLAGS",
    "NEURON_CC_FLAGS",
    "NEURON_RT_STOCHASTIC_ROUNDING_EN",
    "NEURON_RT_STOCHASTIC_ROUNDING_SEED",
    "XLA_USE_BF16",
    "NEURON_COMPILE_CACHE_URL",
    "NEURON_RT_NUM_CORES",
)


def cc_flags(args) -> str:
    """Return NEURON_CC_FLAGS for `args`: model type, strategy, optlevel, auto-cast, cache, then extra_cc_flags."""
    flags = [f"--model-type={args.model_type}"] if args.model_type != "none" else []
    if args.distribution_strategy != "none":
        flags.append(f"--distribution-strategy={args.distribution_strategy}")
    flags.append(f"--optlevel={args.optlevel}")
    extra = shlex.split(args.extra_cc_flags)
    # neuronx-cc casts fp32 matmuls to bf16 by default; autocast and true fp32 both need that off
    # (migration-from-xla-downcast-bf16.rst); an explicit --auto-cast in extra_cc_flags wins
    if not any(f.startswith("--auto-cast") and not f.startswith("--auto-cast-type") for f in extra):
        flags.append("--auto-cast=none")
    if args.neuron_cache_dir:
        flags.append(f"--cache_dir={args.neuron_cache_dir}")  # over NEURON_COMPILE_CACHE_URL (neuron-caching.rst)
    return " ".join(flags + extra)


def environment(args, neuron: bool) -> dict[str, str]:
    """Return the variables a run of `args` sets before torch_xla starts (a user's own NEURON_CC_FLAGS come last)."""
    user = os.environ.get("ACCELBENCH_USER_NEURON_CC_FLAGS", os.environ.get("NEURON_CC_FLAGS", ""))
    env = {"NEURON_CC_FLAGS": " ".join(f for f in (cc_flags(args), user) if f), "ACCELBENCH_USER_NEURON_CC_FLAGS": user}
    rounding = args.stochastic_rounding or args.precision == "bf16-pure-sr"
    env["NEURON_RT_STOCHASTIC_ROUNDING_EN"] = "1" if rounding else "0"
    if rounding:
        env["NEURON_RT_STOCHASTIC_ROUNDING_SEED"] = str(args.seed)  # default 0: fixed for repeats
    if args.bf16_mode == "xla_use_bf16":
        env["XLA_USE_BF16"] = "1"  # deprecated since torch-neuronx 2.5; the record calls it what it is
    if args.neuron_cache_dir:
        env["NEURON_COMPILE_CACHE_URL"] = args.neuron_cache_dir  # neuron_parallel_compile reads it
    if "LOCAL_RANK" not in os.environ:
        env["NEURON_RT_NUM_CORES"] = "1"  # one process drives one NeuronCore; torchrun's ranks get one each
    if not neuron:
        env["PJRT_DEVICE"] = os.environ.get("PJRT_DEVICE", "CPU")
        if args.xla_fast_compile and "xla_backend_optimization_level" not in os.environ.get("XLA_FLAGS", ""):
            env["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {FAST_COMPILE}".strip()
    return env


def snapshot() -> dict:
    """Return the process's compile and execute counters so far (counts and seconds)."""
    import torch_xla.debug.metrics as met

    out = {"uncached_compiles": met.counter_value("UncachedCompile") or 0}
    out["cached_compiles"] = met.counter_value("CachedCompile") or 0
    for metric, key in (("CompileTime", "compile"), ("ExecuteTime", "execute")):
        data = met.metric_data(metric)  # (count, accumulated ns, samples); None before its first use
        out[f"{key}_count"], out[f"{key}_time_s"] = (data[0], data[1] / 1e9) if data else (0, 0.0)
    return out


def settled() -> dict:
    """Return `snapshot()` once the device has finished what was queued (executions count when they complete)."""
    import torch_xla.core.xla_model as xm

    xm.wait_device_ops()
    return snapshot()


def delta(before: dict, after: dict) -> dict:
    """Return `after - before` for every counter."""
    return {k: round(after[k] - before[k], 6) for k in before}


class CompileLog:
    """A run's compile counters at marks, and the compilations of each training step."""

    def __init__(self, args, neuron: bool):
        self.marks = {"start": snapshot()}
        self.env = {k: os.environ[k] for k in WATCHED if k in os.environ}  # what the first graph compiles with
        self.per_batch: list[int] = []  # UncachedCompile before each training batch, less evaluations' own
        self.set_aside = 0
        self.periodic: dict | None = None
        where = args.neuron_cache_dir or NEURON_CACHE
        self.cache = record.XlaCache(kind="Neuron compile cache (neuronx-cc)", dir=where) if neuron else None
        if not neuron and args.xla_cache_dir:
            import torch_xla.runtime as xr

            folder = record.repo_path(args.xla_cache_dir)
            folder.mkdir(parents=True, exist_ok=True)
            with contextlib.suppress(RuntimeError):  # a second run in one process: the first one's cache serves
                xr.initialize_cache(str(folder), readonly=False)
            self.cache = record.XlaCache(kind="torch-xla persistent compilation cache", dir=str(folder))

    def wrap(self, loader) -> Counting:
        """Return `loader` noting the compilations so far before each batch (batch k+1 comes after step k's sync)."""
        return Counting(loader, self)

    def mark(self, name: str) -> None:
        """Keep the counters now under `name` (train_end: what follows is evaluation)."""
        self.marks[name] = settled()

    @contextlib.contextmanager
    def evaluating(self):
        """Count what runs inside as evaluation, not as the training step it follows (a periodic evaluation)."""
        before = settled()
        yield
        spent = delta(before, settled())
        self.periodic = spent if self.periodic is None else {k: self.periodic[k] + v for k, v in spent.items()}
        self.set_aside += spent["uncached_compiles"]

    def section(self, warmup_batches: int, timing: record.Timing | None, shapes: int) -> record.Xla:
        """Return the record's `xla` section: compilations and their seconds, per step, training against evaluation."""
        end = snapshot()
        start, train_end = self.marks["start"], self.marks.get("train_end", end)
        train, evaluation = delta(start, train_end), delta(train_end, end)
        if self.periodic:  # evaluations during training are evaluation's, not the steps'
            train = {k: round(v - self.periodic[k], 6) for k, v in train.items()}
            evaluation = {k: round(v + self.periodic[k], 6) for k, v in evaluation.items()}
        counts = [*self.per_batch, train_end["uncached_compiles"] - self.set_aside]
        per_step = [b - a for a, b in zip(counts, counts[1:])]
        first, steady = (timing.first_step_s, timing.step_time_median_s) if timing else (None, None)
        changed = {k: os.environ.get(k) for k in WATCHED if os.environ.get(k) != self.env.get(k)}
        return record.Xla(
            graph_compilations=end["uncached_compiles"] - start["uncached_compiles"],
            compile_time_s=round(end["compile_time_s"] - start["compile_time_s"], 6),
            run=delta(start, end),
            train=train,
            eval=evaluation,
            periodic_eval=self.periodic,
            compilations_per_step={str(i): n for i, n in enumerate(per_step) if n},
            compilations_after_warmup=sum(per_step[warmup_batches:]),
            warmup_batches=warmup_batches,
            distinct_input_shapes=shapes,
            first_step_s=first,
            steady_step_s=steady,
            first_over_steady=round(first / steady, 2) if first and steady else None,
            cache=self.cache,
            neuron_cc_flags=self.env.get("NEURON_CC_FLAGS"),
            env=self.env,
            env_changed_during_run=changed or None,
        )


class Counting:
    """A training loader that notes UncachedCompile before each batch: two notes differ by what a step compiled."""

    def __init__(self, loader, log: CompileLog):
        self.loader, self.log, self.sampler = loader, log, getattr(loader, "_loader", loader).sampler

    def __len__(self) -> int:
        return len(self.loader)

    def __iter__(self):
        import torch_xla.debug.metrics as met

        for batch in self.loader:
            self.log.per_batch.append((met.counter_value("UncachedCompile") or 0) - self.log.set_aside)
            yield batch
