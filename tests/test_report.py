"""Report tables from hand-made records (exact Markdown, published figures beside), files and plots."""
from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from helpers import records, report, suites, tables
from helpers.run.args import RunConfig

SEQ_SUITE = """
    title = "Sequence length (test)"
    notebook = "Nvidia/baseline.ipynb"
    [quick]
    params = { model_name = "minilm", batch = 16 }
    grid = { max_length = [32, 128], seed = [1, 2] }
    [full]
    grid = { max_length = [32] }
    [report]
    keys = ["max_length"]
    values = ["step_ms", "test_acc"]
    [[report.published]]
    file = "seq_len_profile.csv"
    match = { max_length = "max_length" }
    columns = { step_time_ms = "step ms, published (trn1)" }
"""


def make_record(point: suites.Point, suite: str, status: str = "finished", device: str = "Test CPU",
                step_s: float | None = None, acc: float | None = None, **sections) -> dict:
    """Return a record as a notebook writes it, with only the sections a test needs."""
    rec = {"schema_version": 2, "run_name": point.run_name, "suite": suite, "status": status,
           "params": dict(point.params), "device": {"type": "cpu", "name": device},
           "precision": {"used": point.params.get("precision", "bf16")},
           "started_at": "2026-11-01T10:00:00+00:00", "finished_at": "2026-11-01T10:01:00+00:00",
           "libraries": {"torch": "2.13.0", "transformers": "5.23.0"}}
    if step_s is not None:
        rec["timing"] = {"step_time_median_s": step_s, "samples_per_s": 16 / step_s,
                         "tokens_per_s": 16 * point.params.get("max_length", 32) / step_s,
                         "train_time_s": 10 * step_s}
    if acc is not None:
        rec["metrics"] = {"test_accuracy": acc, "val_accuracy": acc, "final_loss": 1 - acc}
    rec.update(sections)
    return rec


def write_results(path: Path, recs: list[dict], broken: bool = False) -> Path:
    with open(path, "w") as f:
        for i, rec in enumerate(recs):
            f.write(json.dumps(rec) + "\n")
            if broken and i == 0:
                f.write('{"run_name": "cut short by a ki\n')
    return path


@pytest.fixture()
def seq_suite(tmp_path) -> suites.Suite:
    (tmp_path / "suites").mkdir()
    path = tmp_path / "suites" / "seq.toml"
    path.write_text(textwrap.dedent(SEQ_SUITE))
    return suites.load_suite(path)


def seq_records(suite: suites.Suite) -> list[dict]:
    l32s1, l32s2, l128s1, l128s2 = suites.expand(suite, "quick")
    stale = suites.Point("seq-quick-max_length=32,seed=1-000000", l32s1.params)  # an older suite definition
    return [make_record(l32s1, "seq", status="failed"),  # failed first, then finished on the retry
            make_record(l32s1, "seq", step_s=0.100, acc=0.50),
            make_record(l32s2, "seq", step_s=0.120, acc=0.60),
            make_record(l128s1, "seq", step_s=0.400, acc=0.55),
            make_record(l128s2, "seq", status="oom"),
            make_record(stale, "seq", step_s=9.0, acc=0.1)]


def test_latest_record_per_run_name_is_the_last_finished_one(seq_suite):
    point = suites.expand(seq_suite, "quick")[0]
    recs = [make_record(point, "seq", acc=0.1), make_record(point, "seq", acc=0.2),
            make_record(point, "seq", status="failed")]
    assert report.latest_records(recs)[point.run_name]["metrics"]["test_accuracy"] == 0.2
    assert report.latest_records(recs[2:])[point.run_name]["status"] == "failed"


def test_grid_table_is_exact_with_published_beside(seq_suite):
    selected = report.select([seq_suite], report.latest_records(seq_records(seq_suite)))
    assert [r["params"]["seed"] for r in selected["seq"]["quick"]] == [1, 2, 1, 2]
    assert "full" not in selected["seq"]
    expected = textwrap.dedent("""\
        `quick` variant (4 runs on Test CPU); fixed: model_name=minilm, batch=16.

        | max_length | runs | step ms | test acc | step ms, published (trn1) |
        |:---|---:|---:|---:|---:|
        | 32 | 2 | 110 ± 14 | 0.55 ± 0.071 | 55 |
        | 128 | 1 (+1 oom) | 400 | 0.55 | 115 |

        Cells with ± are the mean ± standard deviation over a row's runs (its seeds).""")
    assert tables.section(seq_suite, selected) == expected


def test_a_suite_without_runs_says_so_and_still_shows_the_published_figures(seq_suite):
    expected = textwrap.dedent("""\
        No runs yet — run `python -m helpers.sweep seq`.

        Published figures of the study, for when it runs:

        | max_length | runs | step ms | test acc | step ms, published (trn1) |
        |:---|---:|---:|---:|---:|
        | 32 | 0 | — | — | 55 |
        | 128 | 0 | — | — | 115 |""")
    assert tables.section(seq_suite, {"seq": {}}) == expected


def test_published_rows_map_onto_suite_parameters():
    spec = suites.resolve_suite("precision").report["published"][0]
    labels, rows = tables.load_published(spec, ["precision", "max_length"])
    assert labels == ["accuracy, published (trn1)"]
    assert rows[("bf16-pure-sr", "16")] == {"accuracy, published (trn1)": "0.9305"}
    flags = suites.resolve_suite("compiler_flags").report["published"][0]
    _, rows = tables.load_published(flags, ["optlevel", "model_type", "distribution_strategy"])
    assert ("3", "transformer", "none") in rows  # an empty flag in the CSV is `none` here


def test_speedup_table_sets_measured_beside_published():
    suite = suites.resolve_suite("speedup")
    base, opt = suites.expand(suite, "quick")
    recs = [make_record(base, "speedup", timing={"train_time_s": 100.0, "samples_per_s": 6.0}),
            make_record(opt, "speedup", timing={"train_time_s": 20.0, "samples_per_s": 50.0})]
    rows = base.params["train_subset"]
    expected = textwrap.dedent(f"""\
        |  | measured (Test CPU, quick) | published (trn1) | published (T4) | published (L4) | published (A100) |
        |:---|---:|---:|---:|---:|---:|
        | baseline train s | 100 | 453.02 | 1365.45 | 387.14 | 284.12 |
        | optimized train s | 20 | 82.20 | 367.18 | 53.50 | 39.07 |
        | speedup (baseline / optimized) | 5 | 5.51 | 3.72 | 7.24 | 7.27 |
        | optimized samples/s | 50 | 279.94 | 43.58 | 299.08 | 409.53 |
        | train rows × epochs | {rows} × 1 | 16,000 × 3 | 16,000 × 3 | 16,000 × 3 | 16,000 × 3 |""")
    assert tables.section(suite, {"speedup": {"quick": recs}}).split("\n\n")[0] == expected


def test_token_stats_table():
    suite = suites.resolve_suite("token_lengths")
    (point,) = suites.expand(suite, "quick")
    stats = {"rows": 16000, "min": 3, "max": 87, "mean": 22.31, "median": 19.0, "p90": 38, "p95": 45,
             "p99": 60, "chosen_pow2": 64}
    body = tables.section(suite, {"token_lengths": {"quick": [make_record(point, "token_lengths",
                                                                          token_stats=stats)]}})
    assert "| statistic | tokens (quick: minilm tokenizer) |" in body
    assert "| covers 95% | 45 |" in body and "| rows | 16,000 |" in body
    assert "| chosen length (95% coverage, next power of two) | 64 |" in body


def test_every_suite_report_spec_names_real_parameters_metrics_and_columns():
    names = set(RunConfig().to_dict())
    for suite in suites.find_suites():
        spec = suite.report
        assert spec.get("table", "grid") in tables.SECTIONS, suite.name
        assert set(spec.get("keys", [])) <= names, suite.name
        assert set(spec.get("values", [])) <= set(tables.METRICS), suite.name
        for pub in spec.get("published", []):
            labels, rows = tables.load_published(pub, spec["keys"])
            assert rows and all("published (" in label for label in labels), suite.name


def plot_records() -> list[dict]:
    """Records for every suite that draws a figure: two seeds per point, plausible numbers."""
    recs = []
    for name in ("batch_scaling", "seq_len", "lr_llrd", "precision", "speedup", "profile_memory"):
        for i, point in enumerate(suites.expand(suites.resolve_suite(name), "quick")):
            step_s = 0.05 * point.params.get("batch", 16) * point.params.get("max_length", 32) / 512
            systems = {"flops_per_step": 1e11, "arithmetic_intensity": 20 + i, "achieved_tflops": 0.05 + i / 100,
                       "mfu": 0.1, "peak_tflops": 1.5, "mem_bw_gbps": 20.0, "bound": "memory"}
            profile = {"class_share": {"matmul": 0.5, "attention": 0.1, "elementwise_norm_act": 0.2,
                                       "optimizer": 0.1, "copy_data_movement": 0.05, "other": 0.03,
                                       "host_gap": 0.02}}
            recs.append(make_record(point, name, step_s=step_s, acc=0.3 + (i % 7) / 20, systems=systems,
                                    profile=profile, memory={"host_peak_rss_gib": 1 + point.params.get("batch", 16) / 64}))
    return recs


def test_report_writes_every_table_and_plot(tmp_path):
    results = write_results(tmp_path / "runs.jsonl", plot_records(), broken=True)
    written = report.build_report(results, tmp_path / "Experiment", tmp_path / "Pictures",
                                  command="python -m helpers.report --results runs.jsonl")
    mds = {p.name: p.read_text() for p in written if p.suffix == ".md"}
    assert len(mds) == 14 and "REPORT.md" in mds
    for text in mds.values():
        assert text.startswith("<!-- Written by `python -m helpers.report --results runs.jsonl`")
    full = mds["REPORT.md"]
    assert "1 broken lines skipped" in full and "| Test CPU | 83 / 83 | 2026-11-01 to 2026-11-01 |" in full
    assert full.index("## 1. Token-length") < full.index("## 2. Batch") < full.index("## 13. Scaling")
    assert "No runs yet — run `python -m helpers.sweep scaling`." in full
    assert "| 0.00015 | 0.95 | 2 |" in mds["lr_llrd.md"]
    pngs = sorted(p.name for p in written if p.suffix == ".png")
    assert pngs == ["batch_scaling.png", "cost.png", "lr_llrd_heatmap.png", "memory_vs_batch.png",
                    "precision_accuracy.png", "profile_op_classes.png", "roofline.png", "seq_len.png",
                    "speedup.png"]
    for png in (tmp_path / "Pictures").iterdir():
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    assert "![batch scaling](../Pictures/batch_scaling.png)" in mds["batch_scaling.md"]


def test_report_with_no_records_says_what_to_run(tmp_path):
    written = report.build_report(tmp_path / "none.jsonl", tmp_path / "E", tmp_path / "P", plots=False)
    text = (tmp_path / "E" / "REPORT.md").read_text()
    assert "No runs yet — run `python -m helpers.sweep all --variant quick`" in text
    assert text.count("No runs yet") == 14  # the overview, then every suite (cost and roofline included)
    assert len(written) == 14
    assert records.read_records(tmp_path / "none.jsonl") == ([], 0)


def test_precision_table_gives_intervals_and_the_paired_difference_to_bf16():
    from types import SimpleNamespace

    suite = suites.resolve_suite("precision")
    recs = []
    for mode, seed, acc, f1 in [("bf16", 1, 0.50, 0.40), ("bf16", 2, 0.60, 0.50),
                                ("bf16-pure-sr", 1, 0.52, 0.40), ("bf16-pure-sr", 2, 0.64, 0.50)]:
        point = SimpleNamespace(run_name=f"p-{mode}-{seed}",
                                params={"precision": mode, "max_length": 32, "seed": seed})
        rec = make_record(point, "precision", step_s=0.1 if mode == "bf16" else 0.2,
                          memory={"host_peak_rss_gib": 2.0})
        rec["metrics"] = {"test_accuracy": acc, "test_macro_f1": f1}
        recs.append(rec)
    body = tables.section(suite, {"precision": {"quick": recs}})
    # acc bf16: 55 ± t(.975, 1) * 7.071 / sqrt(2) = 12.706 * 5; paired Δ: (2, 4) -> 3 ± 12.706 * 1
    assert ("| bf16 | 32 | 2 | 55.00 ± 63.53 | 45.00 ± 63.53 | — | 100 ± 0 | 2 ± 0 | — |") in body
    assert ("| bf16-pure-sr | 32 | 2 | 58.00 ± 76.24 | 45.00 ± 63.53 | 3.00 ± 12.71 | 200 ± 0 | 2 ± 0 | 94.05 |"
            in body)
    assert "| bf16-pure | 16 | 0 | — | — | — | — | — | 92.80 |" in body  # published only
    assert "paired difference" in body
    # the SR question: no bf16-pure runs here, so only the published single-run differences and their
    # binomial noise on 2,000 rows: 1.96 * sqrt(2 p (1 - p) / 2000) at p = mean of the two published
    assert "| 32 | 0 | — | -0.25 | ± 1.45 |" in body and "| 16 | 0 | — | +0.25 | ± 1.59 |" in body
