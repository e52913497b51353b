import json
import math

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode
from transformers import BertConfig, BertForSequenceClassification

from conftest import tiny_bert_config
from helpers import roofline


def counted_flops(model: torch.nn.Module, batch: int, seq_len: int, device: str = "cpu") -> tuple[int, int]:
    """Return (forward, forward+backward) FLOPs that FlopCounterMode counts for one training step."""
    ids = torch.zeros(batch, seq_len, dtype=torch.long, device=device)
    labels = torch.zeros(batch, dtype=torch.long, device=device)
    counter = FlopCounterMode(display=False)
    with counter:
        loss = model(input_ids=ids, labels=labels).loss
        forward = counter.get_total_flops()
        loss.backward()
    return forward, counter.get_total_flops()


# Eager attention: on the CPU, SDPA without dropout dispatches to
# aten._scaled_dot_product_flash_attention_for_cpu, which FlopCounterMode (torch 2.13) has no formula
# for, so the L^2 attention matmuls would go uncounted. Eager runs them as bmm, which it counts.
@pytest.mark.parametrize("batch,seq_len", [(1, 8), (4, 32), (8, 128)])
def test_flops_match_flop_counter_tiny(batch, seq_len):
    cfg = tiny_bert_config(attn_implementation="eager")
    model = BertForSequenceClassification(cfg).train()
    forward, total = counted_flops(model, batch, seq_len)
    ours = roofline.train_step_flops_breakdown(cfg, batch, seq_len)
    assert ours["forward"] == pytest.approx(forward, rel=0.05)
    # FlopCounterMode counts matmuls only, so compare without the optimizer's elementwise FLOPs
    assert ours["forward"] + ours["backward"] == pytest.approx(total, rel=0.05)


@pytest.fixture(scope="module")
def bert_base_meta():
    # meta tensors: shapes without storage, so a bert-base forward+backward at batch 64 costs nothing
    cfg = BertConfig(num_labels=6, attn_implementation="eager")
    with torch.device("meta"):
        model = BertForSequenceClassification(cfg).train()
    return cfg, model


@pytest.mark.parametrize("batch", [1, 64])
@pytest.mark.parametrize("seq_len", [16, 128])
def test_flops_match_flop_counter_bert_base(bert_base_meta, batch, seq_len):
    cfg, model = bert_base_meta
    forward, total = counted_flops(model, batch, seq_len, device="meta")
    ours = roofline.train_step_flops_breakdown(cfg, batch, seq_len)
    assert ours["forward"] == pytest.approx(forward, rel=0.05)
    assert ours["forward"] + ours["backward"] == pytest.approx(total, rel=0.05)


def test_train_step_flops_includes_optimizer():
    cfg = tiny_bert_config()
    parts = roofline.train_step_flops_breakdown(cfg, 4, 32)
    assert parts["backward"] == 2 * parts["forward"]
    assert parts["optimizer"] == roofline.ADAMW_FLOPS_PER_PARAM * roofline.param_count(cfg)
    assert roofline.train_step_flops(cfg, 4, 32) == parts["forward"] + parts["backward"] + parts["optimizer"]


def test_param_count_matches_model(bert_base_meta):
    cfg = tiny_bert_config()
    model = BertForSequenceClassification(cfg)
    assert roofline.param_count(cfg) == sum(p.numel() for p in model.parameters())
    cfg, model = bert_base_meta
    assert roofline.param_count(cfg) == sum(p.numel() for p in model.parameters()) == 109_486_854


@pytest.mark.parametrize("precision", list(roofline.PRECISION_BYTES))
def test_step_bytes_grow_with_batch_and_intensity_too(precision):
    cfg = BertConfig(num_labels=6)
    totals = [roofline.step_bytes(cfg, b, 128, precision)["total"] for b in (1, 8, 64)]
    assert totals[0] < totals[1] < totals[2]
    ais = [roofline.arithmetic_intensity(cfg, b, 128, precision) for b in (1, 8, 64)]
    assert ais[0] < ais[1] < ais[2]


def test_step_bytes_tiny_by_hand():
    # hidden 64, 2 layers, 4 heads, intermediate 128, vocab 100, 32 positions, 2 token types, 6 labels;
    # batch 2, L 8 (T = 16 tokens, S = 2*4*8*8 = 512 probabilities per layer), fp32, CUDA (bool masks)
    cfg = tiny_bert_config(vocab_size=100, max_position_embeddings=32)
    matmul_weights = 2 * (4 * 64 * 64 + 2 * 64 * 128) + 64 * 64 + 64 * 6  # 70,016
    tables = (100 + 32 + 2) * 64  # 8,576
    small = 2 * 64 + 2 * (4 * 64 + 128 + 64 + 4 * 64) + 64 + 6  # 1,606 biases and LayerNorm weights
    n = tables + matmul_weights + small  # 80,198
    assert n == 80_198
    # saved activations per layer, bytes: eight T x H fp32 tensors (x, Q, K, V, context, LN1 in, FFN in,
    # LN2 in), two T x I (GELU in, FFN-down in), probs + dropped probs (fp32) and their bool mask,
    # two T x H bool dropout masks, two LayerNorms' mean and rstd
    per_layer = 8 * 16 * 64 * 4 + 2 * 16 * 128 * 4 + 2 * 512 * 4 + 512 + 2 * 16 * 64 + 2 * 2 * 16 * 4
    assert per_layer == 56_064
    embeddings = 16 * 64 * 4 + 2 * 16 * 4 + 16 * 64  # LN input, its stats, dropout mask
    # last hidden state, tanh output, bool mask, dropped pooled output, log-softmax
    head = 16 * 64 * 4 + 2 * 64 * 4 + 2 * 64 + 2 * 64 * 4 + 2 * 6 * 4
    activations = 2 * per_layer + embeddings + head  # 122,672
    expected = ((matmul_weights + small) * 4  # weights read in forward
                + 3 * 16 * 64 * 4  # embedding rows gathered
                + matmul_weights * 4  # matmul weights read again in backward
                + n * 4  # gradients written
                + 7 * n * 4  # AdamW: read p, g, m, v; write p, m, v
                + 2 * activations)  # saved activations written, then read back
    got = roofline.step_bytes(cfg, 2, 8, "fp32")
    assert got["total"] == expected
    assert got["attention_probs_written_forward"] == 2 * (512 * 4 + 512 + 512 * 4)
    assert got["weight_casts_written_forward"] == 0


def test_step_bytes_autocast_counts_weight_casts():
    cfg = tiny_bert_config()
    fp32, bf16 = roofline.step_bytes(cfg, 2, 8, "fp32"), roofline.step_bytes(cfg, 2, 8, "bf16")
    matmul_weights = roofline.param_breakdown(cfg)["matmul_weights"]
    assert bf16["weight_casts_written_forward"] == bf16["weight_casts_read_forward"] == 2 * matmul_weights
    assert bf16["weights_read_backward"] == 2 * matmul_weights < fp32["weights_read_backward"]
    pure = roofline.step_bytes(cfg, 2, 8, "bf16-pure")
    assert pure["optimizer_exp_avg_read_written"] == fp32["optimizer_exp_avg_read_written"] / 2


def test_roofline_point_memory_and_compute_side():
    # ridge of a 100 TFLOP/s, 1000 GB/s device: 100 FLOP/byte
    low = roofline.roofline_point(flops_per_step=1e12, bytes_per_step=1e11, step_time_s=0.5,
                                  peak_tflops=100.0, mem_bw_gbps=1000.0)
    assert low["arithmetic_intensity"] == pytest.approx(10.0)
    assert low["ridge_point"] == pytest.approx(100.0)
    assert low["bound"] == "memory"
    assert low["attainable_tflops"] == pytest.approx(10.0)  # 10 FLOP/byte x 1 TB/s
    assert low["achieved_tflops"] == pytest.approx(2.0)
    assert low["mfu"] == pytest.approx(0.02)
    high = roofline.roofline_point(1e12, 1e9, 0.05, 100.0, 1000.0)
    assert high["bound"] == "compute"
    assert high["attainable_tflops"] == pytest.approx(100.0)
    assert high["mfu"] == pytest.approx(0.2)


@pytest.mark.parametrize("name,key", [
    ("NVIDIA H100 80GB HBM3", "h100"), ("NVIDIA H100 PCIe", None), ("NVIDIA H200", "h200"),
    ("NVIDIA A100-SXM4-40GB", "a100-40gb"), ("NVIDIA A100-SXM4-80GB", "a100-80gb"),
    ("Tesla T4", "t4"), ("NVIDIA L4", "l4"), ("NVIDIA L40S", None), ("NVIDIA A10G", "a10g"),
    ("NVIDIA GeForce RTX 4090", None),
])
def test_cuda_device_key(name, key):
    assert roofline.cuda_device_key(name) == key


def test_device_peaks_csv_has_every_device_with_a_source():
    peaks = roofline.load_device_peaks()
    assert list(peaks.columns) == ["device", "key", "peak_bf16_tflops", "peak_fp32_tflops", "mem_bw_gbps",
                                   "memory_gib", "source"]
    assert {"trn1-core", "trn1-chip", "t4", "l4", "a10g", "a100-40gb", "a100-80gb", "h100",
            "h200"} <= set(peaks["key"])
    assert (peaks["source"].str.strip().str.len() > 0).all()
    assert peaks["key"].is_unique
    # every key the name mapping can return has a roof
    for _, key in roofline.CUDA_NAME_KEYS:
        roof = roofline.device_roof(key, "bf16")
        assert roof["peak_tflops"] > roofline.device_roof(key, "fp32")["peak_tflops"] > 0
        assert roof["mem_bw_gbps"] > 0 and roof["source"]
    assert roofline.device_roof("trn1-chip", "bf16-pure-sr")["peak_tflops"] == 2 * roofline.device_roof(
        "trn1-core", "bf16")["peak_tflops"]
    with pytest.raises(ValueError):
        roofline.device_roof("host", "fp32")  # measured at run time, not published


def test_cpu_microbenchmarks_return_positive_numbers():
    for dtype in (torch.float32, torch.bfloat16):
        tflops = roofline.measure_cpu_matmul_tflops(dtype, n=128, seconds=0.1)
        assert math.isfinite(tflops) and tflops > 0
    gbps = roofline.measure_cpu_copy_gbps(n_bytes=2 ** 22, seconds=0.1)
    assert math.isfinite(gbps) and gbps > 0


def test_cli_prints_intensity_table(capsys):
    roofline.main(["--model", "bert-base", "--batch", "8", "64", "--seq-len", "32", "128",
                   "--precision", "bf16"])
    out = capsys.readouterr().out
    assert out.startswith("<!-- written by: python -m helpers.roofline")
    rows = [line for line in out.splitlines() if line.startswith("| ") and line[2].isdigit()]
    assert len(rows) == 4
    ai = {tuple(int(c) for c in r.split("|")[1:3]): float(r.split("|")[5]) for r in rows}
    assert ai[(64, 128)] > ai[(8, 128)] and ai[(64, 32)] > ai[(8, 32)]


def test_cpu_roof_keeps_the_best_observed_per_threads_and_dtype(tmp_path, monkeypatch):
    from helpers import systems

    path = tmp_path / "cpu_roofs.json"
    monkeypatch.setattr(roofline, "measure_cpu_matmul_tflops", lambda dtype, n, seconds: 1.0)
    monkeypatch.setattr(roofline, "measure_cpu_copy_gbps", lambda seconds: 10.0)
    first = systems.cpu_roof(torch.bfloat16, path)
    assert (first["peak_tflops"], first["mem_bw_gbps"]) == (1.0, 10.0)
    # a later run on a busier machine measures less matmul, more bandwidth: each roof keeps its best
    monkeypatch.setattr(roofline, "measure_cpu_matmul_tflops", lambda dtype, n, seconds: 0.5)
    monkeypatch.setattr(roofline, "measure_cpu_copy_gbps", lambda seconds: 20.0)
    later = systems.cpu_roof(torch.bfloat16, path)
    assert (later["peak_tflops"], later["mem_bw_gbps"]) == (1.0, 20.0)
    assert "best over runs" in later["source"]
    # another dtype (or thread count) is another roof
    fp32 = systems.cpu_roof(torch.float32, path)
    assert fp32["peak_tflops"] == 0.5 and len(json.loads(path.read_text())) == 2
