"""Every claim's quote is the study's own text, with its section; a hypothesis of ours is never a quote."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from study.claims import findings, quotes
from study.published import published

PUB = "Experiment/published"
STUDY = Path(__file__).resolve().parents[3] / ".." / "shared" / "reference" / "study" / "report.txt"


@pytest.fixture(scope="module")
def study_text() -> str:
    """Return the study's report, whitespace normalized; skip when the text is not beside the repository."""
    if not STUDY.is_file():
        pytest.skip(f"the study's text is not at {STUDY} (it lives beside the repository, not in it)")
    return quotes.normalized(STUDY.read_text())


@pytest.mark.parametrize("key", [c.__name__ for c in findings.CLAIMS])
def test_each_claim_quotes_the_study_verbatim_with_its_section(key, study_text):
    q = quotes.quote(key, PUB)
    assert quotes.normalized(q["quote"]) in study_text, q["quote"]
    assert q["section"].startswith("§"), q["section"]
    assert "not located" not in q["section"]


HEADING = re.compile(
    r"^(\d+(?:\.\d+)*)\.? [A-Z][^\n]*[^:\n]$", re.M
)  # "5.2.1 Roofline Trajectory", not a list's "4. X:"


@pytest.mark.parametrize("key", [c.__name__ for c in findings.CLAIMS])
def test_each_quote_stands_in_the_section_it_names(key):
    if not STUDY.is_file():
        pytest.skip(f"the study's text is not at {STUDY}")
    text, by_number = STUDY.read_text(), {}
    starts = list(HEADING.finditer(text))
    for head, after in zip(starts, starts[1:] + [None]):
        body = text[head.end() : after.start() if after else None]
        by_number[head.group(1)] = by_number.get(head.group(1), "") + " " + quotes.normalized(body)
    q = quotes.quote(key, PUB)
    number = re.match(r"§([\d.]+)", q["section"]).group(1)
    assert quotes.normalized(q["quote"]) in by_number[number], (number, q["quote"])


def test_a_quote_that_is_not_the_studys_text_fails(study_text):
    changed = "Batch sizes above 64 cause OOM."  # the study says 48
    assert quotes.normalized(changed) not in study_text


def test_every_claim_has_one_row_and_each_row_a_claim():
    rows = published("statements.csv", PUB)
    assert sorted(rows["claim"]) == sorted(c.__name__ for c in findings.CLAIMS)
    assert rows["source"].str.len().gt(0).all()


def test_the_shown_quote_turns_latex_into_symbols_and_labels_ours():
    assert quotes.shown(r"69 \rightarrow  128, \sim 12") == "69 → 128, ~ 12"
    said = quotes.study_says("lora_accuracy", PUB)
    assert said.startswith('§9 (future work): "LoRA adaptation on Trainium."')
    assert "Ours, not the study's:" in said
    assert "Ours" not in quotes.study_says("host_memory", PUB)


def test_a_summary_quote_that_names_only_its_topic_carries_the_claim_it_tests():
    from study.claims.quotes import short_says

    cost = short_says("cost_ranking", "Experiment/published")
    assert cost.startswith('§6 "Cost for Our Task" · ours: Per 3-epoch task the L4 is cheapest'), cost
    assert "· ours: LoRA trains more samples per second" in short_says("lora_speed", "Experiment/published")
    tuned = short_says("lr_llrd", "Experiment/published")  # its quote states the claim tested
    assert tuned == '§5.8 "accuracy grows from 92.9% (baseline) to 94.65% (optimized)"'
