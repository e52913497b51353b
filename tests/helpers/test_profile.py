"""helpers/profile.py: op classes, a real profiled CPU window, the busy share and its graphed cross-check, XLA."""

import json
import sys
import types

import pytest
import torch

from helpers import arguments, profile, record


@pytest.mark.parametrize(
    "name, cls",
    [
        ("aten::addmm", "matmul"),
        ("aten::bmm", "matmul"),
        ("nvjet_hsh_128x256_64x4_1x2_h_bz_coopB_NNT", "matmul"),
        ("void cutlass::Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_32x32_128x1_tn_align8>", "matmul"),
        ("aten::_scaled_dot_product_flash_attention_for_cpu", "attention"),
        ("fmha_cutlassF_f32_aligned_64x64_rf_sm80", "attention"),
        ("aten::mul_", "elementwise_norm_act"),
        ("aten::native_layer_norm", "elementwise_norm_act"),
        ("void at::native::vectorized_elementwise_kernel<4, GeluCUDAKernelImpl>", "elementwise_norm_act"),
        ("Optimizer.step#AdamW.step", "optimizer"),
        ("aten::_fused_adamw_", "optimizer"),
        ("void multi_tensor_apply_kernel<FusedAdamMathFunctor>", "optimizer"),
        ("aten::embedding", "copy_data_movement"),
        ("Memcpy HtoD (Pageable -> Device)", "copy_data_movement"),
        ("aten::expand", "other"),  # a view: "exp" is a whole word only
        ("AddmmBackward0", "other"),
        ("autograd::engine::evaluate_function: AddmmBackward0", "other"),
    ],
)
def test_classify_op(name, cls):
    assert profile.classify_op(name) == cls


def test_summarize_events_counts_scopes_and_the_host_gap():
    events = [
        {"name": "aten::mm", "self_time_us": 4000},
        {"name": "aten::mm", "self_time_us": 2000},
        {"name": "aten::_softmax", "self_time_us": 500},
        {"name": "aten::bmm", "self_time_us": 700, "scope": "attention"},  # under scaled_dot_product_attention
        {"name": "aten::mul_", "self_time_us": 1000, "scope": "optimizer"},  # under the optimizer's step
        {"name": "aten::copy_", "self_time_us": 500},
    ]
    out = profile.summarize_events(events, wall_us=10_000)
    ms = out["class_time_ms"]
    assert (ms["matmul"], ms["attention"], ms["optimizer"], ms["elementwise_norm_act"]) == (6.0, 0.7, 1.0, 0.5)
    assert ms["host_gap"] == pytest.approx(1.3) and sum(out["class_share"].values()) == pytest.approx(1.0, abs=1e-3)
    assert out["top_ops"][0] == {"name": "aten::mm", "self_time_ms": 6.0, "calls": 2}
    assert profile.summarize_events(events, wall_us=10_000, busy_us=7000)["class_time_ms"]["host_gap"] == 3.0


# ----------------------------------------------------------------------------- the busy share
def test_an_eager_windows_busy_share_is_cuptis():
    share, method = profile.busy_share(wall_s=0.010, kernel_s=0.007, kernels=120)
    assert share == pytest.approx(0.7) and method.startswith("CUPTI")
    assert profile.busy_share(0.010, 0.0, 0) == (None, "CUPTI saw no kernel in the window")


def test_a_graphed_window_keeps_cupti_where_the_replays_agree():
    share, method = profile.busy_share(wall_s=0.010, kernel_s=0.0085, kernels=400, replay_s=0.009, replays=5)
    assert share == pytest.approx(0.85) and method.startswith("CUPTI") and "agrees with the 5 CUDA-graph" in method


@pytest.mark.parametrize(
    "kernel_s, kernels",
    [(0.0, 0), (0.0004, 3), (0.02, 400)],  # no kernel seen; only the copies outside the graphs; stamped past the wall
)
def test_a_graphed_window_whose_kernels_are_implausible_falls_back_to_the_replays(kernel_s, kernels):
    share, method = profile.busy_share(wall_s=0.010, kernel_s=kernel_s, kernels=kernels, replay_s=0.009, replays=5)
    assert share == pytest.approx(0.9) and method.startswith("5 CUDA-graph replays' own device time")
    assert f"CUPTI saw {kernels} kernels" in method


def test_the_replay_clock_puts_torchs_replay_back():
    original = torch.cuda.CUDAGraph.replay
    clock = profile.ReplayClock()
    assert torch.cuda.CUDAGraph.replay is not original
    clock.remove()
    assert torch.cuda.CUDAGraph.replay is original and clock.timed() == (0.0, 0)


# ----------------------------------------------------------------------------- a real CPU window
def profiler(tmp_path, **given) -> profile.Profiler:
    run = arguments.build(
        {"profile_dir": str(tmp_path / "profiles"), "run_name": "tiny", **given}, arguments.NvidiaArgs
    )
    return profile.Profiler("cpu", run, tmp_path / "adhoc" / "tiny@cpu-test.json")


def train_steps(steps: int) -> None:
    """Train a small classifier (linear, GELU, LayerNorm, linear) with AdamW."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(64, 256), torch.nn.GELU(), torch.nn.LayerNorm(256), torch.nn.Linear(256, 6)
    )
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x, labels = torch.randn(32, 64), torch.randint(0, 6, (32,))
    for _ in range(steps):
        torch.nn.functional.cross_entropy(model(x), labels).backward()
        optimizer.step()
        optimizer.zero_grad()


def test_a_profiled_cpu_window_is_split_by_op_class_and_traced(tmp_path):
    prof = profiler(tmp_path, profile=True, profile_steps=2)
    assert prof.steps == 2
    prof.start()
    train_steps(2)
    prof.stop(wall_s=5.0)
    out = prof.summary()
    assert isinstance(out, record.Profile) and out.backend == "torch.profiler" and out.window_steps == 2
    ms = out.class_time_ms
    assert ms.matmul > 0 and ms.optimizer > 0 and ms.elementwise_norm_act > 0 and ms.host_gap > 0
    assert 0 < len(out.top_ops) <= 10 and out.device_busy_share is None
    assert out.trace_path == str(tmp_path / "profiles" / "tiny" / "tiny@cpu-test.trace.json")
    assert json.loads((tmp_path / "profiles" / "tiny" / "tiny@cpu-test.trace.json").read_text())["traceEvents"]
    prof.stop(wall_s=1.0)  # a second stop changes nothing
    assert prof.summary() is out


def test_the_cpu_is_not_profiled_unless_asked(tmp_path):
    prof = profiler(tmp_path)
    assert prof.steps == 0
    prof.start()
    prof.stop(wall_s=1.0)
    assert prof.summary() is None and not (tmp_path / "profiles").exists()


def test_a_profile_that_cannot_be_summarized_says_why_and_lets_the_run_go_on(tmp_path):
    (tmp_path / "profiles").write_text("")  # the trace's folder cannot be made
    prof = profiler(tmp_path, profile=True, profile_steps=1)
    prof.start()
    torch.ones(8, 8) @ torch.ones(8, 8)
    prof.stop(wall_s=1.0, steps=1)
    assert prof.summary().window_steps == 1 and prof.summary().reason.startswith("not summarized: ")


def test_cuda_kernels_are_read_from_a_torch_whose_events_have_no_activity_type():
    """torch 2.11's FunctionEvent (an H200 image's) has no activity_type; 2.13's has: both are read."""
    from torch.autograd import DeviceType
    from torch.autograd.profiler_util import FunctionEvent

    launch = FunctionEvent(1, "aten::mm", 1, 0, 10)
    kernel = FunctionEvent(2, "sm90_xmma_gemm_bf16", 1, 5, 25, device_type=DeviceType.CUDA, linked_correlation_id=1)
    del kernel.activity_type
    found, busy_us, kernels = profile.events_from_profiler(
        types.SimpleNamespace(events=lambda: [launch, kernel]), "cuda"
    )
    assert [(e["name"], e["self_time_us"]) for e in found] == [("sm90_xmma_gemm_bf16", 20)]
    assert busy_us == 20 and kernels == 1


# ----------------------------------------------------------------------------- XLA
def fake_torch_xla(monkeypatch, state: dict) -> None:
    met = types.ModuleType("torch_xla.debug.metrics")
    met.metric_data = lambda name: state["metrics"].get(name)
    met.counter_value = lambda name: state["counters"].get(name)
    debug = types.ModuleType("torch_xla.debug")
    debug.metrics = met
    root = types.ModuleType("torch_xla")
    root.debug = debug
    for name, module in (("torch_xla", root), ("torch_xla.debug", debug), ("torch_xla.debug.metrics", met)):
        monkeypatch.setitem(sys.modules, name, module)


def test_an_xla_window_records_what_compiled_and_ran_in_it(monkeypatch, tmp_path):
    state = {"metrics": {"CompileTime": (2, 3e9, []), "ExecuteTime": (10, 5e8, [])}, "counters": {"UncachedCompile": 2}}
    fake_torch_xla(monkeypatch, state)
    run = arguments.build({"profile": True, "profile_steps": 2, "profile_dir": str(tmp_path)}, arguments.TrainiumArgs)
    prof = profile.Profiler("xla", run, tmp_path / "r@xla.json")
    prof.start()
    state["metrics"] = {"CompileTime": (3, 4.5e9, []), "ExecuteTime": (15, 1e9, [])}
    state["counters"] = {"UncachedCompile": 3, "CachedCompile": 4}
    prof.stop(wall_s=2.0)
    m = prof.summary().xla_metrics
    assert (m.uncached_compiles, m.cached_compiles, m.compile_count, m.execute_count) == (1, 4, 1, 5)
    assert m.compile_time_s == pytest.approx(1.5) and m.execute_time_s == pytest.approx(0.5)
    assert prof.summary().window_wall_ms == 2000.0 and prof.summary().trace_path is None


@pytest.mark.xla
def test_a_real_xla_window_counts_its_compilation_and_execution(tmp_path):
    torch_xla = pytest.importorskip("torch_xla")
    run = arguments.build({"profile": True, "profile_steps": 1, "profile_dir": str(tmp_path)}, arguments.TrainiumArgs)
    prof = profile.Profiler("xla", run, tmp_path / "r@xla.json")
    prof.start()
    x = torch.ones(4, 8, device=torch_xla.device()) @ torch.ones(8, 3, device=torch_xla.device())
    torch_xla.sync()
    x.cpu()
    prof.stop(wall_s=1.0)
    m = prof.summary().xla_metrics
    assert m.uncached_compiles == 1 and m.execute_count >= 1 and m.compile_time_s > 0
