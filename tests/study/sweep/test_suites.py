"""Suite files: checked against the platform's own arguments, expanded into named points, overridden with --set."""

from __future__ import annotations

import re

import pytest

from helpers import arguments, record
from study.sweep import suites

NVIDIA = 'notebook = "Nvidia/baseline.ipynb"\n'
TRAINIUM = 'notebook = "Trainium/baseline.ipynb"\nenv = "xla"\n'
GOOD = NVIDIA + "[quick]\ngrid = { batch = [8] }\n[full]\ngrid = { batch = [8] }\n"


def test_every_suite_file_parses_and_expands_to_unique_names():
    found = suites.find_suites()
    assert [s.name for s in found][:2] == ["time_to_accuracy", "token_lengths"]  # the headline opens the report
    assert [s.order for s in found] == sorted(s.order for s in found)
    for suite in found:
        for variant in suites.VARIANTS:
            points = suites.expand(suite, variant)
            assert (len(points) == 0) == (suite.kind == "derived"), (suite.name, variant)
            assert len({p.run_name for p in points}) == len(points), f"{suite.name}: duplicate run names"
            assert all(p.run_name.startswith(f"{suite.name}-{variant}-") for p in points)
    for path in sorted(record.REPO_ROOT.glob("cloud/*.toml")):  # the smoke run and the device plan's suites
        assert suites.expand(suites.load_suite(path), "full"), path


@pytest.mark.parametrize(
    "name, variant, count",
    [
        ("precision", "quick", 12),
        ("batch_scaling", "full", 15),
        ("compiler_flags", "full", 12),
        ("padding", "quick", 12),
    ]
    + [("padding", "full", 4), ("token_lengths", "quick", 1), ("lora", "quick", 27), ("models", "quick", 12)],
)
def test_known_suites_expand_to_their_grids(name, variant, count):
    suite = suites.resolve_suite(name)
    assert len(suites.expand(suite, variant)) == count


def test_the_committed_xla_records_keep_their_point_names():
    """The Trainium suites dropped device="xla" (TrainiumArgs has no device): their points keep their names."""
    names = {p.run_name for p in suites.expand(suites.resolve_suite("padding"), "quick")}
    found, _ = record.read(record.repo_path("Experiment/results/padding"))
    amd = {r["run_name"] for r in found if "amd-epyc" in r["device"]["key"]}
    assert len(amd) == 12 and amd <= names
    moved = suites.retarget(suites.resolve_suite("seq_len"), "trainium")
    assert suites.expand(moved, "quick")[0].run_name != suites.expand(suites.resolve_suite("seq_len"), "quick")[0]


def test_repeats_come_cell_by_cell_so_one_cells_runs_are_spread_over_the_sweep(suite_file):
    path = suite_file("rep", NVIDIA + "[quick]\ngrid = { batch = [8, 16] }\nrepeats = 3\n[full]\n")
    points = suites.expand(suites.load_suite(path), "quick")
    assert [p.params["batch"] for p in points] == [8, 16, 8, 16, 8, 16]
    assert [p.run_name for p in points[2:4]] == [f"{p.run_name}-rep2" for p in points[:2]]


def test_cases_cross_the_grid_and_an_edited_parameter_renames_every_point(suite_file):
    body = (
        NVIDIA
        + """
        [params]
        batch = 8
        [quick]
        cases = [{ padding = "static" }, { padding = "dynamic", pad_to_multiple_of = 8 }]
        grid = { seed = [1, 2, 3] }
        [full]
    """
    )
    points = suites.expand(suites.load_suite(suite_file("t", body)), "quick")
    assert len(points) == 6 and points[0].run_name.startswith("t-quick-padding=static,seed=1-")
    assert points[3].params == {"batch": 8, "padding": "dynamic", "pad_to_multiple_of": 8, "seed": 1}
    edited = suites.expand(suites.load_suite(suite_file("t", body.replace("= 8\n", "= 16\n", 1))), "quick")
    assert not {p.run_name for p in points} & {p.run_name for p in edited}


@pytest.mark.parametrize(
    "quick, message",
    [
        ("cases = []", "[quick]: cases=[] is invalid"),
        ("grid = { batch = [] }", "[quick]: grid batch=[] is invalid"),
        ("grid = { batch = [8] }\ncases = []", "[quick]: cases=[] is invalid"),
    ],
)
def test_a_variant_of_no_points_is_refused_naming_the_file(suite_file, quick, message):
    path = suite_file("empty", NVIDIA + f"[quick]\n{quick}\n[full]\n")
    with pytest.raises(arguments.ConfigError, match=re.escape(f"{path} {message}")):
        suites.load_suite(path)


@pytest.mark.parametrize("name", suites.SWEEPS)
@pytest.mark.parametrize(
    "where",
    [
        "[params]\n{name} = 'x'\n[quick]\n",
        "[quick]\nparams = {{ {name} = 'x' }}\n",
        "[quick]\ncases = [{{ {name} = 'x' }}]\n",
    ]
    + ["[quick]\ngrid = {{ {name} = ['x', 'y'] }}\n"],
)
def test_what_the_sweep_sets_for_every_point_is_refused_in_a_suite(suite_file, name, where):
    path = suite_file("mine", NVIDIA + where.format(name=name) + "[full]\n")
    with pytest.raises(arguments.ConfigError, match=f"{re.escape(str(path))}.*{name} is set by the sweep"):
        suites.load_suite(path)


@pytest.mark.parametrize(
    "head, param, message",
    [
        (NVIDIA, "optlevel = 3", "'optlevel' belongs to the trainium loop, not to NvidiaArgs"),
        (TRAINIUM, 'step_mode = "compile"', "'step_mode' belongs to the nvidia loop, not to TrainiumArgs"),
        (TRAINIUM, 'device = "xla"', "'device' belongs to the nvidia loop, not to TrainiumArgs"),
        (TRAINIUM, 'precision = "fp16"', "fp16' is not supported on XLA"),
        (NVIDIA, "batch = 0", "batch=0 is invalid"),
        (NVIDIA, "bach = 8", "unknown parameter 'bach': did you mean 'batch'"),
    ],
)
def test_a_suite_is_checked_against_its_own_loops_arguments(suite_file, head, param, message):
    path = suite_file("platform", head + f"[params]\n{param}\n[quick]\n[full]\n")
    with pytest.raises(arguments.ConfigError, match=f"{re.escape(str(path))}.*{re.escape(message)}"):
        suites.load_suite(path)


def test_the_trainium_target_moves_nvidia_suites_and_refuses_what_its_loop_does_not_take(suite_file):
    moved = suites.retarget(suites.resolve_suite("batch_scaling"), "trainium")
    assert moved.notebook == "Trainium/baseline.ipynb" and moved.env in ("xla", "neuron")
    assert suites.platform(moved) is arguments.TrainiumArgs
    graphed = suites.load_suite(suite_file("g", NVIDIA + '[params]\nstep_mode = "compile"\n[quick]\n[full]\n'))
    with pytest.raises(arguments.ConfigError, match="g on the trainium target.*step_mode"):
        suites.retarget(graphed, "trainium")


@pytest.mark.parametrize(
    "line, message",
    [
        ("repeat = 3", "unknown key 'repeat': did you mean 'repeats'"),
        ("timeout = 5", "unknown key 'timeout': did you mean 'timeout_s'"),
        ('timeout_s = "ten"', "timeout_s='ten' is invalid"),
        ("timeout_s = 0", "timeout_s=0 is invalid"),
        ("timeout_s = nan", "timeout_s=nan is invalid"),
        ("repeats = 1.5", "repeats=1.5 is invalid"),
        ("jobs = 0", "jobs=0 is invalid"),
        ("grid = 8", "grid=8 is invalid"),
    ],
)
def test_a_wrong_key_type_or_range_in_a_variant_is_named_with_its_file(suite_file, line, message):
    path = suite_file("t", NVIDIA + f"[quick]\n{line}\n[full]\n")
    with pytest.raises(arguments.ConfigError, match=re.escape(f"{path} [quick]: {message}")):
        suites.load_suite(path)


@pytest.mark.parametrize(
    "text, message",
    [
        (GOOD.replace("notebook", "notebok"), ": unknown key 'notebok': did you mean 'notebook'"),
        (GOOD + '[report]\nkyes = ["batch"]\n', " [report]: unknown key 'kyes': did you mean 'keys'"),
        ('kind = "train"\n' + GOOD, ": kind='train' is invalid"),
        ('env = "conda"\n' + GOOD, ": env='conda' is invalid"),
        ("title = [\n" + GOOD, ": not valid TOML"),
        (NVIDIA + "[quick]\n", ": needs both [quick] and [full] tables"),
    ],
)
def test_a_broken_suite_file_is_named(suite_file, text, message):
    path = suite_file("broken", text)
    with pytest.raises(arguments.ConfigError, match=re.escape(f"{path}{message}")):
        suites.load_suite(path)


def test_a_suite_without_a_report_table_has_its_keys_empty(suite_file):
    assert suites.load_suite(suite_file("plain", GOOD)).report["keys"] == []


def test_set_names_each_point_with_its_overrides_and_the_point_it_belongs_to():
    suite = suites.resolve_suite("speedup")
    plain = suites.expand(suite, "quick")
    graphed = suites.expand(
        suites.with_overrides(suite, ["step_mode=compile", "data_on_device=true"], "quick"), "quick"
    )
    assert [p.run_name for p in graphed] == [f"{p.run_name}+step_mode=compile,data_on_device=True" for p in plain]
    assert [suites.point_of(p.run_name) for p in graphed] == [p.run_name for p in plain]  # the report counts them
    assert all(p.params["step_mode"] == "compile" and p.params["data_on_device"] is True for p in graphed)


def test_set_over_a_varying_parameter_lists_each_point_once():
    suite = suites.with_overrides(suites.resolve_suite("time_to_accuracy"), ["seed=5"], "quick")
    (point,) = suites.expand(suite, "quick")  # three seeds made one
    assert point.params["seed"] == 5 and suites.point_of(point.run_name).startswith("time_to_accuracy-quick-seed=1-")
    repeated = suites.with_overrides(suites.resolve_suite("batch_scaling"), ["batch=8"], "quick")
    first = suites.expand(suites.resolve_suite("batch_scaling"), "quick")[0].run_name  # batch=8
    names = [p.run_name for p in suites.expand(repeated, "quick")]  # its repeats stay independent runs
    assert names == [f"{first}+batch=8", f"{first}-rep2+batch=8", f"{first}-rep3+batch=8"]


@pytest.mark.parametrize(
    "setting, message",
    [
        ("run_name=mine", "run_name is set by the sweep"),
        ("suite=other", "suite is set by the sweep"),
        ("results_path=/tmp/x", "results_path is set by the sweep"),
        ("stepmode=compile", "did you mean 'step_mode'"),
        ("step_mode", "NAME=VALUE"),
        ("batch=0", "batch=0 is invalid"),
    ],
)
def test_set_refuses_what_no_point_would_take(setting, message):
    with pytest.raises(arguments.ConfigError, match=message):
        suites.with_overrides(suites.resolve_suite("speedup"), [setting], "quick")


def test_set_is_checked_against_the_variant_it_runs():
    """time_to_accuracy's quick points pad dynamically (length buckets fit them); its full points statically."""
    suite = suites.resolve_suite("time_to_accuracy")
    settings = ["step_mode=compile", "pad_to_multiple_of=16"]
    quick = suites.expand(suites.with_overrides(suite, settings, "quick"), "quick")
    assert {p.params["pad_to_multiple_of"] for p in quick} == {16}
    with pytest.raises(arguments.ConfigError, match=r"time_to_accuracy \[full\].*dynamic"):
        suites.with_overrides(suite, settings, "full")
