"""helpers/measure/neuron_monitor.py: the JSON stream parsed, this run's cores only, the binary found."""

import json
import os
import stat
import time
from pathlib import Path

import pytest

from helpers.measure import neuron_monitor
from helpers.measure.monitor import start_monitor
from helpers.measure.neuron_monitor import parse_neuron_monitor_line, summarize_neuron_monitor
from helpers.run import schema

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "neuron_monitor"


def _lines(name: str) -> list[str]:
    return (FIXTURES / name).read_text().splitlines()


def _assert_not_measured(out: dict, fields: tuple[str, ...]) -> None:
    for field in fields:
        assert out[f"{field}_mean"] is None and out[f"{field}_p90"] is None
    assert out["reason"]
    json.dumps(out)


# ----------------------------------------------------------------------------- neuron-monitor parser
def test_parse_line_reads_documented_fields():
    report = parse_neuron_monitor_line(_lines("two_cores.jsonl")[0])
    assert report["neuroncore_util_pct"] == {"0": 80.0, "1": 40.0}
    assert report["neuroncore_flops_per_s"] == {"0": 1e13, "1": 5e12}
    assert report["device_mem_used_bytes"] == 10 * 2**30
    assert report["host_vcpu_util_pct"] == 25.0
    assert report["pids"] == [4242]


@pytest.mark.parametrize(
    "line",
    [
        "",
        "not json",
        "[1, 2]",
        '{"other": 1}',
        '{"neuron_runtime_data": [{"report": {"neuroncore_counters": {"neuroncores_in_use": [1, 2]}}}]}',
    ],
)
def test_parse_line_malformed_is_none(line):
    assert parse_neuron_monitor_line(line) is None


def test_summarize_two_cores():
    out = summarize_neuron_monitor(_lines("two_cores.jsonl"))
    # Per period, mean over cores: 60, 70, 50, 40 %.
    assert out["neuroncore_util_pct_mean"] == pytest.approx(55.0)
    assert out["neuroncore_util_pct_p90"] == pytest.approx(67.0)
    assert out["neuroncore_util_pct_mean_per_core"] == {"0": pytest.approx(75.0), "1": pytest.approx(35.0)}
    assert out["achieved_tflops_mean"] == pytest.approx(15.0)
    assert out["device_mem_used_gib_mean"] == pytest.approx(10.5)
    assert out["device_mem_used_gib_p90"] == pytest.approx(11.0)
    assert out["runtime_host_mem_used_gib_mean"] == pytest.approx(6.0)
    assert out["host_vcpu_util_pct_mean"] == pytest.approx(25.5)
    assert out["host_mem_used_gib_mean"] == pytest.approx(16.0)
    assert out["samples"] == 4 and out["malformed_lines"] == 0 and out["neuroncores_seen"] == 2
    assert "reason" not in out
    assert not any("engine" in key for key in out), "neuron-monitor has no per-engine figures"
    json.dumps(out)
    schema.Utilization.model_validate(out)  # the record's section: every key typed


def test_summarize_counts_malformed_line():
    out = summarize_neuron_monitor(_lines("one_malformed.jsonl"))
    assert out["malformed_lines"] == 1
    assert out["samples"] == 3
    assert out["neuroncore_util_pct_mean"] == pytest.approx((60 + 70 + 40) / 3, abs=1e-3)


def test_summarize_nothing_parseable_is_not_measured():
    out = summarize_neuron_monitor(["garbage", "{"])
    assert out["neuroncore_util_pct_mean"] is None
    assert out["malformed_lines"] == 2 and out["samples"] == 0 and out["reason"]


def _report(runtimes: list[tuple[int, dict]]) -> str:
    """One neuron-monitor line with a runtime per (pid, counters of core "0")."""
    return json.dumps(
        {
            "neuron_runtime_data": [
                {"pid": pid, "report": {"neuroncore_counters": {"neuroncores_in_use": {str(i): c}}}}
                for i, (pid, c) in enumerate(runtimes)
            ]
        }
    )


def test_only_this_runs_cores_count():
    line = _report([(100, {"neuroncore_utilization": 90.0}), (200, {"neuroncore_utilization": 10.0})])
    out = summarize_neuron_monitor([line], only_pids={100})
    assert out["neuroncore_util_pct_mean"] == pytest.approx(90.0) and out["neuroncores_seen"] == 1


@pytest.mark.parametrize("field", ["flops", "effective_flops"])
def test_either_flops_field_is_read_and_named(field):
    out = summarize_neuron_monitor([_report([(1, {"neuroncore_utilization": 50.0, field: 2e12})])])
    assert out["achieved_tflops_mean"] == pytest.approx(2.0) and out["flops_field"] == field


@pytest.mark.parametrize("mode, found", [(0o755, True), (0o644, False)])
def test_the_binary_is_found_in_the_neuron_tools_folder_off_path(monkeypatch, tmp_path, mode, found):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    (tmp_path / "neuron-monitor").write_text("#!/bin/sh\n")
    (tmp_path / "neuron-monitor").chmod(mode)  # a file that cannot be run is not the tool
    monkeypatch.setattr(neuron_monitor, "NEURON_BIN", tmp_path)
    assert neuron_monitor.find_binary() == (str(tmp_path / "neuron-monitor") if found else None)


# ----------------------------------------------------------------------------- neuron-monitor process
def test_neuron_without_binary_is_not_measured(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(neuron_monitor, "NEURON_BIN", tmp_path / "absent")
    for device_type in ("neuron", "xla"):
        mon = start_monitor(device_type)
        mon.mark_steady()
        out = mon.stop()
        assert out.backend == "neuron-monitor"
        _assert_not_measured(out.model_dump(), ("neuroncore_util_pct", "device_mem_used_gib"))
        assert "neither on PATH" in out.reason


def test_neuron_monitor_stream_from_fake_binary(monkeypatch, tmp_path):
    # A stand-in neuron-monitor: waits for the test's go-file, then streams the fixture.
    go = tmp_path / "go"
    fake = tmp_path / "neuron-monitor"
    fake.write_text(
        f"#!/bin/sh\nwhile [ ! -f '{go}' ]; do sleep 0.02; done\n"
        f"cat '{FIXTURES / 'one_malformed.jsonl'}'\nexec sleep 30\n"
    )
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(neuron_monitor, "run_pids", lambda: {4242})  # the fixture's runtime is "ours"
    mon = start_monitor("neuron", interval_s=1.0)
    mon.mark_steady()
    go.touch()
    deadline = time.monotonic() + 10
    while len(mon._records) < 4 and time.monotonic() < deadline:
        time.sleep(0.02)
    out = mon.stop()
    assert out.samples == 3 and out.malformed_lines == 1
    assert out.neuroncore_util_pct_mean == pytest.approx((60 + 70 + 40) / 3, abs=1e-3)


def test_a_torchrun_rank_counts_its_sibling_ranks_runtimes_and_no_others(monkeypatch):
    """Ranks are children of one torchrun parent: each one's monitor keeps the runtimes of all of them."""
    import subprocess
    import sys

    parent = (
        "import os, subprocess, sys\n"
        "env = {**os.environ, 'LOCAL_RANK': '0'}\n"
        "sibling = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'], env=env)\n"
        "code = 'import json; from helpers.measure.neuron_monitor import run_pids; print(json.dumps(sorted(run_pids())))'\n"
        "rank = subprocess.run([sys.executable, '-c', code], env=env, capture_output=True, text=True, check=True)\n"
        "sibling.kill()\n"
        "print(rank.stdout.strip(), sibling.pid)\n"
    )
    done = subprocess.run([sys.executable, "-c", parent], capture_output=True, text=True, check=True)
    pids, sibling = done.stdout.rsplit(" ", 1)
    assert int(sibling) in json.loads(pids) and len(json.loads(pids)) == 2  # itself and its sibling
    monkeypatch.delenv("LOCAL_RANK", raising=False)
    assert neuron_monitor.run_pids() == {os.getpid()}  # not under torchrun: this process alone
