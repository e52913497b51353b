"""Profiling of a short steady-state window: where the time of a training step goes.

    prof = StepProfiler(enabled, out_dir, warmup_steps, device_type="cuda")
    for batch in loader:
        ... forward, backward ...
        with torch.profiler.record_function("optimizer"):
            optimizer.step(); optimizer.zero_grad()
        prof.step()
    prof.close()
    run.record.profile = prof.summary()

CPU and CUDA: torch.profiler, op time split into classes by self time (so nothing counts twice).
XLA / Neuron: torch.profiler sees host tracing only, so the window records torch_xla.debug.metrics deltas.
"""

from __future__ import annotations

import re
import time
from collections import defaultdict
from pathlib import Path

from helpers.run.schema import Profile, XlaMetricsWindow

CLASSES = ("matmul", "attention", "elementwise_norm_act", "optimizer", "copy_data_movement", "other")
HOST_GAP_DEFINITION = (
    "cuda: profiled window wall time minus the union of device kernel/memcpy intervals; "
    "cpu: window wall time minus the summed self time of all operators (record_function labels "
    "excluded), i.e. time the host spent outside any operator (Python, data loading, profiler)"
)

# ----------------------------------------------------------------------------- classification
_ATTENTION = ("scaled_dot_product", "attention", "flash", "fmha", "sdpa")
_OPTIMIZER_PREFIX = ("optimizer",)  # record_function("optimizer") and torch's "Optimizer.step#AdamW.step"
_OPTIMIZER = ("_foreach_", "adam", "multi_tensor_apply")
_MATMUL_OPS = {"mm", "addmm", "bmm", "matmul", "linear", "baddbmm", "addbmm", "addmv", "mv", "_addmm_activation"}
_MATMUL_KERNELS = ("gemm", "gemv", "cublas", "cutlass", "xmma", "nvjet", "splitkreduce")
_COPY_OPS = {
    "to",
    "_to_copy",
    "copy_",
    "contiguous",
    "clone",
    "cat",
    "stack",
    "index_select",
    "embedding",
    "embedding_backward",
    "embedding_dense_backward",
    "gather",
    "scatter",
    "index",
    "index_put_",
    "_index_put_impl_",
}
_COPY_KERNELS = ("memcpy", "memset", "copy", "catarray", "indexselect", "index_select", "embedding")
# Whole words of an aten name ("exp" must not catch "expand", a view), substrings of kernel names.
_ELEMENTWISE_OPS = re.compile(
    r"(^|_)(add|sub|rsub|mul|div|addcdiv|addcmul|lerp|gelu|relu|tanh|silu|sigmoid|threshold|norm|"
    r"dropout|bernoulli|softmax|nll_loss|cross_entropy|sum|mean|where|masked_fill|fill|zero|pow|"
    r"sqrt|rsqrt|exp|log|neg|clamp|clamp_min|clamp_max|maximum|minimum)(_|$)"
)
_ELEMENTWISE_KERNELS = ("elementwise", "reduce_kernel", "softmax", "norm", "dropout", "gelu")
_AUTOGRAD_NODE = re.compile(r"[A-Z]\w*Backward\d*")


def classify_op(name: str) -> str:
    """Op class of a profiler event name (aten op, record_function label or CUDA kernel)."""
    lower = name.lower()
    base = lower.removeprefix("aten::")
    # Autograd bookkeeping (AddmmBackward0, evaluate_function: ...): the compute is in its children.
    if lower.startswith(("autograd::", "torch::autograd::")) or _AUTOGRAD_NODE.fullmatch(name.split("::")[-1]):
        return "other"
    if any(k in lower for k in _ATTENTION):
        return "attention"
    if lower.startswith(_OPTIMIZER_PREFIX) or any(k in lower for k in _OPTIMIZER):
        return "optimizer"
    if base in _MATMUL_OPS or any(k in lower for k in _MATMUL_KERNELS):
        return "matmul"
    if base in _COPY_OPS or any(k in lower for k in _COPY_KERNELS):
        return "copy_data_movement"
    if _ELEMENTWISE_OPS.search(base) or any(k in lower for k in _ELEMENTWISE_KERNELS):
        return "elementwise_norm_act"
    return "other"


def summarize_events(
    events: list[dict], device: str = "cpu", wall_time_us: float | None = None, device_busy_us: float | None = None
) -> dict:
    """Time per op class (ms), shares, top-10 ops by self time of events_from_profiler's events on `device`."""
    class_us = dict.fromkeys(CLASSES, 0.0)
    by_name: dict[str, list] = defaultdict(lambda: [0.0, 0])
    for ev in events:
        if ev.get("device", "cpu") != device:
            continue
        scope = ev.get("scope")  # the event runs under an optimizer or attention op or label
        cls = scope if scope in ("optimizer", "attention") else classify_op(ev["name"])
        class_us[cls] += ev["self_time_us"]
        by_name[ev["name"]][0] += ev["self_time_us"]
        by_name[ev["name"]][1] += ev.get("calls", 1)
    busy_us = sum(class_us.values()) if device_busy_us is None else device_busy_us  # summed self time: the cpu's
    class_ms = {k: round(v / 1e3, 3) for k, v in class_us.items()}
    if wall_time_us is None:
        class_ms["host_gap"] = None
    else:
        # Clamped: threads running ops in parallel can sum to more than the wall time.
        class_ms["host_gap"] = round(max(0.0, wall_time_us - busy_us) / 1e3, 3)
    numeric = {k: v for k, v in class_ms.items() if isinstance(v, float)}
    total = sum(numeric.values())
    share = {k: (round(v / total, 4) if total else 0.0) for k, v in numeric.items()}
    top = sorted(by_name.items(), key=lambda kv: -kv[1][0])[:10]
    top_ops = [{"name": name[:160], "self_time_ms": round(us / 1e3, 3), "calls": calls} for name, (us, calls) in top]
    return {"class_time_ms": class_ms, "class_share": share, "top_ops": top_ops}


# ----------------------------------------------------------------------------- torch.profiler
def _is_annotation(ev) -> bool:
    return (
        getattr(ev, "is_user_annotation", False)
        or ev.name.startswith("ProfilerStep#")
        or "annotation" in str(getattr(ev, "activity_type", "")).lower()
    )


def _scope(ev) -> str | None:
    """ "optimizer" or "attention" when ev or one of its CPU ancestors is such an op or label."""
    classes = set()
    while ev is not None:
        classes.add(classify_op(ev.name))
        ev = ev.cpu_parent
    return next((c for c in ("optimizer", "attention") if c in classes), None)


def _union_us(intervals: list[tuple[float, float]]) -> float:
    busy, end = 0.0, float("-inf")
    for start, stop in sorted(intervals):
        if stop > end:
            busy += stop - max(start, end)
            end = stop
    return busy


# Kineto activity types that are device work (not annotations or synchronization records).
_DEVICE_WORK = ("kernel", "gpu_memcpy", "gpu_memset")


def events_from_profiler(prof, device: str) -> tuple[list[dict], float | None]:
    """Plain event dicts from a stopped torch.profiler.profile, and device busy time (us) on cuda."""
    from torch.autograd import DeviceType

    fevents = [e for e in prof.events() if e.name != "[memory]"]
    cpu_by_id = {e.id: e for e in fevents if e.device_type == DeviceType.CPU}
    out, intervals = [], []
    for e in fevents:
        if _is_annotation(e):
            continue
        if device == "cpu" and e.device_type == DeviceType.CPU and not e.is_async:
            out.append(
                {"name": e.name, "self_time_us": e.self_cpu_time_total, "calls": 1, "device": "cpu", "scope": _scope(e)}
            )
        elif (
            device == "cuda"
            and e.device_type == DeviceType.CUDA
            and (getattr(e, "activity_type", None) or "kernel") in _DEVICE_WORK
        ):  # torch < 2.13: none
            # A kernel's linked correlation id is the id of the CPU op that launched it.
            launcher = cpu_by_id.get(getattr(e, "linked_correlation_id", 0))
            out.append(
                {
                    "name": e.name,
                    "self_time_us": e.time_range.elapsed_us(),
                    "calls": 1,
                    "device": "cuda",
                    "scope": _scope(launcher),
                }
            )
            intervals.append((e.time_range.start, e.time_range.end))
    return out, (_union_us(intervals) if device == "cuda" else None)


class StepProfiler:
    """Profiles profile_steps optimizer steps after warmup_steps; summary() is None until done or if disabled."""

    def __init__(
        self,
        enabled: bool,
        out_dir: Path,
        warmup_steps: int,
        profile_steps: int = 5,
        device_type: str = "cpu",
        matmul_flops_per_step: float | None = None,
        kernels_only: bool = False,
    ) -> None:
        if device_type not in ("cpu", "cuda", "xla", "neuron"):
            raise ValueError(f"device_type must be one of cpu, cuda, xla, neuron; got {device_type!r}")
        self.enabled, self.out_dir, self.device_type = enabled, Path(out_dir), device_type
        # CUDA's kernels alone (no host ops, shapes, memory or trace): the device's busy share, cheaply
        self.kernels_only = kernels_only and device_type == "cuda"
        self.warmup_steps, self.profile_steps = warmup_steps, profile_steps
        self.matmul_flops_per_step = matmul_flops_per_step
        self._steps = self._profiled = 0
        self._prof = self._summary = self._xla_before = None
        self._t0 = 0.0
        if enabled and warmup_steps == 0:
            self._start()

    def step(self) -> None:
        """Call after every optimizer step."""
        if not self.enabled or self._summary is not None:
            return
        self._steps += 1
        if self._t0:
            self._profiled += 1
            if self._prof is not None:
                self._prof.step()
            if self._profiled >= self.profile_steps:
                self._stop()
        elif self._steps == self.warmup_steps:
            self._start()

    def _sync(self) -> None:
        if self.device_type == "cuda":
            import torch

            torch.cuda.synchronize()

    def _start(self) -> None:
        if self.device_type in ("xla", "neuron"):
            self._xla_before = xla_counters()
        else:
            from torch.profiler import ProfilerActivity, profile

            activities = [] if self.kernels_only else [ProfilerActivity.CPU]
            if self.device_type == "cuda":
                activities.append(ProfilerActivity.CUDA)
            full = not self.kernels_only
            self._prof = profile(activities=activities, record_shapes=full, profile_memory=full)
            self._sync()
            try:
                self._prof.start()
            except Exception as err:  # noqa: BLE001 - a profiler that cannot start (CUPTI) must not cost the run
                self._prof, self.enabled = None, False
                self._summary = Profile(backend="torch.profiler", reason=f"not started: {type(err).__name__}: {err}")
                return
        self._t0 = time.perf_counter()

    def _stop(self) -> None:
        self._sync()
        wall_us = (time.perf_counter() - self._t0) * 1e6
        base = {"window_steps": self._profiled, "window_wall_ms": round(wall_us / 1e3, 3)}
        if self.device_type in ("xla", "neuron"):
            self._summary = Profile(
                **base,
                backend="torch_xla.debug.metrics",
                trace_path=None,
                class_time_ms=None,
                class_share=None,
                top_ops=[],
                matmul_achieved_tflops=None,
                # Device time on Neuron comes from neuron-profile, not the XLA profiler.
                xla_profiler_trace="not supported on this backend",
                xla_metrics=xla_metrics_since(self._xla_before),
            )
            return
        prof, self._prof = self._prof, None  # stopped once, whatever the summary below does
        prof.stop()
        try:
            summary, trace_path = self._summarize(prof, wall_us)
        except Exception as err:  # noqa: BLE001 - a profile that cannot be read must not cost the run
            self._summary = Profile(
                **base, backend="torch.profiler", reason=f"profile not summarized: {type(err).__name__}: {err}"
            )
            return
        if self.kernels_only:  # the busy share alone: profile=True splits the step by op class
            self._summary = Profile(**base, backend="cupti kernels", device_busy_share=summary.get("device_busy_share"))
            return
        matmul_s = summary["class_time_ms"]["matmul"] / 1e3
        tflops = None
        if self.matmul_flops_per_step and matmul_s > 0:
            tflops = float(f"{self.matmul_flops_per_step * self._profiled / matmul_s / 1e12:.4g}")
        self._summary = Profile(
            **base,
            backend="torch.profiler",
            trace_path=str(trace_path) if trace_path else None,
            **summary,
            matmul_achieved_tflops=tflops,
            host_gap_definition=HOST_GAP_DEFINITION,
        )

    def _summarize(self, prof, wall_us: float) -> tuple[dict, Path | None]:
        """Return the stopped profiler's summary by op class (and CUDA's busy share) and its chrome trace, if any."""
        trace_path = None
        if not self.kernels_only:
            self.out_dir.mkdir(parents=True, exist_ok=True)
            trace_path = self.out_dir / "trace.json"
            prof.export_chrome_trace(str(trace_path))
        events, busy_us = events_from_profiler(prof, self.device_type)
        summary = summarize_events(events, self.device_type, wall_us, busy_us)
        if busy_us is not None and wall_us > 0:
            summary["device_busy_share"] = round(min(1.0, busy_us / wall_us), 4)
        return summary, trace_path

    def summary(self) -> Profile | None:
        """The window's summary for the run record; None when disabled or the window has not ended."""
        return self._summary

    def close(self) -> None:
        """Stop a window still open (summarizing the steps profiled so far); safe to call anytime."""
        if self._summary is None and self._t0:
            if self._profiled:
                self._stop()
            elif self._prof is not None:
                self._prof.stop()
            self._prof = None
            self._t0 = 0.0
            self.enabled = False


# ----------------------------------------------------------------------------- XLA metrics
def xla_counters() -> dict | None:
    """Return torch-xla's compile/execute counters now (measure.xla.snapshot); None without torch_xla."""
    try:
        from helpers.measure.xla import snapshot

        return snapshot()
    except ImportError:
        return None


def xla_metrics_since(before: dict | None) -> XlaMetricsWindow:
    """Return torch-xla's counters since `before` (xla_counters' snapshot): counts and seconds."""
    if before is None:
        return XlaMetricsWindow(backend="torch_xla.debug.metrics", reason="torch_xla is not installed")
    from helpers.measure.xla import delta, snapshot

    return XlaMetricsWindow(backend="torch_xla.debug.metrics", **delta(before, snapshot()))
