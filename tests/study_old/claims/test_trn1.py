"""helpers/study/claims/trn1.py: each claim about trn1's internals reaches each of its verdicts on hand-made
records, and none is ever proxied: without a trn1 record it is not testable here."""

from __future__ import annotations

import pytest

from helpers.study.claims import findings, trn1
from tests.study.claims.claim_records import check, flags, judge, padding_runs, run, util_runs

pytestmark = pytest.mark.usefixtures("no_library_versions")


@pytest.mark.parametrize("hours, verdict", [(77.0, "holds"), (0.1, "does not hold")])
def test_padding_77h(hours, verdict):
    found = judge(trn1.padding_77h, padding_runs("trn1", (900, hours * 3600), multiple=None))
    check(found, verdict, "trn1", "full", 2)


def test_padding_77h_needs_trn1_full():
    found = judge(trn1.padding_77h, padding_runs("xla-cpu", (5, 1e6), "quick", None))
    check(found, "not testable here", "xla-cpu", "quick", 2)


@pytest.mark.parametrize(
    "times, verdict",
    [
        ({1: 132.0, 2: 120.0, 3: 118.0}, "holds"),
        ({1: 132.0, 2: 150.0, 3: 118.0}, "does not hold"),
        ({1: 132.0, 2: 130.0, 3: 129.0}, "inconclusive"),
    ],
)
def test_optlevel(times, verdict):
    check(judge(trn1.optlevel, flags("trn1", times)), verdict, "trn1", "full", 3)


def test_optlevel_needs_neuron():
    found = judge(trn1.optlevel, flags("xla-cpu", {1: 132.0, 2: 100.0}, "quick"))
    check(found, "not testable here", "xla-cpu", "quick", 2)
    assert "neuronx-cc" in found.reason


@pytest.mark.parametrize(
    "shares, verdict",
    [
        ({"copy_data_movement": 0.5, "matmul": 0.2}, "holds"),
        ({"copy_data_movement": 0.1, "matmul": 0.6}, "does not hold"),
    ],
)
def test_dma_bound(shares, verdict):
    found = judge(trn1.dma_bound, [run("trn1", "profile_memory", {"batch": 8}, shares=shares)])
    check(found, verdict, "trn1", "full", 1)


def test_dma_bound_needs_trn1_profile():
    found = judge(trn1.dma_bound, [run("a100", "profile_memory", {"batch": 8}, shares={"matmul": 0.2})])
    check(found, "not testable here")
    assert "neuron-profile" in found.reason


def test_allreduce_is_not_testable_even_with_trn1_scaling():
    recs = [run("trn1", "scaling", {"num_devices": n}) for n in (1, 2)]
    found = judge(trn1.allreduce, recs)
    check(found, "not testable here", "trn1", "full", 2)
    assert found.reason.startswith("needs AllReduce GB/s of a 2-core trn1 run, a field no record holds yet")


@pytest.mark.parametrize(
    "device, status, verdict",
    [("trn1", "failed", "holds"), ("trn1", "finished", "does not hold"), ("a100", "finished", "not testable here")],
)
def test_gradient_checkpointing(device, status, verdict):
    recs = [run(device, "batch_scaling", {"gradient_checkpointing": True, "batch": 64}, status=status)]
    check(judge(trn1.gradient_checkpointing, recs), verdict, device, "full", 1)


@pytest.mark.parametrize("status, verdict", [("oom", "holds"), ("finished", "not testable here")])
def test_host_memory_measured(status, verdict):
    """An OOM decides; a finished batch-64 run does not, for the study's own finished too, on 90 GB of swap,
    and no record holds the swap a run used."""
    recs = [run("trn1", "batch_scaling", {"batch": 64}, status=status, memory={"host_peak_rss_gib": 20.0})]
    found = judge(trn1.host_memory, recs)
    assert found.verdict == verdict, found.reason
    if status == "finished":
        assert found.reason.startswith("1 finished at batch > 48, which decides nothing without the swap")
        assert "a record of the host's swap used" in found.reason


def test_host_memory_is_never_proxied_and_its_estimate_decides_nothing():
    found = judge(trn1.host_memory, [run("cpu", "batch_scaling", {"batch": 64}, "quick", status="oom")])
    check(found, "not testable here")
    assert found.reason.startswith("needs a trn1.2xlarge run at batch > 48 out of memory, or one with its swap")
    assert found.measured.startswith("model, decides nothing")


@pytest.mark.parametrize(
    "claim", [c for c, (_, trn1_internal) in findings.CLAIMS.items() if trn1_internal], ids=lambda c: c.__name__
)
def test_a_trn1_internal_is_never_proxied(claim):
    recs = (
        flags("xla-cpu", {1: 132.0, 2: 100.0, 3: 90.0}, "quick")
        + padding_runs("xla-cpu", (5, 1e6), "quick", None)
        + util_runs("a100", [40.0])
        + util_runs("cpu", [10.0], "quick")
        + [
            run("xla-cpu", "profile_memory", {"batch": 8}, "quick", shares={"copy_data_movement": 0.5, "matmul": 0.2}),
            run("cpu", "batch_scaling", {"batch": 64, "gradient_checkpointing": True}, "quick", status="oom"),
        ]
    )
    found = judge(claim, recs)
    assert found.verdict == "not testable here", (found.verdict, found.reason)
    assert found.reason.startswith(("needs a trn1", "needs AllReduce GB/s of a 2-core trn1 run")), found.reason
