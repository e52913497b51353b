"""Each rule, fed the study's own published figures (Experiment/published/*.csv) as records of bert-base on the
study's devices, reaches what the study concluded, or the page says where its figures and its text part ways.

The study's figures are one run a cell with no stated spread: a rule comparing arms of runs finds no spread
between runs in them and is inconclusive, and the claim's published text says so."""

from __future__ import annotations

import pytest

from study.claims import recipe, speedup, throughput, trn1
from study.published import published
from tests.study.claims.claim_records import PUB, judge, rec

ITS_OWN = "on its own figures"  # how a published text says what the study's figures reach under the rule


def inconclusive_and_said(found) -> None:
    assert found.verdict == "inconclusive", (found.verdict, found.reason)
    assert f"{ITS_OWN} this rule is inconclusive" in found.published, found.published


def test_batch_scaling_on_the_studys_figures_is_a_single_run_each():
    # at fixed shapes samples/s is TFLOP/s over a constant: 12 -> 24 TFLOP/s is 2x the samples/s, one run each
    recs = [
        rec("trn1", "batch_scaling", {"batch": int(r.batch)}, samples_per_s=float(r.achieved_tflops))
        for r in published("roofline.csv", PUB).itertuples()
    ]
    inconclusive_and_said(judge(throughput.batch_scaling, recs))


def test_seq_len_on_the_studys_figures_and_the_cliff_its_step_times_do_not_show():
    recs = [
        rec("trn1", "seq_len", {"max_length": int(r.max_length), "batch": 8}, samples_per_s=8e3 / float(r.step_time_ms))
        for r in published("seq_len_profile.csv", PUB).itertuples()
    ]
    found = judge(throughput.seq_len, recs)
    inconclusive_and_said(found)
    assert "4.06x the FLOPs (the study: 4x) in 2.09x the time" in found.published
    assert "no 'spilling cliff' shows" in found.published


def test_optlevel_on_the_studys_figures():
    pub = published("compiler_flags.csv", PUB)
    recs = [
        rec(
            "trn1",
            "compiler_flags",
            {"optlevel": int(r.optlevel), "distribution_strategy": r.distribution_strategy},
            train_s=float(r.train_time_s),
        )
        for r in pub[pub["distribution_strategy"] == "llm-training"].itertuples()
    ]
    inconclusive_and_said(judge(trn1.optlevel, recs))


def test_stochastic_rounding_on_the_studys_figures():
    recs = [
        rec(
            "trn1",
            "precision",
            {
                "precision": "bf16-pure-sr" if r.stochastic_rounding == "on" else "bf16-pure",
                "max_length": int(r.max_length),
                "seed": 1,
            },
            test_acc=float(r.accuracy),
        )
        for r in published("stochastic_rounding.csv", PUB).itertuples()
    ]
    found = judge(recipe.stochastic_rounding, recs)
    inconclusive_and_said(found)
    assert "did not learn" not in found.reason
    assert "+0.25 accuracy points at L=16, -0.25 at L=32" in found.published  # the unit beside the figures


def test_lr_llrd_on_the_studys_figures():
    pub = published("lr_llrd.csv", PUB)
    cells = pub[pub["lr"].isin(["2e-5", "1.5e-4"]) & pub["llrd_decay"].isin(["", "0.95"])]
    recs = [
        rec(
            "trn1",
            "lr_llrd",
            {"lr": float(r.lr), **({"llrd_decay": float(r.llrd_decay)} if r.llrd_decay else {}), "seed": 1},
            test_acc=float(r.accuracy),
        )
        for r in cells.itertuples()
    ]
    found = judge(recipe.lr_llrd, recs)
    inconclusive_and_said(found)
    assert "+1.75 points" in found.published


@pytest.mark.parametrize(
    "gpu_metric, verdict", [("gpu_sm_pct", "not testable here"), ("gpu_tensor_pct", "inconclusive")]
)
def test_small_batch_util_on_the_studys_figures(gpu_metric, verdict):
    # the study set the A100's SM utilization against the tensor engine's: unlike figures; read as tensor-pipe
    # figures, one run each
    recs = [
        r
        for p in published("small_batch_util.csv", PUB).itertuples()
        for r in (
            rec("a100", "small_batch", {"batch": int(p.batch)}, **{gpu_metric: float(p.a100_sm_util_pct)}),
            rec("trn1", "small_batch", {"batch": int(p.batch)}, te_pct=float(p.trn_tensor_engine_util_pct)),
        )
    ]
    found = judge(throughput.small_batch_util, recs)
    assert found.verdict == verdict, found.reason
    assert f"{ITS_OWN} this rule is inconclusive, and it set SM utilization against" in found.published


def test_dma_bound_on_the_studys_figures_holds():
    te = float(published("roofline.csv", PUB).iloc[0]["tensor_engine_active_pct"])  # §3.2: DMA active > 80%
    found = judge(trn1.dma_bound, [rec("trn1", "profile_memory", {"batch": 8}, dma_pct=80.0, te_pct=te)])
    assert found.verdict == "holds", found.reason


@pytest.mark.parametrize("device, name", [("trn1", "trn1"), ("t4", "T4"), ("l4", "L4"), ("a100", "A100")])
def test_speedup_on_the_studys_figures(device, name):
    r = published("speedup.csv", PUB).set_index("device").loc[name]
    recs = [
        rec(device, "speedup", {"preset": p}, train_s=float(r[f"{p}_train_time_s"])) for p in ("baseline", "optimized")
    ]
    found = judge(speedup.speedup, recs)
    inconclusive_and_said(found)
    assert f"{float(r['speedup']):.2f}x" in found.headline  # its own ratio, inside its own band


def test_the_cost_ranking_on_the_studys_times_and_what_our_prices_make_of_it():
    pub = published("cost.csv", PUB)
    order = list(pub.assign(usd=pub["cost_for_task_usd"].astype(float)).sort_values("usd")["device"])
    assert order == ["L4", "trn1", "A100", "T4"]  # statements.csv: "L4 is cheapest, then trn1, the A100 and the T4"
    times = published("speedup.csv", PUB).set_index("device")["optimized_train_time_s"].astype(float)
    recs = [
        rec(d, "speedup", {"preset": "optimized"}, train_s=times[n])
        for d, n in (("trn1", "trn1"), ("a100", "A100"), ("t4", "T4"))
    ]
    found = judge(speedup.cost_ranking, recs)
    inconclusive_and_said(found)
    # the study priced the A100 at $3.435/h ("Average"); one of p4d.24xlarge's 8 costs $2.745/h
    assert "A100 $0.0298 < trn1 $0.0307" in found.published and "$3.435/h printed" in found.published


def test_allreduce_on_the_studys_figures():
    gbps = published("seq_len_profile.csv", PUB).set_index("max_length")["allreduce_gbps"].astype(float)
    assert gbps["32"] / gbps["128"] == pytest.approx(1.5)  # the 50% the study states
    recs = [
        rec("trn1", "scaling", {"num_devices": 2, "max_length": int(L)}, allreduce_s=1 / bw) for L, bw in gbps.items()
    ]
    found = judge(trn1.allreduce, recs)
    inconclusive_and_said(found)
    assert "1.50x the bandwidth at L=32" in found.headline


def test_padding_77h_host_memory_and_gradient_checkpointing_on_the_studys_account():
    static_s = float(published("speedup.csv", PUB).set_index("device").at["trn1", "baseline_train_time_s"])
    padding = [
        rec("trn1", "padding", {"padding": "static"}, train_s=static_s),
        rec("trn1", "padding", {"padding": "dynamic"}, train_s=77 * 3600.0),  # a lower bound
    ]
    inconclusive_and_said(judge(trn1.padding_77h, padding))
    oom = [rec("trn1", "batch_scaling", {"batch": 64}, status="oom")]  # §3.3 without the 90 GB swap
    assert judge(trn1.host_memory, oom).verdict == "holds"
    failed = [rec("trn1", "adhoc", {"batch": 8, "gradient_checkpointing": True}, status="failed")]
    assert judge(trn1.gradient_checkpointing, failed).verdict == "holds"
