"""helpers/measure/precision_probe.py: precision=auto on a CPU follows a paired bf16-vs-fp32 probe, kept once
per machine and thread count beside the roofs."""

import json

import pytest
import torch

from helpers.measure import precision_probe
from helpers.measure.precision_probe import cpu_probe as real_cache  # before conftest's
from helpers.measure.precision_probe import paired_probe as real_probe
from helpers.run.args import NeuronArgs
from helpers.run.device import DeviceInfo


@pytest.fixture(autouse=True)
def real_cache_fake_probe(monkeypatch):
    """The real cache (conftest cans it for every other test); each test says what its probe measures."""
    monkeypatch.setattr(precision_probe, "cpu_probe", real_cache)
    monkeypatch.setattr(precision_probe, "_MEASURED", {})


def _cpu(bf16: bool) -> DeviceInfo:
    return DeviceInfo("cpu", "cpu", "test cpu", "AVX512+avx512_bf16" if bf16 else "AVX2", bf16_fast=bf16)


def _probe(ratio: float, **kw) -> dict:
    return {
        "ratio": ratio,
        "fp32_step_s": 0.66,
        "bf16_step_s": 0.66 / ratio,
        "per_round": [ratio] * 5,
        "rounds": 5,
        "threads": 2,
        **kw,
    }


def _counting(monkeypatch, ratio: float) -> list:
    calls = []
    monkeypatch.setattr(precision_probe, "paired_probe", lambda: calls.append(torch.get_num_threads()) or _probe(ratio))
    return calls


@pytest.mark.parametrize(
    "ratio, used, words",
    [
        (1.4, "bf16", "bf16 autocast: probe 1.40x faster than fp32 on this CPU"),
        (0.8, "fp32", "fp32: bf16 autocast probe 0.80x fp32's speed"),  # the Xeon with avx512_bf16, no AMX
        (1.05, "fp32", "needs >= 1.10x"),  # faster, but within the margin
    ],
)
def test_auto_on_a_cpu_follows_the_probe(ratio, used, words, monkeypatch, tmp_path):
    calls = _counting(monkeypatch, ratio)
    choice = precision_probe.resolve("auto", _cpu(True), NeuronArgs(), tmp_path)
    assert (choice.used, choice.compute_dtype) == (used, used) and words in choice.auto_reason
    assert choice.probe.ratio == ratio and len(calls) == 1
    assert choice.mechanism == ("fp32" if used == "fp32" else "torch.autocast(cpu, torch.bfloat16) over fp32 weights")


def test_a_cpu_without_bf16_instructions_is_not_probed(monkeypatch, tmp_path):
    calls = _counting(monkeypatch, 3.0)
    choice = precision_probe.resolve("auto", _cpu(False), NeuronArgs(), tmp_path)
    assert (choice.used, choice.auto_reason, choice.probe) == ("fp32", precision_probe.NO_BF16, None) and calls == []
    assert not list(tmp_path.iterdir())


def test_a_precision_given_is_kept_and_never_probed(monkeypatch, tmp_path):
    calls = _counting(monkeypatch, 0.5)
    choice = precision_probe.resolve("bf16", _cpu(True), NeuronArgs(), tmp_path)
    assert (choice.used, choice.auto_reason, calls) == ("bf16", None, [])


def test_the_probe_is_read_from_its_file_instead_of_run_again(monkeypatch, tmp_path):
    calls, key = _counting(monkeypatch, 1.4), _cpu(True).key
    first = precision_probe.cpu_probe(key, tmp_path)
    assert precision_probe.cpu_probe(key, tmp_path) == first and len(calls) == 1
    monkeypatch.setattr(precision_probe, "_MEASURED", {})  # a new process: the file alone answers
    assert precision_probe.resolve("auto", _cpu(True), NeuronArgs(), tmp_path).used == "bf16" and len(calls) == 1
    kept = json.loads((tmp_path / f"{key}.precision.json").read_text())
    assert list(kept) == [f"bf16 autocast vs fp32, {torch.get_num_threads()} threads"]
    assert f"(_peaks/{key}.precision.json)" in first["source"] and str(tmp_path) not in first["source"]
    threads = torch.get_num_threads()
    torch.set_num_threads(threads + 1)
    try:
        precision_probe.cpu_probe(key, tmp_path)  # another thread count is another probe
    finally:
        torch.set_num_threads(threads)
    assert calls == [threads, threads + 1] and len(json.loads((tmp_path / f"{key}.precision.json").read_text())) == 2


def test_a_file_cut_short_is_probed_again_and_a_failing_probe_means_fp32(monkeypatch, tmp_path):
    (tmp_path / "cpu-test.precision.json").write_text('{"bf16 autocast vs fp32, 1 thr')
    calls = _counting(monkeypatch, 1.4)
    assert precision_probe.cpu_probe("cpu-test", tmp_path)["ratio"] == 1.4 and len(calls) == 1

    def broken():
        raise RuntimeError("oneDNN has no bf16 kernel")

    monkeypatch.setattr(precision_probe, "paired_probe", broken)
    choice = precision_probe.resolve("auto", _cpu(True), NeuronArgs(), tmp_path / "elsewhere")
    assert choice.used == "fp32" and "probe failed (RuntimeError: oneDNN" in choice.auto_reason


def test_the_probe_runs_for_real_on_a_tiny_bert():
    tiny = dict(vocab_size=500, hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64)
    out = real_probe(tiny, batch=4, seq_len=8, rounds=3)
    assert out["fp32_step_s"] > 0 and out["bf16_step_s"] > 0 and out["ratio"] > 0
    assert out["rounds"] == len(out["per_round"]) == 3 and out["threads"] == torch.get_num_threads()
    assert out["ratio"] == pytest.approx(sorted(out["per_round"])[1])  # the median of the paired rounds
    assert precision_probe._complete(out) and out["cpu"]


def test_a_probe_measured_while_other_processes_use_the_cpus_decides_this_run_only(monkeypatch, tmp_path):
    """A probe at load 7.3 was kept, so later quiet runs trained in fp32 where bf16 is 1.51x faster."""
    monkeypatch.setattr(precision_probe, "paired_probe", lambda: _probe(0.9, others_cores=1.7, cpu_count=2))
    busy = precision_probe.resolve("auto", _cpu(True), NeuronArgs(), tmp_path)
    assert busy.used == "fp32" and "not kept: measured while other processes kept 1.7 of 2" in busy.probe.source
    assert not list(tmp_path.iterdir())
    monkeypatch.setattr(precision_probe, "paired_probe", lambda: _probe(1.51, others_cores=0.05, cpu_count=2))
    quiet = precision_probe.resolve("auto", _cpu(True), NeuronArgs(), tmp_path)
    assert quiet.used == "bf16" and len(list(tmp_path.iterdir())) == 1


def test_the_probe_a_run_records_passes_the_records_schema(monkeypatch, tmp_path):
    """The busy figures stay in the _peaks file: the record's probe section has no field for them."""
    from helpers.run.schema import PrecisionProbe

    for others in (1.7, 0.05):
        monkeypatch.setattr(
            precision_probe, "paired_probe", lambda others=others: _probe(1.5, others_cores=others, cpu_count=2)
        )
        assert isinstance(precision_probe.resolve("auto", _cpu(True), NeuronArgs(), tmp_path).probe, PrecisionProbe)
