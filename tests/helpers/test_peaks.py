"""helpers/peaks.py: the CPU roof measured once per machine, dtype and threads, kept whole, never from a busy CPU."""

import json
import math

import pytest
import torch

from helpers import devices, peaks, record

CPU = devices.Device("cpu", "cpu", "Test CPU", "cpu-test", None, "AVX512", False)


def canned(tflops: float = 0.2, **extra) -> dict:
    return {
        "peak_tflops": tflops,
        "mem_bw_gbps": 10.0,
        "shape": "square 2048",
        "by_shape": {"square 2048": tflops},
        "threads": torch.get_num_threads(),
        "cpu_count": 2,
        **extra,
    }


@pytest.fixture
def measured(monkeypatch):
    """The dtypes measured: each measurement returns the roof the test set (real ones are tested apart)."""
    calls, roof = [], {"value": canned()}
    monkeypatch.setattr(peaks, "measure", lambda dtype: calls.append(dtype) or dict(roof["value"]))
    return calls, roof


def kept(path) -> dict:
    return json.loads(path.read_text())


def test_a_roof_is_measured_once_then_read(tmp_path, measured):
    calls, _ = measured
    first = peaks.roof("cpu-test", "bf16", tmp_path)
    assert peaks.roof("cpu-test", "bf16", tmp_path) == first and calls == ["bf16"]
    assert first["peak_tflops"] == 0.2 and first["source"].endswith("(_peaks/cpu-test.json)")  # relative: no checkout
    peaks.roof("cpu-test", "fp32", tmp_path)  # another dtype is another roof
    assert calls == ["bf16", "fp32"] and len(kept(tmp_path / "cpu-test.json")) == 2


@pytest.mark.parametrize("stored", ['{"bf16, 1 thr', "[]", json.dumps({"bf16, THREADS threads": canned(-1.0)})])
def test_a_kept_roof_cut_short_or_implausible_is_measured_again_and_replaced(tmp_path, measured, stored):
    (tmp_path / "cpu-test.json").write_text(stored.replace("THREADS", str(torch.get_num_threads())))
    assert peaks.roof("cpu-test", "bf16", tmp_path)["peak_tflops"] == 0.2 and measured[0] == ["bf16"]
    assert kept(tmp_path / "cpu-test.json")[f"bf16, {torch.get_num_threads()} threads"]["peak_tflops"] == 0.2


def test_a_roof_measured_on_a_busy_machine_is_never_kept_and_says_why(tmp_path, measured):
    measured[1]["value"] = canned(0.0278, others_cores=1.6)
    out = peaks.roof("cpu-test", "bf16", tmp_path)
    assert out["peak_tflops"] is None and not (tmp_path / "cpu-test.json").exists()
    assert "other processes kept 1.6 of 2 cores busy" in out["reason"]


def test_a_roof_that_cannot_be_kept_is_used_and_says_why(tmp_path, measured, monkeypatch):
    def full_disk(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(peaks.os, "replace", full_disk)
    out = peaks.roof("cpu-test", "bf16", tmp_path)
    assert out["peak_tflops"] == 0.2 and out["source"].endswith(
        "(_peaks/cpu-test.json; not kept: No space left on device)"
    )
    assert not list(tmp_path.iterdir())  # no temporary file left behind


def test_ensure_cpu_roof_keeps_it_beside_the_suites_and_counts_its_seconds(tmp_path, measured):
    rec = record.start("r", {}, [], {"key": "cpu-test"})
    base = record.base_path(tmp_path, "suite", "r", "cpu-test")
    peaks.ensure_cpu_roof(CPU, "bf16", base, rec)
    assert (tmp_path / "_peaks" / "cpu-test.json").exists() and rec.phases.probes >= 0
    gpu = devices.Device("cuda", "cuda:0", "NVIDIA H200", "cuda-nvidia-h200", None, "AVX512", True)
    peaks.ensure_cpu_roof(gpu, "bf16", base, rec)  # a published peak: nothing measured
    assert measured[0] == ["bf16"]


def test_ensure_cpu_roof_is_never_fatal(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(peaks, "measure", lambda dtype: 1 / 0)
    rec = record.start("r", {}, [], {"key": "cpu-test"})
    peaks.ensure_cpu_roof(CPU, "bf16", record.base_path(tmp_path, None, "r", "cpu-test"), rec)
    assert "could not be measured (ZeroDivisionError" in capsys.readouterr().out and rec.phases.probes is not None


def test_the_report_reads_the_committed_roofs():
    committed = record.repo_path(record.RESULTS_DIR) / record.PEAKS
    roof = peaks.cpu_roof("cpu-amd-epyc-family-unknown-avx512-avx512-bf16", "bf16", 2, committed)
    assert roof["peak_tflops"] == pytest.approx(0.4457, abs=1e-4) and roof["mem_bw_gbps"] > 0
    assert "(_peaks/cpu-amd-epyc-family-unknown-avx512-avx512-bf16.json)" in roof["source"]
    assert peaks.cpu_roof("cpu-amd-epyc-family-unknown-avx512-avx512-bf16", "bf16", 64, committed) is None
    assert peaks.cpu_roof("cpu-never-seen", "bf16", 2, committed) is None


# ----------------------------------------------------------------------------- real measurements
def test_a_measurement_over_its_cap_falls_back_to_the_probes_rate():
    out = peaks.measure("fp32", cap_s=0.0)  # every model shape would pass the cap
    assert list(out["by_shape"]) == ["square 256 (capped)"] and math.isfinite(out["peak_tflops"])
    assert out["peak_tflops"] > 0 and out["mem_bw_gbps"] > 0 and out["others_cores"] >= 0


def test_the_matmul_is_timed_at_the_process_threads(monkeypatch):
    """torch.utils.benchmark's Timer runs at one thread unless told: the roof is the process's threads'."""
    from torch.utils import benchmark

    seen = []

    class Spy(benchmark.Timer):
        def __init__(self, *args, **kwargs):
            seen.append(kwargs.get("num_threads"))
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(benchmark, "Timer", Spy)
    assert peaks.matmul_tflops(64, 64, 64, torch.float32, seconds=0.0) > 0
    assert seen == [torch.get_num_threads()]
