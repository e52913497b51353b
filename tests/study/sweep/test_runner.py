"""The runner: skip reasons, refusals before any point runs, locks, resume, failure records, the exit status."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import psutil
import pytest
import yaml

from helpers import record
from study.sweep import points, runner, suites


def statuses(results: Path) -> Counter:
    """Return how many records below `results` end in each status."""
    return Counter(r["status"] for r in record.read(results)[0])


# ----------------------------------------------------------------------------- what runs where
def test_skip_reasons(monkeypatch, tmp_path):
    assert "nothing to run" in points.skip_reason(suites.resolve_suite("cost"), None)
    assert points.skip_reason(suites.resolve_suite("token_lengths"), None) is None  # in-process, always
    monkeypatch.setitem(points.ENVS, "xla", (str(tmp_path / ".venv-missing"), "accelbench-xla"))
    assert "its environment" in points.skip_reason(suites.resolve_suite("padding"), None)
    monkeypatch.undo()
    flags = suites.resolve_suite("compiler_flags")
    if points.env_python(flags.env).exists():
        assert "needs NeuronCores" in points.skip_reason(flags, {"neuron": False})
        assert points.skip_reason(flags, {"neuron": True}) is None
    precision = suites.resolve_suite("precision")
    assert "no fast bf16" in points.skip_reason(precision, {"bf16_fast": False})
    assert points.skip_reason(precision, {"bf16_fast": False}, force=True) is None


@pytest.mark.parametrize("neuron_venv", [True, False])
def test_papermill_gets_typed_parameters_and_the_kernel_of_the_notebooks_environment(
    tmp_path, monkeypatch, neuron_venv
):
    folder = tmp_path / ".venv-neuron"
    if neuron_venv:  # what `make neuron-venv` leaves on a trn1
        (folder / "bin").mkdir(parents=True)
        (folder / "bin" / "python").touch()
    monkeypatch.setitem(suites.ENVS, "neuron", (str(folder), "accelbench-neuron"))
    params = {"batch": 8, "llrd_decay": None, "lr": 2e-05, "progress": False}
    nvidia = points.papermill_command(suites.resolve_suite("seq_len"), params, tmp_path / "o.ipynb")
    assert nvidia[0].endswith(".venv/bin/papermill") and nvidia[nvidia.index("--kernel") + 1] == "accelbench"
    assert yaml.safe_load(nvidia[-1]) == params
    moved = suites.retarget(suites.resolve_suite("seq_len"), "trainium")
    trainium = points.papermill_command(moved, {}, tmp_path / "o.ipynb")
    env = "neuron" if neuron_venv else "xla"
    assert trainium[trainium.index("--kernel") + 1] == f"accelbench-{env}" and moved.env == env


# ----------------------------------------------------------------------------- refused before any point runs
def test_cuda_graphs_on_a_cpu_are_refused_before_any_point_runs(tmp_path, on_cpu, capsys):
    results = tmp_path / "results"
    with pytest.raises(SystemExit) as stopped:
        runner.main(["speedup", "--set", "step_mode=cudagraphs", "--results", str(results)])
    assert stopped.value.code == 2 and "step_mode='cudagraphs' needs CUDA, not cpu" in capsys.readouterr().err
    assert not results.exists()


def test_a_compiled_step_in_the_fp16_that_auto_resolves_to_is_refused(tmp_path, monkeypatch):
    t4 = {"type": "cuda", "name": "Tesla T4", "key": "cuda-tesla-t4", "bf16_fast": False, "neuron": False}
    monkeypatch.setattr(points, "device_of", lambda env, requested="auto": t4)
    suite = suites.with_overrides(suites.resolve_suite("speedup"), ["step_mode=compile"], "quick")
    with pytest.raises(runner.arguments.ConfigError, match="precision='auto' chose fp16"):
        runner.sweep([suite], "quick", tmp_path / "results")


@pytest.mark.parametrize("setting", ["run_name=mine", "suite=mine", f"results_path={os.devnull}"])
def test_what_the_sweep_sets_is_refused_with_set(setting, tmp_path, capsys):
    with pytest.raises(SystemExit) as stopped:
        runner.main(["speedup", "--set", setting, "--results", str(tmp_path)])
    assert stopped.value.code == 2 and "is set by the sweep" in capsys.readouterr().err


@pytest.mark.parametrize("flag", ["--timeout=-1", "--timeout=0", "--timeout=nan", "--timeout=inf", "--jobs=0"])
def test_a_limit_that_is_not_positive_is_refused(flag, capsys, tmp_path):
    with pytest.raises(SystemExit) as stopped:
        runner.main(["batch_scaling", flag, "--results", str(tmp_path / "r")])
    assert stopped.value.code == 2 and flag.split("=")[0] in capsys.readouterr().err
    assert not (tmp_path / "r").exists()


def test_list_prints_each_point_once_with_set(capsys):
    runner.main(["time_to_accuracy", "--set", "seed=5", "--list"])
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "time_to_accuracy (notebook, 1 points)" and len(out) == 2 and out[1].endswith("+seed=5")


def test_all_leaves_an_on_demand_suite_out_and_a_mistyped_folder_is_refused(capsys):
    runner.main(["all", "--list"])
    out, err = capsys.readouterr()
    assert "cost (derived, 0 points)" in out and "recipe (" not in out and "recipe is on demand" in err
    with pytest.raises(SystemExit) as stopped:
        runner.main(["all", "--suites-dir", "Experiment/suite", "--list"])
    assert stopped.value.code == 2


def test_a_results_folder_the_sweep_cannot_write_is_refused_in_words(tmp_path, capsys):
    (tmp_path / "a-file").write_text("")
    results = tmp_path / "a-file" / "results"
    with pytest.raises(SystemExit) as stopped:
        runner.main(["token_lengths", "--results", str(results)])
    assert stopped.value.code == 2 and "--results=" in capsys.readouterr().err


# ----------------------------------------------------------------------------- locks and leftovers
def test_two_paths_to_one_results_folder_share_the_points_lock(tmp_path):
    real = tmp_path / "results"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    paths = [record.base_path(r, "s", "p", "cpu-x").resolve() for r in (real, tmp_path / "link")]
    with points.point_lock(paths[0]) as first, points.point_lock(paths[1]) as second:
        assert first and not second
    with points.point_lock(paths[1]) as again:  # given back when its holder is done
        assert again


def test_a_point_another_live_sweep_holds_is_left_to_it_and_free_once_that_sweep_dies(tmp_path, on_cpu):
    suite = suites.resolve_suite("token_lengths")
    (point,) = suites.expand(suite, "quick")
    base = record.base_path(tmp_path, suite.name, point.run_name, on_cpu["key"])
    hold = f"from pathlib import Path\nfrom study.sweep import points\nwith points.point_lock(Path({str(base)!r})) as mine:"
    hold += "\n    print(mine, flush=True)\n    input()\n"
    env = {**os.environ, "PYTHONPATH": str(record.REPO_ROOT)}
    holder = subprocess.Popen([sys.executable, "-c", hold], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert holder.stdout.readline().strip() == b"True"
        assert points.run_point(suite, point, on_cpu, tmp_path, tmp_path, 60) == ("running in another sweep", 0.0)
    finally:
        holder.kill()
        holder.wait()
    with points.point_lock(base) as mine:  # the kernel dropped a killed holder's lock
        assert mine


def test_a_dead_sweeps_processes_on_a_point_are_found_by_its_tag_and_killed(tmp_path):
    tag = str(tmp_path / "s" / "p@cpu-x.json")
    orphan = subprocess.Popen(["sleep", "60"], env={**os.environ, points.POINT_TAG: tag})
    try:
        assert [p.pid for p in points.tagged(tag)] == [orphan.pid]
        points.kill_processes(points.tagged(tag))
        assert not points.tagged(tag) and not psutil.pid_exists(orphan.pid)  # killed and reaped
    finally:
        orphan.kill()


# ----------------------------------------------------------------------------- runs
def test_the_token_statistics_run_in_process_and_resume(tmp_path, suite_file):
    subset = tmp_path / "data"
    subset.mkdir()
    for split in ("train", "validation", "test"):  # 200 rows a split, of 1 to 20 words
        rows = (json.dumps({"text": " ".join(["word"] * (1 + i % 20)), "label": i % 6}) for i in range(200))
        (subset / f"{split}.jsonl").write_text("\n".join(rows) + "\n")
    path = suite_file("tok", f'kind = "token_stats"\n[params]\ndata_dir = "{subset}"\nmodel_name = "minilm"\n')
    path.write_text(path.read_text() + "[quick]\n[full]\n")
    suite = suites.load_suite(path)
    assert runner.sweep([suite], "quick", tmp_path / "results", out=io.StringIO()) == {"tok": {"finished": 1}}
    (rec,), _ = record.read(tmp_path / "results")
    assert rec["token_stats"]["rows"] == 200 and rec["token_stats"]["max"] == 22  # [CLS] 20 words [SEP]
    assert rec["device"]["type"] == "cpu" and rec["data"]["tokenize_s"] > 0
    assert runner.sweep([suite], "quick", tmp_path / "results", out=io.StringIO()) == {"tok": {"already done": 1}}


def test_jobs_run_points_at_once_each_on_its_share_of_the_cores(tmp_path, on_cpu, monkeypatch, suite_file):
    together, lock, seen = threading.Barrier(2), threading.Lock(), {"now": 0, "most": 0, "threads": []}

    def run_point(suite, point, dev, results, runs_dir, timeout_s, threads=None):
        with lock:
            seen["now"] += 1
            seen["most"] = max(seen["most"], seen["now"])
            seen["threads"].append(threads)
        together.wait(timeout=60) if threads else time.sleep(0.2)  # with jobs=2 both points must be running
        with lock:
            seen["now"] -= 1
        return "finished", 0.0

    monkeypatch.setattr(points, "run_point", run_point)
    monkeypatch.setattr(runner.os, "cpu_count", lambda: 4)
    body = 'notebook = "Nvidia/baseline.ipynb"\n[quick]\ngrid = { batch = [8, 16] }\njobs = 2\n[full]\n'
    suite = suites.load_suite(suite_file("pair", body))
    assert runner.sweep([suite], "quick", tmp_path, tmp_path, out=io.StringIO()) == {"pair": {"finished": 2}}
    assert seen["most"] == 2 and seen["threads"] == [2, 2]
    seen.update(most=0, threads=[])
    runner.sweep([suite], "quick", tmp_path, tmp_path, jobs=1, out=io.StringIO())  # --jobs 1 over the suite's
    assert seen["most"] == 1 and seen["threads"] == [None, None]


FAILING = """
import os, time
if max_steps == 1:
    raise MemoryError("host ran out of memory")
if max_steps == 2:
    time.sleep(120)
from pathlib import Path
from helpers import record
rec = record.start(run_name, {"max_steps": max_steps}, [], {"key": "cpu-test"}, suite)
rec.status = "finished"
record.write(rec, Path(os.environ["ACCELBENCH_POINT"]))
"""


@pytest.mark.slow
def test_points_that_fail_get_a_record_the_sweep_exits_1_and_a_rerun_adds_never_replaces(
    tmp_path, on_cpu, stand_in, suite_file, capsys
):
    nb = stand_in(FAILING)
    path = suite_file(
        "fails", f'notebook = "{nb}"\n[quick]\ngrid = {{ max_steps = [1, 2, 3] }}\ntimeout_s = 15\n[full]\n'
    )
    results, runs = tmp_path / "results", tmp_path / "runs"
    argv = [str(path), "--results", str(results), "--runs-dir", str(runs)]
    with pytest.raises(SystemExit) as stopped:
        runner.main(argv)
    assert stopped.value.code == "sweep: points failed (2 in fails): see records"  # exit status 1
    assert "fails: " in capsys.readouterr().out and statuses(results) == {"oom": 1, "timeout": 1, "finished": 1}
    by_steps = {r["params"]["max_steps"]: r for r in record.read(results)[0]}
    oom, timeout = by_steps[1], by_steps[2]
    assert "MemoryError: host ran out of memory" in oom["error"] and oom["runner"]["returncode"] == 1
    assert "batch" in oom["params"] and "batch" not in oom["params_given"]  # as the run would have resolved it
    assert oom["device"]["key"] == "cpu-test" and "15 s timeout" in timeout["error"]
    first = {r["_source"]: Path(r["_source"]).read_text() for r in record.read(results)[0]}
    with pytest.raises(SystemExit):  # oom and finished are done; the timed-out point runs again
        runner.main([*argv, "--timeout", "5"])
    (summary,) = [line for line in capsys.readouterr().out.splitlines() if line.startswith("fails: ")]
    assert sorted(summary.removeprefix("fails: ").split(", ")) == ["1 timeout", "2 already done"]
    assert statuses(results) == {"oom": 1, "timeout": 2, "finished": 1}
    assert all(Path(p).read_text() == text for p, text in first.items())  # nothing replaced: a .run2 beside
    assert any(p.endswith(".run2.json") for p in (r["_source"] for r in record.read(results)[0]))


@pytest.mark.slow
def test_sigterm_stops_every_running_point_and_records_none(tmp_path, stand_in, suite_file):
    nb = stand_in()
    path = suite_file("stopme", f'notebook = "{nb}"\n[quick]\ngrid = {{ max_steps = [60, 61] }}\njobs = 2\n[full]\n')
    results = tmp_path / "results"
    cmd = [sys.executable, "-m", "study.sweep", str(path), "--results", str(results), "--runs-dir", str(tmp_path)]
    env = {**os.environ, "PYTHONPATH": str(record.REPO_ROOT)}
    proc = subprocess.Popen(cmd, cwd=record.REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 120
    while len(kernels(results)) < 2:  # both kernels are running
        assert proc.poll() is None and time.monotonic() < deadline, "the sweep ended before it was stopped"
        time.sleep(0.2)
    running = kernels(results)
    proc.send_signal(signal.SIGTERM)
    t0 = time.monotonic()
    assert proc.wait(timeout=30) != 0
    print("stopped in", time.monotonic() - t0)
    assert not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in running)
    assert record.read(results)[0] == []


def kernels(results: Path) -> list[psutil.Process]:
    """Return the live Jupyter kernels of points below `results`."""
    found = []
    for proc in psutil.process_iter():
        try:
            if str(results) in proc.environ().get(points.POINT_TAG, "") and "ipykernel" in " ".join(proc.cmdline()):
                found.append(proc)
        except (psutil.Error, OSError):
            continue
    return found
