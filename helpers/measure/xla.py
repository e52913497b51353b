"""What torch-xla compiled and executed during a run: graph compilations, their seconds, per step.

Every new graph (a new input shape, a new precision, a different step such as the optimizer's first)
is a cache miss that compiles: `UncachedCompile` counts them, `CompileTime` sums their seconds, and
`ExecuteTime` counts graph executions (torch_xla.debug.metrics; shared/NEURON.md "Measuring"). The
counters are process-wide, so a CompileLog takes snapshots at marks (start, end of training, end) and
the record carries the differences.
"""

from __future__ import annotations

import contextlib
import os

from helpers.run.args import RunArgs
from helpers.run.paths import repo_path
from helpers.run.schema import Timing, Xla, XlaCache

XLA_ENV = (
    "PJRT_DEVICE",
    "XLA_FLAGS",
    "XLA_PERSISTENT_CACHE_PATH",
    "NEURON_CC_FLAGS",
    "NEURON_RT_STOCHASTIC_ROUNDING_EN",
    "NEURON_RT_STOCHASTIC_ROUNDING_SEED",
    "XLA_USE_BF16",
    "NEURON_COMPILE_CACHE_URL",
    "NEURON_RT_NUM_CORES",
    "NEURON_RT_VISIBLE_CORES",
)


def init_cache(args: RunArgs, dev) -> XlaCache:
    """Open torch-xla's persistent compilation cache where asked (before any XLA computation); return its section."""
    if dev.neuron:  # the compiler's NEFF cache is the one that counts
        neff_dir = args.neuron.neuron_cache_dir or "/var/tmp/neuron-compile-cache"
        return XlaCache(kind="Neuron compile cache (neuronx-cc)", dir=neff_dir)
    kind = "torch-xla persistent compilation cache"
    if not args.neuron.xla_cache_dir:
        # torch-xla 2.9's CPU backend writes entries it can never load back (tests/run/test_xla.py shows it)
        return XlaCache(
            kind=kind,
            state="off",
            reason=(
                "torch-xla 2.9's CPU backend cannot load a serialized executable, so a cache would only be "
                "written; set xla_cache_dir to use it where the backend can"
            ),
        )
    import torch_xla.runtime as xr

    folder = repo_path(args.neuron.xla_cache_dir)
    folder.mkdir(parents=True, exist_ok=True)
    try:
        xr.initialize_cache(str(folder), readonly=False)
    except RuntimeError as err:  # a second run in one process: the cache opened by the first serves
        return XlaCache(kind=kind, dir=str(folder), note=f"already initialized in this process ({err})")
    return XlaCache(kind=kind, dir=str(folder))


def cache_state(run: dict) -> str:
    """Return what the run's persistent-cache counters say: warm, cold, or written but not loadable."""
    if run.get("persistent_cache_load_failures"):
        return "written, not loadable on this backend: every graph compiled again"
    if run.get("persistent_cache_hits") and not run.get("persistent_cache_misses"):
        return "warm: every graph loaded from the cache"
    if run.get("persistent_cache_hits"):
        return "partly warm"
    return "cold: every graph compiled and written"


def snapshot() -> dict:
    """Return the process's compile/execute counters so far: counts and seconds."""
    import torch_xla.debug.metrics as met

    out = {
        "uncached_compiles": met.counter_value("UncachedCompile") or 0,
        "cached_compiles": met.counter_value("CachedCompile") or 0,
    }
    for metric, key in (("CompileTime", "compile"), ("ExecuteTime", "execute")):
        data = met.metric_data(metric)  # (count, accumulated ns, samples), None before first use
        out[f"{key}_count"] = data[0] if data else 0
        out[f"{key}_time_s"] = data[1] / 1e9 if data else 0.0
    # torch_xla's persistent cache (XLA_PERSISTENT_CACHE_PATH, torch_xla.runtime.initialize_cache): hits
    # are graphs a warm cache saved from compiling. On XLA-CPU with torch-xla 2.9 every existing entry
    # fails to load ("Deserializing serialized executable not supported") and is compiled again: these
    # counters show that as load failures, not hits. Neuron's NEFF cache is the compiler's own.
    for counter, key in (
        ("PersistentCacheHit", "hits"),
        ("PersistentCacheMiss", "misses"),
        ("PersistentCacheDeserializeFailure", "load_failures"),
    ):
        out[f"persistent_cache_{key}"] = met.counter_value(counter) or 0
    return out


def settled_snapshot() -> dict:
    """Return `snapshot()` once the device has finished what was queued."""
    # executions are counted when they complete: a snapshot taken while one runs charges whichever side finishes it
    import torch_xla.core.xla_model as xm

    xm.wait_device_ops()
    return snapshot()


def delta(before: dict, after: dict) -> dict:
    """Return `after - before` for every counter."""
    return {k: round(after[k] - before[k], 6) for k in before}


class CountingLoader:
    """Wraps the training loader; before handing out each batch it notes the compilations so far."""

    # batch k+1 is requested only after step k ended with torch_xla.sync(): two notes differ by what step k
    # compiled, less what an evaluation between them compiled (`set_aside`)

    def __init__(self, loader):
        self.loader = loader
        self.counts: list[int] = []  # UncachedCompile before each batch, over all epochs, less set_aside
        self.set_aside = 0  # compilations of evaluations run between steps (CompileLog.evaluating)

    def __len__(self) -> int:
        return len(self.loader)

    def __iter__(self):
        import torch_xla.debug.metrics as met

        for batch in self.loader:
            self.counts.append((met.counter_value("UncachedCompile") or 0) - self.set_aside)
            yield batch

    def per_batch(self, final: int) -> list[int]:
        """Return the graphs compiled during each batch's step (`final`: the counter after the last)."""
        counts = self.counts + [final - self.set_aside]
        return [b - a for a, b in zip(counts, counts[1:])]


class CompileLog:
    """Compile snapshots of one run, and the per-step compilations of its training loader."""

    def __init__(self, cache: XlaCache | None = None):
        self.marks: dict[str, dict] = {"start": snapshot()}
        # before the run's first graph: the environment the compiler gets (the end's may differ)
        self.env = {k: os.environ[k] for k in XLA_ENV if k in os.environ}
        self.loader: CountingLoader | None = None
        self.cache = cache or XlaCache()  # the persistent compilation cache: where, and cold or warm
        self.periodic: dict | None = None  # counters of the evaluations run during training, summed

    def mark(self, name: str) -> None:
        """Store a snapshot under `name`."""
        self.marks[name] = snapshot()

    @contextlib.contextmanager
    def evaluating(self):
        """Count what runs inside as evaluation, not as the training step it follows (periodic evaluation)."""
        before = settled_snapshot()
        try:
            yield
        finally:
            spent = delta(before, settled_snapshot())
            self.periodic = (
                spent if self.periodic is None else {k: round(self.periodic[k] + v, 6) for k, v in spent.items()}
            )
            if self.loader is not None:
                self.loader.set_aside += spent["uncached_compiles"]

    def wrap(self, loader) -> CountingLoader:
        """Return `loader` wrapped to count compilations per training step."""
        self.loader = CountingLoader(loader)
        return self.loader

    def section(self, warmup_batches: int, timing: Timing | None, shapes: int | None) -> Xla:
        """Return the record's `xla` section: compilations, their seconds, executions, cache and environment."""
        end = snapshot()
        start, train_end = self.marks["start"], self.marks.get("train_end", end)
        train, evaluation = delta(start, train_end), delta(train_end, end)
        if self.periodic:  # evaluations during training: evaluation's, not the training steps'
            train = {k: round(v - self.periodic[k], 6) for k, v in train.items()}
            evaluation = {k: round(v + self.periodic[k], 6) for k, v in evaluation.items()}
        out = {
            "graph_compilations": end["uncached_compiles"] - start["uncached_compiles"],
            "compile_time_s": round(end["compile_time_s"] - start["compile_time_s"], 6),
            "run": delta(start, end),
            "train": train,
            "eval": evaluation,
        }
        if self.periodic:
            out["periodic_eval"] = self.periodic  # included in eval
        if self.loader is not None:
            per_batch = self.loader.per_batch(final=train_end["uncached_compiles"])
            out["compilations_per_step"] = {str(i): n for i, n in enumerate(per_batch) if n}  # zeros left out
            out["compilations_after_warmup"] = sum(per_batch[warmup_batches:])
            out["warmup_batches"] = warmup_batches
        if shapes is not None:
            out["distinct_input_shapes"] = shapes
        if timing:
            out["first_step_s"] = timing.first_step_s
            out["steady_step_s"] = timing.step_time_median_s
            if out["first_step_s"] and out["steady_step_s"]:
                out["first_over_steady"] = round(out["first_step_s"] / out["steady_step_s"], 2)
        if self.cache.state != "off" and self.cache.dir and not self.cache.kind.startswith("Neuron"):
            self.cache = self.cache.model_copy(update={"state": cache_state(out["run"])})
        out["cache"] = self.cache
        out["neuron_cc_flags"] = self.env.get("NEURON_CC_FLAGS")  # what the first compilation saw
        out["env"] = self.env
        changed = {k: os.environ.get(k) for k in XLA_ENV if os.environ.get(k) != self.env.get(k)}
        if changed:
            out["env_changed_during_run"] = changed  # later graphs may have compiled with these
        return Xla(**out)
