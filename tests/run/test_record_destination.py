"""The record's destination is checked before anything is built, and a run name is claimed by one process at
a time: a claim nobody holds (its run died, ran on another host, left an empty file, its pid reused) is taken
over, by exactly one of the processes that try at once."""

import json
import multiprocessing
import os
import socket
import subprocess
import sys
import textwrap

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers.run import record_destination, records
from helpers.run.args import ConfigError

WORKERS, TRIALS = 8, 40


def _contend(path: str, start, tried, done, wins) -> None:
    """Try to claim `path` once per trial, all workers at once; a winner holds it until every worker tried,
    then gives it back (odd trials) or dies as a killed run would: lock dropped, file left (even trials)."""
    for trial in range(TRIALS):
        start.wait()
        try:
            claim = record_destination.claim_name(records.Path(path))
        except ConfigError:
            claim = None
        if claim is not None:
            wins.put(trial)
        tried.wait()
        if claim is not None:
            if trial % 2:
                record_destination.release(claim)
            else:
                record_destination._HELD.pop(claim).release()  # a live pid in a file nobody holds: "pid reused"
        done.wait()


def test_many_processes_taking_over_one_stale_claim_get_exactly_one_winner(tmp_path):
    path = tmp_path / "r@cpu.json"
    claim = record_destination._claim_path(path)
    claim.write_text(json.dumps({"host": "old-spot-instance", "pid": 4242, "since": "2026-01-01T00:00:00+00:00"}))
    ctx = multiprocessing.get_context("fork")
    start, tried, done = (ctx.Barrier(WORKERS) for _ in range(3))
    wins = ctx.Queue()
    procs = [ctx.Process(target=_contend, args=(str(path), start, tried, done, wins)) for _ in range(WORKERS)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=300)
    assert [p.exitcode for p in procs] == [0] * WORKERS
    won = [wins.get(timeout=5) for _ in range(wins.qsize())] if wins.qsize() else []
    assert sorted(won) == list(range(TRIALS))  # every trial: one winner, never two, never none


HOLDER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from helpers.run import record_destination
    record_destination.claim_name(Path(sys.argv[1]))
    print("held", flush=True)
    time.sleep(120)
""")


def test_a_claim_held_by_a_live_run_is_refused_naming_its_holder_and_freed_when_it_dies(tmp_path):
    path = tmp_path / "r@cpu.json"
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(path)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(
            ConfigError, match=f"is running on this device now .claimed by pid {holder.pid} on {socket.gethostname()}"
        ):
            record_destination.claim_name(path)
    finally:
        holder.kill()
        holder.wait()
    claim = record_destination.claim_name(path)  # killed: its file is left, its lock went with it
    assert json.loads(claim.read_text())["pid"] == os.getpid()
    record_destination.release(claim)
    assert not claim.exists()


def test_a_name_claimed_again_by_its_process_is_its_own_and_one_release_frees_it_for_another(tmp_path):
    path = tmp_path / "r@cpu.json"
    claim = record_destination.claim_name(path)
    assert record_destination.claim_name(path) == claim  # a notebook cell run again
    ctx = multiprocessing.get_context("fork")
    refused = ctx.Process(target=record_destination.claim_name, args=(path,))
    refused.start()
    refused.join(timeout=60)
    record_destination.release(claim)  # once, though claimed twice
    granted = ctx.Process(target=record_destination.claim_name, args=(path,))
    granted.start()
    granted.join(timeout=60)
    assert (refused.exitcode, granted.exitcode) == (1, 0)


def test_a_folder_at_the_claim_path_is_removed_when_empty_and_named_when_not(tmp_path):
    path = tmp_path / "r@cpu.json"
    claim = record_destination._claim_path(path)
    claim.mkdir()
    record_destination.release(record_destination.claim_name(path))
    claim.mkdir()
    (claim / "x").write_text("someone's")
    with pytest.raises(ConfigError, match=f"a folder is at the claim path {claim}"):
        record_destination.claim_name(path)


def test_a_run_never_removes_a_claim_it_does_not_hold(tmp_path):
    claim = record_destination._claim_path(tmp_path / "r@cpu.json")
    claim.write_text("{}")
    record_destination.release(claim)
    assert claim.exists()


@pytest.mark.parametrize("kind", ["folder", "FIFO"])
def test_a_folder_or_fifo_with_the_records_name_is_refused_before_the_run(tmp_path, kind):
    path = tmp_path / "r@cpu.json"
    path.mkdir() if kind == "folder" else os.mkfifo(path)
    with pytest.raises(records.RecordWriteError, match=f"a {kind} is at the record's path {path}"):
        record_destination.check_destination(path)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.one_of(
        st.binary(max_size=40),
        st.text(max_size=40).map(str.encode),
        st.fixed_dictionaries(
            {"host": st.text(max_size=8), "pid": st.integers(-5, 2**22), "since": st.text(max_size=8)}
        ).map(lambda d: json.dumps(d).encode()),
    )
)
def test_any_claim_file_nobody_holds_is_taken_over_and_a_held_one_never_is(tmp_path, content):
    path = tmp_path / "r@cpu.json"
    claim = record_destination._claim_path(path)
    claim.write_bytes(content)
    mine = record_destination.claim_name(path)
    assert mine == claim and json.loads(claim.read_text())["pid"] == os.getpid()
    ctx = multiprocessing.get_context("fork")
    other = ctx.Process(target=record_destination.claim_name, args=(path,))  # held here: the other process is refused
    other.start()
    other.join(timeout=60)
    assert other.exitcode == 1 and claim.exists()
    record_destination.release(mine)
    assert not claim.exists()


def test_a_record_this_code_cannot_read_is_kept_unless_the_user_asks_to_replace_it(tmp_path):
    """A newer commit's finished record (a key this code does not know) at the run's path: refused, naming it;
    replace_record=True claims the name (and only a finished rerun replaces it: records.write_record)."""
    path = tmp_path / "adhoc" / "r@cpu-x.json"
    path.parent.mkdir()
    finished = records.as_json(records.run_record({"run_name": "r"}, [], status="finished"))
    path.write_text(json.dumps({**finished, "new_section": {"x": 1}}))
    with pytest.raises(ConfigError, match="new_section: Extra inputs are not permitted.*it is kept"):
        record_destination.claim_name(path)
    record_destination.release(record_destination.claim_name(path, replace=True))
    assert json.loads(path.read_text())["new_section"] == {"x": 1}
