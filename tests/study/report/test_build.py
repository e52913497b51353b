"""study/report/build.py: the report from many machines' records: one frame, device column groups, the findings
first, the same bytes twice, fixtures only when asked, and a results folder that cannot make a report refused."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from record_fixtures import record, write

from study import frame
from study.report.build import build_report, first_runs, main
from study.report.tables import LABELS
from study.sweep.suites import expand, find_suites, resolve_suite


def point(suite: str, variant: str = "quick", **match):
    """Return the run name and parameters of the suite point whose parameters include `match`."""
    for p in expand(resolve_suite(suite), variant):
        if all(p.params.get(k) == v for k, v in match.items()):
            return p.run_name, p.params
    raise AssertionError(f"no {suite} point with {match}")


@pytest.fixture(scope="module")
def two_machines(tmp_path_factory) -> Path:
    """Results of two machines copied side by side: a CPU box and a GPU box with a trn1 beside it."""
    root = tmp_path_factory.mktemp("results")
    for batch, rate in ((8, 300.0), (16, 520.0), (32, 900.0), (64, 1250.0)):
        name, params = point("batch_scaling", batch=batch)
        write(root / "gpu-box", record("a100", "batch_scaling", params, run_name=name, samples_per_s=rate))
        write(root / "cpu-box", record("cpu", "batch_scaling", params, run_name=name, samples_per_s=rate / 20))
    name, params = point("speedup", preset="optimized")
    trn1 = record("trn1", "speedup", params, run_name=name, samples_per_s=800.0, compile_s=300.0, compilations=12)
    write(root / "gpu-box", trn1)
    write(root / "cpu-box", {**record("cpu", "speedup", params, run_name=name), "fixture": False})
    return root


def build(root: Path, out: Path, **kw) -> list[Path]:
    return build_report(root, out / "Experiment", out / "Pictures", command="python -m study.report", **kw)


def test_a_record_copied_from_another_machine_is_its_own_row(two_machines):
    df, skipped = frame.load(two_machines, include_fixtures=True)
    batch8 = df[(df["suite"] == "batch_scaling") & (df["batch"] == 8)]
    assert not skipped and sorted(batch8["device_type"]) == ["cpu", "cuda"]  # one point, two devices: two rows


def test_device_tables_show_every_machine_and_findings_open_the_report(two_machines, tmp_path):
    build(two_machines, tmp_path, include_fixtures=True, plots=False)
    table = (tmp_path / "Experiment" / "batch_scaling.md").read_text()
    assert "samples/s · A100-SXM4-40GB" in table and "samples/s · Xeon @ 2.80GHz" in table
    text = (tmp_path / "Experiment" / "REPORT.md").read_text()
    first_heading = text.split("\n## ")[0]
    assert first_heading.split("\n\n")[2].startswith("**Bottom line.**")  # the answer, then the findings
    assert "](claims.md#claim-" in first_heading and first_heading.rstrip().split("\n\n")[-1].startswith("Each claim")
    roofline = (tmp_path / "Experiment" / "roofline.md").read_text()  # a derived section reads every suite's runs
    assert "No runs with FLOP counts" not in roofline and "batch_scaling" in roofline


def test_a_second_report_is_byte_identical(two_machines, tmp_path):
    first = {p.name: p.read_bytes() for p in build(two_machines, tmp_path / "a", include_fixtures=True)}
    second = {p.name: p.read_bytes() for p in build(two_machines, tmp_path / "b", include_fixtures=True)}
    assert first.keys() == second.keys() and {"decide_cost.png", "batch_scaling.png", "REPORT.md"} <= set(first)
    for name in first:
        assert first[name] == second[name], f"{name} differs between two renders of the same records"


def test_fixtures_never_reach_the_report_unless_asked_and_rendering_starts_no_process(
    two_machines, tmp_path, monkeypatch
):
    def refuse(*args, **kwargs):
        raise AssertionError(f"the report started a process: {args}")

    monkeypatch.setattr(subprocess, "Popen", refuse)
    build(two_machines, tmp_path, plots=False)
    text = (tmp_path / "Experiment" / "REPORT.md").read_text()
    assert "A100-SXM4-40GB" not in text and "AWS Trainium (trn1.2xlarge)" not in text
    assert "Xeon" in text  # the one record that is no fixture


def test_a_report_without_records_says_what_to_run(tmp_path):
    (tmp_path / "empty").mkdir()
    build(tmp_path / "empty", tmp_path, plots=False)
    said = (tmp_path / "Experiment" / "batch_scaling.md").read_text()
    assert "No runs of this suite are recorded yet: run `python -m study.sweep batch_scaling`" in said


def test_every_suite_report_spec_names_known_columns():
    for suite in find_suites():
        for value in suite.report.get("values", []):
            assert value in LABELS, f"{suite.name}: unknown report value {value}"


@pytest.mark.parametrize("make", ["missing", "empty", "unreadable"])
def test_a_results_folder_without_records_is_refused_before_anything_is_written(tmp_path, capsys, make):
    results = tmp_path / "resluts"  # a mistyped folder
    if make != "missing":
        (results / "s").mkdir(parents=True)
    if make == "unreadable":
        (results / "s" / "cut@d.json").write_text('{"run_name": ')
    out = tmp_path / "out"
    with pytest.raises(SystemExit):
        main(["--results", str(results), "--out-dir", str(out / "E"), "--pictures", str(out / "P"), "--no-plots"])
    err = capsys.readouterr().err
    assert f"--results {results}: " in err and "nothing was written" in err and not out.exists()
    assert make != "unreadable" or "cut@d.json: empty, cut short or not JSON" in err


def test_the_first_runs_table_shows_each_devices_smoke_run_and_says_what_to_run_without_one():
    assert "No smoke run yet: `make cloud TARGET=trn1`" in first_runs(frame.frame([]))
    params = {"model_name": "bert-base-random", "batch": 32, "max_length": 128}
    smoke = record("h200", "smoke", params, run_name="smoke-full-x", samples_per_s=838.5, step_ms=35.0)
    steps = [record("h200", "batch_scaling", {"batch": b}, run_name=f"b{b}", step_ms=19.0) for b in (8, 64)]
    failed = record("cpu", "smoke", {"batch": 8}, run_name="smoke-quick-y", status="failed")
    text = first_runs(frame.frame([smoke, *steps, failed]))
    rows = [line for line in text.splitlines() if line.startswith("| H200")]
    assert (
        len(rows) == 1 and rows[0].startswith("| H200 (host-bound) ") and "32 × 128" in rows[0] and "838.5" in rows[0]
    )


def test_a_report_of_another_folder_never_rewrites_the_committed_report(tmp_path, monkeypatch, capsys):
    name, params = point("batch_scaling", batch=8)
    one = tmp_path / "results" / "smoke"
    write(one, {**record("a100", "batch_scaling", params, run_name=name), "fixture": False})
    committed = tmp_path / "Experiment"
    monkeypatch.setattr("study.report.build.OUT_DIR", str(committed))
    monkeypatch.setattr("study.report.build.PICTURES_DIR", str(tmp_path / "Pictures"))
    monkeypatch.setattr("study.report.build.RESULTS", str(one.parent))
    with pytest.raises(SystemExit):
        main(["--results", str(one), "--no-plots"])
    assert f"the committed report (--out-dir {committed}) is made from every record" in capsys.readouterr().err
    main(["--results", str(one), "--out-dir", str(tmp_path / "mine"), "--no-plots"])
    assert (tmp_path / "mine" / "REPORT.md").exists() and not committed.exists()
