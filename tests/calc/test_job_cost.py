"""helpers/calc/job_cost.py: a job's seconds, dollars and joules, checked against hand-computed values."""

import math

import pytest

from helpers.calc import job_cost

# validation accuracy every 4,000 samples of a 16,000-row run: 94% is first reached at 12,000 samples
CURVE = [
    {"step": 63, "train_time_s": 7.0, "samples": 4000, "val_accuracy": 0.80},
    {"step": 125, "train_time_s": 14.0, "samples": 8000, "val_accuracy": 0.92},
    {"step": 188, "train_time_s": 21.0, "samples": 12000, "val_accuracy": 0.945},
    {"step": 250, "train_time_s": 28.0, "samples": 16000, "val_accuracy": 0.95},
]


def test_one_off_is_the_larger_of_compile_time_and_first_step_excess():
    # compile 310 s; first step 312.1 s against a 0.08 s steady step: 312.02 s of excess
    assert job_cost.one_off_s(310.0, 312.1, 0.08) == pytest.approx(312.02)
    assert job_cost.one_off_s(400.0, 5.0, 0.1) == 400.0  # compilations after the first step count too
    assert job_cost.one_off_s(None, 2.5, 0.5) == pytest.approx(2.0)  # eager: the first step's warm-up
    assert job_cost.one_off_s("not measured", 0.4, 0.5) == 0.0  # never negative
    assert math.isnan(job_cost.one_off_s(None, None, 0.1))


def test_one_off_share_over_runs_sharing_a_cache():
    assert job_cost.one_off_share_s(300.0, runs_sharing_cache=4) == 75.0
    assert job_cost.one_off_share_s(300.0, runs_sharing_cache=4, warm_cache=True) == 0.0
    assert job_cost.one_off_share_s(2.0, runs_sharing_cache=4, cacheable=False) == 2.0  # CUDA warm-up: every run
    with pytest.raises(ValueError, match="runs_sharing_cache"):
        job_cost.one_off_share_s(300.0, runs_sharing_cache=0)


def test_epoch_wall_dollars_and_energy_known_values():
    assert job_cost.per_epoch_s(16_000, 400.0) == 40.0
    assert job_cost.wall_s(75.0, 40.0, 3) == 195.0  # 75 + 3 x 40
    assert job_cost.usd(3600, 1.34375) == pytest.approx(1.34375)
    assert job_cost.usd(195.0, 2.745) == pytest.approx(0.14869, abs=1e-5)  # 195 / 3600 x 2.745
    # 48,000 samples at 4 samples per joule (the run's steady windows, all its devices)
    assert job_cost.energy_j(48_000, samples_per_joule=4.0) == 12_000.0


def test_epochs_to_target_from_a_known_curve():
    assert job_cost.epochs_to_target(CURVE, 0.94, run_rows=16_000) == pytest.approx(0.75)  # 12,000 / 16,000
    assert job_cost.epochs_to_target(CURVE, 0.80, run_rows=16_000) == pytest.approx(0.25)
    assert job_cost.epochs_to_target(list(reversed(CURVE)), 0.94, 16_000) == pytest.approx(0.75)  # order-proof
    # two ranks, the curve counting rank 0's samples: twice the samples seen
    assert job_cost.epochs_to_target(CURVE, 0.94, run_rows=16_000, samples_scale=2) == pytest.approx(1.5)
    # a 4,000-row run reaching it at 12,000 samples took 3 epochs of its rows
    assert job_cost.epochs_to_target(CURVE, 0.94, run_rows=4_000) == pytest.approx(3.0)


def test_target_never_reached_is_none_not_an_extrapolation():
    assert job_cost.epochs_to_target(CURVE, 0.99, run_rows=16_000) is None
    assert job_cost.epochs_to_target([], 0.5, run_rows=16_000) is None
    assert job_cost.epochs_covered(CURVE, 16_000) == 1.0
    assert job_cost.epochs_covered([], 16_000) == 0.0


def test_break_even_epochs_known_numbers():
    # a: $0.10 up front, $0.01/epoch; b: nothing up front, $0.03/epoch -> equal at 0.10 / 0.02 = 5 epochs
    assert job_cost.break_even_epochs(0.10, 0.01, 0.0, 0.03) == pytest.approx(5.0)
    assert job_cost.break_even_epochs(0.10, 0.03, 0.0, 0.01) is None  # a costs more per epoch: never
    assert job_cost.break_even_epochs(0.0, 0.01, 0.05, 0.03) is None  # a cheaper from the start: no crossing
    assert job_cost.break_even_epochs(0.10, 0.02, 0.0, 0.02) is None  # parallel
    assert job_cost.break_even_epochs(math.nan, 0.01, 0.0, 0.03) is None


def test_one_off_budget_known_numbers():
    # b: 3 epochs x $0.03 = $0.09; a's epochs $0.03; $0.06 left at $3.60/h = 60 s of compilation
    assert job_cost.one_off_budget_s(3, 0.01, 0.0, 0.03, 3.6) == pytest.approx(60.0)
    assert job_cost.one_off_budget_s(3, 0.04, 0.0, 0.03, 3.6) < 0  # a loses even with no compilation
