"""The typed record: every committed record validates, older files upgrade, bad or newer ones are skipped by
name with the reason, and no JSON value in any field crashes reading the records or building the report's frame."""
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from helpers.run import records, schema
from helpers.study.report import frame
from record_fixtures import record

REPO = Path(__file__).resolve().parent.parent.parent
SECTIONS = ("timing", "systems", "energy", "metrics", "device", "precision", "data", "model", "memory", "xla")


def test_every_committed_record_validates():
    found, skipped = records.read_records(REPO / "Experiment" / "results")
    assert found and not skipped, skipped
    assert all(r["schema_version"] == schema.SCHEMA_VERSION for r in found)


def test_the_committed_json_schema_is_the_models():
    assert schema.SCHEMA_FILE.read_text() == schema.json_schema(), "run: python -m helpers.run.schema --write"


def test_an_old_records_sentinel_strings_and_nan_become_none_with_the_reason_kept():
    old = {"schema_version": 3, "run_name": "old", "status": "finished", "profile": None,
           "energy": {"joules": "not measured", "mean_watts": "nan", "seconds": 20.0, "reason": "no RAPL"},
           "systems": {"mfu": float("nan"), "peak_tflops": 1.0}}
    rec, why = schema.validate(old)
    assert why is None and rec["schema_version"] == 4 and rec["run_id"]
    assert rec["energy"]["joules"] is None and rec["energy"]["mean_watts"] is None
    assert rec["energy"]["seconds"] == 20.0 and rec["energy"]["reason"] == "no RAPL"
    assert rec["systems"]["mfu"] is None and rec["systems"]["peak_tflops"] == 1.0


def test_a_wrong_type_and_a_newer_schema_are_skipped_by_file_with_the_reason(tmp_path):
    good = record("cpu", "batch_scaling", {"batch": 8}, run_name="good")
    bad = {**record("cpu", "batch_scaling", {"batch": 16}, run_name="bad"), "timing": {"samples_per_s": "fast"}}
    newer = {**record("cpu", "batch_scaling", {"batch": 32}, run_name="newer"), "schema_version": 99}
    for name, rec in (("good", good), ("bad", bad), ("newer", newer)):
        (tmp_path / "s").mkdir(exist_ok=True)
        (tmp_path / "s" / f"{name}@cpu.json").write_text(json.dumps(rec))
    found, skipped = records.read_records(tmp_path)
    assert [r["run_name"] for r in found] == ["good"]
    reasons = dict(skipped)
    assert any(k.startswith("s/bad@cpu.json: timing.samples_per_s") for k in reasons), reasons
    assert any(k.startswith("s/newer@cpu.json: schema_version 99 is newer") for k in reasons), reasons


def test_a_record_that_does_not_match_is_never_written(tmp_path):
    rec = records.new_record({"run_name": "x"}, status="finished", timing={"steps": "many"})
    try:
        records.write_record(tmp_path / "x@cpu.json", rec)
    except records.RecordWriteError as err:
        assert "timing.steps" in str(err)
    else:
        raise AssertionError("a record with text in a number field was written")
    assert not list(tmp_path.iterdir())


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
                    lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=6), kids, max_size=3),
                    max_leaves=8)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(section=st.sampled_from(SECTIONS + ("status", "curve", "params", "phases", "run_name")), value=JSON,
       field=st.sampled_from(("samples_per_s", "mfu", "joules", "test_accuracy", "name", "rows", "type", "x")))
def test_no_json_value_in_any_field_crashes_reading_or_the_frame(tmp_path, section, value, field):
    rec = record("cpu", "batch_scaling", {"batch": 8}, run_name="fuzz")
    if isinstance(rec.get(section), dict):
        rec[section] = {**rec[section], field: value}
    else:
        rec[section] = value
    path = tmp_path / "s" / "fuzz@cpu.json"
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(rec, allow_nan=True))
    found, skipped = records.read_records(tmp_path)
    assert len(found) + sum(skipped.values()) == 1  # read, or skipped and named: never a crash
    frame.frame(found)


@pytest.mark.parametrize("version", [True, False, -7, 0, "4", 4.0, None])
def test_a_schema_version_that_is_not_a_positive_integer_is_refused(tmp_path, version):
    rec = {**record("cpu", "batch_scaling", {"batch": 8}, run_name="odd"), "schema_version": version}
    assert schema.validate(rec) == (None, f"schema_version {version!r} is not a schema version (an integer from 1)")
    (tmp_path / "odd@cpu.json").write_text(json.dumps(rec))
    found, skipped = records.read_records(tmp_path)
    assert not found and list(skipped) == [f"odd@cpu.json: schema_version {version!r} is not a schema version "
                                           "(an integer from 1)"]
