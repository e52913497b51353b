"""helpers/study/frame.py: every record one row with the named columns, the latest finished record per suite
point and device, another machine's copy of a point its own row, and parameters a table cannot group by named."""

from __future__ import annotations

import pytest

from helpers.run import records
from helpers.run.paths import RESULTS_DIR, repo_path
from helpers.study.frame import frame, load, params_problem
from tests.record_fixtures import record, write

pytestmark = pytest.mark.usefixtures("no_library_versions")


def test_the_named_columns_read_the_records_sections_in_the_tables_units():
    df = frame(
        [
            record(
                "a100",
                "batch_scaling",
                {"batch": 8},
                run_name="b8",
                samples_per_s=300.0,
                step_ms=25.0,
                tflops=31.2,
                test_acc=0.93,
            )
        ]
    )
    row = df.iloc[0]
    assert row["samples_per_s"] == 300.0 and row["step_ms"] == pytest.approx(25.0)  # seconds in, ms shown
    assert row["mfu_pct"] == pytest.approx(10.0) and row["test_acc"] == 0.93  # the record's own MFU, in %
    assert row["batch"] == 8 and row["device_type"] == "cuda" and row["suite"] == "batch_scaling"


def test_each_record_has_its_device_class_and_only_the_studys_model_on_a_gpu_or_trn1_is_no_proxy():
    bert = {"model_name": "bert-base-uncased"}
    runs = [record(d, "speedup", bert, run_name=d) for d in ("a100", "trn1", "xla-cpu", "cpu")]
    df = frame([*runs, record("a100", "speedup", {"model_name": "minilm"}, run_name="minilm")]).set_index("run_name")
    assert df["cls"].to_dict() == {"a100": "gpu", "trn1": "trn1", "xla-cpu": "xla-cpu", "cpu": "cpu", "minilm": "gpu"}
    assert sorted(df.index[~df["proxy"]]) == ["a100", "trn1"]


def test_an_xla_fixture_has_every_xla_key_the_committed_xla_records_share():
    committed = [rec["xla"] for rec in records.read_records(repo_path(RESULTS_DIR))[0] if rec.get("xla")]
    fixture = record("xla-cpu", "speedup", {}, compile_s=50.0, compilations=3)
    assert committed and set.intersection(*(set(x) for x in committed)) <= set(fixture["xla"])
    assert set(committed[0]["train"]) == set(fixture["xla"]["train"])
    assert frame([fixture])["train_compile_s"].iloc[0] == 50.0  # the compile seconds inside the train time


def test_the_latest_finished_record_stands_for_a_point_on_a_device():
    done = record("cpu", "batch_scaling", {"batch": 8}, run_name="b8", samples_per_s=30.0)
    later = record("cpu", "batch_scaling", {"batch": 8}, run_name="b8", samples_per_s=99.0, status="failed")
    later["finished_at"] = "2999-01-01T00:00:00+00:00"  # a later attempt that failed does not replace it
    assert list(frame([done, later])["samples_per_s"]) == [30.0]
    again = {**done, "finished_at": "2999-01-01T00:00:00+00:00", "timing": {**done["timing"], "samples_per_s": 31.0}}
    assert list(frame([done, again])["samples_per_s"]) == [31.0]


def test_the_same_point_on_another_machine_is_its_own_row():
    df = frame([record(device, "batch_scaling", {"batch": 8}, run_name="b8") for device in ("cpu", "a100")])
    assert sorted(df["device_type"]) == ["cpu", "cuda"]


def test_a_failure_recorded_by_the_sweep_changes_neither_the_finished_rows_numbers_nor_their_device():
    done = record("a100", "speedup", {"batch": 64, "max_length": 32}, run_name="opt")
    # what a sweep wrote for a kernel that died: the parameters as given, the device by its key alone
    died = record("a100", "speedup", {"preset": "optimized"}, run_name="opt-rep2", status="failed")
    died["device"], died["params"] = {"key": done["device"]["key"]}, {"preset": "optimized"}
    df = frame([done, died]).set_index("run_name")
    assert repr(df.loc["opt", "batch"]) == "64" and repr(df.loc["opt", "max_length"]) == "32"  # never 64.0
    assert df.loc["opt-rep2", "batch"] is None
    assert df.loc["opt-rep2", "device"] == df.loc["opt", "device"] != "unknown"
    assert df.loc["opt-rep2", "device_type"] == "cuda"


@pytest.mark.parametrize(
    "params, why",
    [
        ({"batch": 8}, None),
        ({"batch": [8]}, "params.batch: Input should be a valid number"),
        ({"batch": float("nan")}, "params.batch: Input should be a finite number"),
        ({"padding": 3}, "params.padding: Input should be a valid string"),
        ({"group_by_length": "yes"}, "params.group_by_length: Input should be a valid boolean"),
    ],
)
def test_parameters_a_table_cannot_group_by_are_named(params, why):
    found = params_problem({"params": params})
    assert found == why if why is None else found.startswith(why), found


def test_a_record_no_table_can_group_is_left_out_and_counted(tmp_path):
    good = record("cpu", "batch_scaling", {"batch": 8}, run_name="good")
    odd = record("cpu", "batch_scaling", {"batch": 16}, run_name="odd")
    odd["params"]["batch"] = [16]
    for rec in (good, odd):
        write(records.record_path(tmp_path, rec["suite"], rec["run_name"], rec["device"]["key"]), rec)
    df, skipped = load(tmp_path, include_fixtures=True)
    assert list(df["run_name"]) == ["good"]
    assert [why.split(": ", 1)[1] for why in skipped] == [
        "params.batch: Input should be a valid number, not list '[16]'"
    ]
    assert load(tmp_path)[0].empty  # fixtures are left out unless asked for


def test_every_committed_record_holds_the_fields_the_frame_reads_without_an_older_fallback():
    found, _ = records.read_records(repo_path("Experiment/results"))
    assert found
    for rec in found:
        timing, xla, precision = (rec.get(k) or {} for k in ("timing", "xla", "precision"))
        where = rec["_source"]
        assert timing.get("steps") is None or timing.get("steady_steps") is not None, where
        assert xla.get("compile_time_s") is None or (xla.get("train") or {}).get("compile_time_s") is not None, where
        assert precision.get("used") is None or precision.get("compute_dtype") is not None, where
