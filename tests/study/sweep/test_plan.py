"""The plan (each point's limit and the price it bounds) and precompile (one Neuron trial per compile configuration)."""

from __future__ import annotations

import io
import shlex

import pytest

from helpers import arguments
from study.sweep import plan, precompile, runner, suites

PRICES = {"trn1.2xlarge": (1.34375, "test price"), "g6.xlarge": (0.8048, "test price")}


@pytest.fixture()
def priced(monkeypatch):
    """The instance prices study.cost would give."""
    monkeypatch.setattr(plan, "price", lambda instance: PRICES[instance])


def test_the_plan_lists_every_point_with_its_limit_and_the_price_it_bounds(priced, tmp_path, capsys):
    runner.main(["lora", "--plan", "--results", str(tmp_path / "r")])
    text = capsys.readouterr().out
    lora = suites.resolve_suite("lora")
    names = [p.run_name for p in suites.expand(lora, "quick")]
    assert all(f"  {name}\n" in text + "\n" for name in names) and len(names) == 27
    # 27 runs, one at a time, each killed at 2,700 s: 20.25 h at $0.8048/h
    assert "## lora: 27 runs, 1 at a time, each stopped at 2,700 s ($0.60): at most 20.25 h, $16.30" in text
    assert "Whole sweep: at most 20.25 h, $16.30 on g6.xlarge" in text
    assert "MFU" not in text and "graphs" not in text  # bounds, not a model
    assert not (tmp_path / "r").exists()  # nothing ran


def test_points_run_together_bound_the_sweep_by_their_batches(priced, suite_file):
    suite = suites.load_suite(
        suite_file(
            "pair",
            'notebook = "Nvidia/baseline.ipynb"\n[quick]\ngrid = { batch = [8, 16, 32] }\njobs = 2\ntimeout_s = 3600\n[full]\n',
        )
    )
    text = plan.plan_text([suite], "quick", "nvidia", "trn1.2xlarge", "cmd")
    assert "3 runs, 2 at a time" in text and f"at most 2.00 h, ${2 * 1.34375:.2f}" in text


def test_a_trainium_plan_bounds_the_precompile_trials_too(priced):
    padding = suites.resolve_suite("padding")
    text = plan.plan_text([padding], "quick", "trainium", None, "cmd")
    hours = (4 * precompile.TRIAL_TIMEOUT_S + 12 * 2400) / 3600
    assert "## precompile: 4 runs" in text and f"Whole sweep: at most {hours:.2f} h" in text and "trn1.2xlarge" in text


def test_one_trial_per_compile_configuration_not_per_point():
    """padding's quick points: 4 cases x 3 repeats; the repeats compile nothing new."""
    padding = suites.resolve_suite("padding")
    found = precompile.trials([padding], "quick")
    assert [t.point for t in found] == [p.run_name for p in suites.expand(padding, "quick")[:4]]
    flags = suites.resolve_suite("compiler_flags")  # 3 x 2 x 2 flag sets, each its own graphs
    assert len(precompile.trials([flags], "quick")) == 12
    seeds = suites.retarget(suites.resolve_suite("time_to_accuracy"), "trainium")  # seeds are data, one graph set
    assert len(precompile.trials([seeds], "quick")) == 1
    assert precompile.trials([suites.resolve_suite("batch_scaling")], "quick") == []  # no Trainium point


def test_a_trial_is_the_points_own_run_for_a_few_steps_under_neuron_parallel_compile():
    padding = suites.resolve_suite("padding")
    point, trial = suites.expand(padding, "quick")[0], precompile.trials([padding], "quick")[0]
    tool, python, script, *flags = trial.command
    assert (tool, script) == ("neuron_parallel_compile", "Trainium/train.py") and python.endswith("/bin/python")
    parsed = arguments.from_cli(flags, arguments.TrainiumArgs)  # what the loop will read
    assert parsed.max_steps == min(precompile.TRIAL_STEPS, point.params["max_steps"]) == 8
    assert parsed.padding == "static" and parsed.batch == 8 and parsed.max_length == 64 and not parsed.progress
    assert parsed.run_name == f"{point.run_name}-precompile" and parsed.results_path == precompile.TRIALS_DIR
    assert trial.env == {"NEURON_PARALLEL_COMPILE_MAX_RETRIES": "1"}


def test_without_the_tool_precompile_prints_what_would_run_and_runs_nothing(monkeypatch):
    monkeypatch.setattr(precompile.shutil, "which", lambda name: None)
    out = io.StringIO()
    precompile.precompile([suites.resolve_suite("padding")], "quick", out)
    lines = out.getvalue().splitlines()
    assert lines[0] == "precompile: 4 trials, one per distinct compile configuration"
    assert shlex.split(lines[1])[:2] == ["NEURON_PARALLEL_COMPILE_MAX_RETRIES=1", "neuron_parallel_compile"]
    assert "nothing was run" in lines[-1]


def test_a_trial_past_its_limit_is_killed(tmp_path):
    tool = tmp_path / "neuron_parallel_compile"
    tool.write_text("#!/bin/sh\nsleep 60 &\nwait\n")  # a compiler child that would outlive its parent
    tool.chmod(0o755)
    trial = precompile.Trial("s", "p", [str(tool), "python"], timeout_s=1)
    assert precompile.run_trial(str(tool), trial) is None
    trial.timeout_s = 30
    fine = tmp_path / "fine"
    fine.write_text("#!/bin/sh\nexit 3\n")
    fine.chmod(0o755)
    assert precompile.run_trial(str(fine), trial) == 3


def test_precompile_needs_the_trainium_target(capsys):
    with pytest.raises(SystemExit) as stopped:
        runner.main(["padding", "--precompile"])
    assert stopped.value.code == 2 and "--target trainium" in capsys.readouterr().err
