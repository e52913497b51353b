"""helpers/measure/peaks.py: the CPU's roof measured once per machine, dtype and threads, within a cap."""
import json
import math

import pytest

from helpers.measure import peaks


def test_a_peak_is_measured_once_then_read(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(peaks, "measure_peak", lambda dtype: calls.append(dtype) or {
        "peak_tflops": 1.5, "mem_bw_gbps": 9.0, "shape": "square 2048", "by_shape": {"square 2048": 1.5},
        "threads": 2, "measured_at": "now", "load_1min": 0.1, "seconds": 1.0})
    first = peaks.machine_peak("cpu-test", "bf16", tmp_path)
    again = peaks.machine_peak("cpu-test", "bf16", tmp_path)
    assert first == again and first["peak_tflops"] == 1.5 and calls == ["bf16"]
    assert "(_peaks/cpu-test.json)" in first["source"]  # relative: a record never names a checkout's path
    peaks.machine_peak("cpu-test", "fp32", tmp_path)  # another dtype is another roof
    assert calls == ["bf16", "fp32"] and len(json.loads((tmp_path / "cpu-test.json").read_text())) == 2


def test_a_file_cut_short_is_measured_again_not_trusted(tmp_path, monkeypatch):
    (tmp_path / "cpu-test.json").write_text('{"fp32, 2 threads": {"peak_t')
    monkeypatch.setattr(peaks, "measure_peak", lambda dtype: {"peak_tflops": 1.0, "mem_bw_gbps": 1.0,
                                                             "shape": "s", "by_shape": {"s": 1.0}, "threads": 2})
    assert peaks.machine_peak("cpu-test", "fp32", tmp_path)["peak_tflops"] == 1.0
    assert json.loads((tmp_path / "cpu-test.json").read_text())  # rewritten whole


def test_a_slow_dtype_stops_at_the_time_cap():
    out = peaks.measure_peak("fp16", cap_s=0.5)  # fp16 is emulated on most CPUs: a 2048^3 matmul takes minutes
    assert out["seconds"] < 5 and math.isfinite(out["peak_tflops"]) and out["peak_tflops"] > 0


def test_microbenchmarks_return_positive_numbers():
    assert peaks.matmul_tflops(128, 128, 128, peaks.DTYPES["fp32"], seconds=0.05) > 0
    assert peaks.copy_gbps(n_bytes=2 ** 22, seconds=0.05) > 0


def test_a_roof_that_cannot_be_kept_says_why_without_naming_the_path(tmp_path, monkeypatch):
    monkeypatch.setattr(peaks, "measure_peak", lambda dtype: {"peak_tflops": 1.0, "mem_bw_gbps": 1.0,
                                                             "shape": "s", "by_shape": {"s": 1.0}, "threads": 2})

    def full_disk(path, data):
        raise OSError(28, "No space left on device", str(path))

    monkeypatch.setattr(peaks, "write_json_atomic", full_disk)
    source = peaks.machine_peak("cpu-test", "fp32", tmp_path)["source"]
    assert source.endswith("(_peaks/cpu-test.json; not kept: No space left on device)")
    assert str(tmp_path) not in source
