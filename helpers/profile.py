"""The profiled steps: where a training step's time goes, and how busy the device was.

    profiler = profile.Profiler(dev.type, args, record_path)
    # the timer runs the profiled steps after the warm-up and before the first steady window, in a window of its own:
    profiler.start(); ... profiler.steps optimizer steps ...; device sync; profiler.stop(wall_s)
    rec.profile = profiler.summary()

The profiler's start, stop and parse are never inside a timed window, and nothing is called per step; a loop whose
profiled step raises calls stop() in its `finally` (it stops the profiler and puts torch's graph replay back).
CUDA: always its kernels, for the device busy share (the union of kernel and copy intervals over the window's wall);
with args.profile also the host's ops, the time per op class and a Chrome trace in <profile_dir>/<run name>/.
CPU: with args.profile, the ops' self time per class. XLA: with args.profile, torch_xla's counters over the window.
A CUDA-graphed run's busy share is checked against each graph replay's own device time (CUDA events around it):
CUPTI may miss the kernels of graphs captured before the profiler attached.
"""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path
from typing import Any

from helpers import record, xla

CLASSES = ("matmul", "attention", "elementwise_norm_act", "optimizer", "copy_data_movement", "other")
HOST_GAP_DEFINITION = (
    "cuda: the window's wall time minus the time the device was busy (device_busy_share); cpu: the window's wall "
    "time minus the summed self time of all operators, i.e. time the host spent outside any operator"
)
# a graphed window's kernels must cover at least this share of its graph replays' device time to be believed
PLAUSIBLE_KERNEL_SHARE = 0.5

# ----------------------------------------------------------------------------- classification
ATTENTION = ("scaled_dot_product", "attention", "flash", "fmha", "sdpa")
OPTIMIZER = ("_foreach_", "adam", "multi_tensor_apply")  # and names starting "optimizer" (label, Optimizer.step#)
MATMUL_OPS = {"mm", "addmm", "bmm", "matmul", "linear", "baddbmm", "addbmm", "addmv", "mv", "_addmm_activation"}
MATMUL_KERNELS = ("gemm", "gemv", "cublas", "cutlass", "xmma", "nvjet", "splitkreduce")
COPY_OPS = {
    *("to", "_to_copy", "copy_", "contiguous", "clone", "cat", "stack", "index_select", "embedding"),
    *("embedding_backward", "embedding_dense_backward", "gather", "scatter", "index", "index_put_", "_index_put_impl_"),
}
COPY_KERNELS = ("memcpy", "memset", "copy", "catarray", "indexselect", "index_select", "embedding")
# whole words of an aten name ("exp" must not catch "expand", a view); substrings of kernel names
ELEMENTWISE_OPS = re.compile(
    r"(^|_)(add|sub|rsub|mul|div|addcdiv|addcmul|lerp|gelu|relu|tanh|silu|sigmoid|threshold|norm|"
    r"dropout|bernoulli|softmax|nll_loss|cross_entropy|sum|mean|where|masked_fill|fill|zero|pow|"
    r"sqrt|rsqrt|exp|log|neg|clamp|clamp_min|clamp_max|maximum|minimum)(_|$)"
)
ELEMENTWISE_KERNELS = ("elementwise", "reduce_kernel", "softmax", "norm", "dropout", "gelu")
AUTOGRAD_NODE = re.compile(r"[A-Z]\w*Backward\d*")
DEVICE_WORK = ("kernel", "gpu_memcpy", "gpu_memset")  # Kineto's activity types of device work


def classify_op(name: str) -> str:
    """Return the op class of a profiler event name (an aten op, a record_function label or a CUDA kernel)."""
    lower = name.lower()
    base = lower.removeprefix("aten::")
    # autograd bookkeeping (AddmmBackward0, evaluate_function: ...): the compute is in its children
    if lower.startswith(("autograd::", "torch::autograd::")) or AUTOGRAD_NODE.fullmatch(name.split("::")[-1]):
        return "other"
    if any(k in lower for k in ATTENTION):
        return "attention"
    if lower.startswith("optimizer") or any(k in lower for k in OPTIMIZER):
        return "optimizer"
    if base in MATMUL_OPS or any(k in lower for k in MATMUL_KERNELS):
        return "matmul"
    if base in COPY_OPS or any(k in lower for k in COPY_KERNELS):
        return "copy_data_movement"
    if ELEMENTWISE_OPS.search(base) or any(k in lower for k in ELEMENTWISE_KERNELS):
        return "elementwise_norm_act"
    return "other"


def summarize_events(events: list[dict], wall_us: float, busy_us: float | None = None) -> dict:
    """Return time per op class (ms, the host gap beside), shares and the top 10 ops by self time of `events`."""
    class_us, by_name = dict.fromkeys(CLASSES, 0.0), defaultdict(lambda: [0.0, 0])
    for ev in events:
        # an event under an optimizer or attention op or label counts as its scope's
        cls = ev["scope"] if ev.get("scope") in ("optimizer", "attention") else classify_op(ev["name"])
        class_us[cls] += ev["self_time_us"]
        by_name[ev["name"]][0] += ev["self_time_us"]
        by_name[ev["name"]][1] += 1
    busy_us = sum(class_us.values()) if busy_us is None else busy_us  # the CPU's: its ops' summed self time
    class_ms = {k: round(v / 1e3, 3) for k, v in class_us.items()}
    class_ms["host_gap"] = round(max(0.0, wall_us - busy_us) / 1e3, 3)  # threads in parallel can sum past the wall
    total = sum(class_ms.values())
    top = sorted(by_name.items(), key=lambda kv: -kv[1][0])[:10]
    return {
        "class_time_ms": class_ms,
        "class_share": {k: round(v / total, 4) if total else 0.0 for k, v in class_ms.items()},
        "top_ops": [{"name": n[:160], "self_time_ms": round(us / 1e3, 3), "calls": calls} for n, (us, calls) in top],
    }


def scope(ev) -> str | None:
    """Return "optimizer" or "attention" when `ev` or one of its CPU ancestors is such an op or label."""
    classes = set()
    while ev is not None:
        classes.add(classify_op(ev.name))
        ev = ev.cpu_parent
    return next((c for c in ("optimizer", "attention") if c in classes), None)


def union_us(intervals: list[tuple[float, float]]) -> float:
    """Return the length of the union of (start, end) intervals."""
    busy, end = 0.0, float("-inf")
    for start, stop in sorted(intervals):
        if stop > end:
            busy, end = busy + stop - max(start, end), stop
    return busy


def events_from_profiler(prof, device: str) -> tuple[list[dict], float, int]:
    """Return a stopped torch.profiler's events on `device` as dicts, the union of their intervals (us), their count."""
    from torch.autograd import DeviceType

    events = [e for e in prof.events() if e.name != "[memory]"]
    cpu_by_id = {e.id: e for e in events if e.device_type == DeviceType.CPU}
    out, intervals = [], []
    for e in events:
        if getattr(e, "is_user_annotation", False) or e.name.startswith("ProfilerStep#"):
            continue
        if device == "cpu" and e.device_type == DeviceType.CPU and not e.is_async:
            out.append({"name": e.name, "self_time_us": e.self_cpu_time_total, "scope": scope(e)})
        # torch before 2.13 gives its events no activity_type: every CUDA event is then a kernel
        elif (
            device == "cuda"
            and e.device_type == DeviceType.CUDA
            and getattr(e, "activity_type", "kernel") in DEVICE_WORK
        ):
            # a kernel's linked correlation id is the id of the CPU op that launched it
            launcher = cpu_by_id.get(getattr(e, "linked_correlation_id", 0))
            out.append({"name": e.name, "self_time_us": e.time_range.elapsed_us(), "scope": scope(launcher)})
            intervals.append((e.time_range.start, e.time_range.end))
    return out, union_us(intervals), len(intervals)


def busy_share(wall_s: float, kernel_s: float, kernels: int, replay_s: float = 0.0, replays: int = 0) -> tuple:
    """Return (the device busy share of a profiled window, 0..1 or None, how it was measured, in words)."""
    cupti = f"CUPTI: the union of {kernels} kernel and copy intervals over the window's wall"
    if not replays:
        return (min(1.0, kernel_s / wall_s), cupti) if kernels else (None, "CUPTI saw no kernel in the window")
    replayed = f"{replays} CUDA-graph replays' own device time ({replay_s * 1e3:.2f} ms, events around each)"
    if kernels and PLAUSIBLE_KERNEL_SHARE * replay_s <= kernel_s <= 1.02 * wall_s:
        return min(1.0, kernel_s / wall_s), f"{cupti}; it agrees with the {replayed}"
    # CUPTI missed the graphs' kernels (or stamped them wrongly): the replays' own time, which leaves out the
    # kernels run outside the graphs (input copies), is the figure
    saw = f"CUPTI saw {kernels} kernels covering {kernel_s * 1e3:.2f} ms, implausible against the replays"
    return min(1.0, replay_s / wall_s), f"{replayed} over the window's wall ({saw})"


class ReplayClock:
    """Times each CUDA-graph replay on the device while installed: an event recorded before and after it."""

    def __init__(self) -> None:
        import torch

        self.graph, self.pairs = torch.cuda.CUDAGraph, []
        self.original = original = self.graph.replay

        def replay(graph) -> None:
            before, after = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            before.record()
            original(graph)
            after.record()
            self.pairs.append((before, after))

        # torch has no hook on a replay; the class's method is swapped for the profiled window only
        self.graph.replay = replay

    def remove(self) -> None:
        """Put torch's replay back."""
        self.graph.replay = self.original

    def timed(self) -> tuple[float, int]:
        """Return the replays' device seconds and their count (after a device sync: every event has happened)."""
        return sum(b.elapsed_time(a) for b, a in self.pairs) / 1e3, len(self.pairs)


class Profiler:
    """Profiles `steps` optimizer steps in a window of their own; summary() is None when nothing is profiled."""

    def __init__(self, device_type: str, args: Any, record_path: Path) -> None:
        if device_type not in ("cpu", "cuda", "xla"):
            raise ValueError(f"device_type must be one of cpu, cuda, xla; got {device_type!r}")
        self.device_type, self.full = device_type, bool(args.profile)
        self.graphed = getattr(args, "step_mode", "eager") == "cudagraphs"
        # CUDA is always profiled (its kernels alone give the busy share); the CPU and XLA when asked
        self.steps = args.profile_steps if self.full or device_type == "cuda" else 0
        self.trace = Path(args.profile_dir) / args.name() / f"{Path(record_path).stem}.trace.json"
        self.prof = self.replays = self.xla_before = self.result = None
        self.started = False

    def start(self) -> None:
        """Start profiling: the timer calls this after a device sync, before the first profiled step."""
        if not self.steps or self.started:
            return
        self.started = True
        if self.device_type == "xla":
            self.xla_before = xla.snapshot()
            return
        from torch.profiler import ProfilerActivity, profile

        activities = [ProfilerActivity.CPU] if self.full else []
        activities += [ProfilerActivity.CUDA] if self.device_type == "cuda" else []
        try:
            self.prof = profile(activities=activities, record_shapes=self.full, profile_memory=self.full)
            self.prof.start()
        except Exception as err:  # noqa: BLE001 - a profiler that cannot start (CUPTI) must not cost the run
            self.prof, self.result = None, record.Profile(backend="torch.profiler", reason=f"not started: {err}")
            return
        self.replays = ReplayClock() if self.graphed else None

    def stop(self, wall_s: float, steps: int | None = None) -> None:
        """Stop after the last profiled step and a device sync (`wall_s`: the window's seconds); summarise."""
        if not self.started or self.result is not None:
            return
        base = {"window_steps": self.steps if steps is None else steps, "window_wall_ms": round(wall_s * 1e3, 3)}
        if self.device_type == "xla":
            spent = xla.delta(self.xla_before, xla.snapshot())
            window = record.XlaMetricsWindow(backend="torch_xla.debug.metrics", **spent)
            self.result = record.Profile(**base, backend="torch_xla.debug.metrics", xla_metrics=window)
            return
        if self.replays is not None:
            self.replays.remove()  # torch's own replay back first, whatever happens below
        prof, self.prof = self.prof, None
        try:
            prof.stop()
            replays = self.replays.timed() if self.replays is not None else (0.0, 0)
            self.result = self.summarize(prof, wall_s, replays, base)
        except Exception as err:  # noqa: BLE001 - a profile that cannot be read must not cost the run
            self.result = record.Profile(**base, backend="torch.profiler", reason=f"not summarized: {err!r}")

    def summarize(self, prof, wall_s: float, replays: tuple[float, int], base: dict) -> record.Profile:
        """Return the stopped profiler's summary: the busy share (CUDA), the split by op class and the trace."""
        events, kernel_us, kernels = events_from_profiler(prof, self.device_type)
        out, busy_us = dict(base, backend="torch.profiler"), None
        if self.device_type == "cuda":
            share, method = busy_share(wall_s, kernel_us / 1e6, kernels, *replays)
            out["busy_share_method"] = method
            if share is not None:
                out["device_busy_share"], busy_us = round(share, 4), share * wall_s * 1e6
            if not self.full:
                return record.Profile(**out | {"backend": "CUPTI kernels"})
        path = record.repo_path(self.trace)
        path.parent.mkdir(parents=True, exist_ok=True)
        prof.export_chrome_trace(str(path))
        summary = summarize_events(events, wall_s * 1e6, busy_us)
        return record.Profile(**out, **summary, trace_path=str(self.trace), host_gap_definition=HOST_GAP_DEFINITION)

    def summary(self) -> record.Profile | None:
        """Return the profiled window's summary for the record; None when nothing was profiled."""
        return self.result
