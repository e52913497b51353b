"""Tests for helpers/profile.py: op classification, a real tiny CPU window, XLA metrics, Neuron summary."""

import json
import sys
import types
from pathlib import Path

import pytest
import torch
from conftest import tiny_bert_config

from helpers.measure.profile import StepProfiler, classify_op, summarize_events, xla_counters, xla_metrics_since
from helpers.run import schema


# ----------------------------------------------------------------------------- classification
@pytest.mark.parametrize(
    "name, cls",
    [
        ("aten::mm", "matmul"),
        ("aten::addmm", "matmul"),
        ("aten::bmm", "matmul"),
        ("aten::linear", "matmul"),
        ("aten::baddbmm", "matmul"),
        ("ampere_sgemm_128x64_tn", "matmul"),
        ("nvjet_hsh_128x256_64x4_1x2_h_bz_coopB_NNT", "matmul"),
        ("void cutlass::Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_32x32_128x1_tn_align8>", "matmul"),
        ("aten::scaled_dot_product_attention", "attention"),
        ("aten::_scaled_dot_product_flash_attention_for_cpu", "attention"),
        ("void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64>>", "attention"),
        ("fmha_cutlassF_f32_aligned_64x64_rf_sm80", "attention"),
        ("aten::add", "elementwise_norm_act"),
        ("aten::mul_", "elementwise_norm_act"),
        ("aten::gelu_backward", "elementwise_norm_act"),
        ("aten::native_layer_norm", "elementwise_norm_act"),
        ("aten::native_dropout", "elementwise_norm_act"),
        ("aten::_softmax", "elementwise_norm_act"),
        ("void at::native::vectorized_elementwise_kernel<4, GeluCUDAKernelImpl>", "elementwise_norm_act"),
        ("Optimizer.step#AdamW.step", "optimizer"),
        ("optimizer", "optimizer"),
        ("aten::_foreach_addcdiv_", "optimizer"),
        ("aten::_fused_adamw_", "optimizer"),
        ("void multi_tensor_apply_kernel<FusedAdamMathFunctor>", "optimizer"),
        ("aten::copy_", "copy_data_movement"),
        ("aten::to", "copy_data_movement"),
        ("aten::contiguous", "copy_data_movement"),
        ("aten::cat", "copy_data_movement"),
        ("aten::embedding", "copy_data_movement"),
        ("Memcpy HtoD (Pageable -> Device)", "copy_data_movement"),
        ("aten::expand", "other"),
        ("aten::view", "other"),
        ("AddmmBackward0", "other"),
        ("autograd::engine::evaluate_function: AddmmBackward0", "other"),
        ("aten::empty", "other"),
    ],
)
def test_classify_op(name, cls):
    assert classify_op(name) == cls


def test_summarize_events_classes_scope_and_host_gap():
    events = [
        {"name": "aten::mm", "self_time_us": 4000, "calls": 2, "device": "cpu"},
        {"name": "aten::addmm", "self_time_us": 2000, "calls": 1, "device": "cpu"},
        {"name": "aten::_softmax", "self_time_us": 500, "calls": 1, "device": "cpu"},
        # softmax and bmm under scaled_dot_product_attention are attention time
        {"name": "aten::_softmax", "self_time_us": 300, "calls": 1, "device": "cpu", "scope": "attention"},
        {"name": "aten::bmm", "self_time_us": 700, "calls": 1, "device": "cpu", "scope": "attention"},
        # an ordinary mul under the optimizer label is optimizer time
        {"name": "aten::mul_", "self_time_us": 1000, "calls": 4, "device": "cpu", "scope": "optimizer"},
        {"name": "aten::copy_", "self_time_us": 500, "calls": 1, "device": "cpu"},
        {"name": "aten::view", "self_time_us": 0, "calls": 9, "device": "cpu"},
        {"name": "sgemm_kernel", "self_time_us": 99999, "calls": 1, "device": "cuda"},  # other device
    ]
    out = summarize_events(events, device="cpu", wall_time_us=10000)
    ms = out["class_time_ms"]
    assert ms["matmul"] == pytest.approx(6.0)
    assert ms["attention"] == pytest.approx(1.0)
    assert ms["elementwise_norm_act"] == pytest.approx(0.5)
    assert ms["optimizer"] == pytest.approx(1.0)
    assert ms["copy_data_movement"] == pytest.approx(0.5)
    assert ms["other"] == 0.0
    assert ms["host_gap"] == pytest.approx(1.0)  # 10 ms wall - 9 ms in ops
    assert sum(out["class_share"].values()) == pytest.approx(1.0, abs=1e-3)
    top = out["top_ops"]
    assert top[0] == {"name": "aten::mm", "self_time_ms": 4.0, "calls": 2}
    assert {t["name"] for t in top} >= {"aten::_softmax", "aten::bmm"}
    assert next(t for t in top if t["name"] == "aten::_softmax")["calls"] == 2


def test_summarize_events_cuda_uses_device_busy_and_top10():
    events = [{"name": f"kernel_{i}", "self_time_us": 100.0 * (i + 1), "calls": 1, "device": "cuda"} for i in range(12)]
    events.append({"name": "aten::mm", "self_time_us": 5.0, "calls": 1, "device": "cpu"})  # launch only
    out = summarize_events(events, device="cuda", wall_time_us=10000, device_busy_us=7000)
    assert out["class_time_ms"]["host_gap"] == pytest.approx(3.0)
    assert len(out["top_ops"]) == 10 and out["top_ops"][0]["name"] == "kernel_11"
    assert summarize_events(events, device="cuda")["class_time_ms"]["host_gap"] is None


# ----------------------------------------------------------------------------- real CPU window
def _tiny_bert():
    from transformers import BertForSequenceClassification

    torch.manual_seed(0)
    return BertForSequenceClassification(tiny_bert_config(vocab_size=1000))


def test_step_profiler_on_tiny_bert_cpu(tmp_path):
    model = _tiny_bert()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    input_ids = torch.randint(0, 1000, (4, 16))
    labels = torch.randint(0, 6, (4,))
    prof = StepProfiler(
        True, tmp_path / "prof", warmup_steps=2, profile_steps=3, device_type="cpu", matmul_flops_per_step=1e6
    )
    for step in range(8):
        loss = model(input_ids=input_ids, labels=labels).loss
        loss.backward()
        with torch.profiler.record_function("optimizer"):
            optimizer.step()
            optimizer.zero_grad()
        prof.step()
        if step < 4:
            assert prof.summary() is None
    summary = prof.summary()
    prof.close()
    prof.close()
    assert summary is not None and summary.backend == "torch.profiler"
    assert summary.window_steps == 3
    ms = summary.class_time_ms
    assert ms.matmul > 0 and ms.optimizer > 0 and ms.elementwise_norm_act > 0
    assert isinstance(ms.host_gap, float) and ms.host_gap >= 0
    assert 0 < len(summary.top_ops) <= 10
    assert summary.matmul_achieved_tflops > 0
    trace = json.loads(Path(summary.trace_path).read_text())
    assert trace["traceEvents"]
    assert isinstance(summary, schema.Profile)  # the record's section, typed where it is made


def test_disabled_profiler_is_none(tmp_path):
    prof = StepProfiler(False, tmp_path / "prof", warmup_steps=0)
    for _ in range(3):
        prof.step()
    assert prof.summary() is None
    prof.close()
    assert not (tmp_path / "prof").exists()


def test_close_midway_summarizes_partial_window(tmp_path):
    prof = StepProfiler(True, tmp_path / "prof", warmup_steps=0, profile_steps=5)
    torch.ones(8, 8) @ torch.ones(8, 8)
    prof.step()
    prof.close()
    assert prof.summary().window_steps == 1


def test_a_profile_that_cannot_be_summarized_leaves_its_reason_and_the_training_going(tmp_path):
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("")  # the trace's folder cannot be made: the summary fails after the profiler stopped
    prof = StepProfiler(True, blocked / "prof", warmup_steps=1, profile_steps=2)
    for _ in range(4):
        torch.ones(8, 8) @ torch.ones(8, 8)
        prof.step()  # raised before: the run's training died with it
    prof.close()  # and closing again tried to stop a stopped profiler
    summary = prof.summary()
    assert summary.window_steps == 2 and summary.reason.startswith("profile not summarized: ")


def test_cuda_kernels_are_read_from_a_torch_whose_events_have_no_activity_type():
    """torch 2.11 (an H200 image's) FunctionEvent has no activity_type; 2.13's has: both are read."""
    from torch.autograd import DeviceType
    from torch.autograd.profiler_util import FunctionEvent

    from helpers.measure.profile import events_from_profiler

    launch = FunctionEvent(1, "aten::mm", 1, 0, 10)
    kernel = FunctionEvent(2, "sm90_xmma_gemm_bf16", 1, 5, 25, device_type=DeviceType.CUDA, linked_correlation_id=1)
    del kernel.activity_type
    found, busy_us = events_from_profiler(types.SimpleNamespace(events=lambda: [launch, kernel]), "cuda")
    assert [(e["name"], e["device"], e["self_time_us"]) for e in found] == [("sm90_xmma_gemm_bf16", "cuda", 20)]
    assert busy_us == 20


# ----------------------------------------------------------------------------- XLA metrics
def _fake_torch_xla(monkeypatch, state):
    met = types.ModuleType("torch_xla.debug.metrics")
    met.metric_data = lambda name: state["metrics"].get(name)
    met.counter_value = lambda name: state["counters"].get(name)
    debug = types.ModuleType("torch_xla.debug")
    debug.metrics = met
    root = types.ModuleType("torch_xla")
    root.debug = debug
    for name, mod in (("torch_xla", root), ("torch_xla.debug", debug), ("torch_xla.debug.metrics", met)):
        monkeypatch.setitem(sys.modules, name, mod)


def test_xla_metrics_since_counts_what_ran_after_the_snapshot(monkeypatch):
    state = {
        "metrics": {"CompileTime": (2, 3e9, []), "ExecuteTime": (10, 5e8, [])},
        "counters": {"UncachedCompile": 2},
    }  # CachedCompile not yet created: None
    _fake_torch_xla(monkeypatch, state)
    before = xla_counters()
    state["metrics"] = {"CompileTime": (3, 4.5e9, []), "ExecuteTime": (15, 1e9, [])}
    state["counters"] = {"UncachedCompile": 3, "CachedCompile": 4}
    deltas = xla_metrics_since(before)
    assert deltas.compile_count == 1 and deltas.compile_time_s == pytest.approx(1.5)
    assert deltas.execute_count == 5 and deltas.execute_time_s == pytest.approx(0.5)
    assert deltas.uncached_compiles == 1 and deltas.cached_compiles == 4


def test_xla_metrics_since_without_torch_xla_says_why(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch_xla", None)
    deltas = xla_metrics_since(xla_counters())
    assert deltas.uncached_compiles is None and "torch_xla" in deltas.reason


def test_step_profiler_on_xla_records_metrics(monkeypatch, tmp_path):
    state = {"metrics": {}, "counters": {}}
    _fake_torch_xla(monkeypatch, state)
    prof = StepProfiler(True, tmp_path, warmup_steps=1, profile_steps=2, device_type="xla")
    prof.step()
    state["metrics"] = {"CompileTime": (1, 2e9, []), "ExecuteTime": (2, 1e7, [])}
    state["counters"] = {"UncachedCompile": 1}
    prof.step()
    prof.step()
    summary = prof.summary()
    assert summary.xla_profiler_trace == "not supported on this backend"
    assert summary.xla_metrics.uncached_compiles == 1
    assert summary.trace_path is None and summary.window_steps == 2
