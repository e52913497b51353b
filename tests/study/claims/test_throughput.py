"""study/claims/throughput.py: each throughput, padding and utilization claim comes out each way on records
made for it, and a timing comparison speaks only with interleaved repeats of its arms."""

from __future__ import annotations

import pytest

from study.claims import throughput
from tests.study.claims.claim_records import arm, check, judge, rec

FAST, SLOW, CLOSE = [200.0, 205.0, 195.0], [100.0, 104.0, 98.0], [150.0, 210.0, 96.0]
WAYS = [(FAST, SLOW, "holds"), (SLOW, FAST, "does not hold"), (CLOSE, SLOW, "inconclusive")]


def batches(device: str, small: list[float], large: list[float], variant: str = "full") -> list[dict]:
    return arm(device, "batch_scaling", {"batch": 8}, small, "samples_per_s", variant) + arm(
        device, "batch_scaling", {"batch": 64}, large, "samples_per_s", variant
    )


@pytest.mark.parametrize("large, small, verdict", WAYS)
def test_batch_scaling(large, small, verdict):
    check(judge(throughput.batch_scaling, batches("a100", small, large)), verdict, "A100", "full", "6 runs")


def test_batch_scaling_without_repeats_is_inconclusive_and_a_proxy_gives_a_direction():
    found = judge(throughput.batch_scaling, batches("a100", [100.0], [400.0]))
    check(found, "inconclusive")  # 4x, but one run each: no spread between runs
    assert "not judged: no spread between runs" in found.reason
    check(judge(throughput.batch_scaling, batches("cpu", SLOW, FAST, "quick")), "consistent on proxy", "minilm")
    check(judge(throughput.batch_scaling, batches("cpu", FAST, SLOW, "quick")), "contradicted on proxy")
    real = judge(throughput.batch_scaling, batches("a100", SLOW, FAST) + batches("cpu", FAST, SLOW, "quick"))
    assert real.verdict == "holds" and "Xeon" not in real.measured  # a real device outranks a proxy
    check(
        judge(throughput.batch_scaling, arm("a100", "batch_scaling", {"batch": 8}, SLOW, "samples_per_s")),
        "not testable here",
    )


@pytest.mark.parametrize("short, long, verdict", WAYS)
def test_seq_len(short, long, verdict):
    recs = arm("trn1", "seq_len", {"max_length": 32}, short, "samples_per_s")
    recs += arm("trn1", "seq_len", {"max_length": 128}, long, "samples_per_s")
    check(judge(throughput.seq_len, recs), verdict, "Trainium", "6 runs")


@pytest.mark.parametrize(
    "compiled, dynamic_s, verdict",
    [
        (40, SLOW, "holds"),
        (1, SLOW, "does not hold"),
        (40, [10.0, 11.0, 12.0], "does not hold"),
        (40, [48.0, 60.0, 55.0], "inconclusive"),
    ],
)
def test_padding(compiled, dynamic_s, verdict):
    static = arm("trn1", "padding", {"padding": "static"}, [50.0, 52.0, 49.0], "train_s", compilations=1)
    dynamic = arm("trn1", "padding", {"padding": "dynamic"}, dynamic_s, "train_s", compilations=compiled)
    check(judge(throughput.padding, static + dynamic), verdict, "Trainium")


def test_padding_needs_xla_and_a_count_speaks_without_repeats():
    gpu = arm("a100", "padding", {"padding": "static"}, [50.0], "train_s") + arm(
        "a100", "padding", {"padding": "dynamic"}, [90.0], "train_s"
    )
    check(judge(throughput.padding, gpu), "not testable here")
    static = [rec("xla-cpu", "padding", {"padding": "static"}, "quick", train_s=50.0, compilations=2)]
    fewer = [
        rec(
            "xla-cpu", "padding", {"padding": "dynamic", "pad_to_multiple_of": 8}, "quick", train_s=90.0, compilations=2
        )
    ]
    check(judge(throughput.padding, static + fewer), "contradicted on proxy", "pad to 8")


def utils(gpu: list[float], core: list[float], gpu_metric: str = "gpu_tensor_pct", core_metric: str = "te_pct"):
    return [
        r
        for b in (2, 8, 16)
        for r in arm("h200", "small_batch", {"batch": b}, gpu, gpu_metric)
        + arm("trn1", "small_batch", {"batch": b}, core, core_metric)
    ]


@pytest.mark.parametrize(
    "gpu, core, verdict",
    [
        ([40.0, 41.0, 42.0], [10.0, 12.0, 11.0], "holds"),
        ([20.0, 21.0, 22.0], [60.0, 61.0, 59.0], "does not hold"),
        ([30.0, 40.0, 35.0], [35.0, 45.0, 38.0], "inconclusive"),
        ([40.0], [10.0], "inconclusive"),
    ],
)
def test_small_batch_util(gpu, core, verdict):
    check(judge(throughput.small_batch_util, utils(gpu, core)), verdict, "H200", "Trainium")


@pytest.mark.parametrize(
    "gpu_metric, core_metric, other",
    [("gpu_sm_pct", "te_pct", "SM activity"), ("gpu_tensor_pct", "core_busy_pct", "neuron-monitor")],
)
def test_small_batch_util_is_not_testable_unless_both_sides_measure_the_tensor_units(gpu_metric, core_metric, other):
    found = judge(throughput.small_batch_util, utils([40.0] * 3, [10.0] * 3, gpu_metric, core_metric))
    check(found, "not testable here")
    assert other in found.reason
