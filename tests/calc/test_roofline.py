"""helpers/calc/roofline.py: bytes per step, arithmetic intensity, the roofline point, a run's systems figures."""

from collections import Counter

import pytest
from conftest import tiny_bert_config
from transformers import BertConfig

from helpers.calc import flops, roofline
from helpers.calc.flops import PRECISION_BYTES
from helpers.measure import peaks


@pytest.mark.parametrize("precision", list(PRECISION_BYTES))
def test_step_bytes_grow_with_batch_and_intensity_too(precision):
    cfg = BertConfig(num_labels=6)
    totals = [roofline.step_bytes(cfg, b, 128, precision)["total"] for b in (1, 8, 64)]
    assert totals[0] < totals[1] < totals[2]
    ais = [flops.model_flops(cfg, b, 128) / total for b, total in zip((1, 8, 64), totals)]
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
    expected = (
        (matmul_weights + small) * 4  # weights read in forward
        + 3 * 16 * 64 * 4  # embedding rows gathered
        + matmul_weights * 4  # matmul weights read again in backward
        + n * 4  # gradients written
        + 7 * n * 4  # AdamW: read p, g, m, v; write p, m, v
        + 2 * activations
    )  # saved activations written, then read back
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
    low = roofline.roofline_point(
        flops_per_step=1e12, bytes_per_step=1e11, step_time_s=0.5, peak_tflops=100.0, mem_bw_gbps=1000.0
    )
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


def test_cli_prints_intensity_table(capsys):
    roofline.main(["--model", "bert-base", "--batch", "8", "64", "--seq-len", "32", "128", "--precision", "bf16"])
    out = capsys.readouterr().out
    assert out.startswith("<!-- written by: python -m helpers.calc.roofline")
    rows = [line for line in out.splitlines() if line.startswith("| ") and line[2].isdigit()]
    assert len(rows) == 4
    ai = {tuple(int(c) for c in r.split("|")[1:3]): float(r.split("|")[5]) for r in rows}
    assert ai[(64, 128)] > ai[(8, 128)] and ai[(64, 32)] > ai[(8, 32)]


def test_systems_section_is_mfu_against_the_device_peak(tmp_path, monkeypatch):
    cfg = BertConfig(num_labels=6)
    gpu = {"type": "cuda", "name": "NVIDIA A100-SXM4-40GB", "key": "cuda-nvidia-a100-sxm4-40gb"}
    out = roofline.systems_section(
        cfg, Counter({(64, 32): 10}), 1.0, 10, "bf16", "bf16", gpu, None, fused_attention=True
    )
    model_tflops = 10 * flops.model_flops(cfg, 64, 32) / 1.0 / 1e12
    assert out.achieved_tflops == pytest.approx(model_tflops) and out.peak_tflops == 312
    assert out.mfu == pytest.approx(model_tflops / 312) and "datasheet" in out.peak_source
    fused = out.bytes_per_step
    unfused = roofline.systems_section(cfg, Counter({(64, 32): 10}), 1.0, 10, "bf16", "bf16", gpu, None)
    assert fused < unfused.bytes_per_step  # SDPA never stores the L^2 probabilities
    cpu = {"type": "cpu", "name": "some cpu", "key": "cpu-test"}
    monkeypatch.setattr(
        roofline,
        "machine_peak",
        lambda key, dtype, where: {
            "peak_tflops": 2.0,
            "mem_bw_gbps": 20.0,
            "source": f"measured {key} {dtype} in {where}",
        },
    )
    out = roofline.systems_section(cfg, Counter({(8, 32): 4}), 2.0, 4, "fp32", "fp32", cpu, tmp_path)
    assert out.mfu == pytest.approx(4 * flops.model_flops(cfg, 8, 32) / 2.0 / 2e12)
    assert out.peak_source == f"measured cpu-test fp32 in {tmp_path}"
    empty = roofline.systems_section(cfg, Counter(), 0.0, 0, "fp32", "fp32", cpu, None)
    assert empty.mfu is None and empty.reason == "no steady-state steps"


def test_a_lora_run_is_held_against_the_flops_of_a_lora_step_its_arguments_name():
    """The rank and targets reach the FLOP count as arguments (no attribute on the model's config): a LoRA
    step does no weight gradient for the frozen weights, so it counts fewer FLOPs than a full step."""
    cfg = BertConfig(num_labels=6)
    gpu = {"type": "cuda", "name": "NVIDIA A100-SXM4-40GB", "key": "cuda-nvidia-a100-sxm4-40gb"}
    shapes = Counter({(64, 32): 10})
    full = roofline.systems_section(cfg, shapes, 1.0, 10, "bf16", "bf16", gpu, None)
    lora = roofline.systems_section(cfg, shapes, 1.0, 10, "bf16", "bf16", gpu, None, 8, "all-linear")
    assert lora.flops_per_step == pytest.approx(flops.lora_model_flops(cfg, 64, 32, 8, "all-linear"))
    assert lora.flops_per_step < 0.8 * full.flops_per_step and not hasattr(cfg, "lora_r")


@pytest.mark.parametrize(
    "instance, key, bf16",
    [
        ("trn1.2xlarge", "trn1-core", 95.0),
        ("trn1n.32xlarge", "trn1-core", 95.0),
        ("trn2.48xlarge", "trn2-core", 83.375),
        ("inf2.xlarge", "inf2-core", 95.0),
        (None, "trn1-core", 95.0),
    ],
)
def test_a_neuron_runs_mfu_is_against_its_own_neuroncore(instance, key, bf16):
    peak = roofline.device_peak({"type": "xla", "neuron": True, "instance": instance, "key": "x"}, "bf16")
    assert roofline.neuron_core_key(instance) == key and peak["peak_tflops"] == bf16


@pytest.mark.parametrize(
    "name, bf16", [("NVIDIA A10G", 70.0), ("NVIDIA A10", 125.0), ("NVIDIA H200", 989.4), ("NVIDIA H200 NVL", 835.5)]
)
def test_a_gpu_is_held_against_its_own_peak_not_a_relatives(name, bf16):
    """The A10G (AWS G5) is not the A10: 125 TFLOP/s would put every A10G MFU ~1.8x low."""
    assert roofline.device_peak({"type": "cuda", "name": name, "key": "x"}, "bf16")["peak_tflops"] == bf16


def test_an_mfu_above_one_is_never_written_and_the_roof_it_beat_is_dropped(tmp_path, monkeypatch):
    import json

    cfg = tiny_bert_config()
    cpu = {"type": "cpu", "name": "some cpu", "key": "cpu-test"}
    monkeypatch.setattr(peaks.torch, "get_num_threads", lambda: 1)
    stored = {"peak_tflops": 1e-6, "mem_bw_gbps": 1.0, "threads": 1, "shape": "s", "by_shape": {"s": 1e-6}}
    (tmp_path / "cpu-test.json").write_text(json.dumps({"fp32, 1 threads": stored, "bf16, 1 threads": stored}))
    monkeypatch.setattr(peaks, "floor_tflops", lambda key, dtype, threads: None)  # a roof no floor catches
    out = roofline.systems_section(cfg, Counter({(8, 32): 4}), 0.01, 4, "fp32", "fp32", cpu, tmp_path)
    assert out.mfu is None and out.reason.startswith("MFU ") and "is above 1" in out.reason
    assert out.achieved_tflops > out.peak_tflops == 1e-6
    assert list(json.loads((tmp_path / "cpu-test.json").read_text())) == ["bf16, 1 threads"]  # measured again next
