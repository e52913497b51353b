"""Suite files, grid expansion, run names, and the runner: resume, failures, timeouts, a real kill."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import nbformat
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers.run import records, schema
from helpers.run.args import ConfigError
from helpers.run.paths import REPO_ROOT
from helpers.study import frame
from helpers.study.report import sections
from helpers.study.sweep import points, runner, suites


def write_suite(path: Path, body: str) -> Path:
    path.write_text(textwrap.dedent(body))
    return path


def write_notebook(path: Path, code: str) -> Path:
    """Write a stand-in notebook: a `parameters` cell with the runner's three names, then `code`."""
    nb = nbformat.v4.new_notebook()
    params = nbformat.v4.new_code_cell("run_name = None\nsuite = None\nresults_path = None\nmax_steps = 1")
    params.metadata["tags"] = ["parameters"]
    nb.cells = [params, nbformat.v4.new_code_cell(textwrap.dedent(code))]
    nb.metadata["kernelspec"] = {"name": "python3", "language": "python", "display_name": "Python 3"}
    nbformat.write(nb, path)
    return path


# a light notebook that sleeps max_steps seconds and writes a finished record where the sweep reads it
# (the path is in the point's tag; a real notebook computes the same path from its device)
RECORDING = """
import os, time
from helpers.run import records
time.sleep(max_steps)
params = {"max_steps": max_steps, "pid": os.getpid()}
records.write_json_atomic(os.environ["ACCELBENCH_POINT"], {"schema_version": 5, "run_id": run_name, "run_name": run_name,
                     "suite": suite, "status": "finished", "params": params})
"""


def done_names(results: Path) -> set[str]:
    """Return the run names with a final record below `results`."""
    return {r["run_name"] for r in records.read_records(results)[0] if r["status"] in records.DONE}


# ----------------------------------------------------------------------------- suite files
def test_every_suite_file_parses_and_expands():
    found = suites.find_suites()
    names = [s.name for s in found]
    assert len(names) == 17 and names[:2] == ["time_to_accuracy", "token_lengths"]  # the headline opens the report
    assert [s.order for s in found] == sorted(s.order for s in found)
    for suite in found:
        for variant in suites.VARIANTS:
            points = suites.expand(suite, variant)
            assert (len(points) == 0) == (suite.kind == "derived"), (suite.name, variant)
            assert len({p.run_name for p in points}) == len(points), f"{suite.name}: duplicate run names"
            for point in points:
                assert point.run_name.startswith(f"{suite.name}-{variant}-")
        if suite.kind == "notebook":
            assert suite.notebook in ("Nvidia/baseline.ipynb", "Trainium/baseline.ipynb")


def test_sweep_all_leaves_an_on_demand_suite_out_and_runs_it_by_name(tmp_path, capsys):
    from helpers.study.sweep.runner import every_suite

    for name, extra in (("kept", ""), ("search", "on_demand = true\n")):
        (tmp_path / f"{name}.toml").write_text(f'notebook = "Nvidia/baseline.ipynb"\n{extra}[quick]\n[full]\n')
    assert [s.name for s in every_suite(str(tmp_path))] == ["kept"]
    assert "search is on demand" in capsys.readouterr().err
    assert suites.resolve_suite(str(tmp_path / "search.toml")).on_demand  # by name it still resolves, to run
    assert [s.name for s in suites.find_suites(tmp_path)] == ["kept", "search"]  # and the report tabulates it
    assert [s.name for s in suites.find_suites() if s.on_demand] == ["recipe"]  # the one-time recipe search
    (tmp_path / "bad.toml").write_text('notebook = "Nvidia/baseline.ipynb"\non_demand = "yes"\n[quick]\n[full]\n')
    with pytest.raises(ConfigError, match="on_demand"):
        suites.load_suite(tmp_path / "bad.toml")


@pytest.mark.parametrize(
    "name, variant, count",
    [
        ("precision", "quick", 12),
        ("lr_llrd", "quick", 12),
        ("batch_scaling", "full", 15),
        ("compiler_flags", "full", 12),
        ("padding", "quick", 12),
        ("padding", "full", 4),
        ("token_lengths", "quick", 1),
        ("lora", "quick", 27),
        ("lora", "full", 27),
        ("models", "quick", 12),
    ],
)
def test_known_suites_expand_to_their_grids(name, variant, count):
    suite = suites.resolve_suite(name)
    points = suites.expand(suite, variant)
    assert len(points) == count
    assert [p.run_name for p in points] == [p.run_name for p in suites.expand(suite, variant)]  # deterministic


def test_repeats_come_cell_by_cell_so_one_cells_runs_are_spread_over_the_sweep(tmp_path):
    path = tmp_path / "rep.toml"
    path.write_text(
        'notebook = "Nvidia/baseline.ipynb"\n[quick]\ngrid = { batch = [8, 16] }\nrepeats = 3\n'
        "[full]\ngrid = { batch = [8] }\n"
    )
    points = suites.expand(suites.load_suite(path), "quick")
    assert [p.params["batch"] for p in points] == [8, 16, 8, 16, 8, 16]  # interleaved, not 8, 8, 8, 16, ...
    first = [p.run_name for p in points[:2]]
    assert [p.run_name for p in points[2:4]] == [f"{n}-rep2" for n in first]  # repeat 1 keeps the point's name
    assert len({p.run_name for p in points}) == 6
    assert len(suites.expand(suites.load_suite(path), "full")) == 1  # no repeats: one run a point


@pytest.mark.parametrize("bad", ["0", "1.5", "true"])
def test_a_repeat_count_below_one_or_not_an_integer_is_refused(tmp_path, bad):
    path = tmp_path / "rep.toml"
    path.write_text(f'notebook = "Nvidia/baseline.ipynb"\n[quick]\nrepeats = {bad}\n[full]\n')
    with pytest.raises(ConfigError, match="repeats"):
        suites.load_suite(path)


def test_every_quick_timing_suite_runs_three_independent_processes_a_point():
    for name in (
        "batch_scaling",
        "small_batch",
        "seq_len",
        "scaling",
        "profile_memory",
        "padding",
        "speedup",
        "models",
    ):
        assert suites.resolve_suite(name).variants["quick"].get("repeats", 1) >= 3, name


def test_quick_and_full_variants_differ_in_model():
    suite = suites.resolve_suite("batch_scaling")
    assert {p.params["model_name"] for p in suites.expand(suite, "quick")} == {"minilm"}
    assert {p.params["model_name"] for p in suites.expand(suite, "full")} == {"bert-base-uncased"}
    assert all(p.params.get("max_steps") for p in suites.expand(suite, "quick"))  # timed, not trained
    accuracy = suites.resolve_suite("lr_llrd")
    # accuracy suites train to the end of an epoch (never max_steps); the full variant on the whole split
    assert not any(p.params.get("max_steps") for v in suites.VARIANTS for p in suites.expand(accuracy, v))
    assert not any(p.params.get("train_subset") for p in suites.expand(accuracy, "full"))
    assert all(p.params.get("shuffle_subset") for p in suites.expand(accuracy, "quick"))  # a subset, not the head


def test_cases_cross_the_grid_and_run_names_follow_every_parameter(tmp_path):
    body = """
        notebook = "Nvidia/baseline.ipynb"
        [params]
        batch = 8
        [quick]
        cases = [{ padding = "static" }, { padding = "dynamic", pad_to_multiple_of = 8 }]
        grid = { seed = [1, 2, 3] }
        [full]
        grid = { seed = [1] }
    """
    points = suites.expand(suites.load_suite(write_suite(tmp_path / "t.toml", body)), "quick")
    assert len(points) == 6
    assert points[0].run_name.startswith("t-quick-padding=static,seed=1-")
    assert points[3].params == {"batch": 8, "padding": "dynamic", "pad_to_multiple_of": 8, "seed": 1}
    # editing a fixed parameter gives new run names, so old records are not taken as done
    edited = suites.expand(suites.load_suite(write_suite(tmp_path / "t.toml", body.replace("8\n", "16\n", 1))), "quick")
    assert not {p.run_name for p in points} & {p.run_name for p in edited}


def test_trainium_target_moves_nvidia_notebook_suites_to_the_trainium_notebook(tmp_path, monkeypatch):
    monkeypatch.setitem(suites.ENVS, "neuron", (str(tmp_path / ".venv-neuron"), "accelbench-neuron"))  # off a trn1
    batch = suites.resolve_suite("batch_scaling")
    moved = suites.retarget(batch, "trainium")
    assert (moved.notebook, moved.env) == ("Trainium/baseline.ipynb", "xla")
    assert {p.params["device"] for p in suites.expand(moved, "full")} == {"xla"}
    names = {p.run_name for p in suites.expand(batch, "full")}
    assert not names & {p.run_name for p in suites.expand(moved, "full")}  # a trn1 run is not a GPU run
    padding = suites.resolve_suite("padding")
    assert suites.retarget(padding, "trainium") is padding and suites.retarget(batch, "nvidia") is batch


@pytest.mark.parametrize("neuron_venv", [True, False])
def test_the_trainium_notebook_runs_on_the_neuron_kernel_where_venv_neuron_exists(tmp_path, monkeypatch, neuron_venv):
    folder = tmp_path / ".venv-neuron"
    if neuron_venv:  # what `make neuron-venv` leaves on a trn1
        (folder / "bin").mkdir(parents=True)
        (folder / "bin" / "python").touch()
    monkeypatch.setitem(suites.ENVS, "neuron", (str(folder), "accelbench-neuron"))
    moved = suites.retarget(suites.resolve_suite("batch_scaling"), "trainium")
    padding = suites.retarget(suites.resolve_suite("padding"), "nvidia")  # names the Trainium notebook itself
    command = points.papermill_command(moved, {"run_name": "x"}, tmp_path / "out.ipynb")
    env, folder = ("neuron", folder) if neuron_venv else ("xla", REPO_ROOT / ".venv-xla")
    assert moved.env == padding.env == env and points.env_python(env) == folder / "bin" / "python"
    assert command[0] == str(folder / "bin" / "papermill")
    assert command[command.index("--kernel") + 1] == suites.ENVS[env][1] == f"accelbench-{env}"
    batch = suites.resolve_suite("batch_scaling")
    assert suites.retarget(batch, "nvidia").env == "main"  # the Nvidia notebook keeps .venv either way


@pytest.mark.parametrize(
    "body, message",
    [
        ('notebook = "x.ipynb"\n[quick]\nparams = { batchsize = 8 }\n[full]\n', "unknown parameter"),
        ('notebook = "x.ipynb"\n[quick]\n', "needs both"),
        ('kind = "train"\n', "kind='train' is unknown"),
        ('notebook = "x.ipynb"\nenv = "conda"\n[quick]\n[full]\n', "env='conda' is unknown"),
        ('notebook = "x.ipynb"\nrequires = "tpu"\n[quick]\n[full]\n', "requires='tpu' is unknown"),
        ('notebook = "x.ipynb"\n[quick]\njobs = 0\n[full]\n', "jobs=0 is invalid"),
    ],
)
def test_bad_suite_files_are_rejected(tmp_path, body, message):
    with pytest.raises(ConfigError, match=message):
        suites.load_suite(write_suite(tmp_path / "bad.toml", body))


def test_skip_reasons(monkeypatch):
    assert "nothing to run" in points.skip_reason(suites.resolve_suite("cost"), None)
    padding = suites.resolve_suite("padding")
    monkeypatch.setitem(points.ENVS, "xla", (".venv-missing", "accelbench-xla"))
    assert points.skip_reason(padding, None) == (
        "its environment .venv-missing is missing (create it with `make xla-venv`)"
    )
    monkeypatch.undo()
    flags = suites.resolve_suite("compiler_flags")
    if points.env_python("xla").exists():
        assert "needs NeuronCores" in points.skip_reason(flags, {"neuron": False})
        assert points.skip_reason(flags, {"neuron": True}) is None


def test_bf16_suites_are_skipped_without_fast_bf16_unless_forced(tmp_path, monkeypatch):
    results = tmp_path / "results"
    assert "no fast bf16" in points.skip_reason(suites.resolve_suite("precision"), {"bf16_fast": False})
    assert points.skip_reason(suites.resolve_suite("precision"), {"bf16_fast": True}) is None
    nb = write_notebook(tmp_path / "stand_in.ipynb", RECORDING)
    suite = suites.load_suite(
        write_suite(
            tmp_path / "bf16.toml",
            f"""
        notebook = "{nb}"
        requires = "fast-bf16"
        [quick]
        grid = {{ max_steps = [1] }}
        [full]
    """,
        )
    )
    monkeypatch.setattr(points, "device_of", lambda env, requested="auto": {"key": "cpu-slow", "bf16_fast": False})
    assert runner.sweep([suite], "quick", results, tmp_path / "runs") == {}
    assert not results.exists()
    assert runner.sweep([suite], "quick", results, tmp_path / "runs", force=True) == {"bf16": {"finished": 1}}


def test_papermill_command_passes_typed_parameters_and_the_environments_kernel():
    suite = suites.resolve_suite("batch_scaling")
    cmd = points.papermill_command(
        suite, {"batch": 8, "llrd_decay": None, "lr": 2e-05, "progress": False}, Path("/tmp/o.ipynb")
    )
    assert cmd[0].endswith(".venv/bin/papermill") and cmd[2] == "/tmp/o.ipynb"
    assert cmd[cmd.index("--kernel") + 1] == "accelbench"
    import yaml

    assert yaml.safe_load(cmd[-1]) == {"batch": 8, "llrd_decay": None, "lr": 2e-05, "progress": False}
    xla = suites.resolve_suite("padding")
    assert points.papermill_command(xla, {}, Path("/tmp/o.ipynb"))[4] == "accelbench-xla"


@pytest.mark.parametrize(
    "text, status",
    [
        ("torch.OutOfMemoryError: CUDA out of memory", "oom"),
        ("MemoryError", "oom"),
        ("RESOURCE_EXHAUSTED: XLA", "oom"),
        ("ValueError: bad", "failed"),
    ],
)
def test_classify_failure(text, status):
    assert records.failure_status(text) == status


def test_a_bad_parameter_is_refused_when_the_suite_is_read(tmp_path):
    with pytest.raises(ConfigError, match="batch=0 is invalid"):
        suites.load_suite(
            write_suite(
                tmp_path / "bad.toml",
                """
            notebook = "Nvidia/baseline.ipynb"
            [quick]
            grid = { batch = [0] }
            [full]
        """,
            )
        )
    with pytest.raises(ConfigError, match="unknown parameter 'learnin_rate': did you mean 'lr'"):
        suites.load_suite(
            write_suite(
                tmp_path / "typo.toml",
                """
            notebook = "Nvidia/baseline.ipynb"
            [quick]
            params = { learnin_rate = 1e-4 }
            [full]
        """,
            )
        )


def test_token_stats_suite_writes_its_own_record(tmp_path, tiny_data_dir, tiny_model_dir):
    results_path = tmp_path / "results"
    suite = suites.load_suite(
        write_suite(
            tmp_path / "tok.toml",
            f"""
        kind = "token_stats"
        [params]
        data_dir = "{tiny_data_dir}"
        model_name = "{tiny_model_dir}"
        [quick]
        [full]
    """,
        )
    )
    assert runner.sweep([suite], "quick", results_path) == {"tok": {"finished": 1}}
    (rec,), _ = records.read_records(results_path)
    assert rec["token_stats"]["rows"] == 256 and rec["token_stats"]["chosen_pow2"] in (8, 16, 32)
    assert rec["_source"].endswith(f"@{rec['device']['key']}.json") and rec["device"]["type"] == "cpu"
    assert rec["run_name"] == suites.expand(suite, "quick")[0].run_name and rec["suite"] == "tok"
    df, _ = frame.load(results_path)  # the report's section is built from that record
    text = sections.token_stats_section(suite, df[df["suite"] == "tok"], None)
    assert re.search(rf"covers 95%\s*\|\s*{rec['token_stats']['p95']}\s*\|", text), text
    assert re.search(r"The suites train at max_length=(8|16|32), the study's choice", text), text


# ----------------------------------------------------------------------------- notebooks
@pytest.mark.slow
def test_two_point_suite_runs_end_to_end_and_resumes(tmp_path, tiny_model_dir, tiny_data_dir):
    results_path = tmp_path / "results"
    suite = suites.load_suite(
        write_suite(
            tmp_path / "two.toml",
            f"""
        notebook = "Nvidia/baseline.ipynb"
        [params]
        model_name = "{tiny_model_dir}"
        data_dir = "{tiny_data_dir}"
        max_length = 32
        batch = 16
        lr = 5e-3
        epochs = 1
        max_steps = 5
        progress = false
        [quick]
        grid = {{ seed = [1, 2] }}
        [full]
        grid = {{ seed = [1] }}
    """,
        )
    )
    runs = tmp_path / "runs"
    assert runner.sweep([suite], "quick", results_path, runs) == {"two": {"finished": 2}}
    recs, skipped = records.read_records(results_path)
    names = [p.run_name for p in suites.expand(suite, "quick")]
    assert not skipped and [r["run_name"] for r in recs] == names
    assert all(r["status"] == "finished" and r["suite"] == "two" for r in recs)
    assert [r["params"]["seed"] for r in recs] == [1, 2] and recs[0]["timing"]["steps"] == 5
    for name in names:
        html = (runs / "two" / f"{name}.html").read_text()
        assert html.startswith("<!-- Written by `python -m helpers.study.sweep two`")
        nb = nbformat.read(runs / "two" / f"{name}.ipynb", as_version=4)
        assert nb.cells[0].source.startswith("Written by `python -m helpers.study.sweep two`")
        assert "training: finished, 5 steps" in (runs / "two" / f"{name}.log").read_text()  # streamed
    # a second sweep finds both done and runs nothing
    assert runner.sweep([suite], "quick", results_path, runs) == {"two": {"already done": 2}}
    assert len(records.read_records(results_path)[0]) == 2


@pytest.mark.slow
def test_failures_without_a_record_are_recorded_and_the_next_point_runs(tmp_path):
    results_path = tmp_path / "results"
    nb = write_notebook(
        tmp_path / "stand_in.ipynb",
        """
        if max_steps == 1:
            raise MemoryError("host ran out of memory")
        import os
        if max_steps == 2:
            import time
            open(results_path + ".pid", "w").write(str(os.getpid()))
            time.sleep(120)
        from helpers.run import records
        records.write_json_atomic(os.environ["ACCELBENCH_POINT"], {"schema_version": 5, "run_id": run_name, "run_name": run_name,
                                                              "status": "finished", "params": {}})
    """,
    )
    suite = suites.load_suite(
        write_suite(
            tmp_path / "fails.toml",
            f"""
        notebook = "{nb}"
        [quick]
        grid = {{ max_steps = [1, 2, 3] }}
        timeout_s = 20
        [full]
    """,
        )
    )
    summary = runner.sweep([suite], "quick", results_path, tmp_path / "runs")
    assert summary == {"fails": {"oom": 1, "timeout": 1, "finished": 1}}
    oom, timeout, done = sorted(records.read_records(results_path)[0], key=lambda r: r["params"].get("max_steps", 3))
    assert oom["status"] == "oom" and "MemoryError: host ran out of memory" in oom["error"]
    assert oom["runner"]["returncode"] == 1 and oom["params"]["max_steps"] == 1
    # recorded as the run would have resolved it (the defaults filled in) on the device the sweep asked for
    assert "batch" in oom["params"] and "batch" not in oom["params_given"] and oom["device"]["name"]
    assert timeout["status"] == "timeout" and "20 s timeout" in timeout["error"]
    assert done["status"] == "finished"
    # the timed-out kernel (jupyter starts it in a session of its own) was killed with papermill
    import psutil

    pid = int(Path(f"{results_path}.pid").read_text())
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    # a timed-out point is tried again by the next sweep; oom is final
    assert done_names(results_path) == {oom["run_name"], done["run_name"]}


def sweep_cli(toml: Path, results: Path, runs: Path) -> list[str]:
    """Return the command line that runs a suite file's sweep in a process of its own."""
    return [sys.executable, "-m", "helpers.study.sweep", str(toml), "--results", str(results), "--runs-dir", str(runs)]


def _kill_with_children(pid: int) -> None:
    import psutil

    procs = psutil.Process(pid).children(recursive=True) + [psutil.Process(pid)]
    for proc in procs:
        try:
            proc.send_signal(signal.SIGKILL)
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(procs, timeout=10)


@pytest.mark.slow
def test_a_killed_sweep_resumes_with_the_points_it_had_not_finished(tmp_path):
    results_path = tmp_path / "results"
    nb = write_notebook(tmp_path / "stand_in.ipynb", RECORDING)
    toml = write_suite(
        tmp_path / "killme.toml",
        f"""
        notebook = "{nb}"
        [quick]
        grid = {{ max_steps = [1, 4] }}
        [full]
    """,
    )
    first, second = (p.run_name for p in suites.expand(suites.load_suite(toml), "quick"))
    runs = tmp_path / "runs"
    cmd = sweep_cli(toml, results_path, runs)
    proc = subprocess.Popen(cmd, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 120
    while not (runs / "killme" / f"{second}.log").exists():  # the second point has started
        assert proc.poll() is None and time.monotonic() < deadline, "the sweep ended before it was killed"
        time.sleep(0.1)
    assert done_names(results_path) == {first}
    _kill_with_children(proc.pid)  # SIGKILL: no handler, no clean-up, like a lost machine
    proc.wait()
    assert done_names(results_path) == {first}
    out = subprocess.run(cmd, cwd=REPO_ROOT, capture_output=True, text=True, timeout=120).stdout
    assert "killme: 1 already done, 1 finished" in out
    assert sorted(r["run_name"] for r in records.read_records(results_path)[0]) == sorted([first, second])


def _point_processes(results: Path) -> list:
    """Return the live processes tagged with a point below `results` (a notebook, its kernel)."""
    import psutil

    found = []
    for proc in psutil.process_iter():
        try:
            if str(results) in proc.environ().get(points.POINT_TAG, ""):
                found.append(proc)
        except (psutil.Error, OSError):
            continue
    return found


@pytest.mark.slow
def test_a_sweep_killed_alone_leaves_no_notebook_running_beside_its_resumption(tmp_path):
    import psutil

    results_path = tmp_path / "results"
    nb = write_notebook(tmp_path / "stand_in.ipynb", RECORDING)
    toml = write_suite(
        tmp_path / "orphan.toml",
        f"""
        notebook = "{nb}"
        [quick]
        grid = {{ max_steps = [20] }}
        [full]
    """,
    )
    (name,) = (p.run_name for p in suites.expand(suites.load_suite(toml), "quick"))
    cmd = sweep_cli(toml, results_path, tmp_path / "runs")
    proc = subprocess.Popen(cmd, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 120
    while not any("ipykernel" in " ".join(p.cmdline()) for p in _point_processes(results_path)):
        assert proc.poll() is None and time.monotonic() < deadline, "the kernel never started"
        time.sleep(0.2)
    orphans = _point_processes(results_path)
    proc.send_signal(signal.SIGKILL)  # the sweep alone: its notebook and kernel run on in their session
    proc.wait()
    assert all(p.is_running() for p in orphans)
    out = subprocess.run(cmd, cwd=REPO_ROOT, capture_output=True, text=True, timeout=180).stdout
    assert "orphan: 1 finished" in out
    assert not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in orphans)
    (rec,), _ = records.read_records(results_path)
    assert rec["run_name"] == name
    assert rec["params"]["pid"] not in {p.pid for p in orphans}  # the resumed sweep's run


@pytest.mark.slow
def test_two_sweeps_on_one_results_folder_never_run_the_same_point(tmp_path):
    results_path = tmp_path / "results"
    nb = write_notebook(tmp_path / "stand_in.ipynb", RECORDING)
    toml = write_suite(
        tmp_path / "shared.toml",
        f"""
        notebook = "{nb}"
        [quick]
        grid = {{ max_steps = [15] }}
        [full]
    """,
    )
    first = subprocess.Popen(
        sweep_cli(toml, results_path, tmp_path / "runs"),
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 120
    while not _point_processes(results_path):
        assert first.poll() is None and time.monotonic() < deadline, "the first sweep never started its point"
        time.sleep(0.2)
    second = subprocess.run(
        sweep_cli(toml, results_path, tmp_path / "runs2"), cwd=REPO_ROOT, capture_output=True, text=True, timeout=120
    ).stdout
    assert "shared: 1 running in another sweep" in second
    assert first.wait(timeout=120) == 0
    assert len(records.read_records(results_path)[0]) == 1


def test_cli_lists_points(capsys):
    runner.main(["all", "--list"])
    out = capsys.readouterr().out
    assert "cost (derived, 0 points)" in out and "batch_scaling (notebook, " in out
    assert "  batch_scaling-quick-batch=" in out


@pytest.mark.parametrize("folder", ["Experiment/suite", "Experiment/results"])  # a typo; a folder of no suite
def test_sweep_all_with_a_mistyped_suites_folder_is_refused_not_an_empty_success(folder, capsys):
    with pytest.raises(SystemExit) as stopped:
        runner.main(["all", "--suites-dir", folder, "--list"])
    assert stopped.value.code == 2 and f"--suites-dir: {folder}: " in capsys.readouterr().err


def test_a_results_folder_the_sweep_cannot_write_is_refused_in_words(tmp_path, tiny_data_dir, capsys):
    """A read-only results root gave a traceback on the point's .lock file."""
    toml = write_suite(
        tmp_path / "tok.toml", f'kind = "token_stats"\n[params]\ndata_dir = "{tiny_data_dir}"\n[quick]\n[full]\n'
    )
    results = tmp_path / "ro"
    results.mkdir()
    os.chmod(results, 0o555)
    if os.access(results, os.W_OK):  # root writes anywhere: a results root below a file is as unwritable
        (tmp_path / "a-file").write_text("")
        results = tmp_path / "a-file" / "results"
    with pytest.raises(SystemExit) as stopped:
        runner.main([str(toml), "--results", str(results)])
    err = capsys.readouterr().err
    assert stopped.value.code == 2 and f"--results='{results / 'tok'}' cannot hold run records" in err


# a stand-in that records when it ran and on how many threads it was told to run
TIMED = """
import os, time
from helpers.run import records
t0 = time.time()
open(f"{results_path}.{max_steps}.pid", "w").write(str(os.getpid()))
time.sleep(max_steps)
times = {"start": t0, "end": time.time(), "omp": os.environ.get("OMP_NUM_THREADS")}
records.write_json_atomic(os.environ["ACCELBENCH_POINT"], {"schema_version": 5, "run_id": run_name, "run_name": run_name, "suite": suite,
                     "status": "finished", "params": times})
"""


@pytest.mark.slow
def test_jobs_run_points_at_once_each_on_its_share_of_the_cores(tmp_path, monkeypatch):
    results_path = tmp_path / "results"
    nb = write_notebook(tmp_path / "stand_in.ipynb", TIMED)
    suite = suites.load_suite(
        write_suite(
            tmp_path / "pair.toml",
            f"""
        notebook = "{nb}"
        [quick]
        grid = {{ max_steps = [6, 7] }}
        jobs = 2
        [full]
    """,
        )
    )
    monkeypatch.setattr(runner.os, "cpu_count", lambda: 4)
    assert runner.sweep([suite], "quick", results_path, tmp_path / "runs") == {"pair": {"finished": 2}}
    a, b = sorted((r["params"] for r in records.read_records(results_path)[0]), key=lambda p: p["start"])
    assert a["omp"] == b["omp"] == "2"
    assert max(a["start"], b["start"]) < min(a["end"], b["end"])  # they overlapped
    # --jobs 1 overrides the suite: one at a time, threads left alone
    results2 = tmp_path / "again"
    runner.sweep([suite], "quick", results2, tmp_path / "runs2", jobs=1)
    a, b = sorted((r["params"] for r in records.read_records(results2)[0]), key=lambda p: p["start"])
    assert a["omp"] is None and a["end"] <= b["start"]


@pytest.mark.slow
def test_sigterm_stops_every_running_point_and_records_none(tmp_path):
    import psutil

    results_path = tmp_path / "results"
    nb = write_notebook(tmp_path / "stand_in.ipynb", TIMED)
    toml = write_suite(
        tmp_path / "stopme.toml",
        f"""
        notebook = "{nb}"
        [quick]
        grid = {{ max_steps = [60, 61] }}
        jobs = 2
        [full]
    """,
    )
    cmd = sweep_cli(toml, results_path, tmp_path / "runs")
    proc = subprocess.Popen(cmd, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    pid_files = [Path(f"{results_path}.{n}.pid") for n in (60, 61)]
    deadline = time.monotonic() + 120
    while not all(p.exists() and p.read_text() for p in pid_files):  # both kernels are running
        assert proc.poll() is None and time.monotonic() < deadline, "the sweep ended before it was stopped"
        time.sleep(0.1)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) != 0
    for pid in (int(p.read_text()) for p in pid_files):
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    assert records.read_records(results_path)[0] == [] and not _point_processes(results_path)


def test_two_paths_to_one_results_folder_share_the_points_lock(tmp_path):
    real = tmp_path / "results"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    suite = suites.resolve_suite("seq_len")
    p = suites.expand(suite, "quick")[0]
    paths = [records.record_path(r, suite.name, p.run_name, "cpu-x").resolve() for r in (real, tmp_path / "link")]
    assert paths[0] == paths[1]
    with points.point_lock(paths[0]) as first:
        with points.point_lock(paths[1]) as second:
            assert first and not second
    with points.point_lock(paths[1]) as again:  # given back when its holder is done
        assert again


def test_a_point_held_by_another_live_sweep_is_refused_and_free_once_that_sweep_is_killed(tmp_path):
    record = tmp_path / "results" / "s" / "p@cpu-x.json"
    hold = "from pathlib import Path\nfrom helpers.study.sweep import points\n"
    hold += f"with points.point_lock(Path({str(record)!r})) as mine:\n"
    hold += "    print(mine, flush=True)\n    input()\n"
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    holder = subprocess.Popen([sys.executable, "-c", hold], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert holder.stdout.readline().strip() == b"True"
        with points.point_lock(record) as mine:
            assert not mine
    finally:
        holder.kill()
        holder.wait()
    with points.point_lock(record) as mine:  # the kernel dropped a killed holder's lock
        assert mine


@pytest.mark.parametrize(
    "version, why",
    [
        (schema.SCHEMA_VERSION + 1, f"schema_version {schema.SCHEMA_VERSION + 1} is newer"),
        (schema.SCHEMA_VERSION, "new_section: Extra inputs are not permitted"),  # a newer commit, same schema
    ],
)
def test_the_sweep_names_records_it_cannot_read_keeps_a_newer_one_and_finishes(
    tmp_path, tiny_data_dir, tiny_model_dir, version, why
):
    import io
    import json

    results_path = tmp_path / "results"
    suite = suites.load_suite(
        write_suite(
            tmp_path / "tok.toml",
            f"""
        kind = "token_stats"
        [params]
        data_dir = "{tiny_data_dir}"
        model_name = "{tiny_model_dir}"
        [quick]
        [full]
    """,
        )
    )
    (point,) = suites.expand(suite, "quick")
    key = points.device_of("main", "cpu")["key"]
    newer = records.record_path(results_path, "tok", point.run_name, key)
    newer.parent.mkdir(parents=True)
    finished = records.as_json(records.run_record({"run_name": point.run_name}, [], status="finished"))
    newer_text = json.dumps({**finished, "schema_version": version, "new_section": {"x": 1}})
    newer.write_text(newer_text)
    (results_path / "tok" / "junk@cpu-x.json").write_text(
        json.dumps({"schema_version": schema.SCHEMA_VERSION, "run_id": "j", "run_name": "junk", "status": "exploded"})
    )
    out = io.StringIO()
    summary = runner.sweep([suite], "quick", results_path, out=out)
    ((kept, count),) = summary["tok"].items()
    assert count == 1 and kept.startswith("kept: its record is not one this code reads") and why in kept
    assert newer.read_text() == newer_text  # a newer code's record is never overwritten
    text = out.getvalue()
    assert re.search(r"skipped record tok/junk@cpu-x\.json: status: .*1 problem", text), text
    assert f"skipped record tok/{newer.name}: {why}" in text
    assert "tok: 1 kept" in text  # the sweep went on to its summary


# ----------------------------------------------------------------------------- suite files: typos, types, timeouts
GOOD = 'notebook = "Nvidia/baseline.ipynb"\n[quick]\ngrid = { batch = [8] }\n[full]\ngrid = { batch = [8] }\n'


@pytest.mark.parametrize(
    "typo, closest",
    [("repeat = 3", "repeats"), ("timeout = 5", "timeout_s"), ("gird = { batch = [8] }", "grid"), ("jbos = 2", "jobs")],
)
def test_an_unknown_key_in_a_variant_is_refused_with_the_closest_known_one(tmp_path, typo, closest):
    path = write_suite(tmp_path / "typo.toml", GOOD.replace("[full]\n", f"{typo}\n[full]\n"))
    with pytest.raises(
        ConfigError, match=f"{path} \\[quick\\]: unknown key '{typo.split()[0]}': did you mean '{closest}'"
    ):
        suites.load_suite(path)


def test_an_unknown_top_level_or_report_key_is_refused_with_the_closest_known_one(tmp_path):
    path = write_suite(tmp_path / "top.toml", GOOD.replace("notebook", "notebok"))
    with pytest.raises(ConfigError, match=f"{path}: unknown key 'notebok': did you mean 'notebook'"):
        suites.load_suite(path)
    path = write_suite(tmp_path / "rep.toml", GOOD + '[report]\nkyes = ["batch"]\n')
    with pytest.raises(ConfigError, match=f"{path} \\[report\\]: unknown key 'kyes': did you mean 'keys'"):
        suites.load_suite(path)


@pytest.mark.parametrize(
    "line, message",
    [
        ('timeout_s = "ten"', "timeout_s='ten' is not a number"),
        ("timeout_s = -1", "timeout_s=-1 is invalid"),
        ("timeout_s = 0", "timeout_s=0 is invalid"),
        ("timeout_s = nan", "timeout_s=nan is invalid"),
        ('repeats = "3"', "repeats='3' is not an integer"),
        ("grid = 8", "grid=8 is not a table"),
        ("grid = { batch = 8 }", "grid batch=8 is invalid"),
    ],
)
def test_a_wrong_type_or_range_in_a_suite_is_named_with_its_file(tmp_path, line, message):
    quick = line if line.startswith("grid") else f"grid = {{ batch = [8] }}\n{line}"
    path = write_suite(tmp_path / "t.toml", f'notebook = "Nvidia/baseline.ipynb"\n[quick]\n{quick}\n[full]\n')
    with pytest.raises(ConfigError, match=re.escape(f"{path} [quick]: {message}")):
        suites.load_suite(path)


@pytest.mark.parametrize(
    "text, message",
    [
        ('order = "first"\n' + GOOD, "order='first' is not an integer"),
        ("title = [\n" + GOOD, "not valid TOML"),
        (b"title = '\xff'\n", "not valid TOML"),
    ],
)
def test_a_broken_suite_file_is_named(tmp_path, text, message):
    path = tmp_path / "broken.toml"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(ConfigError, match=re.escape(f"{path}: ") + ".*" + re.escape(message)):
        suites.load_suite(path)


def test_one_broken_file_among_the_suites_is_named_and_skipped_and_the_rest_go_on(tmp_path, capsys):
    import shutil

    folder = tmp_path / "suites"
    shutil.copytree(REPO_ROOT / suites.SUITES_DIR, folder)
    (folder / "broken.toml").write_text("title = [\n")
    found = suites.find_suites(folder)
    assert [s.name for s in found] == [s.name for s in suites.find_suites()]
    assert (
        f"skipped suite file {folder / 'broken.toml'}: {folder / 'broken.toml'}: not valid TOML"
        in capsys.readouterr().err
    )
    runner.main(["all", "--list", "--suites-dir", str(folder)])
    out, err = capsys.readouterr()
    assert "batch_scaling (notebook" in out and "skipped suite file" in err
    with pytest.raises(SystemExit):
        runner.main(["broken", "--list", "--suites-dir", str(folder)])  # by name: refused, naming the file
    assert "broken.toml: not valid TOML" in capsys.readouterr().err


@pytest.mark.parametrize("flag", ["--timeout=-1", "--timeout=0", "--timeout=nan", "--timeout=inf"])
def test_a_timeout_that_is_not_a_positive_number_of_seconds_is_refused(flag, capsys, tmp_path):
    with pytest.raises(SystemExit):
        runner.main(["batch_scaling", flag, "--list", "--results", str(tmp_path), "--runs-dir", str(tmp_path)])
    assert "--timeout" in capsys.readouterr().err and not list(tmp_path.iterdir())
    with pytest.raises(ConfigError, match="timeout=.* is invalid"):
        runner.sweep([], "quick", tmp_path, tmp_path, timeout_s=float(flag.split("=")[1]))


def toml_value(value) -> str:
    """Return `value` as TOML text (tests only: scalars, lists and inline tables)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return (
            "nan"
            if value != value
            else "inf"
            if value == float("inf")
            else "-inf"
            if value == -float("inf")
            else repr(value)
        )
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    return "{ " + ", ".join(f"{json.dumps(k)} = {toml_value(v)}" for k, v in value.items()) + " }"


def toml_text(top: dict, tables: dict) -> str:
    """Return a TOML document: the top-level keys, then one [table] each."""
    lines = [f"{json.dumps(k)} = {toml_value(v)}" for k, v in top.items()]
    for name, table in tables.items():
        lines += [f"[{name}]"] + [f"{json.dumps(k)} = {toml_value(v)}" for k, v in table.items()]
    return "\n".join(lines) + "\n"


SCALAR = st.one_of(
    st.booleans(),
    st.integers(-3, 40),
    st.floats(allow_nan=True),
    st.text(max_size=6),
    st.sampled_from(["Nvidia/baseline.ipynb", "notebook", "derived", "main", "xla", "neuron"]),
)
VALUE = st.one_of(
    SCALAR,
    st.lists(SCALAR, max_size=3),
    st.dictionaries(
        st.sampled_from(["batch", "lr", "max_length", "bach", "seed"]),
        st.one_of(SCALAR, st.lists(SCALAR, max_size=2)),
        max_size=2,
    ),
)
TOP = st.dictionaries(
    st.sampled_from(
        [
            "title",
            "description",
            "order",
            "kind",
            "notebook",
            "env",
            "requires",
            "on_demand",
            "params",
            "notebok",
            "titel",
            "repeat",
        ]
    ),
    VALUE,
    max_size=4,
)
VARIANT = st.dictionaries(
    st.sampled_from(["params", "grid", "cases", "repeats", "timeout_s", "jobs", "repeat", "timeout", "gird"]),
    VALUE,
    max_size=4,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(top=TOP, quick=VARIANT, full=VARIANT)
def test_any_suite_file_is_a_suite_or_a_config_error_naming_its_file(tmp_path, top, quick, full):
    path = tmp_path / "fuzz.toml"
    path.write_text(toml_text(top, {"quick": quick, "full": full}))
    try:
        suite = suites.load_suite(path)
    except ConfigError as err:
        assert str(path) in str(err)
        return
    for variant in suites.VARIANTS:  # what loads, expands, and every point's parameters build
        spec = suite.variants[variant]
        assert spec.get("repeats", 1) >= 1 and spec.get("timeout_s", 1) > 0
        suites.expand(suite, variant)


def test_a_finished_point_stays_finished_when_its_html_copy_cannot_be_written(tmp_path, capsys):
    # the GPU image's nbconvert / soupsieve pair once failed the export after training had finished; the
    # point's finished record was then overwritten by a failed one: the HTML copy must never cost the result
    results, runs = tmp_path / "results", tmp_path / "runs"
    nb = write_notebook(tmp_path / "stand_in.ipynb", RECORDING)
    suite = suites.load_suite(
        write_suite(
            tmp_path / "html.toml",
            f"""
        notebook = "{nb}"
        [quick]
        grid = {{ max_steps = [1] }}
        [full]
    """,
        )
    )
    point = suites.expand(suite, "quick")[0]
    (runs / "html" / f"{point.run_name}.html").mkdir(parents=True)  # a folder where the HTML copy goes
    assert runner.sweep([suite], "quick", results, runs) == {"html": {"finished": 1}}
    assert done_names(results) == {point.run_name}
    assert "no HTML copy (IsADirectoryError" in capsys.readouterr().err
