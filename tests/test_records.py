import json
import multiprocessing as mp

from helpers import records


def test_append_and_read_back(tmp_path):
    path = tmp_path / "r.jsonl"
    records.append_record(path, records.new_record({"run_name": "a"}, status="finished"))
    records.append_record(path, {"run_name": "b", "schema_version": 2, "loss": float("nan")})
    recs, broken = records.read_records(path)
    assert [r["run_name"] for r in recs] == ["a", "b"] and broken == 0
    assert recs[1]["loss"] == "nan"  # never invalid JSON


def test_record_survives_a_crash_mid_write(tmp_path):
    path = tmp_path / "r.jsonl"
    records.append_record(path, {"run_name": "a", "schema_version": 2, "status": "finished"})
    with open(path, "a") as f:  # a process killed half-way through its line
        f.write('{"run_name": "half", "sta')
    records.append_record(path, {"run_name": "c", "schema_version": 2, "status": "finished"})
    recs, broken = records.read_records(path)
    assert [r["run_name"] for r in recs] == ["a", "c"] and broken == 1
    assert records.finished_run_names(path) == {"a", "c"}


def test_older_schema_still_loads(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_text(json.dumps({"run_name": "old", "train_time_s": 12.0, "test_accuracy": 0.9}) + "\n")
    (rec,), _ = records.read_records(path)
    assert rec["schema_version"] == records.SCHEMA_VERSION
    assert rec["timing"]["train_time_s"] == 12.0 and rec["metrics"]["test_accuracy"] == 0.9


def _writer(path, tag, n):
    for i in range(n):
        records.append_record(path, {"run_name": f"{tag}-{i}", "schema_version": 2, "pad": "x" * 5000})


def test_two_writers_do_not_interleave(tmp_path):
    path = tmp_path / "r.jsonl"
    procs = [mp.get_context("spawn").Process(target=_writer, args=(path, t, 40)) for t in "ab"]
    [p.start() for p in procs]
    [p.join() for p in procs]
    recs, broken = records.read_records(path)
    assert broken == 0 and len(recs) == 80
    assert {r["run_name"] for r in recs} == {f"{t}-{i}" for t in "ab" for i in range(40)}
