"""helpers/measure/peaks.py: the CPU's roof measured once per machine, dtype and threads, within a cap."""

import json
import math

import pytest
import torch

from helpers.measure import peaks


@pytest.fixture(autouse=True)
def _threads_put_back():
    """peaks.main sets the process's torch threads, as a command should: put them back for the next test."""
    threads = peaks.torch.get_num_threads()
    yield
    peaks.torch.set_num_threads(threads)


def test_a_peak_is_measured_once_then_read(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(
        peaks,
        "measure_peak",
        lambda dtype: (
            calls.append(dtype)
            or {
                "peak_tflops": 1.5,
                "mem_bw_gbps": 9.0,
                "shape": "square 2048",
                "by_shape": {"square 2048": 1.5},
                "threads": 2,
                "measured_at": "now",
                "load_1min": 0.1,
                "seconds": 1.0,
            }
        ),
    )
    first = peaks.machine_peak("cpu-test", "bf16", tmp_path)
    again = peaks.machine_peak("cpu-test", "bf16", tmp_path)
    assert first == again and first["peak_tflops"] == 1.5 and calls == ["bf16"]
    assert "(_peaks/cpu-test.json)" in first["source"]  # relative: a record never names a checkout's path
    peaks.machine_peak("cpu-test", "fp32", tmp_path)  # another dtype is another roof
    assert calls == ["bf16", "fp32"] and len(json.loads((tmp_path / "cpu-test.json").read_text())) == 2


def test_a_file_cut_short_is_measured_again_not_trusted(tmp_path, monkeypatch):
    (tmp_path / "cpu-test.json").write_text('{"fp32, 2 threads": {"peak_t')
    monkeypatch.setattr(
        peaks,
        "measure_peak",
        lambda dtype: {"peak_tflops": 1.0, "mem_bw_gbps": 1.0, "shape": "s", "by_shape": {"s": 1.0}, "threads": 2},
    )
    assert peaks.machine_peak("cpu-test", "fp32", tmp_path)["peak_tflops"] == 1.0
    assert json.loads((tmp_path / "cpu-test.json").read_text())  # rewritten whole


def test_a_slow_dtype_stops_at_the_time_cap():
    out = peaks.measure_peak("fp16", cap_s=0.5)  # fp16 is emulated on most CPUs: a 2048^3 matmul takes minutes
    assert out["seconds"] < 5 and math.isfinite(out["peak_tflops"]) and out["peak_tflops"] > 0


def test_the_matmul_timer_runs_at_the_process_threads():
    """torch.utils.benchmark's Timer runs at one thread unless told: the roof and the bench keep the process's."""
    timer = peaks.matmul_timer(8, 16, 4, torch.float32)
    assert timer.timeit(2).task_spec.num_threads == torch.get_num_threads()


def test_microbenchmarks_return_positive_numbers():
    assert peaks.matmul_tflops(128, 128, 128, peaks.DTYPES["fp32"], seconds=0.05) > 0
    assert peaks.copy_gbps(n_bytes=2**22, seconds=0.05) > 0


def test_a_roof_that_cannot_be_kept_says_why_without_naming_the_path(tmp_path, monkeypatch):
    monkeypatch.setattr(
        peaks,
        "measure_peak",
        lambda dtype: {"peak_tflops": 1.0, "mem_bw_gbps": 1.0, "shape": "s", "by_shape": {"s": 1.0}, "threads": 2},
    )

    def full_disk(path, data):
        raise OSError(28, "No space left on device", str(path))

    monkeypatch.setattr(peaks, "write_json_atomic", full_disk)
    source = peaks.machine_peak("cpu-test", "fp32", tmp_path)["source"]
    assert source.endswith("(_peaks/cpu-test.json; not kept: No space left on device)")
    assert str(tmp_path) not in source


def _roof(tflops: float, load: float = 0.1) -> dict:
    return {
        "peak_tflops": tflops,
        "mem_bw_gbps": 10.0,
        "shape": "s",
        "by_shape": {"s": tflops},
        "threads": 2,
        "measured_at": "now",
        "load_1min": load,
        "cpu_count": 2,
        "seconds": 1.0,
    }


@pytest.mark.parametrize(
    "key, dtype, floor",
    [
        ("cpu-amd-epyc-avx512-avx512-bf16", "bf16", 0.04),
        ("cpu-intel-xeon-processor-2.80ghz-avx512", "bf16", 0.0048),
        ("xla-xla-cpu-intel-xeon-processor-2.80ghz-avx512", "fp32", 0.02),
        ("cpu-test", "fp16", None),
    ],
)
def test_each_cpu_kind_has_the_floor_of_its_data_file(key, dtype, floor):
    assert peaks.floor_tflops(key, dtype, 2) == (pytest.approx(floor) if floor else None)


@pytest.mark.parametrize("stored", [-1.0, 0.0, float("nan"), float("inf"), 0.0012])
def test_a_stored_roof_that_is_not_plausible_is_measured_again_and_replaced(tmp_path, monkeypatch, stored):
    (tmp_path / "cpu-test.json").write_text(json.dumps({"fp32, 2 threads": _roof(stored)}))
    monkeypatch.setattr(peaks.torch, "get_num_threads", lambda: 2)
    monkeypatch.setattr(peaks, "measure_peak", lambda dtype: _roof(0.2))
    assert peaks.machine_peak("cpu-test", "fp32", tmp_path)["peak_tflops"] == 0.2
    assert json.loads((tmp_path / "cpu-test.json").read_text())["fp32, 2 threads"]["peak_tflops"] == 0.2


def test_a_roof_measured_on_a_busy_machine_is_never_kept_and_says_why(tmp_path, monkeypatch):
    monkeypatch.setattr(peaks.torch, "get_num_threads", lambda: 2)
    monkeypatch.setattr(peaks, "measure_peak", lambda dtype: _roof(0.0012, load=3.2))
    peak = peaks.machine_peak("cpu-test", "fp32", tmp_path)
    assert peak["peak_tflops"] is None and not (tmp_path / "cpu-test.json").exists()
    assert "0.0012 TFLOP/s at load 3.2 on 2 CPUs is below the 0.02" in peak["reason"]
    assert "python -m helpers.measure.peaks" in peak["reason"]


@pytest.mark.parametrize(
    "broken, why", [("[]", "not a JSON object"), ('{"fp32, 1 thr', "cut short or not JSON"), ("", "empty")]
)
def test_the_peaks_command_repairs_a_broken_cache_naming_the_file(tmp_path, monkeypatch, capsys, broken, why):
    from helpers.run.device import resolve_device

    path = tmp_path / "_peaks" / f"{resolve_device('cpu').key}.json"
    path.parent.mkdir()
    path.write_text(broken)
    monkeypatch.setattr(peaks, "measure_peak", lambda dtype: _roof(0.2))
    peaks.main(["--dtype", "fp32", "--threads", "2", "--results", str(tmp_path)])
    out = capsys.readouterr().out
    assert f"{path}: {why}" in out and f"wrote {path}" in out
    assert json.loads(path.read_text())["fp32, 2 threads"]["peak_tflops"] == 0.2
    monkeypatch.setattr(peaks, "measure_peak", lambda dtype: _roof(0.0012, load=3.2))
    with pytest.raises(SystemExit, match="not kept"):
        peaks.main(["--dtype", "fp32", "--threads", "2", "--results", str(tmp_path)])
    assert "fp32, 2 threads" not in json.loads(path.read_text())  # a busy roof replaces nothing with itself


def test_a_real_measurement_times_its_best_shape_twice_and_keeps_the_faster():
    out = peaks.measure_peak("fp32", cap_s=2.0)
    assert len(out["rounds_tflops"]) in (1, 2) and out["peak_tflops"] == max(out["rounds_tflops"])
    assert out["cpu_count"] >= 1 and out["load_1min"] >= 0


@pytest.mark.parametrize("others, kept", [(1.6, False), (0.1, True)])
def test_a_roof_measured_while_other_processes_use_the_cpus_is_never_kept(tmp_path, monkeypatch, others, kept):
    """0.0278 TFLOP/s measured under load is above the floor (0.02 at 2 threads) yet a quarter of the quiet
    roof: kept, it made the next quiet run's MFU 0.81 instead of about 0.11."""
    monkeypatch.setattr(peaks.torch, "get_num_threads", lambda: 2)
    monkeypatch.setattr(peaks, "measure_peak", lambda dtype: {**_roof(0.0278), "others_cores": others})
    peak = peaks.machine_peak("cpu-test", "fp32", tmp_path)
    assert (tmp_path / "cpu-test.json").exists() == kept
    assert (peak["peak_tflops"] == 0.0278) == kept
    if not kept:
        assert "other processes kept 1.6 of 2 cores busy" in peak["reason"]


def test_a_measurement_says_how_busy_the_other_processes_kept_the_cpus():
    """A process spinning beside the measurement is counted (a quiet machine is not asserted: tests share it)."""
    import subprocess
    import sys

    spin = subprocess.Popen(
        [sys.executable, "-c", "import time\nend = time.time() + 1.5\nwhile time.time() < end: pass"]
    )
    mark = peaks.cpu_mark()
    spin.wait()
    assert peaks.others_cores(mark) > peaks.BUSY_CORES
    assert peaks.measure_peak("fp32", cap_s=0.5)["others_cores"] >= 0
