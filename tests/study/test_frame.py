"""study/frame.py: every record one row with the named columns and the figures derived from its raw fields, the
latest finished record per suite point and device, one estimator of a timing figure, and a host-bound accelerator
named so."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from record_fixtures import BERT_BASE, record, write

from helpers import flops
from study.frame import Band, estimate, frame, load, params_problem, ratio


def test_the_named_columns_read_the_records_sections_in_the_tables_units():
    row = frame([record("a100", "batch_scaling", {"batch": 8, "max_length": 32}, samples_per_s=300.0, step_ms=25.0)])
    row = row.iloc[0]
    assert row["samples_per_s"] == 300.0 and row["step_ms"] == pytest.approx(25.0)  # seconds in, ms shown
    assert row["batch"] == 8 and row["device_type"] == "cuda" and row["suite"] == "batch_scaling"
    # MFU from the raw fields: all 500 steps' micro-batches (no steady shapes kept), 497 steady steps of 25 ms
    per_step = 500 * flops.model_flops(BERT_BASE, 8, 32) / 500
    assert row["tflops"] == pytest.approx(per_step / 0.025 / 1e12)
    assert row["mfu_pct"] == pytest.approx(100 * per_step / 0.025 / 312e12) and row["peak_tflops"] == 312
    assert row["ai"] > 0 and row["bound"] in ("memory", "compute") and "A100" in row["peak_source"]


def test_the_steady_windows_micro_batches_are_what_mfu_counts_where_the_record_kept_them():
    rec = record("a100", "speedup", {"batch": 8, "max_length": 32})
    rec["shapes"]["steady"] = {"8x32": 497 * 2}  # gradient accumulation: two micro-batches a step
    assert frame([rec])["tflops"].iloc[0] == pytest.approx(
        2 * frame([record("a100", "speedup", {"batch": 8, "max_length": 32})])["tflops"].iloc[0]
    )


def test_a_profiled_record_from_before_the_profiler_had_its_own_window_is_timed_by_its_median_step():
    rec = record("a100", "profile_memory", {"batch": 8, "max_length": 32}, step_ms=25.0)
    rec["timing"]["steady_time_s"] *= 3  # the profiled steps, slowed, sat in the steady windows
    rec["profile"] = {"class_share": {"matmul": 0.5, "host_gap": 0.1}}
    assert frame([rec])["mfu_pct"].iloc[0] == pytest.approx(
        frame([record("a100", "x", {"batch": 8, "max_length": 32}, step_ms=25.0)])["mfu_pct"].iloc[0]
    )


def test_a_cpu_runs_mfu_is_against_the_roof_kept_for_its_machine_at_its_threads(tmp_path):
    rec = record("cpu", "batch_scaling", {"batch": 8, "max_length": 32}, run_name="b8")
    kept = {"peak_tflops": 0.2, "mem_bw_gbps": 20.0, "threads": 2, "shape": "square 2048", "by_shape": {}}
    roof = {"fp32, 2 threads": {**kept, "measured_at": "2026-11-24T01:02:03"}}
    (tmp_path / "_peaks").mkdir()
    (tmp_path / "_peaks" / f"{rec['device']['key']}.json").write_text(json.dumps(roof))
    write(tmp_path, rec)
    row = load(tmp_path, include_fixtures=True)[0].iloc[0]
    assert row["peak_tflops"] == 0.2 and row["peak_source"] == "measured (square 2048, 2026-11-24)"
    assert row["mfu_pct"] == pytest.approx(100 * row["tflops"] / 0.2)
    busy = {"fp32, 2 threads": {**kept, "others_cores": 1.5}}  # measured while other processes ran: never trusted
    (tmp_path / "_peaks" / f"{rec['device']['key']}.json").write_text(json.dumps(busy))
    row = load(tmp_path, include_fixtures=True)[0].iloc[0]
    assert pd.isna(row["mfu_pct"]) and row["peak_source"] == "no trusted fp32 roof kept for this CPU"


def test_each_record_has_its_device_class_from_the_facts_and_only_the_studys_model_on_a_gpu_or_trn1_is_no_proxy():
    bert = {"model_name": "bert-base-uncased"}
    runs = [record(d, "speedup", bert, run_name=d) for d in ("a100", "trn1", "xla-cpu", "cpu")]
    df = frame([*runs, record("a100", "speedup", {"model_name": "minilm"}, run_name="minilm")]).set_index("run_name")
    assert df["cls"].to_dict() == {"a100": "gpu", "trn1": "trn1", "xla-cpu": "xla-cpu", "cpu": "cpu", "minilm": "gpu"}
    assert sorted(df.index[~df["proxy"]]) == ["a100", "trn1"]


def test_the_latest_finished_record_stands_for_a_point_on_a_device():
    done = record("cpu", "batch_scaling", {"batch": 8}, run_name="b8", samples_per_s=30.0)
    later = record("cpu", "batch_scaling", {"batch": 8}, run_name="b8", samples_per_s=99.0, status="failed")
    later["finished_at"] = "2999-01-01T00:00:00+00:00"  # a later attempt that failed does not replace it
    assert list(frame([done, later])["samples_per_s"]) == [30.0]
    again = {**done, "finished_at": "2999-01-01T00:00:00+00:00", "timing": {**done["timing"], "samples_per_s": 31.0}}
    assert list(frame([done, again])["samples_per_s"]) == [31.0]
    assert sorted(frame([record(d, "b", {}, run_name="b8") for d in ("cpu", "a100")])["device_type"]) == ["cpu", "cuda"]


def test_a_failure_recorded_by_the_sweep_changes_neither_the_finished_rows_numbers_nor_their_device():
    done = record("a100", "speedup", {"batch": 64, "max_length": 32}, run_name="opt")
    died = record("a100", "speedup", {"preset": "optimized"}, run_name="opt-rep2", status="failed")
    died["device"], died["params"] = {"key": done["device"]["key"]}, {"preset": "optimized"}
    df = frame([done, died]).set_index("run_name")
    assert repr(df.loc["opt", "batch"]) == "64" and df.loc["opt-rep2", "batch"] is None  # never 64.0
    assert df.loc["opt-rep2", "device"] == df.loc["opt", "device"] and df.loc["opt-rep2", "device_type"] == "cuda"


@pytest.mark.parametrize(
    "params, why",
    [
        ({"batch": 8}, None),
        ({"batch": [8]}, "params.batch: Input should be a valid number"),
        ({"batch": float("nan")}, "params.batch: Input should be a finite number"),
        ({"group_by_length": "yes"}, "params.group_by_length: Input should be a valid boolean"),
    ],
)
def test_parameters_a_table_cannot_group_by_are_named(params, why):
    found = params_problem({"params": params})
    assert found == why if why is None else found.startswith(why), found


def test_a_record_no_table_can_group_is_left_out_and_counted_and_fixtures_only_when_asked(tmp_path):
    good = record("cpu", "batch_scaling", {"batch": 8}, run_name="good")
    odd = record("cpu", "batch_scaling", {"batch": 16}, run_name="odd")
    odd["params"]["batch"] = [16]
    for rec in (good, odd):
        write(tmp_path, rec)
    df, skipped = load(tmp_path, include_fixtures=True)
    assert list(df["run_name"]) == ["good"]
    assert [why.split(": ", 1)[1] for why in skipped] == [
        "params.batch: Input should be a valid number, not list '[16]'"
    ]
    assert load(tmp_path)[0].empty


def runs(rates: list[float], **figures) -> pd.DataFrame:
    """Return the frame of one configuration's independent runs, one per samples/s in `rates`."""
    return frame(
        [record("cpu", "s", {"seed": i}, run_name=f"r{i}", samples_per_s=r, **figures) for i, r in enumerate(rates)]
    )


def test_the_one_estimator_is_the_median_of_runs_with_the_lowest_and_highest_run():
    assert estimate(runs([10.0, 12.0, 11.0, 30.0]), "samples_per_s") == Band(11.5, 10.0, 30.0)
    assert estimate(runs([10.0]), "samples_per_s") == Band(10.0, 10.0, 10.0)  # one run: no spread between runs
    assert ratio(Band(4.0, 3.0, 5.0), Band(2.0, 1.0, 2.5)) == Band(2.0, 1.2, 5.0)
    assert str(Band(2.0, 1.2, 5.0)) == "2 (1.2–5)" and str(Band(2.0, 2.0, 2.0)) == "2"


def scaling(device: str, steps_ms: dict[int, float], **extra) -> list[dict]:
    """Return batch_scaling runs of `device` with these median step times per batch."""
    return [
        record(device, "batch_scaling", {"batch": b, "max_length": 32}, run_name=f"b{b}", step_ms=ms, **extra)
        for b, ms in steps_ms.items()
    ]


def test_an_accelerator_whose_step_stays_flat_across_batches_is_named_host_bound_and_one_that_grows_is_not():
    flat = frame(scaling("h200", {8: 19.0, 16: 14.2, 32: 17.7, 64: 19.2}) + scaling("a100", {8: 10.0, 64: 60.0}))
    status = flat.drop_duplicates("device_key").set_index("kind")
    assert status.loc["h200", "host_bound"] == "host-bound" and status.loc["h200", "label"] == "H200 (host-bound)"
    assert status.loc["a100-40gb", "host_bound"] == ""
    assert (frame(scaling("cpu", {8: 100.0, 64: 110.0}))["host_bound"] == "").all()  # a CPU is its own host


def test_a_recorded_device_busy_share_decides_and_is_named():
    busy = {"profile": {"device_busy_share": 0.23}}
    assert (
        frame(scaling("a100", {8: 10.0, 64: 60.0}, **busy))["label"].iloc[0]
        == "A100-SXM4-40GB (host-bound, device busy 23%)"
    )
    assert (frame(scaling("h200", {8: 19.0, 64: 19.2}, profile={"device_busy_share": 0.9}))["host_bound"] == "").all()


def test_a_bar_in_a_device_name_never_splits_a_markdown_row():
    rec = record("cpu", "batch_scaling", {"batch": 8, "max_length": 32})
    rec["device"]["name"] = "Vendor CPU | 2 sockets"
    row = frame([rec]).iloc[0]
    table = frame([rec])[["device", "batch"]].to_markdown(index=False)
    assert "|" not in row["device"] and all(line.count("|") == 3 for line in table.splitlines())
