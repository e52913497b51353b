"""study/claims/trn1.py: each claim about trn1's internals comes out each way on records made for it, and none
is ever proxied: without a trn1 record it is not testable here."""

from __future__ import annotations

import pytest

from study.claims import trn1
from tests.study.claims.claim_records import arm, check, judge, rec


def padding(dynamic_s: list[float], device: str = "trn1", variant: str = "full") -> list[dict]:
    return arm(device, "padding", {"padding": "static"}, [100.0, 104.0, 98.0], "train_s", variant) + arm(
        device, "padding", {"padding": "dynamic"}, dynamic_s, "train_s", variant
    )


@pytest.mark.parametrize(
    "dynamic_s, verdict",
    [
        ([77 * 3600.0] * 3, "holds"),
        ([300.0, 310.0, 305.0], "does not hold"),
        ([900.0, 1200.0, 1100.0], "inconclusive"),  # 9x to 12x: the range straddles 10x
        ([77 * 3600.0], "inconclusive"),  # one run each: no spread
    ],
)
def test_padding_77h(dynamic_s, verdict):
    check(judge(trn1.padding_77h, padding(dynamic_s)), verdict, "Trainium")


def test_padding_77h_needs_trn1_full():
    check(judge(trn1.padding_77h, padding([1e6] * 3, "xla-cpu", "quick")), "not testable here")


def flags(times: dict[int, list[float]], device: str = "trn1") -> list[dict]:
    return [
        r
        for level, t in times.items()
        for r in arm(
            device, "compiler_flags", {"optlevel": level, "distribution_strategy": "llm-training"}, t, "train_s"
        )
    ]


@pytest.mark.parametrize(
    "two, three, verdict",
    [
        ([120.0, 121.0, 119.0], [118.0, 117.0, 119.0], "holds"),
        ([150.0, 151.0, 149.0], [118.0, 117.0, 119.0], "does not hold"),
        ([130.0, 133.0, 129.0], [118.0, 117.0, 119.0], "inconclusive"),
    ],
)
def test_optlevel(two, three, verdict):
    found = judge(trn1.optlevel, flags({1: [132.0, 131.0, 131.5], 2: two, 3: three}))
    check(found, verdict, "Trainium", "llm-training")


def test_optlevel_needs_neuron():
    found = judge(trn1.optlevel, flags({1: [132.0] * 3, 2: [100.0] * 3}, "xla-cpu"))
    check(found, "not testable here")
    assert "neuronx-cc" in found.reason


@pytest.mark.parametrize("dma, verdict", [(82.0, "holds"), (10.0, "does not hold")])
def test_dma_bound(dma, verdict):
    found = judge(trn1.dma_bound, [rec("trn1", "profile_memory", {"batch": 8}, dma_pct=dma, te_pct=18.0)])
    check(found, verdict, "DMA active")


def test_dma_bound_needs_a_neuron_profile():
    monitor = [rec("trn1", "profile_memory", {"batch": 8}, core_busy_pct=50.0)]  # neuron-monitor: no DMA figure
    check(judge(trn1.dma_bound, monitor), "not testable here")


def allreduce(at32: list[float], at128: list[float]) -> list[dict]:
    params = {"num_devices": 2}
    return arm("trn1", "scaling", {**params, "max_length": 32}, at32, "allreduce_s") + arm(
        "trn1", "scaling", {**params, "max_length": 128}, at128, "allreduce_s"
    )


@pytest.mark.parametrize(
    "at32, at128, verdict",
    [
        ([0.020, 0.021, 0.019], [0.030, 0.031, 0.029], "holds"),  # 1.5x the bandwidth at L=32, the study's 50%
        ([0.040, 0.041, 0.039], [0.030, 0.031, 0.029], "does not hold"),
        ([0.020, 0.032, 0.025], [0.030, 0.031, 0.029], "inconclusive"),
    ],
)
def test_allreduce(at32, at128, verdict):
    check(judge(trn1.allreduce, allreduce(at32, at128)), verdict, "the bandwidth at L=32")


@pytest.mark.parametrize("statuses, verdict", [(["failed"], "holds"), (["failed", "finished"], "does not hold")])
def test_gradient_checkpointing(statuses, verdict):
    recs = [rec("trn1", "adhoc", {"gradient_checkpointing": True, "seed": i}, status=s) for i, s in enumerate(statuses)]
    check(judge(trn1.gradient_checkpointing, recs), verdict, "failed 1")


def test_gradient_checkpointing_elsewhere_cannot_stand_in():
    check(
        judge(trn1.gradient_checkpointing, [rec("a100", "adhoc", {"gradient_checkpointing": True})]),
        "not testable here",
    )


@pytest.mark.parametrize(
    "status, host_gib, verdict",
    [
        ("oom", None, "holds"),
        ("finished", 20.0, "does not hold"),  # trained in RAM: no swap needed
        ("finished", 31.5, "not testable here"),  # near the host's 32 GiB: it may have swapped
        ("finished", None, "not testable here"),  # the study's own batch 64 finished, on swap
    ],
)
def test_host_memory(status, host_gib, verdict):
    figures = {"host_mem_gib": host_gib} if host_gib else {}
    check(judge(trn1.host_memory, [rec("trn1", "batch_scaling", {"batch": 64}, status=status, **figures)]), verdict)
