"""helpers/study/claims/throughput.py: each throughput, padding and utilization claim reaches each of its
verdicts on hand-made records, its measured-evidence text names the device, the variant and the run count,
and a timing verdict resolves only beyond the spread between runs and the drift between suites."""

from __future__ import annotations

import pytest

from helpers.study.claims import throughput
from tests.study.claims.claim_records import batches, check, judge, padding_runs, run, steady, util_runs

pytestmark = pytest.mark.usefixtures("no_library_versions")


@pytest.mark.parametrize(
    "rates, verdict",
    [([100, 200, 400], "holds"), ([400, 200, 100], "does not hold"), ([100, 101, 102], "inconclusive")],
)
def test_batch_scaling(rates, verdict):
    found = judge(throughput.batch_scaling, batches("a100", rates))
    check(found, verdict, "a100", "full", 3)
    assert ("spread" in found.reason) == (verdict == "inconclusive")


def test_batch_scaling_untestable_and_proxy():
    check(judge(throughput.batch_scaling, batches("a100", [100])), "not testable here", "a100", "full", 1)
    proxy = judge(throughput.batch_scaling, batches("cpu", [100, 200, 400], "quick"))
    check(proxy, "consistent on proxy", "cpu", "quick", 3)
    assert "direction only, on proxy: minilm on CPU" in proxy.reason and proxy.basis.startswith("proxy")
    real = judge(throughput.batch_scaling, batches("a100", [100, 200, 400]) + batches("cpu", [400, 200, 100], "quick"))
    assert real.verdict == "holds" and "Xeon" not in real.measured  # a real device outranks a proxy


@pytest.mark.parametrize(
    "rates, verdict",
    [
        ((145.0, 70.0), "holds"),  # the study's 55 vs 115 ms at batch 8
        ((70.0, 145.0), "does not hold"),  # L=128 the faster
        ((100.0, 101.0), "inconclusive"),  # within the windows' ±3%
        ((100.0, None), "not testable here"),
    ],
)
def test_seq_len_asks_whether_l32_trains_more_samples_per_second(rates, verdict):
    recs = [
        run("trn1", "seq_len", {"max_length": L, "batch": 64}, samples_per_s=s) for L, s in zip((32, 128), rates) if s
    ]
    found = judge(throughput.seq_len, recs)
    check(found, verdict, "trn1" if rates[1] else None, "full", 2 if rates[1] else None)
    if rates[1]:
        assert "the FLOPs at L=128 (model)" in found.measured and "x the samples/s" in found.headline
    assert "no 'spilling cliff' shows in the step times" in found.published  # the study's figures vs its words


@pytest.mark.parametrize(
    "dynamic, verdict",
    [
        ((40, 1000.0), "holds"),
        ((1, 1000.0), "does not hold"),
        ((40, 70.0), "does not hold"),
        ((40, 101.0), "inconclusive"),
    ],
)
def test_padding(dynamic, verdict):
    check(judge(throughput.padding, padding_runs("trn1", dynamic)), verdict, "trn1", "full", 2)


def test_padding_needs_xla():
    found = judge(throughput.padding, padding_runs("a100", (1, 100.0)))
    check(found, "not testable here", "a100", "full", 2)
    proxy = judge(throughput.padding, padding_runs("xla-cpu", (5, 300.0), "quick", 8))
    check(proxy, "consistent on proxy", "xla-cpu", "quick", 2)
    assert "on proxy: minilm on XLA on the CPU" in proxy.reason


@pytest.mark.parametrize(
    "gpu, core, verdict",
    [([40.0], [10.0], "holds"), ([20.0], [60.0], "does not hold"), ([30.0, 40.0], [35.0, 45.0], "inconclusive")],
)
def test_small_batch_util(gpu, core, verdict):
    found = judge(throughput.small_batch_util, util_runs("a100", gpu) + util_runs("trn1", core))
    check(found, verdict, "a100", "full", 3 * len(gpu))
    assert "Trainium" in found.measured and "tensor pipes" in found.measured
    assert "tensor engine" in found.measured


@pytest.mark.parametrize("gpu_like, core_like", [(False, True), (True, False), (False, False)])
def test_small_batch_util_is_not_testable_unless_both_sides_measure_the_studys_figure(gpu_like, core_like):
    # the same numbers that hold like for like: SM activity (SMs busy with any work, not the tensor pipes) or
    # neuron-monitor's busy % on either side is another figure, and no verdict comes from it
    found = judge(
        throughput.small_batch_util,
        util_runs("a100", [40.0], like_study=gpu_like) + util_runs("trn1", [10.0], like_study=core_like),
    )
    assert found.verdict == "not testable here"
    assert "SM activity" in found.reason if not gpu_like else "neuron-monitor" in found.reason


def test_small_batch_util_needs_both_classes():
    found = judge(throughput.small_batch_util, util_runs("a100", [40.0]) + util_runs("cpu", [10.0]))
    check(found, "not testable here", "a100", "full", 3)  # a CPU cannot stand in for a NeuronCore


def repeated(device: str, batch: int, rates: list[float], tflops: float | None = None) -> list[dict]:
    """Return independent runs (told apart by seed) of one batch_scaling cell with these samples/s (and MFU
    in proportion, as a fixed FLOP count per sample gives, unless `tflops` is given)."""

    def systems(rate: float) -> dict:
        achieved = rate / 100 if tflops is None else tflops
        return {
            "arithmetic_intensity": 50.0 + batch,
            "achieved_tflops": achieved,
            "mfu": achieved / 312,
            "peak_tflops": 312.0,
        }

    return [
        run(device, "batch_scaling", {"batch": batch, "seed": i}, samples_per_s=s, systems=systems(s))
        for i, s in enumerate(rates, 1)
    ]


@pytest.mark.parametrize(
    "small, large, verdict",
    [
        ([100, 102, 98], [200, 205, 195], "holds"),  # apart beyond the range between runs
        ([100, 160, 60], [120, 130, 125], "inconclusive"),  # the windows (±3%) would call it; the runs' range does not
        ([200, 205, 195], [100, 102, 98], "does not hold"),
    ],
)
def test_batch_scaling_with_three_runs_a_cell_is_judged_on_the_range_between_runs(small, large, verdict):
    recs = repeated("a100", 8, small) + repeated("a100", 16, [150] * 3) + repeated("a100", 64, large)
    check(judge(throughput.batch_scaling, recs), verdict, "a100", "full", 9)


def test_batch_scaling_rests_on_samples_per_s_alone_and_flop_per_byte_decides_nothing():
    recs = (
        repeated("a100", 8, [100] * 3, tflops=2.0)
        + repeated("a100", 16, [150] * 3)
        + repeated("a100", 64, [200] * 3, tflops=1.0)
    )  # MFU is no second test: samples/s rose beyond the range
    found = judge(throughput.batch_scaling, recs)
    assert found.verdict == "holds" and "(model, decides nothing)" in found.measured and "MFU" not in found.measured


def drifting(small: list[float], large: list[float], rep: bool) -> list[dict]:
    """Return batch_scaling runs at batch 8 and 64 (named as repeats or as seeds) and a configuration that two
    other suites timed 20% apart on the same device: the machine's drift between suites."""
    recs = []
    for batch, rates in ((8, small), (64, large)):
        for i, rate in enumerate(rates, 1):
            name = f"batch_scaling-full-b{batch}" + (f"-rep{i}" if rep and i > 1 else f"-s{i}")
            recs.append(
                run("a100", "batch_scaling", {"batch": batch, "seed": 1 if rep else i}, samples_per_s=rate)
                | {"run_name": name}
            )
    for suite, rate in (("small_batch", 100.0), ("seq_len", 120.0)):
        recs += [
            run("a100", suite, {"batch": 32, "seed": i}, samples_per_s=rate) | {"run_name": f"{suite}-x-{i}"}
            for i in (1, 2, 3)
        ]
    return recs


@pytest.mark.parametrize("rep, verdict", [(True, "holds"), (False, "inconclusive")])
def test_a_timing_verdict_resolves_beyond_the_drift_unless_its_arms_ran_interleaved(rep, verdict):
    # 10% faster beyond the range between runs: enough when the repeats ran interleaved, not beyond a 20% drift
    found = judge(throughput.batch_scaling, drifting([100, 101, 99], [110, 111, 109], rep))
    assert found.verdict == verdict, found.reason
    if not rep:
        assert "drift between suites (20.0%" in found.reason


def test_the_summary_number_is_the_comparison_that_decided_the_verdict():
    found = judge(throughput.batch_scaling, batches("a100", [100, 200, 400]) + batches("t4", [100, 101, 102]))
    assert found.verdict == "inconclusive" and found.headline.startswith("Tesla T4: 1.02x"), found.headline
    both = judge(throughput.batch_scaling, batches("a100", [100, 200, 400]) + batches("t4", [100, 150, 300]))
    assert both.verdict == "holds" and both.headline.startswith("A100"), both.headline


@pytest.mark.parametrize(
    "drift, verdict",
    [
        ([], "inconclusive"),  # no device here measured a drift: one run a cell, one after another, cannot speak
        (steady(5.0), "holds"),  # another machine's 5% drift: a 2x difference is beyond it
        (steady(150.0), "inconclusive"),  # beyond 2x: not even that
    ],
)
def test_an_unknown_drift_leaves_a_comparison_of_runs_not_interleaved_unresolved(drift, verdict):
    found = judge(throughput.batch_scaling, batches("a100", [100, 150, 200]), drift=drift)
    assert found.verdict == verdict, found.reason
    if not drift:
        assert "no device here measured the drift between suites: not resolved" in found.reason


def profiled_pair(shares: dict | None) -> list[dict]:
    """Return seq_len's L=32 and L=128 on a trn1, L=32 the faster, profiled (`shares`) or not."""
    return [
        run("trn1", "profile_memory", {"max_length": L, "batch": 8}, samples_per_s=s, shares=shares)
        for L, s in ((32, 145.0), (128, 70.0))
    ]


def test_a_profiled_run_never_times_a_claim():
    plain = judge(throughput.seq_len, profiled_pair(None))
    assert plain.verdict == "holds", plain.reason
    profiled = judge(throughput.seq_len, profiled_pair({"matmul": 0.5, "host_gap": 0.1}))
    assert profiled.verdict == "not testable here", profiled.reason
