"""The record: one writer that never replaces a file, one reader that names what it skips, and the committed records."""

from __future__ import annotations

import json
import os
import threading
import time

import pytest

from helpers import record


def new(name: str = "run", **fields) -> record.RunRecord:
    """Return a record of a run named `name` on a test device."""
    return record.start(name, {"batch": 8}, ["batch"], {"key": "cpu-test", "type": "cpu"}, **fields)


def test_runs_of_one_name_each_keep_their_own_file_even_at_once(tmp_path):
    base = record.base_path(tmp_path, None, "run", "cpu-test")
    threads = [threading.Thread(target=record.write, args=(new(), base)) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    paths = record.paths_of(base)
    assert len(paths) == 8 and paths[0] == base and paths[1].name == "run@cpu-test.run2.json"
    assert len({json.loads(p.read_text())["run_id"] for p in paths}) == 8
    assert not list(tmp_path.rglob(".*.tmp"))


def test_the_reader_skips_what_is_not_a_record_and_says_why(tmp_path):
    folder = tmp_path / "suite"
    record.write(new(), folder / "good@cpu-test.json")
    (folder / "cut@cpu-test.json").write_text('{"schema_version": 6, "run_na')
    (folder / "old@cpu-test.json").write_text(json.dumps({"schema_version": 5, "run_name": "x"}))
    (folder / "newer@cpu-test.json").write_text(json.dumps({"schema_version": 7}))
    (folder / "extra@cpu-test.json").write_text(json.dumps({**record.as_json(new()), "mfu": 0.3}))
    os.mkfifo(folder / "fifo@cpu-test.json")  # never opened: reading a FIFO would wait forever
    (tmp_path / "_peaks").mkdir()
    (tmp_path / "_peaks" / "cpu-test.json").write_text("{}")  # a roof, not a record: not read
    found, skipped = record.read(tmp_path)
    assert [r["run_name"] for r in found] == ["run"]
    why = " ".join(skipped)
    assert "cut short" in why and "migrate_records" in why and "newer than this code" in why
    assert "mfu" in why and "not a regular file" in why and len(skipped) == 5


def test_a_figure_that_is_not_finite_is_no_figure():
    rec = new()
    rec.timing = record.Timing(samples_per_s=float("nan"), train_time_s=float("inf"))
    assert record.as_json(rec)["timing"] == {}


def test_a_record_that_cannot_go_where_it_belongs_goes_to_the_working_folder(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    blocked = tmp_path / "file"
    blocked.write_text("a file where the results folder would be")
    rec = new("lost")
    data = record.finish(rec, blocked / "adhoc" / "lost@cpu-test.json", time.perf_counter())
    assert data["_source"] == str(tmp_path / "lost@cpu-test.json")
    assert json.loads((tmp_path / "lost@cpu-test.json").read_text())["run_id"] == rec.run_id
    assert "record NOT written" in capsys.readouterr().err


def test_check_folder_refuses_a_folder_it_cannot_write(tmp_path):
    blocked = tmp_path / "file"
    blocked.write_text("x")
    with pytest.raises(record.RecordError, match="cannot hold files"):
        record.check_folder(blocked / "results")


def test_newest_finds_the_record_rank_0_wrote(tmp_path):
    record.write(new("ddp"), record.base_path(tmp_path, None, "ddp", "cpu-a"))
    later = new("ddp")
    time.sleep(0.01)
    record.write(later, record.base_path(tmp_path, None, "ddp", "cpu-a"))
    assert record.newest(tmp_path, None, "ddp")["run_id"] == later.run_id
    with pytest.raises(record.RecordError, match="no record of 'other'"):
        record.newest(tmp_path, None, "other")


def test_every_committed_record_is_a_record_this_code_reads():
    found, skipped = record.read(record.REPO_ROOT / record.RESULTS_DIR)
    assert not skipped and len(found) > 200


def test_the_committed_json_schema_is_the_records():
    schema = json.loads(record.SCHEMA_FILE.read_text())
    assert schema == record.RunRecord.model_json_schema()


def test_the_headline_names_the_device_and_where_the_wall_went():
    rec = new()
    rec.status = "finished"
    rec.phases = record.Phases(train=3.0, evaluate=1.0, wall=5.0)
    text = record.headline(record.as_json(rec))
    assert "cpu-test" in text and "wall 5.0 s = train 3.0, evaluate 1.0" in text
