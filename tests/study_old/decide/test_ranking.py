"""helpers/study/decide/ranking.py: which record stands for a device, the decision table's seconds, dollars,
energy and marks, and break-even epochs, from tests/study/decide/job_records.py."""

import math

import pandas as pd
import pytest

from helpers.calc import job_cost
from helpers.run import records
from helpers.study import frame
from helpers.study.decide import ranking
from tests.record_fixtures import DEVICES, record, write
from tests.study.decide.job_records import A100_USD_H, CPU_USD_H, FULL, OPTIMIZED, TRN1, TRN1_USD_H, df, results, row_of  # noqa: F401


def test_representative_rule_prefers_the_optimized_run_over_all_rows(df):
    chosen = ranking.representative(df).set_index("device_key")
    assert chosen.loc[DEVICES["a100"]["key"], "run_name"] == FULL
    assert chosen.loc[DEVICES["a100"]["key"], "rule"] == "speedup suite, optimized preset, all rows"
    assert chosen.loc[DEVICES["cpu"]["key"], "rule"] == "speedup suite, optimized preset, subset (quick)"
    assert len(chosen) == 4


def test_decision_rows_match_hand_computed_values(df):
    table = ranking.decision(df, ranking.Job(epochs=3, rows=16_000, target_accuracy=0.94, shared_instance=True))
    trn1, a100 = row_of(table, "Trainium"), row_of(table, "A100")
    # trn1: one-off = first step (2 + 300 s) - steady step 0.08 s = 301.92 s > compile 300 s; 20 s/epoch
    assert trn1["one_off_s"] == pytest.approx(301.92)
    assert trn1["epoch_s"] == pytest.approx(16_000 / 800)
    assert trn1["job_s"] == pytest.approx(301.92 + 3 * 20)
    assert trn1["job_usd"] == pytest.approx((301.92 + 60) / 3600 * TRN1_USD_H)
    assert trn1["instance"] == "trn1.2xlarge" and trn1["energy"] == "not measured"
    # A100 eager: one-off = 2 - 0.08 s of first-step warm-up, 13.33 s/epoch; energy 48,000 samples at the
    # record's 1200 samples/s / 260 W = 4.6 samples per joule over its steady windows
    assert a100["job_s"] == pytest.approx(1.92 + 3 * 16_000 / 1200)
    assert a100["job_usd"] == pytest.approx((1.92 + 40) / 3600 * A100_USD_H)
    assert a100["energy"] == "10.4 kJ (measured)"
    # time to 94%: half an epoch after the one-off
    assert trn1["target_s"] == pytest.approx(301.92 + 0.5 * 20)
    assert a100["target"] == f"{1.92 + 0.5 * 16_000 / 1200:.4g} s (0.50 epochs)"
    # CPU: priced on the 2-vCPU stand-in; never reached 94% in the 1,280 rows it saw
    cpu = row_of(table, "^Xeon", "proxy")  # the CPU stands in for the study's job: a proxy row
    assert cpu["instance"] == "m6i.large" and cpu["usd_per_h"] == CPU_USD_H
    assert cpu["target"] == "not reached in 1 epoch (best 60.0%)" and math.isnan(cpu["target_s"])
    assert row_of(table, "XLA", "proxy")["one_off_s"] == pytest.approx(2 + 50 - 0.08)  # first step, compile inside
    # published rows beside, the L4 priced on g6.xlarge with the study's price kept
    l4 = row_of(table, "L4", "published")
    assert (l4["instance"], l4["published_usd_per_h"]) == ("g6.xlarge", 0.576)
    assert row_of(table, "trn1", "published")["one_off_s"] == pytest.approx(301.92)  # from the trn1 record
    # marks only among rows of one configuration: the CPU and XLA-on-CPU ran bert-base b64 L32 fp32 over 1,280
    # rows; trn1, the A100 and the study's four its optimized run in bf16 over 16,000
    assert cpu["mark"] == "cheapest of 2 (proxy); fastest of 2 (proxy)" and row_of(table, "XLA", "proxy")["mark"] == ""
    assert cpu["setup"] == "bert-base-uncased, b64, L32, fp32, 1,280 rows"
    assert a100["setup"] == trn1["setup"] == l4["setup"] == "bert-base-uncased, b64, L32, bf16, 16,000 rows"
    assert "of 2" not in a100["mark"] and "of 2" not in trn1["mark"]


def test_a_single_user_pays_the_whole_instance_unless_the_job_shares_it(df):
    whole = row_of(ranking.decision(df, ranking.Job()), "A100")
    shared = row_of(ranking.decision(df, ranking.Job(shared_instance=True)), "A100")
    assert whole["usd_per_h"] == 21.96 and shared["usd_per_h"] == pytest.approx(21.96 / 8)
    assert whole["job_usd"] == pytest.approx(8 * shared["job_usd"])  # one A100 of a p4d.24xlarge, alone
    page = ranking.markdown(
        t := ranking.decision(df, ranking.Job()), ranking.break_even(t, ranking.Job()), ranking.Job()
    )
    assert "p4d.24xlarge: whole $21.96/h, shared $2.745/h" in page and "priced at the whole instance" in page


def test_a_mark_needs_two_rows_of_the_same_job(df):
    alone = df[df["device"].str.contains("A100") & (df["train_subset"].isna())]
    table = ranking.decision(alone, ranking.Job(model="bert-base-uncased"))
    assert row_of(table, "A100", "published")["mark"] == "fastest of 5 (published)"  # the A100 and the study's four
    assert "of 5" in row_of(table, "L4", "published")["mark"]
    cpu_only = ranking.decision(df[df["device_type"] == "cpu"], ranking.Job())
    assert row_of(cpu_only, "Xeon", "proxy")["mark"] == ""  # the only row over 1,280 rows: nothing to be cheapest among


def test_a_model_or_lora_rank_without_records_says_no_record(df):
    job = ranking.Job(model="roberta-base", lora_r=8)
    table = ranking.decision(df, job)
    assert table.empty and "No record for roberta-base, LoRA r=8" in ranking.markdown(
        table, ranking.break_even(table, job), job
    )
    assert len(ranking.decision(df, ranking.Job(model="bert-base-uncased"))) == len(ranking.decision(df, ranking.Job()))


def test_a_hub_models_random_configuration_answers_for_its_speed():
    runs = frame.frame([record("cpu", None, {"model_name": m}, run_name=m) for m in ("bert-base-random", "minilm")])
    kept = runs["run_name"][ranking.matches(runs, ranking.Job(model="bert-base-uncased"))]
    assert kept.tolist() == ["bert-base-random"]
    assert not ranking.matches(runs, ranking.Job(model="bert-large-uncased")).any()


def test_runs_sharing_the_cache_split_only_the_compilation(df):
    table = ranking.decision(df, ranking.Job(runs_sharing_cache=4))
    assert row_of(table, "Trainium")["one_off_s"] == pytest.approx(301.92 / 4)
    assert row_of(table, "A100")["one_off_s"] == pytest.approx(1.92)  # CUDA warm-up is paid by every run
    assert row_of(ranking.decision(df, ranking.Job(warm_cache=True)), "Trainium")["one_off_s"] == 0.0


def test_target_beyond_the_job_is_not_reached(df):
    table = ranking.decision(df, ranking.Job(epochs=0.25, target_accuracy=0.94))
    assert row_of(table, "Trainium")["target"] == "not reached in the job's 0.25 epochs (needs 0.50)"


def test_break_even_epochs_of_trn1_against_the_a100(df):
    job = ranking.Job(shared_instance=True)
    table = ranking.decision(df, job)
    breaks = ranking.break_even(table, job).set_index(["device", "against"])
    # trn1 saves (13.33 s x $2.745 - 20 s x $1.34375) / 3600 per epoch; its extra one-off repays after ~41 epochs
    one_off = (301.92 * TRN1_USD_H - 1.92 * A100_USD_H) / 3600
    saving = (16_000 / 1200 * A100_USD_H - 20 * TRN1_USD_H) / 3600
    row = breaks.loc[(TRN1, "A100-SXM4-40GB (measured)")]
    assert row["epochs"] == pytest.approx(one_off / saving) == pytest.approx(41.2, abs=0.1)
    assert row["reading"] == f"cheaper beyond {one_off / saving:.3g} epochs"
    # the study's L4 epoch costs less than trn1's: never
    assert breaks.loc[("trn1 (published)", "L4 (published)"), "reading"].startswith("never: costs ")
    # the same arithmetic on this machine: XLA-on-CPU against the CPU
    assert ("XLA CPU (Xeon @ 2.80GHz) (proxy)", "Xeon @ 2.80GHz (proxy)") in breaks.index


def test_job_energy_is_the_records_samples_per_joule_over_its_steady_windows(tmp_path):
    two = record("a100", "speedup", OPTIMIZED, samples_per_s=2400.0, run_name="ddp", fixture=False, world_size=2)
    # both GPUs of the node over the steady windows: 20 s at 2 x 260 W, 48,000 samples of both ranks
    two["energy"].update(
        joules=10_400.0,
        mean_watts=520.0,
        device_count=2,
        samples=48_000,
        samples_per_joule=48_000 / 10_400,
        whole_run={"joules": 20_000.0, "seconds": 25.0},
    )
    write(records.record_path(tmp_path, two["suite"], two["run_name"], two["device"]["key"]), two)
    table = ranking.decision(frame.load(tmp_path)[0], ranking.Job(epochs=3, rows=16_000))
    assert row_of(table, "A100")["energy"] == "10.4 kJ (measured)"  # 48,000 job samples / 4.6 samples per J


def test_without_a_trn1_record_the_compile_is_not_measured_and_a_budget_is_given():
    job = ranking.Job()
    table = ranking.decision(pd.DataFrame(), job)
    assert set(table["source"]) == {"published"}
    trn1 = row_of(table, "trn1", "published")
    assert trn1["lower_bound"] and math.isnan(trn1["one_off_s"])
    reading = ranking.break_even(table, job).set_index("against").loc["T4 (published)", "reading"]
    # T4 job $0.05365 - trn1's 3 epochs $0.03069 = $0.02296 of trn1 time at $1.34375/h = 61.5 s
    budget = job_cost.one_off_budget_s(3, 27.40 / 3600 * TRN1_USD_H, 0.0, 122.39 / 3600 * 0.526, TRN1_USD_H)
    assert budget == pytest.approx(61.5, abs=0.1)
    assert reading == (
        f"compile not measured; cheaper per epoch, so cheaper for 3 epochs if compilation takes under {budget:.4g} s"
    )


def test_break_even_compares_only_rows_of_one_configuration(df):
    job = ranking.Job()
    alike = ranking.break_even(ranking.decision(df, job), job).set_index(["device", "against"])
    # one configuration: compared (XLA on the CPU at half the CPU's samples/s costs twice as much per epoch)
    assert (
        alike.loc[("XLA CPU (Xeon @ 2.80GHz) (proxy)", "Xeon @ 2.80GHz (proxy)"), "reading"]
        == "never: costs 100% more per epoch"
    )
    xla = df["device_type"] == "xla"
    unlike = df.assign(batch=df["batch"].where(~xla, 8), max_length=df["max_length"].where(~xla, 64))
    table = ranking.decision(unlike, job)
    breaks = ranking.break_even(table, job)
    mine = breaks[breaks["device"] == "XLA CPU (Xeon @ 2.80GHz) (proxy)"]
    assert (
        len(mine) == 1 and mine["against"].iloc[0] == "no eager CPU run of bert-base-uncased, b8, L64, fp32, 1,280 rows"
    )
    assert mine["reading"].iloc[0] == "not compared: no eager run of the same configuration"
    assert math.isnan(mine["epochs"].iloc[0])


def test_no_cheapest_across_unlike_precisions(df):
    cpu = df["device_type"] == "cpu"
    bf16 = df.assign(precision=df["precision"].where(~cpu, "bf16"))  # the CPU in bf16, XLA on it in fp32
    table = ranking.decision(bf16, ranking.Job())
    assert row_of(table, "^Xeon", "proxy")["mark"] == "" and row_of(table, "XLA", "proxy")["mark"] == ""
    assert "Xeon @ 2.80GHz (proxy) is cheapest" not in ranking.markdown(
        table, ranking.break_even(table, ranking.Job()), ranking.Job()
    )


def test_the_answer_prices_one_basis_and_shows_the_other_beside_it(df):
    whole_job, shared_job = ranking.Job(), ranking.Job(shared_instance=True)
    whole = row_of(ranking.decision(df, whole_job), "A100")
    shared = row_of(ranking.decision(df, shared_job), "A100")
    assert whole["job_usd_other"] == pytest.approx(shared["job_usd"])  # beside: the share, 1/8 of the bill
    assert shared["job_usd_other"] == pytest.approx(whole["job_usd"])
    page = ranking.markdown(t := ranking.decision(df, whole_job), ranking.break_even(t, whole_job), whole_job)
    assert "job $ (whole instance)" in page and "job $ (one accelerator's share, beside)" in page
    page = ranking.markdown(t := ranking.decision(df, shared_job), ranking.break_even(t, shared_job), shared_job)
    assert "job $ (one accelerator's share)" in page and "job $ (whole instance, beside)" in page


def test_no_nan_where_an_instance_name_belongs(df):
    """XLA on the CPU is priced as the CPU (a stand-in instance); a GPU the facts do not price says so."""
    unpriced = df.copy()
    unpriced.loc[unpriced["device"].str.contains("A100"), "device"] = "NVIDIA H200"
    unpriced.loc[unpriced["device"] == "NVIDIA H200", "instance"] = float("nan")
    page = ranking.markdown(
        t := ranking.decision(unpriced, ranking.Job()), ranking.break_even(t, ranking.Job()), ranking.Job()
    )
    assert "nan" not in page and "no instance priced: whole —/h" in page
    xla = row_of(ranking.decision(df, ranking.Job()), "XLA", "proxy")
    assert xla["instance"] == "m6i.large" and "not in the facts" not in xla["price_note"]
