"""Every claim of the findings table reaches each of its verdicts on hand-made records (tests/record_fixtures.py),
and its measured-evidence text names the device, the variant and the run count."""
from __future__ import annotations

import pytest

from helpers.run import records
from helpers.study.claims import rules as claims
from helpers.study.claims import rules_trn1 as claims_trn1
from helpers.study.claims import findings
from helpers.study.claims.evidence import VERDICTS, Finding
from helpers.study.report.frame import frame
from tests.record_fixtures import record

PUB = "Experiment/published"
MODEL = {"quick": "minilm", "full": "bert-base-uncased"}
NAMES = {"a100": "A100", "t4": "T4", "trn1": "Trainium", "cpu": "Xeon", "xla-cpu": "XLA CPU"}


@pytest.fixture(autouse=True)
def no_library_versions(monkeypatch):
    """Skip reading installed packages' metadata for every fixture record (most of a record's cost)."""
    monkeypatch.setattr(records, "library_versions", lambda: {})


def run(device: str, suite: str, params: dict, variant: str = "full", ai: float | None = None,
        util: float | None = None, shares: dict | None = None, like_study: bool = False, **figures) -> dict:
    """Return a fixture record of one run of `suite`'s `variant` on `device` with these params and figures."""
    params = {"model_name": MODEL[variant], **params}
    name = f"{suite}-{variant}-" + "-".join(f"{k}{v}" for k, v in sorted(params.items()) if k != "model_name")
    extra = {}
    if "precision" in params:  # what the run used, as the run path records it
        extra["precision"] = {"requested": params["precision"], "used": params["precision"],
                              "compute_dtype": "bf16", "mechanism": "fixture"}
    if ai is not None:
        extra["systems"] = {"arithmetic_intensity": ai, "achieved_tflops": 1.0}
    if util is not None and like_study:  # tensor units on both sides: GPM tensor pipes, the tensor engine
        if device in ("a100", "t4"):
            extra["utilization"] = {"tensor_active_pct_mean": util, "sm_active_pct_mean": 95.0,
                                    "sm_util_pct_mean": 100.0}
        else:
            extra["neuron_profile"] = {"backend": "neuron-profile", "tensor_engine_active_pct": util}
    elif util is not None:  # SM activity or utilization.gpu on a GPU, neuron-monitor's busy % on a NeuronCore
        gpu = device in ("a100", "t4")
        extra["utilization"] = {"sm_active_pct_mean": util, "sm_util_pct_mean": 100.0} if gpu \
            else {"neuroncore_util_pct_mean": util}
    if shares is not None:
        extra["profile"] = {"class_share": shares}
    return record(device, suite, params, run_name=name, **extra, **figures)


def judge(claim, recs: list[dict]) -> Finding:
    """Return a claim's finding on the frame of these records."""
    return claim(frame(recs), PUB)


def check(found: Finding, verdict: str, device: str | None = None, variant: str = "full", runs: int | None = None):
    """Assert the verdict, and that the measured text names the device, the variant and the run count."""
    assert found.verdict == verdict, (found.verdict, found.reason, found.measured)
    if device:
        assert NAMES[device] in found.measured and variant in found.measured, found.measured
    if runs:
        assert f"{runs} run" in found.measured, found.measured


def batches(device: str, rates: list[float], variant: str = "full") -> list[dict]:
    return [run(device, "batch_scaling", {"batch": b}, variant, ai=50 + b, samples_per_s=s)
            for b, s in zip((8, 16, 64), rates)]


@pytest.mark.parametrize("rates, verdict", [([100, 200, 400], "holds"), ([400, 200, 100], "does not hold"),
                                            ([100, 101, 102], "inconclusive")])
def test_batch_scaling(rates, verdict):
    found = judge(claims.batch_scaling, batches("a100", rates))
    check(found, verdict, "a100", "full", 3)
    assert ("spread" in found.reason) == (verdict == "inconclusive")


def test_batch_scaling_untestable_and_proxy():
    check(judge(claims.batch_scaling, batches("a100", [100])), "not testable here", "a100", "full", 1)
    proxy = judge(claims.batch_scaling, batches("cpu", [100, 200, 400], "quick"))
    check(proxy, "consistent on proxy", "cpu", "quick", 3)
    assert "direction only, on proxy: minilm on CPU" in proxy.reason and proxy.basis.startswith("proxy")
    real = judge(claims.batch_scaling, batches("a100", [100, 200, 400]) + batches("cpu", [400, 200, 100], "quick"))
    assert real.verdict == "holds" and "Xeon" not in real.measured  # a real device outranks a proxy


@pytest.mark.parametrize("rates, verdict", [((145.0, 70.0), "holds"),  # the study's 55 vs 115 ms at batch 8
                                            ((70.0, 145.0), "does not hold"),  # L=128 the faster
                                            ((100.0, 101.0), "inconclusive"),  # within the windows' ±3%
                                            ((100.0, None), "not testable here")])
def test_seq_len_asks_whether_l32_trains_more_samples_per_second(rates, verdict):
    recs = [run("trn1", "seq_len", {"max_length": L, "batch": 64}, samples_per_s=s)
            for L, s in zip((32, 128), rates) if s]
    found = judge(claims.seq_len, recs)
    check(found, verdict, "trn1" if rates[1] else None, "full", 2 if rates[1] else None)
    if rates[1]:
        assert "the FLOPs at L=128 (model)" in found.measured and "x the samples/s" in found.headline
    assert "no 'spilling cliff' shows in the step times" in found.published  # the study's figures vs its words


def padding_runs(device: str, dynamic: tuple[int, float], variant: str = "full", multiple: int | None = 16):
    static = run(device, "padding", {"padding": "static"}, variant, compilations=1, train_s=100.0)
    params = {"padding": "dynamic"} | ({"pad_to_multiple_of": multiple} if multiple else {})
    return [static, run(device, "padding", params, variant, compilations=dynamic[0], train_s=dynamic[1])]


@pytest.mark.parametrize("dynamic, verdict", [((40, 1000.0), "holds"), ((1, 1000.0), "does not hold"),
                                              ((40, 70.0), "does not hold"), ((40, 101.0), "inconclusive")])
def test_padding(dynamic, verdict):
    check(judge(claims.padding, padding_runs("trn1", dynamic)), verdict, "trn1", "full", 2)


def test_padding_needs_xla():
    found = judge(claims.padding, padding_runs("a100", (1, 100.0)))
    check(found, "not testable here", "a100", "full", 2)
    proxy = judge(claims.padding, padding_runs("xla-cpu", (5, 300.0), "quick", 8))
    check(proxy, "consistent on proxy", "xla-cpu", "quick", 2)
    assert "on proxy: minilm on XLA on the CPU" in proxy.reason


@pytest.mark.parametrize("hours, verdict", [(77.0, "holds"), (0.1, "does not hold")])
def test_padding_77h(hours, verdict):
    found = judge(claims_trn1.padding_77h, padding_runs("trn1", (900, hours * 3600), multiple=None))
    check(found, verdict, "trn1", "full", 2)


def test_padding_77h_needs_trn1_full():
    found = judge(claims_trn1.padding_77h, padding_runs("xla-cpu", (5, 1e6), "quick", None))
    check(found, "not testable here", "xla-cpu", "quick", 2)


def flags(device: str, times: dict[int, float], variant: str = "full") -> list[dict]:
    return [run(device, "compiler_flags", {"optlevel": level, "distribution_strategy": "llm-training"}, variant,
                train_s=t) for level, t in times.items()]


@pytest.mark.parametrize("times, verdict", [({1: 132.0, 2: 120.0, 3: 118.0}, "holds"),
                                            ({1: 132.0, 2: 150.0, 3: 118.0}, "does not hold"),
                                            ({1: 132.0, 2: 130.0, 3: 129.0}, "inconclusive")])
def test_optlevel(times, verdict):
    check(judge(claims_trn1.optlevel, flags("trn1", times)), verdict, "trn1", "full", 3)


def test_optlevel_needs_neuron():
    found = judge(claims_trn1.optlevel, flags("xla-cpu", {1: 132.0, 2: 100.0}, "quick"))
    check(found, "not testable here", "xla-cpu", "quick", 2)
    assert "neuronx-cc" in found.reason


def precision_runs(device: str, effects: dict[int, float], variant: str = "full") -> list[dict]:
    """Five seeds per length: bf16-pure at a base accuracy, bf16-pure-sr shifted by the length's effect ± noise."""
    recs = []
    for length, effect in effects.items():
        for seed, noise in zip(range(1, 6), (0.0, 0.004, -0.004, 0.002, -0.002)):
            base = 0.80 + seed / 100
            recs.append(run(device, "precision", {"precision": "bf16-pure", "max_length": length, "seed": seed},
                            variant, test_acc=base))
            recs.append(run(device, "precision", {"precision": "bf16-pure-sr", "max_length": length, "seed": seed},
                            variant, test_acc=base + effect + noise))
    return recs


@pytest.mark.parametrize("effects, verdict", [({16: 0.02, 32: -0.02}, "holds"),
                                              ({16: -0.02, 32: -0.02}, "does not hold"),
                                              ({16: 0.0, 32: -0.02}, "inconclusive")])
def test_stochastic_rounding(effects, verdict):
    found = judge(findings.stochastic_rounding, precision_runs("a100", effects))
    check(found, verdict, "a100", "full", 20)
    assert ("resolve an SR effect of ±" in found.reason) == (verdict == "inconclusive")
    assert "did not learn" not in found.reason


def test_stochastic_rounding_on_an_arm_that_did_not_learn_is_inconclusive_and_names_it():
    # the effects that hold above, with round-to-nearest 30 points under SR at L=16: a baseline that did not learn
    recs = precision_runs("a100", {16: 0.30, 32: -0.02})
    found = judge(findings.stochastic_rounding, recs)
    assert found.verdict == "inconclusive", found.reason
    assert found.reason.startswith("an arm did not learn: bf16-pure L=16"), found.reason
    assert "5 points below" in found.reason and "bf16-pure-sr L=16" not in found.reason.split(" below")[0]


def test_stochastic_rounding_with_different_optimizers_says_so():
    recs = precision_runs("a100", {16: 0.02, 32: -0.02})
    for r in recs:
        r["optimizer"] = {"class": "torchao.optim.adam._AdamW" if r["params"]["precision"] == "bf16-pure-sr"
                          else "torch.optim.adamw.AdamW"}
    found = judge(findings.stochastic_rounding, recs)
    assert found.verdict == "inconclusive"
    assert "the arms use different optimizers" in found.reason and "torchao" in found.reason


def test_stochastic_rounding_untestable_and_proxy():
    only_pure = [r for r in precision_runs("a100", {16: 0.05}) if r["params"]["precision"] == "bf16-pure"]
    check(judge(findings.stochastic_rounding, only_pure), "not testable here", "a100", "full", 5)
    proxy = judge(findings.stochastic_rounding, precision_runs("cpu", {16: 0.02, 32: -0.02}, "quick"))
    check(proxy, "consistent on proxy", "cpu", "quick", 20)
    assert "on proxy: minilm on CPU" in proxy.reason


def llrd_runs(device: str, accs: dict[tuple[float, float | None], list[float]], variant: str = "full") -> list[dict]:
    """Return runs of the lr x LLRD 2x2: accuracy per seed for each (lr, llrd_decay) cell given."""
    return [run(device, "lr_llrd", {"lr": lr, **({"llrd_decay": d} if d else {}), "seed": seed}, variant, test_acc=acc)
            for (lr, d), values in accs.items() for seed, acc in enumerate(values, 1)]


def grid(lo_none, lo_llrd, hi_none, hi_llrd) -> dict:
    return {(2e-5, None): lo_none, (2e-5, 0.95): lo_llrd, (1.5e-4, None): hi_none, (1.5e-4, 0.95): hi_llrd}


@pytest.mark.parametrize("accs, verdict", [
    (grid([0.90, 0.902], [0.93, 0.932], [0.92, 0.922], [0.95, 0.952]), "holds"),  # tuned 5 points up
    (grid([0.93, 0.932], [0.92, 0.922], [0.91, 0.912], [0.90, 0.902]), "does not hold"),  # tuned 3 points down
    (grid([0.92, 0.93], [0.92, 0.93], [0.92, 0.93], [0.925, 0.935]), "inconclusive"),  # within the seeds' noise
    (grid([0.35, 0.36], [0.91, 0.92], [0.91, 0.92], [0.91, 0.92]), "inconclusive")])  # the baseline learned nothing
def test_lr_llrd_tests_the_studys_tuned_against_baseline(accs, verdict):
    found = judge(findings.lr_llrd, llrd_runs("trn1", accs))
    check(found, verdict, "trn1", "full", 8)
    assert "ours: LLRD's effect apart from the lr" in found.measured
    if min(accs[2e-5, None]) < 0.5:
        assert found.reason.startswith("an arm did not learn: lr 2e-5 without LLRD"), found.reason


def test_lr_llrd_shows_llrd_apart_from_the_lr_as_ours_and_never_credits_it():
    # the study's own pattern: the tuned corner is higher, all of it the learning rate's
    found = judge(findings.lr_llrd, llrd_runs("trn1", grid([0.90, 0.902], [0.90, 0.902], [0.94, 0.942],
                                                           [0.94, 0.942])))
    assert found.verdict == "holds"
    assert "LLRD's effect apart from the lr +0.00 points" in found.measured
    assert "credited to LLRD" not in found.published and "(ours)" in found.published


def test_lr_llrd_untestable_without_both_corners():
    corners = llrd_runs("a100", {(2e-5, None): [0.9], (1.5e-4, None): [0.94]})
    check(judge(findings.lr_llrd, corners), "not testable here", "a100", "full", 2)


def util_runs(device: str, utils: list[float], variant: str = "full", like_study: bool = True) -> list[dict]:
    return [run(device, "small_batch", {"batch": b, "seed": seed}, variant, util=u, like_study=like_study)
            for b in (2, 4, 8) for seed, u in enumerate(utils, 1)]


@pytest.mark.parametrize("gpu, core, verdict", [([40.0], [10.0], "holds"), ([20.0], [60.0], "does not hold"),
                                                ([30.0, 40.0], [35.0, 45.0], "inconclusive")])
def test_small_batch_util(gpu, core, verdict):
    found = judge(claims.small_batch_util, util_runs("a100", gpu) + util_runs("trn1", core))
    check(found, verdict, "a100", "full", 3 * len(gpu))
    assert "Trainium" in found.measured and "tensor pipes" in found.measured
    assert "tensor engine" in found.measured


@pytest.mark.parametrize("gpu_like, core_like", [(False, True), (True, False), (False, False)])
def test_small_batch_util_is_not_testable_unless_both_sides_measure_the_studys_figure(gpu_like, core_like):
    # the same numbers that hold like for like: SM activity (SMs busy with any work, not the tensor pipes) or
    # neuron-monitor's busy % on either side is another figure, and no verdict comes from it
    found = judge(claims.small_batch_util, util_runs("a100", [40.0], like_study=gpu_like)
                  + util_runs("trn1", [10.0], like_study=core_like))
    assert found.verdict == "not testable here"
    assert "SM activity" in found.reason if not gpu_like else "neuron-monitor" in found.reason


def test_small_batch_util_needs_both_classes():
    found = judge(claims.small_batch_util, util_runs("a100", [40.0]) + util_runs("cpu", [10.0]))
    check(found, "not testable here", "a100", "full", 3)  # a CPU cannot stand in for a NeuronCore


@pytest.mark.parametrize("shares, verdict", [({"copy_data_movement": 0.5, "matmul": 0.2}, "holds"),
                                             ({"copy_data_movement": 0.1, "matmul": 0.6}, "does not hold")])
def test_dma_bound(shares, verdict):
    found = judge(claims_trn1.dma_bound, [run("trn1", "profile_memory", {"batch": 8}, shares=shares)])
    check(found, verdict, "trn1", "full", 1)


def test_dma_bound_needs_trn1_profile():
    found = judge(claims_trn1.dma_bound, [run("a100", "profile_memory", {"batch": 8}, shares={"matmul": 0.2})])
    check(found, "not testable here")
    assert "neuron-profile" in found.reason


def presets(device: str, baseline_s: float, optimized_s: float, variant: str = "full") -> list[dict]:
    return [run(device, "speedup", {"preset": "baseline"}, variant, train_s=baseline_s),
            run(device, "speedup", {"preset": "optimized"}, variant, train_s=optimized_s)]


@pytest.mark.parametrize("device, baseline_s, verdict", [("a100", 727.0, "holds"), ("trn1", 551.0, "holds"),
                                                         ("t4", 372.0, "holds"), ("a100", 200.0, "does not hold")])
def test_speedup(device, baseline_s, verdict):
    check(judge(findings.speedup, presets(device, baseline_s, 100.0)), verdict, device, "full", 2)


def test_speedup_proxy_is_not_testable():
    found = judge(findings.speedup, presets("cpu", 700.0, 100.0, "quick"))
    check(found, "not testable here", "cpu", "quick", 2)
    assert "minilm on CPU" in found.reason and "direction only" in found.measured


@pytest.mark.parametrize("trn1_s, verdict", [(60.0, "holds"), (400.0, "does not hold"), (82.0, "inconclusive")])
def test_cost_ranking(trn1_s, verdict):
    recs = [run("trn1", "speedup", {"preset": "optimized"}, train_s=trn1_s),
            run("a100", "speedup", {"preset": "optimized"}, train_s=40.0),
            run("t4", "speedup", {"preset": "optimized"}, train_s=367.0)]
    found = judge(findings.cost_ranking, recs)
    check(found, verdict, "trn1", "full", 1)
    assert "A100" in found.measured and "T4" in found.measured


def test_cost_ranking_needs_two_study_devices():
    found = judge(findings.cost_ranking, [run("a100", "speedup", {"preset": "optimized"}, train_s=40.0)])
    check(found, "not testable here", "a100", "full", 1)


def test_allreduce_is_not_testable_even_with_trn1_scaling():
    recs = [run("trn1", "scaling", {"num_devices": n}) for n in (1, 2)]
    check(judge(claims_trn1.allreduce, recs), "not testable here", "trn1", "full", 2)


@pytest.mark.parametrize("device, status, verdict", [("trn1", "failed", "holds"), ("trn1", "finished", "does not hold"),
                                                     ("a100", "finished", "not testable here")])
def test_gradient_checkpointing(device, status, verdict):
    recs = [run(device, "batch_scaling", {"gradient_checkpointing": True, "batch": 64}, status=status)]
    check(judge(claims_trn1.gradient_checkpointing, recs), verdict, device, "full", 1)


@pytest.mark.parametrize("status, verdict", [("oom", "holds"), ("finished", "does not hold")])
def test_host_memory_measured(status, verdict):
    recs = [run("trn1", "batch_scaling", {"batch": 64}, status=status, memory={"host_peak_rss_gib": 20.0})]
    check(judge(claims_trn1.host_memory, recs), verdict, "trn1", "full", 1)


def test_host_memory_is_never_proxied_and_its_estimate_decides_nothing():
    found = judge(claims_trn1.host_memory, [run("cpu", "batch_scaling", {"batch": 64}, "quick", status="oom")])
    check(found, "not testable here")
    assert found.reason.startswith("needs a trn1 record") and found.measured.startswith("model, decides nothing")


def test_findings_table_and_markdown():
    tokens = run("cpu", "token_lengths", {}, "quick")
    del tokens["params"]["batch"], tokens["params"]["max_length"]  # a record without them: None in the frame
    recs = batches("a100", [100, 200, 400]) + presets("cpu", 700.0, 100.0, "quick") + [tokens]
    table = findings.findings(frame(recs), PUB)
    assert len(table) == len(findings.CLAIMS) and set(table["verdict"]) <= set(VERDICTS)
    text = findings.markdown(table).strip().splitlines()
    assert text[0] == findings.QUESTION
    counts = next(line for line in text if line.startswith("Of "))
    assert counts.startswith(f"Of {len(findings.CLAIMS)} claims, on records of the claim's own kind 1 hold and "
                             "0 do not hold; on proxies (direction only) 0 are consistent")
    empty = findings.findings(frame([]), PUB)
    assert set(empty["verdict"]) == {"not testable here"}
    with pytest.raises(ValueError):
        Finding("c", "p", "m", "maybe", "r")


@pytest.mark.parametrize("basis, verdict, graded", [
    ("measured", "holds", "holds"), ("measured", "does not hold", "does not hold"),
    ("proxy (direction only)", "holds", "consistent on proxy"),
    ("proxy (direction only)", "does not hold", "contradicted on proxy"),
    ("estimate", "holds", "consistent with the model"), ("estimate", "does not hold", "contradicted by the model"),
    ("proxy (direction only)", "inconclusive", "inconclusive")])
def test_a_verdict_carries_the_grade_of_its_evidence(basis, verdict, graded):
    assert Finding("c", "p", "m", verdict, "r", basis=basis).verdict == graded


def repeated(device: str, batch: int, rates: list[float], tflops: float | None = None) -> list[dict]:
    """Return independent runs (told apart by seed) of one batch_scaling cell with these samples/s (and MFU
    in proportion, as a fixed FLOP count per sample gives, unless `tflops` is given)."""
    def systems(rate: float) -> dict:
        achieved = rate / 100 if tflops is None else tflops
        return {"arithmetic_intensity": 50.0 + batch, "achieved_tflops": achieved, "mfu": achieved / 312,
                "peak_tflops": 312.0}
    return [run(device, "batch_scaling", {"batch": batch, "seed": i}, samples_per_s=s, systems=systems(s))
            for i, s in enumerate(rates, 1)]


@pytest.mark.parametrize("small, large, verdict", [
    ([100, 102, 98], [200, 205, 195], "holds"),        # apart beyond the range between runs
    ([100, 160, 60], [120, 130, 125], "inconclusive"),  # the windows (±3%) would call it; the runs' range does not
    ([200, 205, 195], [100, 102, 98], "does not hold")])
def test_batch_scaling_with_three_runs_a_cell_is_judged_on_the_range_between_runs(small, large, verdict):
    recs = repeated("a100", 8, small) + repeated("a100", 16, [150] * 3) + repeated("a100", 64, large)
    check(judge(claims.batch_scaling, recs), verdict, "a100", "full", 9)


def test_batch_scaling_rests_on_samples_per_s_alone_and_flop_per_byte_decides_nothing():
    recs = repeated("a100", 8, [100] * 3, tflops=2.0) + repeated("a100", 16, [150] * 3) \
        + repeated("a100", 64, [200] * 3, tflops=1.0)  # MFU is no second test: samples/s rose beyond the range
    found = judge(claims.batch_scaling, recs)
    assert found.verdict == "holds" and "(model, decides nothing)" in found.measured and "MFU" not in found.measured


def test_every_claim_row_says_what_the_study_says_and_where():
    table = findings.findings(frame([]), PUB)
    assert table["study"].str.match(r"§\d").all(), table["study"].tolist()
    assert not table["study"].str.contains("published, the study's text|not located").any()
    gc = table[table["claim"] == "Gradient checkpointing fails on Trainium"]["study"].iloc[0]
    assert "seems AWS does not implement this feature" in gc  # the study's words, not a paraphrase
    assert "3.72x" in table[table["claim"].str.startswith("The optimized configuration")]["study"].iloc[0]


@pytest.mark.parametrize("key", findings.TRN1_INTERNALS)
def test_a_trn1_internal_is_never_proxied(key):
    recs = (flags("xla-cpu", {1: 132.0, 2: 100.0, 3: 90.0}, "quick") + padding_runs("xla-cpu", (5, 1e6), "quick", None)
            + util_runs("a100", [40.0]) + util_runs("cpu", [10.0], "quick")
            + [run("xla-cpu", "profile_memory", {"batch": 8}, "quick", shares={"copy_data_movement": 0.5, "matmul": 0.2}),
               run("cpu", "batch_scaling", {"batch": 64, "gradient_checkpointing": True}, "quick", status="oom")])
    claim = next(c for c in findings.CLAIMS if c.__name__ == key)
    found = judge(claim, recs)
    assert found.verdict == "not testable here", (found.verdict, found.reason)
    assert found.reason.startswith("needs a trn1 record"), found.reason


def drifting(small: list[float], large: list[float], rep: bool) -> list[dict]:
    """Return batch_scaling runs at batch 8 and 64 (named as repeats or as seeds) and a configuration that two
    other suites timed 20% apart on the same device: the machine's drift between suites."""
    recs = []
    for batch, rates in ((8, small), (64, large)):
        for i, rate in enumerate(rates, 1):
            name = f"batch_scaling-full-b{batch}" + (f"-rep{i}" if rep and i > 1 else f"-s{i}")
            recs.append(run("a100", "batch_scaling", {"batch": batch, "seed": 1 if rep else i}, samples_per_s=rate)
                        | {"run_name": name})
    for suite, rate in (("small_batch", 100.0), ("seq_len", 120.0)):
        recs += [run("a100", suite, {"batch": 32, "seed": i}, samples_per_s=rate) | {"run_name": f"{suite}-x-{i}"}
                 for i in (1, 2, 3)]
    return recs


@pytest.mark.parametrize("rep, verdict", [(True, "holds"), (False, "inconclusive")])
def test_a_timing_verdict_resolves_beyond_the_drift_unless_its_arms_ran_interleaved(rep, verdict):
    # 10% faster beyond the range between runs: enough when the repeats ran interleaved, not beyond a 20% drift
    found = judge(claims.batch_scaling, drifting([100, 101, 99], [110, 111, 109], rep))
    assert found.verdict == verdict, found.reason
    if not rep:
        assert "drift between suites (20.0%)" in found.reason


def test_the_summary_number_is_the_comparison_that_decided_the_verdict():
    found = judge(claims.batch_scaling, batches("a100", [100, 200, 400]) + batches("t4", [100, 101, 102]))
    assert found.verdict == "inconclusive" and found.headline.startswith("Tesla T4: 1.02x"), found.headline
    both = judge(claims.batch_scaling, batches("a100", [100, 200, 400]) + batches("t4", [100, 150, 300]))
    assert both.verdict == "holds" and both.headline.startswith("A100"), both.headline
