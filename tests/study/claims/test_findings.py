"""study/claims/findings.py: the findings table holds every claim with the study's words and section, its
Markdown asks the question, counts the verdicts and opens with the summary, and the bottom line names the devices
of the current points it is given."""

from __future__ import annotations

from study.claims import findings
from study.claims.verdict import VERDICTS, prepare
from study.frame import frame
from tests.study.claims.claim_records import PUB, arm, rec

SLOW, FAST = [100.0, 104.0, 98.0], [200.0, 205.0, 195.0]


def batches(device: str, variant: str = "full") -> list[dict]:
    return arm(device, "batch_scaling", {"batch": 8}, SLOW, "samples_per_s", variant) + arm(
        device, "batch_scaling", {"batch": 64}, FAST, "samples_per_s", variant
    )


def test_findings_table_and_markdown():
    recs = batches("a100") + [rec("cpu", "token_lengths", {}, "quick")]  # no batch: None in the frame
    table = findings.findings(frame(recs), PUB)
    assert len(table) == len(findings.CLAIMS) and set(table["verdict"]) <= set(VERDICTS)
    text = findings.markdown(table).strip().splitlines()
    assert text[0] == findings.QUESTION
    counts = next(line for line in text if line.startswith("Of "))
    assert counts.startswith(
        f"Of {len(findings.CLAIMS)} claims, on records of the claim's own kind (bert-base on a GPU or trn1) "
        "✔ 1 hold and ✘ 0 do not hold; on proxies (direction only) ☑ 0 are consistent"
    )
    assert set(findings.findings(frame([]), PUB)["verdict"]) == {"not testable here"}


def test_every_claim_row_says_what_the_study_says_and_where():
    table = findings.findings(frame([]), PUB)
    assert table["study"].str.match(r"§\d").all(), table["study"].tolist()
    gc = table[table["key"] == "gradient_checkpointing"]["study"].iloc[0]
    assert "seems AWS does not implement this feature" in gc  # the study's words, not a paraphrase
    assert "3.72x" in table[table["key"] == "speedup"]["study"].iloc[0]


def test_the_bottom_line_says_trn1_or_gpu_cannot_be_answered_without_both_and_names_every_device():
    recs = batches("a100") + batches("cpu", "quick")
    line = findings.bottom_line(frame(recs), findings.findings(frame(recs), PUB))
    assert "No record here trains bert-base on a trn1, so these records cannot say whether trn1 or a GPU" in line
    assert "A100" in line and "the CPUs Xeon" in line  # every device measured, named
    both = recs + batches("trn1")
    line = findings.bottom_line(frame(both), findings.findings(frame(both), PUB))
    assert "The records hold bert-base on trn1 (AWS Trainium (trn1.2xlarge)) and on a GPU (A100" in line
    assert "cannot say" not in line and "1 claims hold there" in line
    quick = batches("h200", "quick") + batches("trn1")
    line = findings.bottom_line(frame(quick), findings.findings(frame(quick), PUB))
    assert "No record here trains bert-base on a GPU, so" in line  # MiniLM on a GPU does not answer it


def test_the_bottom_line_counts_xla_devices_among_the_current_points_only():
    xla = [rec("xla-cpu", "padding", {"padding": "static"}, "quick", train_s=10.0)]
    stale = [rec("xla-cpu", "padding", {"padding": "dynamic"}, "quick", train_s=20.0)]
    stale[0]["device"] |= {"key": "xla-another-cpu", "name": "XLA CPU (AMD EPYC)"}
    every = prepare(frame(batches("cpu", "quick") + xla + stale))
    current = every[every["run_name"] != stale[0]["run_name"]]  # what frame.current_points keeps
    table = findings.findings(current, PUB)
    assert "torch-xla on 2 of them" in findings.bottom_line(every, table)
    assert "torch-xla on 1 of them" in findings.bottom_line(current, table)


def test_each_verdict_has_its_own_symbol_in_the_summary():
    assert len(set(VERDICTS.values())) == len(VERDICTS)
    table = findings.findings(frame(batches("a100")), PUB)
    narrow = findings.summary(table, page="claims.md", quotes=False)
    assert "✔\u00a0**holds**" in narrow and "·\u00a0**not\u00a0testable\u00a0here**" in narrow
    assert "](claims.md#claim-batch_scaling)" in narrow and "the study says" not in narrow
