"""helpers/study/claims/findings.py: the findings table holds every claim, each row with the study's words and
section, and its Markdown asks the question, counts the verdicts and opens with the summary."""

from __future__ import annotations

import pytest

from helpers.study.claims import findings
from helpers.study.claims.verdict import VERDICTS
from helpers.study.frame import frame
from tests.study.claims.claim_records import PUB, batches, presets, run, steady

pytestmark = pytest.mark.usefixtures("no_library_versions")


def test_findings_table_and_markdown():
    tokens = run("cpu", "token_lengths", {}, "quick")
    del tokens["params"]["batch"], tokens["params"]["max_length"]  # a record without them: None in the frame
    recs = batches("a100", [100, 200, 400]) + presets("cpu", 700.0, 100.0, "quick") + [tokens] + steady()
    table = findings.findings(frame(recs), PUB)
    assert len(table) == len(findings.CLAIMS) and set(table["verdict"]) <= set(VERDICTS)
    text = findings.markdown(table).strip().splitlines()
    assert text[0] == findings.QUESTION
    counts = next(line for line in text if line.startswith("Of "))
    assert counts.startswith(
        f"Of {len(findings.CLAIMS)} claims, on records of the claim's own kind (bert-base on a GPU or trn1) "
        "✔ 1 hold and ✘ 0 do not hold; on proxies (direction only) ☑ 0 are consistent"
    )
    empty = findings.findings(frame([]), PUB)
    assert set(empty["verdict"]) == {"not testable here"}


def test_every_claim_row_says_what_the_study_says_and_where():
    table = findings.findings(frame([]), PUB)
    assert table["study"].str.match(r"§\d").all(), table["study"].tolist()
    assert not table["study"].str.contains("published, the study's text|not located").any()
    gc = table[table["claim"] == "Gradient checkpointing fails on Trainium"]["study"].iloc[0]
    assert "seems AWS does not implement this feature" in gc  # the study's words, not a paraphrase
    assert "3.72x" in table[table["claim"].str.startswith("The optimized configuration")]["study"].iloc[0]


def test_the_bottom_line_says_trn1_or_gpu_cannot_be_answered_without_both_and_names_every_device():
    recs = batches("a100", [100, 200, 400]) + batches("cpu", [10, 20, 40], "quick")
    table = findings.findings(frame(recs), PUB)
    line = findings.bottom_line(frame(recs), table)
    assert "No record here trains bert-base on a trn1, so these records cannot say whether trn1 or a GPU" in line
    assert "A100" in line and "the CPUs Xeon" in line  # every device measured, named
    both = recs + batches("trn1", [50, 90, 160])
    line = findings.bottom_line(frame(both), findings.findings(frame(both), PUB))
    assert "The records hold bert-base on trn1 (AWS Trainium (trn1.2xlarge)) and on a GPU (A100" in line
    assert "cannot say" not in line and "claims hold there" in line
    quick = batches("a100", [100, 200, 400], "quick") + batches("trn1", [50, 90, 160])
    line = findings.bottom_line(frame(quick), findings.findings(frame(quick), PUB))
    assert "No record here trains bert-base on a GPU, so" in line  # MiniLM on a GPU does not answer it


def test_each_verdict_has_its_own_symbol_in_the_summary():
    assert len(set(VERDICTS.values())) == len(VERDICTS)
    table = findings.findings(frame(batches("a100", [100, 200, 400]) + steady()), PUB)
    narrow = findings.summary(table, page="claims.md", quotes=False)
    assert "✔\u00a0**holds**" in narrow and "·\u00a0**not\u00a0testable\u00a0here**" in narrow
    assert "](claims.md#claim-batch_scaling)" in narrow and "the study says" not in narrow
