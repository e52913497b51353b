"""What the study says about each in its own words: a verbatim quote of its report with the
section it stands in (Experiment/published/statements.csv), and, apart from it, the hypothesis this
repository adds where a rule tests more than the quote says (labelled ours, never published).

The quotes are checked against the study's text (../shared/reference/study/report.txt) by
tests/study/claims/test_quotes.py: each is a substring of it once runs of whitespace are one space.
"""

from __future__ import annotations

import functools
import re

import pandas as pd

from study.published import published

# the study's text writes arrows and approximations as LaTeX macros; shown as the symbols they print
LATEX = {r"\rightarrow": "→", r"\approx": "≈", r"\sim": "~", r"\$": "$"}


def normalized(text: str) -> str:
    """Return the text with every run of whitespace as one space (how a quote is matched to the study)."""
    return re.sub(r"\s+", " ", text).strip()


def shown(text: str) -> str:
    """Return a quote as a reader sees it: whitespace normalized, LaTeX macros as their symbols."""
    text = normalized(text)
    for macro, symbol in LATEX.items():
        text = text.replace(macro, symbol)
    return text


@functools.cache
def statements(published_dir: str) -> pd.DataFrame:
    """Return statements.csv by claim."""
    return published("statements.csv", published_dir).set_index("claim")


def quote(key: str, published_dir: str) -> pd.Series:
    """Return a claim's row of statements.csv: quote, short part, section, our hypothesis ('' when none)."""
    return statements(published_dir).loc[key]


def study_says(key: str, published_dir: str) -> str:
    """Return '§x: "quote"' and, where the rule tests our own hypothesis, 'Ours, not the study's: ...'."""
    q = quote(key, published_dir)
    text = f'{q["section"]}: "{shown(q["quote"])}"'
    return text + (f" Ours, not the study's: {q['ours']}." if q["ours"] else "")


def short_says(key: str, published_dir: str) -> str:
    """Return '§x "short part of the quote"' and, where the quote names only a topic, '· ours: the claim tested'."""
    q = quote(key, published_dir)
    said = f'{q["section"].split(" (")[0]} "{shown(q["short"])}"'
    return said + (f" · ours: {q['ours']}" if q["ours"] else "")
