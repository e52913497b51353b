"""The device plan's suites (cloud/gpu_step.toml, cloud/gpu_grid.toml) and `sweep --set`, which runs the
quick suites on the fastest step path."""

import pytest

from helpers.run.args import ConfigError, build_args
from helpers.study.sweep import suites

PLAN_SUITES = ("cloud/gpu_step.toml", "cloud/gpu_grid.toml")


@pytest.mark.parametrize("path", PLAN_SUITES)
def test_the_rehearsal_runs_on_a_cpu_and_the_gpu_variant_takes_the_graphed_path(path):
    """quick (the CPU rehearsal) never asks for CUDA graphs, which a CPU refuses; full measures them."""
    suite = suites.load_suite(suites.repo_path(path))
    quick, full = suites.expand(suite, "quick"), suites.expand(suite, "full")
    for point in quick:
        args = build_args(point.params)
        assert args.train.step_mode != "cudagraphs" and args.train.device != "cuda"
    modes = {build_args(p.params).train.step_mode for p in full}
    assert "cudagraphs" in modes
    assert all(build_args(p.params).task.model_name == "bert-base-random" for p in full)


def test_the_step_suite_sets_eager_against_the_fastest_path_at_both_lengths():
    full = suites.expand(suites.load_suite(suites.repo_path(PLAN_SUITES[0])), "full")
    cells = {(p.params["step_mode"], p.params.get("data_on_device", False), p.params["max_length"]) for p in full}
    for length in (32, 128):
        assert {("eager", False, length), ("cudagraphs", True, length)} <= cells


def test_set_puts_a_parameter_over_every_point_and_names_them_anew():
    suite = suites.load_suite(suites.repo_path("Experiment/suites/speedup.toml"))
    plain = suites.expand(suite, "quick")
    graphed = suites.expand(suites.with_overrides(suite, ["step_mode=compile", "data_on_device=true"]), "quick")
    assert len(graphed) == len(plain)
    assert all(p.params["step_mode"] == "compile" and p.params["data_on_device"] is True for p in graphed)
    assert not {p.run_name for p in graphed} & {p.run_name for p in plain}  # never taken for the eager records


def test_set_is_checked_against_each_point_of_the_variant_it_runs():
    """time_to_accuracy's quick points pad dynamically: length buckets fit them; its full points pad statically."""
    suite = suites.load_suite(suites.repo_path("Experiment/suites/time_to_accuracy.toml"))
    settings = ["step_mode=compile", "pad_to_multiple_of=16"]
    assert all(
        p.params["pad_to_multiple_of"] == 16 for p in suites.expand(suites.with_overrides(suite, settings), "quick")
    )
    with pytest.raises(ConfigError, match=r"time_to_accuracy \[full\].*dynamic"):
        suites.with_overrides(suite, settings, "full")


@pytest.mark.parametrize(
    "setting, message",
    [("stepmode=compile", "did you mean 'step_mode'"), ("step_mode", "NAME=VALUE"), ("batch=0", "batch")],
)
def test_set_refuses_what_no_run_would_take(setting, message):
    suite = suites.load_suite(suites.repo_path("Experiment/suites/speedup.toml"))
    with pytest.raises(ConfigError, match=message):
        suites.with_overrides(suite, [setting])
