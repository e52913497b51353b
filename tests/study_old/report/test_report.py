"""The report from many machines' records: one frame, device column groups, findings first, same bytes twice."""

import subprocess
from pathlib import Path

import pytest
from record_fixtures import record
from record_fixtures import write as write_record

from helpers import steps
from helpers.run import records
from helpers.run.args import build_args
from helpers.study import frame
from helpers.study.notation import short_device
from helpers.study.report.build import build_report, first_runs, main
from helpers.study.sweep.suites import expand, resolve_suite


def point(suite: str, variant: str = "quick", **match):
    """Return the run name and parameters of the suite point whose parameters include `match`."""
    for p in expand(resolve_suite(suite), variant):
        if all(p.params.get(k) == v for k, v in match.items()):
            return p.run_name, p.params
    raise AssertionError(f"no {suite} point with {match}")


def write(folder: Path, rec: dict) -> Path:
    """Write `rec` where the run path would: <folder>/<suite>/<run_name>@<device>.json."""
    return write_record(records.record_path(folder, rec["suite"], rec["run_name"], rec["device"]["key"]), rec)


@pytest.fixture(scope="module")
def two_machines(tmp_path_factory, tiny_model_dir, tiny_data_dir):
    """Results of two machines copied side by side: this CPU (a real run) and a GPU box (fixtures)."""
    root = tmp_path_factory.mktemp("results")
    # machine A: a real run through the run path, as a batch_scaling point
    name, params = point("batch_scaling", batch=8)
    args = build_args(
        {
            **params,
            "model_name": str(tiny_model_dir),
            "data_dir": str(tiny_data_dir),
            "run_name": name,
            "suite": "batch_scaling",
            "results_path": str(root / "cpu-box"),
            "train_subset": 128,
            "max_steps": 9,
            "log_every": 3,
        }
    )
    steps.run_all(args)
    # machine B: the same points on an A100 and a trn1 (fixtures in the shape those runs write)
    for batch, rate in ((8, 300.0), (16, 520.0), (32, 900.0), (64, 1250.0)):
        name, params = point("batch_scaling", batch=batch)
        write(
            root / "gpu-box",
            record(
                "a100",
                "batch_scaling",
                params,
                run_name=name,
                samples_per_s=rate,
                step_ms=1000 * batch / rate,
                tflops=rate / 100,
            ),
        )
    name, params = point("speedup", preset="optimized")
    write(
        root / "gpu-box",
        record("trn1", "speedup", params, run_name=name, samples_per_s=800.0, compile_s=300.0, compilations=12),
    )
    return root


def build(root: Path, out: Path, **kw) -> list[Path]:
    return build_report(root, out / "Experiment", out / "Pictures", command="python -m helpers.study.report", **kw)


def test_a_record_copied_from_another_machine_is_its_own_row(two_machines):
    df, skipped = frame.load(two_machines, include_fixtures=True)
    assert not skipped
    batch8 = df[(df["suite"] == "batch_scaling") & (df["batch"] == 8)]
    assert sorted(batch8["device_type"]) == ["cpu", "cuda"]  # one point, two devices: two rows, none dropped
    assert set(batch8["device"]) == {"NVIDIA A100-SXM4-40GB", next(d for d in batch8["device"] if "A100" not in d)}


def test_device_tables_show_every_machine_and_findings_open_the_report(two_machines, tmp_path):
    build(two_machines, tmp_path, include_fixtures=True)
    table = (tmp_path / "Experiment" / "batch_scaling.md").read_text()
    df, _ = frame.load(two_machines, include_fixtures=True)
    this_cpu = short_device(next(d for d in df[df["device_type"] == "cpu"]["device"]))  # Xeon, EPYC, ...
    assert "samples/s · A100-SXM4-40GB" in table and f"samples/s · {this_cpu}" in table
    text = (tmp_path / "Experiment" / "REPORT.md").read_text()
    first_heading = text.split("\n## ")[0]
    assert first_heading.split("\n\n")[2].startswith("**Bottom line.**")  # the answer, then the findings
    assert "](claims.md#claim-" in first_heading  # each row links its claim's section on claims.md
    assert "What do the study's claims come to" in (tmp_path / "Experiment" / "claims.md").read_text()
    assert "| claim" in first_heading or "claim |" in first_heading
    assert "AWS Trainium (trn1.2xlarge)" in text and "A100" in text
    roofline = (tmp_path / "Experiment" / "roofline.md").read_text()  # a derived section reads every suite's runs
    assert "No runs with FLOP counts" not in roofline and "batch_scaling" in roofline, roofline


def test_a_second_report_is_byte_identical(two_machines, tmp_path):
    first = {p.name: p.read_bytes() for p in build(two_machines, tmp_path / "a", include_fixtures=True)}
    second = {p.name: p.read_bytes() for p in build(two_machines, tmp_path / "b", include_fixtures=True)}
    assert first.keys() == second.keys() and any(n.endswith(".png") for n in first)
    for name in first:
        assert first[name] == second[name], f"{name} differs between two renders of the same records"


def test_fixtures_never_reach_the_report_unless_asked(two_machines, tmp_path):
    build(two_machines, tmp_path, plots=False)
    text = (tmp_path / "Experiment" / "REPORT.md").read_text()
    assert "A100-SXM4-40GB" not in text and "AWS Trainium (trn1.2xlarge)" not in text  # measured devices
    df, _ = frame.load(two_machines)
    assert short_device(next(d for d in df[df["device_type"] == "cpu"]["device"])) in text  # the real CPU run


def test_rendering_starts_no_process(two_machines, tmp_path, monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError(f"the report started a process: {args}")

    monkeypatch.setattr(subprocess, "Popen", refuse)
    monkeypatch.setattr(subprocess, "run", refuse)
    build(two_machines, tmp_path, include_fixtures=True)


def test_a_report_without_records_says_what_to_run(tmp_path):
    (tmp_path / "empty").mkdir()
    build(tmp_path / "empty", tmp_path, plots=False)
    assert (
        "No runs of this suite are recorded yet: run `python -m helpers.study.sweep batch_scaling`"
        in (tmp_path / "Experiment" / "batch_scaling.md").read_text()
    )


def test_every_suite_report_spec_names_known_columns(tmp_path):
    from helpers.study.report.tables import LABELS
    from helpers.study.sweep.suites import find_suites

    for suite in find_suites():
        for value in suite.report.get("values", []):
            assert value in LABELS, f"{suite.name}: unknown report value {value}"


@pytest.mark.parametrize("make", ["missing", "empty", "unreadable"])
def test_a_results_folder_without_records_is_refused_before_anything_is_written(tmp_path, capsys, make):
    results = tmp_path / "resluts"  # a mistyped folder
    if make != "missing":
        (results / "s").mkdir(parents=True)
    if make == "unreadable":
        (results / "s" / "deep@d.json").write_text("[" * 100_000 + "]" * 100_000)
    out = tmp_path / "out"
    with pytest.raises(SystemExit):
        main(
            [
                "--results",
                str(results),
                "--out-dir",
                str(out / "Experiment"),
                "--pictures",
                str(out / "Pictures"),
                "--no-plots",
            ]
        )
    err = capsys.readouterr().err
    assert f"--results {results}: " in err and "nothing was written" in err
    if make == "unreadable":
        assert "deep@d.json: nested too deeply" in err
    assert not out.exists()


def test_the_first_runs_table_shows_each_devices_smoke_run_and_says_what_to_run_without_one():
    assert "No smoke run yet: `make cloud TARGET=trn1`" in first_runs(frame.frame([]))
    smoke = record(
        "a100",
        "smoke",
        {"model_name": "bert-base-random", "batch": 32, "max_length": 128},
        run_name="smoke-full-x",
        samples_per_s=838.5,
        step_ms=35.0,
    )
    other = record("a100", "batch_scaling", {"batch": 8}, run_name="b8")
    failed = record("cpu", "smoke", {"batch": 8}, run_name="smoke-quick-y", status="failed")
    text = first_runs(frame.frame([smoke, other, failed]))
    rows = [line for line in text.splitlines() if line.startswith("| ") and "device" not in line]
    assert len(rows) == 1 and "bert-base-random" in rows[0] and "32 × 128" in rows[0] and "838.5" in rows[0]


@pytest.fixture()
def one_record(tmp_path) -> Path:
    """A results folder holding one record (a first cloud run's `smoke` folder)."""
    name, params = point("batch_scaling", batch=8)
    write(tmp_path / "smoke", record("a100", "batch_scaling", params, run_name=name))
    return tmp_path / "smoke"


def test_a_mistyped_suites_folder_is_refused_before_anything_is_written(one_record, tmp_path, capsys):
    out = tmp_path / "out"
    for typo in (tmp_path / "Experiment" / "suite", one_record):  # missing; a folder without suite files
        with pytest.raises(SystemExit):
            main(["--results", str(one_record), "--out-dir", str(out), "--suites-dir", str(typo), "--no-plots"])
        assert f"--suites-dir: {typo}: " in capsys.readouterr().err
    assert not out.exists()


def test_a_report_of_another_folder_never_rewrites_the_committed_report(one_record, tmp_path, monkeypatch, capsys):
    """`report --results Experiment/results/smoke` would have rewritten every committed page from 1 record:
    refused unless the report goes elsewhere (--out-dir, and --pictures where it draws)."""
    committed = tmp_path / "Experiment"
    monkeypatch.setattr("helpers.study.report.build.OUT_DIR", str(committed))
    monkeypatch.setattr("helpers.study.report.build.PICTURES_DIR", str(tmp_path / "Pictures"))
    monkeypatch.setattr("helpers.study.report.build.RESULTS", str(one_record.parent))
    with pytest.raises(SystemExit):
        main(["--results", str(one_record), "--no-plots"])
    assert f"the committed report (--out-dir {committed}) is made from every record" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["--results", str(one_record), "--out-dir", str(tmp_path / "mine")])  # its plots: Pictures/
    assert "(--pictures " in capsys.readouterr().err
    assert not committed.exists() and not (tmp_path / "Pictures").exists()
    main(["--results", str(one_record), "--out-dir", str(tmp_path / "mine"), "--no-plots"])
    assert (tmp_path / "mine" / "REPORT.md").exists()
    main(["--results", str(one_record.parent) + "/", "--no-plots"])  # the committed report's own folder
    assert (committed / "REPORT.md").exists()
