"""The typed record: every committed record validates, bad, older or newer files are skipped by
name with the reason, and no JSON value in any field crashes reading the records or building the report's frame."""

import importlib.util
import json
import os
from pathlib import Path

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError
from record_fixtures import record

from helpers.measure import peak_memory
from helpers.measure.neuron_monitor import NeuronMonitorSource
from helpers.measure.utilization_sources import NvmlSource, PsutilSource, not_measured
from helpers.run import records, schema
from helpers.study import frame

REPO = Path(__file__).resolve().parent.parent.parent
SECTIONS = ("timing", "systems", "energy", "metrics", "device", "precision", "data", "model", "memory", "xla")


def test_every_committed_record_validates():
    found, skipped = records.read_records(REPO / "Experiment" / "results")
    assert found and not skipped, skipped
    assert all(r["schema_version"] == schema.SCHEMA_VERSION for r in found)


def test_every_committed_record_file_matches_the_committed_json_schema():
    # the files as committed, not as the reader upgrades them: a foreign tool reads them with the JSON Schema
    validator = jsonschema.Draft202012Validator(json.loads(schema.SCHEMA_FILE.read_text()))
    root = REPO / "Experiment" / "results"
    files = sorted(p for p in root.rglob("*.json") if records.PEAKS not in p.relative_to(root).parts)
    assert "adhoc" in {p.relative_to(root).parts[0] for p in files} and len(files) > 100
    failing = {}
    for path in files:
        error = jsonschema.exceptions.best_match(validator.iter_errors(json.loads(path.read_text())))
        if error is not None:
            failing[str(path.relative_to(root))] = f"{error.json_path}: {error.message[:120]}"
    assert not failing, failing


def test_the_migration_rewrites_a_record_as_the_reader_reads_it_and_once(tmp_path):
    spec = importlib.util.spec_from_file_location("migrate", REPO / "scripts" / "migrate_records.py")
    migrate = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(migrate)
    old = record("cpu", "batch_scaling", {"batch": 8}, run_name="old")
    old["energy"] = {**old["energy"], "joules": "not measured", "mean_watts": "nan", "power_samples": "N/A"}
    old["energy"]["reason"] = "no RAPL"
    path = tmp_path / "batch_scaling" / "old@cpu.json"
    path.parent.mkdir()
    path.write_text(json.dumps(old))
    assert records.read_records(tmp_path)[0] == []  # the reader refuses a string in a number field
    migrate.main([str(tmp_path)])
    text = path.read_text()
    assert json.loads(text)["schema_version"] == schema.SCHEMA_VERSION
    (rec,) = records.read_records(tmp_path)[0]
    assert rec["energy"]["joules"] is rec["energy"]["mean_watts"] is rec["energy"]["power_samples"] is None
    assert rec["energy"]["reason"] == "no RAPL" and rec["energy"]["seconds"] == old["energy"]["seconds"]
    migrate.main([str(tmp_path)])
    assert path.read_text() == text  # a second run changes nothing


def test_the_migration_names_each_file_it_cannot_read_goes_on_and_keeps_modes_and_links(tmp_path, capsys):
    """A JSON list, a string schema_version, a cut-short file or a FIFO stopped the migration with a traceback
    that named no file (the FIFO hung it), leaving every later record unmigrated; a 0600 record came back 0644
    and a link came back a copy."""
    spec = importlib.util.spec_from_file_location("migrate", REPO / "scripts" / "migrate_records.py")
    migrate = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(migrate)
    folder = tmp_path / "s"
    folder.mkdir()
    bad = {"a-list@cpu.json": "[1, 2]", "b-version@cpu.json": '{"schema_version": "5"}', "c-cut@cpu.json": '{"run'}
    for name, text in bad.items():
        (folder / name).write_text(text)
    os.mkfifo(folder / "d-fifo@cpu.json")
    private = folder / "e-private@cpu.json"
    private.write_text(json.dumps(record("cpu", "s", {"batch": 8}, run_name="private")))  # not as the writer writes
    private.chmod(0o600)
    elsewhere = tmp_path / "kept" / "f-linked@cpu.json"
    elsewhere.parent.mkdir()
    elsewhere.write_text(json.dumps(record("cpu", "s", {"batch": 8}, run_name="linked")))
    (folder / "f-linked@cpu.json").symlink_to(elsewhere)
    with pytest.raises(SystemExit, match="4 file.s. not migrated"):
        migrate.main([str(folder)])
    out, err = capsys.readouterr()
    for name in [*bad, "d-fifo@cpu.json"]:
        assert f"not migrated: {folder / name}: " in err
    assert "migrated e-private@cpu.json" in out and "migrated f-linked@cpu.json" in out
    assert oct(private.stat().st_mode & 0o777) == oct(0o600) and records.read_record(private)["run_name"] == "private"
    assert (folder / "f-linked@cpu.json").is_symlink() and records.read_record(elsewhere)["run_name"] == "linked"
    assert records.json_text(json.loads(elsewhere.read_text())) == elsewhere.read_text()


def test_the_committed_json_schema_is_the_models():
    assert schema.SCHEMA_FILE.read_text() == schema.json_schema(), "run: python -m helpers.run.schema --write"


def test_nan_becomes_none_and_a_sentinel_string_is_refused():
    old = {
        "schema_version": schema.SCHEMA_VERSION,
        "run_id": "r1",
        "run_name": "old",
        "status": "finished",
        "energy": {"joules": None, "mean_watts": float("inf"), "seconds": 20.0, "reason": "no RAPL"},
        "systems": {"mfu": float("nan"), "peak_tflops": 1.0},
    }
    rec, why = schema.validate(old)
    assert why is None and rec["schema_version"] == schema.SCHEMA_VERSION
    assert rec["energy"]["joules"] is None and rec["energy"]["mean_watts"] is None
    assert rec["energy"]["seconds"] == 20.0 and rec["energy"]["reason"] == "no RAPL"
    assert rec["systems"]["mfu"] is None and rec["systems"]["peak_tflops"] == 1.0
    # scripts/migrate_records.py turns an older record's "not measured" into null; the reader names it
    _, why = schema.validate({**old, "energy": {**old["energy"], "joules": "not measured"}})
    assert why.startswith("energy.joules: ")


def test_a_wrong_type_an_older_and_a_newer_schema_are_skipped_by_file_with_the_reason(tmp_path):
    good = record("cpu", "batch_scaling", {"batch": 8}, run_name="good")
    bad = {**record("cpu", "batch_scaling", {"batch": 16}, run_name="bad"), "timing": {"samples_per_s": "fast"}}
    newer = {**record("cpu", "batch_scaling", {"batch": 32}, run_name="newer"), "schema_version": 99}
    older = {**record("cpu", "batch_scaling", {"batch": 64}, run_name="older"), "schema_version": 4}
    unversioned = {k: v for k, v in record("cpu", "batch_scaling", {"batch": 2}, run_name="none").items()}
    unversioned.pop("schema_version", None)
    for name, rec in (("good", good), ("bad", bad), ("newer", newer), ("older", older), ("none", unversioned)):
        (tmp_path / "s").mkdir(exist_ok=True)
        (tmp_path / "s" / f"{name}@cpu.json").write_text(json.dumps(rec))
    found, skipped = records.read_records(tmp_path)
    assert [r["run_name"] for r in found] == ["good"]
    reasons = dict(skipped)
    assert any(k.startswith("s/bad@cpu.json: timing.samples_per_s") for k in reasons), reasons
    assert any(k.startswith("s/newer@cpu.json: schema_version 99 is newer") for k in reasons), reasons
    assert "s/older@cpu.json: schema_version 4 is older than this code reads (5)" in reasons, reasons
    assert "s/none@cpu.json: schema_version None is not a schema version (an integer from 1)" in reasons, reasons


def test_a_misspelled_key_is_refused_at_the_top_and_in_the_typed_sections():
    good = record("cpu", "time_to_accuracy", {"batch": 8}, run_name="typed")
    good.update(
        optimizer={"class": "torch.optim.adamw.AdamW"},
        time_to_accuracy={"0.90": {"train_time_s": 95.0, "step": 300, "rows": 2000, "val_accuracy": 0.9}},
    )
    rec, why = schema.validate(good)
    assert why is None and rec["optimizer"] == {"class": "torch.optim.adamw.AdamW"}
    assert rec["time_to_accuracy"]["0.90"]["step"] == 300
    for key, value, where in (
        ("time_to_acuracy", good["time_to_accuracy"], "time_to_acuracy"),
        ("optimizer", {"klass": "AdamW"}, "optimizer.class"),
        ("time_to_accuracy", {"0.90": {"seconds": 95.0}}, "time_to_accuracy.0.90.seconds"),
        ("time_to_accuracy", {"0.90": {"step": "many"}}, "time_to_accuracy.0.90.step"),
        ("token_stats", {"split": "train", "rows": 10, "mean": 2.0}, "token_stats.min"),
    ):
        rec, why = schema.validate({**good, key: value})
        assert rec is None and why.startswith(where + ":"), (key, why)


def every_section() -> dict:
    """Return a fixture record with every section filled in, nested ones too (a valid record)."""
    rec = record("cpu", "time_to_accuracy", {"batch": 8}, run_name="full")
    rec["precision"]["probe"] = {"ratio": 1.2, "fp32_step_s": 0.6, "bf16_step_s": 0.5, "rounds": 3}
    lora = {"r": 8, "alpha": 16, "dropout": 0.0, "targets": "query,value", "roles": ["query", "value"]}
    rec["model"] = {"name": "minilm", "parameters": 22_000_000, "lora": lora}
    rec["energy"].update(
        devices={"intel-rapl:0": {"name": "package-0"}},
        whole_run={"window": "the whole run", "seconds": 30.0, "joules": None},
    )
    rec.update(
        curve=[{"step": 50, "train_time_s": 10.0, "samples": 400, "val_accuracy": 0.5, "rows": 2000}],
        shapes={"distinct": 1, "counts": {"8x64": 50}},
        xla={
            "graph_compilations": 2,
            "run": {"uncached_compiles": 2, "compile_time_s": 3.0},
            "cache": {"kind": "torch-xla persistent compilation cache", "state": "off"},
        },
        distributed={
            "world_size": 2,
            "shards": {"rows_per_rank": [8, 8], "overlap_rows": 0},
            "allreduce": {"status": None, "reason": "no DDP wrapper"},
            "rank_errors": [{"rank": 1, "exception": "OSError", "message": "disk", "written_ns": 1}],
        },
        profile={
            "backend": "torch.profiler",
            "class_time_ms": {"matmul": 1.0, "host_gap": 0.5},
            "top_ops": [{"name": "aten::mm", "self_time_ms": 1.0, "calls": 2}],
            "xla_metrics": {"backend": "torch_xla.debug.metrics", "compile_count": 0},
        },
        neuron_profile={"backend": "neuron-profile", "tensor_engine_active_pct": 40.0},
    )
    return rec


# every section that took any key before the sections were typed, by where it sits in a record
OPEN_BEFORE = (
    "device",
    "precision",
    "precision.probe",
    "data",
    "model",
    "model.lora",
    "timing",
    "systems",
    "memory",
    "energy",
    "energy.devices.intel-rapl:0",
    "energy.whole_run",
    "utilization",
    "metrics",
    "curve.0",
    "phases",
    "shapes",
    "xla",
    "xla.run",
    "xla.cache",
    "distributed",
    "distributed.shards",
    "distributed.allreduce",
    "distributed.rank_errors.0",
    "profile",
    "profile.class_time_ms",
    "profile.top_ops.0",
    "profile.xla_metrics",
    "neuron_profile",
)


@pytest.mark.parametrize("where", OPEN_BEFORE)
def test_an_unknown_key_in_any_section_is_refused_and_named(where):
    rec = every_section()
    assert schema.validate(rec)[1] is None
    section = rec
    for part in where.split("."):
        section = section[int(part)] if isinstance(section, list) else section[part]
    section["samples_per_sec"] = 1.0  # a plausible misspelling, a number as the writer would give it
    valid, why = schema.validate(rec)
    assert valid is None and why.startswith(f"{where}.samples_per_sec: Extra inputs are not permitted"), why


def test_every_object_of_the_committed_json_schema_refuses_unknown_keys():
    defs = json.loads(schema.SCHEMA_FILE.read_text())["$defs"]
    open_objects = [name for name, d in defs.items() if d.get("additionalProperties") is not False]
    assert not open_objects, open_objects


def test_a_record_with_a_misspelled_key_in_a_section_is_named_and_skipped_by_the_readers(tmp_path):
    good = record("cpu", "batch_scaling", {"batch": 8}, run_name="good")
    typo = record("cpu", "batch_scaling", {"batch": 16}, run_name="typo")
    typo["memory"] = {"host_peak_rss_gb": 3.0, "device": "host"}
    (tmp_path / "s").mkdir()
    for rec in (good, typo):
        (tmp_path / "s" / f"{rec['run_name']}@cpu.json").write_text(json.dumps(rec))
    found, skipped = records.read_records(tmp_path)
    assert [r["run_name"] for r in found] == ["good"]
    assert list(skipped) == ["s/typo@cpu.json: memory.host_peak_rss_gb: Extra inputs are not permitted (1 problem(s))"]
    assert records.read_record(tmp_path / "s" / "typo@cpu.json") is None


@pytest.mark.parametrize("source", [PsutilSource, NvmlSource, NeuronMonitorSource])
def test_a_sources_figures_not_measured_are_a_valid_utilization_section(source):
    """Each source's figures are fields of the section: a source adding one fails here until it is typed."""
    assert {f"{field}_{stat}" for field in source.fields for stat in ("mean", "p90")} <= set(
        schema.Utilization.model_fields
    )
    section = not_measured(source.backend, source.fields, "no device")
    assert schema.Utilization.model_validate(section).reason == "no device"


def test_the_peak_memory_of_a_cpu_run_is_a_memory_section():
    out = peak_memory.peak("cpu")
    assert isinstance(out, schema.Memory) and out.host_peak_rss_gib > 0 and out.device == "host"


def test_a_record_that_does_not_match_is_refused_when_built_and_never_written(tmp_path):
    with pytest.raises(ValidationError, match="timing.steps"):
        records.run_record({"run_name": "x"}, [], status="finished", timing={"steps": "many"})
    rec = records.run_record({"run_name": "x"}, [], status="finished", timing={"steps": 3})
    rec.timing.steps = "many"  # a section changed in place is checked again by the writer
    with pytest.raises(records.RecordWriteError, match="timing.steps"):
        records.write_record(tmp_path / "x@cpu.json", rec)
    assert not list(tmp_path.iterdir())


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=6), kids, max_size=3),
    max_leaves=8,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    section=st.sampled_from(SECTIONS + ("status", "curve", "params", "phases", "run_name")),
    value=JSON,
    field=st.sampled_from(("samples_per_s", "mfu", "joules", "test_accuracy", "name", "rows", "type", "x")),
)
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
    assert not found and list(skipped) == [
        f"odd@cpu.json: schema_version {version!r} is not a schema version (an integer from 1)"
    ]


def test_a_curve_that_reaches_its_targets_is_recorded_with_its_crossings(tmp_path):
    """Every key crossings() writes is typed: a run whose curve passed 88-92% (tiny test runs never do) was
    refused by the schema and its record fell back to the working folder."""
    from helpers.calc.accuracy_time import crossings

    curve = [
        {
            "step": 50 * i,
            "train_time_s": 10.0 * i,
            "wall_s": 12.0 * i,
            "samples": 1600 * i,
            "rows": 2000,
            "val_accuracy": 0.3 + 0.2 * i,
            "eval_s": 1.5,
        }
        for i in range(1, 4)
    ]
    curve[-1]["test_accuracy"] = 0.9
    rec = record("cpu", "time_to_accuracy", {"batch": 32}, run_name="crossed")
    points = [schema.CurvePoint(**p) for p in curve]
    rec.update(curve=curve, time_to_accuracy=crossings(points, compile_s=0.0))
    valid, why = schema.validate(rec)
    assert why is None and valid["time_to_accuracy"]["0.90"]["wall_s"] == 36.0
