"""helpers/study/decide/command.py: `python -m helpers.study.decide` prints a job's table, writes it where
asked, reads the suites' current points, names records it cannot read and refuses a job too large."""

import pytest

from helpers.run import records, schema
from helpers.study import frame
from helpers.study.decide import command
from tests.record_fixtures import record, write
from tests.study.decide.job_records import OPTIMIZED, df, results  # noqa: F401 - fixtures


def test_cli_prints_the_table_for_a_job(results, capsys):
    command.main(["--epochs", "3", "--rows", "16000", "--target-accuracy", "0.94", "--results", str(results)])
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("Which device for 3 epochs")
    header = next(line for line in out if line.startswith("| device"))
    assert "job $" in header and "to target" in header
    source = {line.split("|")[1].strip(): line.split("|")[2].strip() for line in out if line.startswith("| ")}
    assert {
        d: source[d]
        for d in ("AWS Trainium (trn1.2xlarge)", "A100-SXM4-40GB", "Xeon @ 2.80GHz", "XLA CPU (Xeon @ 2.80GHz)")
    } == {
        "AWS Trainium (trn1.2xlarge)": "measured",
        "A100-SXM4-40GB": "measured",
        "Xeon @ 2.80GHz": "proxy",
        "XLA CPU (Xeon @ 2.80GHz)": "proxy",
    }
    assert out[-1].startswith("For 3 epochs over 16,000 rows")
    for bad in (["--runs-sharing-cache", "0"], ["--target-accuracy", "94"], ["--lora-r", "-1"]):
        with pytest.raises(SystemExit):
            command.main([*bad, "--results", str(results)])
    command.main(["--model", "roberta-base", "--lora-r", "8", "--shared-instance", "--results", str(results)])
    out = capsys.readouterr().out
    assert "(roberta-base, LoRA r=8)" in out and "No record for roberta-base, LoRA r=8" in out


def test_cli_writes_a_users_job_where_asked_never_over_the_reports_figure(results, tmp_path):
    out = tmp_path / "my-job"
    command.main(["--epochs", "5", "--results", str(results), "--write", str(out)])
    page = (out / "decide.md").read_text()
    assert page.startswith("<!-- Written by `python -m helpers.study.decide") and "Which device for 5 epochs" in page
    assert "![job cost against epochs](decide_cost.png)" in page
    assert (out / "decide_cost.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_cli_names_records_it_cannot_read_and_still_prints_the_table(results, capsys):
    import json

    (results / "speedup" / "bad@cpu-x.json").write_text(
        json.dumps({"schema_version": schema.SCHEMA_VERSION, "run_id": "b", "run_name": "bad", "status": "exploded"})
    )
    newer = {"schema_version": schema.SCHEMA_VERSION + 1, "run_name": "later", "status": "finished"}
    (results / "speedup" / "later@cpu-x.json").write_text(json.dumps(newer))
    (results / "speedup" / "cut@cpu-x.json").write_text('{"run_name": "cut", "sta')
    command.main(["--epochs", "3", "--rows", "16000", "--results", str(results)])
    out, err = capsys.readouterr()
    assert "A100" in out and "bad" not in out  # the table of the valid records
    lines = err.splitlines()
    assert any(line.startswith("skipped record speedup/bad@cpu-x.json: status: ") for line in lines), err
    assert f"skipped record speedup/later@cpu-x.json: schema_version {schema.SCHEMA_VERSION + 1} is newer" in err
    assert "skipped record speedup/cut@cpu-x.json: cut short or not JSON" in err


def test_the_cli_reads_only_the_suites_current_points(results, capsys):
    old = record(
        "t4", "speedup", OPTIMIZED, samples_per_s=50.0, run_name="speedup-full-preset=optimized-000000", fixture=False
    )  # a point the suite no longer expands to: superseded
    path = records.record_path(results, "speedup", old["run_name"], old["device"]["key"])
    write(path, old)
    command.main(["--results", str(results)])
    devices = {line.split("|")[1].strip() for line in capsys.readouterr().out.splitlines() if line.startswith("| ")}
    assert "A100-SXM4-40GB" in devices and "Tesla T4" not in devices and "T4" in devices  # the study's T4 only
    assert frame.load(results)[0]["device"].str.contains("Tesla T4").any()  # the record is there, left out


def test_the_readme_command_prints_the_table_of_cost_md(capsys):
    command.main(["--epochs", "3", "--rows", "16000", "--target-accuracy", "0.94"])  # the README's example
    printed = [line for line in capsys.readouterr().out.splitlines() if line.startswith("|")]
    from helpers.run.paths import repo_path

    committed = [line for line in repo_path("Experiment/cost.md").read_text().splitlines() if line.startswith("|")]
    assert printed == committed


@pytest.mark.parametrize(
    "flag, value",
    [
        ("--epochs", "1e308"),
        ("--epochs", "inf"),
        ("--rows", "10^350"),
        ("--rows", "1" + "0" * 350),
        ("--rows", "2.5"),
        ("--rows", "1e10"),
    ],
)
def test_a_job_too_large_for_finite_costs_is_refused_clearly(results, capsys, flag, value):
    with pytest.raises(SystemExit):
        command.main([flag, value, "--results", str(results)])
    err = capsys.readouterr().err
    assert "--epochs" in err if flag == "--epochs" else "--rows" in err
    assert "Traceback" not in err and "$inf" not in err


def test_a_deeply_nested_record_is_named_and_the_table_still_printed(results, capsys):
    (results / "speedup" / "deep@cpu-x.json").write_text("[" * 100_000 + "]" * 100_000)
    command.main(["--rows", "1e5", "--results", str(results)])  # 1e5 reads as the whole number 100,000
    out, err = capsys.readouterr()
    assert "A100" in out and "100,000 rows" in out
    assert "skipped record speedup/deep@cpu-x.json: nested too deeply" in err


def test_a_mistyped_suites_folder_is_refused(results, tmp_path, capsys):
    """A typo in --suites-dir read no suite, so every measured device dropped out of the decision."""
    with pytest.raises(SystemExit):
        command.main(["--results", str(results), "--suites-dir", str(tmp_path / "suite")])
    assert "no such folder of suite files" in capsys.readouterr().err
