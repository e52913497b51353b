"""Record files: written whole, read back whatever a crash or a full disk left, bad input skipped."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest

from helpers.run import records, schema


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def test_write_and_read_back(tmp_path):
    path = records.record_path(tmp_path, "suite", "a", "cpu-x")
    assert path == tmp_path / "suite" / "a@cpu-x.json"
    records.write_record(
        path, records.run_record({"run_name": "a"}, [], status="finished", metrics={"final_loss": float("nan")})
    )
    rec = records.read_record(path)
    assert rec["run_name"] == "a" and rec["metrics"]["final_loss"] is None  # NaN: null, never invalid JSON
    assert oct(path.stat().st_mode & 0o777) == oct(0o666 & ~_umask())  # readable by others (0644), not 0600
    assert records.record_path(tmp_path, None, "b", "cpu-x").parent.name == records.ADHOC


def test_a_given_mode_is_kept_whatever_the_umask(tmp_path):
    mask = os.umask(0o077)
    try:
        shared = records.write_json_atomic(tmp_path / "shared.json", {"a": 1}, mode=0o664)
        private = records.write_json_atomic(tmp_path / "private.json", {"a": 1})
    finally:
        os.umask(mask)
    assert oct(shared.stat().st_mode & 0o777) == oct(0o664) and oct(private.stat().st_mode & 0o777) == oct(0o600)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["private.json", "shared.json"]  # no temporary file left


def test_reading_skips_what_is_not_a_record_and_counts_it(tmp_path):
    good = records.run_record({"run_name": "ok"}, [], status="finished")
    records.write_record(tmp_path / "s" / "ok@d.json", good)
    (tmp_path / "s" / "list@d.json").write_text("[1, 2]")  # valid JSON, not an object
    (tmp_path / "s" / "noname@d.json").write_text(
        json.dumps({"schema_version": 5, "run_id": "r", "status": "finished"})
    )
    (tmp_path / "s" / "cut@d.json").write_text('{"run_name": "cut", "sta')
    (tmp_path / "_peaks").mkdir()
    (tmp_path / "_peaks" / "cpu.json").write_text("{}")  # not a record folder: never read as one
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "runs.jsonl").write_text(json.dumps(json.loads(good.model_dump_json())) + "\n")
    found, skipped = records.read_records(tmp_path)
    assert [r["run_name"] for r in found] == ["ok"]  # a runs.jsonl of the first rounds is not read
    assert skipped == {
        "s/list@d.json: not a JSON object": 1,
        "s/noname@d.json: run_name: Field required (1 problem(s))": 1,
        "s/cut@d.json: cut short or not JSON": 1,
    }


WRITER = textwrap.dedent("""
    import sys
    from helpers.run import records
    path, n = sys.argv[1], 0
    while True:
        n += 1
        params = {"run_name": "big", "n": n, "pad": "x" * 2_000_000}
        records.write_record(path, records.run_record(params, [], status="finished"))
        print(n, flush=True)
""")


def test_a_record_killed_mid_write_is_the_old_one_or_the_new_one(tmp_path):
    path = tmp_path / "r" / "big@d.json"
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(path)], stdout=subprocess.PIPE, text=True)
    for _ in range(3):  # let it rewrite the file a few times, then kill it at an arbitrary point
        proc.stdout.readline()
    time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    rec = records.read_record(path)
    assert rec is not None and rec["params"]["n"] >= 3 and len(rec["params"]["pad"]) == 2_000_000
    assert not [p for p in path.parent.iterdir() if p.suffix == ".tmp" and p.stat().st_size == len(rec)]


@pytest.fixture()
def small_disk(tmp_path):
    """A 64 KiB tmpfs (needs root and mount); skipped with the reason where it cannot be mounted."""
    mount = tmp_path / f"disk-{uuid.uuid4().hex[:6]}"
    mount.mkdir()
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)], capture_output=True)
    if made.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here ({made.stderr.decode().strip() or 'not root'})")
    yield mount
    subprocess.run(["umount", "-l", str(mount)], capture_output=True)


def fill(folder: Path) -> None:
    """Fill the filesystem of `folder` to the last byte."""
    with open(folder / "filler", "wb", buffering=0) as f:
        try:
            while True:
                f.write(b"\0" * 512)
        except OSError:
            pass


def test_a_full_disk_leaves_the_old_file_whole_and_names_the_path(small_disk):
    path = small_disk / "_peaks" / "cpu.json"
    records.write_json_atomic(path, {"fp32, 2 threads": {"peak_tflops": 1.0}})
    fill(small_disk)
    with pytest.raises(records.RecordWriteError, match=str(path)):
        records.write_json_atomic(path, {"fp32, 2 threads": {"peak_tflops": 2.0}, "pad": "x" * 100_000})
    assert json.loads(path.read_text()) == {"fp32, 2 threads": {"peak_tflops": 1.0}}
    assert not list(path.parent.glob("*.tmp"))


def test_a_full_or_read_only_destination_is_refused_before_the_run(small_disk, tmp_path):
    fill(small_disk)
    with pytest.raises(records.RecordWriteError, match="results_path=.*(cannot hold run records|bytes free)"):
        records.check_writable(small_disk / "results")
    read_only = tmp_path / "ro"
    read_only.mkdir()
    os.chmod(read_only, 0o555)
    if os.access(read_only, os.W_OK):  # root writes anywhere: a read-only mount says no even to root
        subprocess.run(["mount", "-o", "remount,ro", str(small_disk)], check=True)
        read_only = small_disk
    with pytest.raises(records.RecordWriteError, match="cannot hold run records"):
        records.check_writable(read_only / "results")


def test_failure_status_knows_every_backends_out_of_memory():
    assert records.failure_status("torch.OutOfMemoryError: CUDA out of memory") == "oom"
    assert records.failure_status("RuntimeError: RESOURCE_EXHAUSTED: XLA") == "oom"
    assert records.failure_status("MemoryError") == "oom"
    assert records.failure_status("ValueError: bad") == "failed"


def test_an_empty_file_and_a_deeply_nested_one_are_named_with_the_reason(tmp_path):
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "empty@d.json").write_bytes(b"")
    (tmp_path / "s" / "deep@d.json").write_text("[" * 100_000 + "]" * 100_000)  # json alone: RecursionError
    (tmp_path / "s" / "deepish@d.json").write_text('{"run_name": "x", "a": ' + "[" * 500 + "]" * 500 + "}")
    deep_params = json.loads(records.run_record({"run_name": "p"}, [], status="finished").model_dump_json())
    deep_params["params"] = {"a": json.loads("[" * 900 + "]" * 900)}  # json reads it; pydantic cannot write it
    (tmp_path / "s" / "params@d.json").write_text(json.dumps(deep_params))
    found, skipped = records.read_records(tmp_path)
    assert not found and dict(skipped) == {
        "s/empty@d.json: empty (0 bytes)": 1,
        "s/deep@d.json: nested too deeply: not a record": 1,
        "s/deepish@d.json: schema_version None is not a schema version (an integer from 1)": 1,
        "s/params@d.json: not a record (Maximum serialization depth exceeded)": 1,
    }
    assert records.read_record(tmp_path / "s" / "deep@d.json") is None
    with pytest.raises(records.RecordReadError, match="deep@d.json: nested too deeply"):
        records.read_json(tmp_path / "s" / "deep@d.json")


def test_the_records_command_names_the_file_it_cannot_read(tmp_path):
    deep = tmp_path / "deep@d.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(SystemExit, match=r"skipped deep@d.json: nested too deeply"):
        records.main([str(deep)])


def test_a_fifo_is_never_opened_as_a_record(tmp_path):
    fifo = tmp_path / "r@d.json"
    os.mkfifo(fifo)  # opening it to read would wait for a writer forever
    assert records.read_record(fifo) is None
    with pytest.raises(records.RecordReadError, match="not a regular file"):
        records.read_json(fifo)


def test_the_printer_never_shows_an_older_record_as_this_runs(tmp_path, capsys):
    """`make baseline` prints the record its run wrote: with --since its start, another machine's older
    record of the same name is not shown in its place, and a run that wrote none fails saying so."""
    from record_fixtures import record, write

    older = record("cpu", "adhoc", {"batch": 32}, run_name="minilm-baseline")
    path = records.record_path(tmp_path, "adhoc", "minilm-baseline", "cpu-other-machine")
    write(path, older)
    os.utime(path, (time.time() - 3600, time.time() - 3600))
    started = time.time() - 60
    with pytest.raises(SystemExit, match="no record of minilm-baseline written by this run"):
        records.main([str(tmp_path / "adhoc"), "--run", "minilm-baseline", "--since", str(started)])
    records.main([str(tmp_path / "adhoc"), "--run", "minilm-baseline"])  # without --since: the newest there
    assert "cpu-other-machine" in capsys.readouterr().out
    mine = records.record_path(tmp_path, "adhoc", "minilm-baseline", "cpu-this-machine")
    write(mine, {**older, "device": {**older["device"], "key": "cpu-this-machine"}})
    records.main([str(tmp_path / "adhoc"), "--run", "minilm-baseline", "--since", str(started)])
    assert "cpu-this-machine" in capsys.readouterr().out


def test_a_written_record_says_its_schema_version_so_it_is_never_upgraded_again(tmp_path):
    """A data-parallel run's window rates are the job's already (schema 5): written without its version, the
    record would read as schema 1 and have them multiplied by its ranks on the way in."""
    rates = {"min": 190.0, "median": 200.0, "max": 210.0}
    rec = records.run_record(
        {"run_name": "ddp"},
        [],
        status="finished",
        world_size=2,
        timing={"samples_per_s": 200.0, "samples_per_s_per_device": 100.0, "window_samples_per_s": rates},
    )
    path = tmp_path / "ddp@cpu.json"
    records.write_record(path, rec)
    assert json.loads(path.read_text())["schema_version"] == schema.SCHEMA_VERSION
    assert records.read_record(path)["timing"]["window_samples_per_s"] == rates


@pytest.mark.parametrize("rerun", ["failed", "interrupted", "oom", "diverged"])
@pytest.mark.parametrize("extra_key", [False, True])
def test_a_finished_record_is_replaced_only_by_a_finished_one(tmp_path, rerun, extra_key):
    """A rerun of a finished name (replace_record, `make baseline`) that fails or is interrupted writes its
    record aside, never over the finished one, even one a newer commit wrote (an unknown key); a finished
    rerun replaces it."""
    path = tmp_path / "adhoc" / "base@cpu-x.json"
    first = records.run_record({"run_name": "base"}, [], status="finished")
    records.write_record(path, first)
    if extra_key:  # a newer commit of the same schema version: this code cannot read it, it is still finished
        path.write_text(json.dumps({**json.loads(path.read_text()), "new_section": {"x": 1}}))
    before = path.read_text()
    worse = records.run_record({"run_name": "base"}, [], status=rerun)
    written = records.write_record(path, worse)
    assert path.read_text() == before
    assert written == records.aside_path(path) and records.read_record(written)["run_id"] == worse.run_id
    assert records.read_records(tmp_path)[0] == [] if extra_key else len(records.read_records(tmp_path)[0]) == 1
    again = records.run_record({"run_name": "base"}, [], status="finished")
    assert records.write_record(path, again) == path
    assert records.read_record(path)["run_id"] == again.run_id


def test_a_failed_record_replaces_a_failed_one(tmp_path):
    path = tmp_path / "r@cpu-x.json"
    for status in ("failed", "interrupted", "failed"):
        rec = records.run_record({"run_name": "r"}, [], status=status)
        assert records.write_record(path, rec) == path
        assert records.read_record(path)["status"] == status


@pytest.mark.parametrize("since", ["nan", "inf", "1e400", "-5", str(int(time.time() * 1000)), "yesterday"])
def test_the_printer_refuses_a_since_that_is_no_unix_time_in_seconds(tmp_path, since, capsys):
    """nan, 1e400 and milliseconds were accepted, then answered "no record written by this run"."""
    with pytest.raises(SystemExit) as stopped:
        records.main([str(tmp_path), "--since", since])
    assert stopped.value.code == 2 and "--since: " in capsys.readouterr().err


def test_the_printer_takes_a_since_of_now_in_seconds(tmp_path):
    with pytest.raises(SystemExit, match="no record written by this run"):
        records.main([str(tmp_path), "--since", str(time.time())])
