"""study/cost.py: prices from the facts, a job's seconds, dollars and energy per device from one record each, the
study's figures at the prices it printed, marks and break-even only where rows compare, and the command line."""

from __future__ import annotations

import copy
import math

import pytest
import record_fixtures
from record_fixtures import record, write

from study import cost
from study.frame import frame
from study.sweep import suites

FULL = {"model_name": "bert-base-uncased", "preset": "optimized"}


def rows(*extra: dict) -> list[dict]:
    """Return the optimized bert-base runs of an A100 and a trn1 over all rows (the study's job), and `extra`."""
    a100 = record("a100", "speedup", FULL, run_name="opt", samples_per_s=400.0, step_ms=80.0)
    trn1 = record("trn1", "speedup", FULL, run_name="opt", samples_per_s=250.0, step_ms=80.0, compile_s=300.0)
    return [a100, trn1, *extra]


def test_an_instance_is_priced_whole_with_its_source_and_an_unknown_one_is_refused_naming_the_known():
    usd, source = cost.instance_price("trn1.2xlarge")
    assert usd == 1.34375 and "On-Demand" in source and "taken 2025-06-05" in source
    with pytest.raises(ValueError, match="no price for 'x9.huge'; known: trn1.2xlarge"):
        cost.instance_price("x9.huge")
    assert cost.accelerator_price("p4d.24xlarge", "a100-40gb") == ("p4d.24xlarge", 21.96 / 8, "")
    assert cost.accelerator_price("g5.xlarge", "l4") == ("g6.xlarge", 0.8048, "g5.xlarge carries a10g, not l4")
    assert cost.whole_instances_price("p4d.24xlarge", 9) == 2 * 21.96


def test_the_job_arithmetic_by_hand():
    assert cost.one_off_s(310.0, 312.1, 0.1) == 312.0  # the first step's excess saw more than the compile counter
    assert cost.one_off_s(math.nan, 2.0, 0.5) == 1.5 and math.isnan(cost.one_off_s(math.nan, math.nan, 0.5))
    assert cost.break_even_epochs(1.0, 0.1, 0.0, 0.3) == pytest.approx(5.0)  # $1 up front repaid at $0.2 an epoch
    assert cost.break_even_epochs(1.0, 0.3, 0.0, 0.1) is None  # dearer per epoch: the lines never meet
    curve = [{"samples": 800, "val_accuracy": 0.8}, {"samples": 1600, "val_accuracy": 0.95}]
    assert cost.epochs_to_target(curve, 0.94, 800) == 2.0 and cost.epochs_to_target(curve, 0.99, 800) is None


def test_decision_rows_are_the_records_figures_at_the_whole_instances_price():
    t = cost.decision(frame(rows()), cost.Job(epochs=3, rows=16_000, runs_sharing_cache=2)).set_index("device")
    a100, trn1 = t.loc["A100-SXM4-40GB"], t.loc["AWS Trainium (trn1.2xlarge)"]
    assert a100["usd_per_h"] == 21.96 and a100["epoch_s"] == 16_000 / 400
    assert a100["one_off_s"] == pytest.approx(2.0 - 0.08)  # CUDA warm-up: every run pays it, no cache shares it
    assert a100["job_usd"] == pytest.approx((1.92 + 3 * 40) / 3600 * 21.96)
    assert trn1["one_off_s"] == pytest.approx((302.0 - 0.08) / 2)  # the compilation, split over the cache's runs
    assert (a100["source"], trn1["source"]) == ("measured", "measured") and a100["mark"] == "fastest of 2"


def test_the_studys_rows_are_at_the_prices_it_printed_and_ranked_only_among_themselves():
    t = cost.decision(frame(rows()), cost.Job()).set_index(["device", "source"])
    l4 = t.loc[("L4", "published")]
    assert l4["usd_per_h"] == 0.576 and l4["instance"] == "g5.xlarge (as printed)"
    assert t.loc[("trn1", "published"), "lower_bound"]  # its compile time is not published: a lower bound
    marks = t[t["mark"] != ""].reset_index()
    assert sorted(zip(marks["source"], marks["mark"])) == [
        ("measured", "cheapest of 2"),
        ("measured", "fastest of 2"),
        ("published", "cheapest of 4"),
        ("published", "fastest of 4"),
    ]


def test_a_proxy_is_never_ranked_even_two_cpus_of_one_configuration():
    other = copy.deepcopy(record_fixtures.DEVICES["cpu"]) | {"key": "cpu-other-f25m17-avx512", "name": "Other CPU"}
    record_fixtures.DEVICES["cpu2"] = other
    try:
        cpus = [
            record(d, "batch_scaling", {"model_name": "minilm"}, samples_per_s=s)
            for d, s in (("cpu", 30.0), ("cpu2", 60.0))
        ]
    finally:
        del record_fixtures.DEVICES["cpu2"]
    t = cost.decision(frame(cpus), cost.Job())
    assert set(t.loc[t["source"] == "proxy", "usd_per_h"]) == {0.096}  # one stand-in instance for both
    assert (t.loc[t["source"] == "proxy", "mark"] == "").all()


def test_break_even_is_said_in_words_within_what_single_runs_resolve():
    job = cost.Job()
    t = cost.decision(frame(rows()), job)
    breaks = cost.break_even(t, job).set_index(["device", "against"])
    measured = breaks.loc[("AWS Trainium (trn1.2xlarge) (measured)", "A100-SXM4-40GB (measured)"), "reading"]
    # trn1: $0.1127 of compile up front, then $0.0239 an epoch; the A100: $0.0117, then $0.244 an epoch
    assert measured == "cheaper beyond 0.459 epochs"
    published = breaks.loc[("trn1 (published)", "L4 (published)"), "reading"]
    assert published.startswith("never: costs") and "more per epoch" in published
    budget = breaks.loc[("trn1 (published)", "T4 (published)"), "reading"]
    assert budget.startswith("compile not measured; cheaper for 3 epochs if it takes under")
    close = {"epoch_usd": 1.0, "lower_bound": False}
    assert cost.reading(close, {"epoch_usd": 1.05}, None, job).startswith("per-epoch costs 5% apart")


def test_the_page_asks_first_and_concludes_last_without_ranking_proxies():
    job = cost.Job()
    text = cost.markdown(cost.decision(frame(rows()), job), job)
    assert text.startswith("Which device for 3 epochs over 16,000 training rows, target 94% validation accuracy")
    last = text.splitlines()[-1]
    assert last.startswith("For 3 epochs over 16,000 rows:") and "proxies are not ranked" in last


def test_the_command_prints_a_users_job_and_refuses_what_has_no_finite_cost(tmp_path, capsys):
    point = next(
        p for p in suites.expand(suites.resolve_suite("speedup"), "full") if p.params.get("preset") == "optimized"
    )
    for rec in rows():
        write(tmp_path, {**rec, "fixture": False, "run_name": point.run_name})
    cost.main(["--results", str(tmp_path), "--epochs", "5", "--rows", "8000"])
    out = capsys.readouterr().out
    assert out.startswith("Which device for 5 epochs over 8,000 training rows") and "| A100-SXM4-40GB" in out
    for flag, value in (("--epochs", "1e300"), ("--target-accuracy", "94"), ("--runs-sharing-cache", "0")):
        with pytest.raises(SystemExit):
            cost.main(["--results", str(tmp_path), flag, value])
    with pytest.raises(SystemExit):
        cost.main(["--results", str(tmp_path / "nowhere")])
    assert "no such folder" in capsys.readouterr().err
