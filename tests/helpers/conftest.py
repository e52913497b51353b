"""tests/conftest.py's autouse fixture `canned_precision_probe` patches helpers.measure, which the redesign retired.

This override lets the tests below run until tests/conftest.py is updated; then delete this file: a conftest here
shadows `from conftest import ...` (tests/conftest.py's tiny_bert_config) for every module of tests/helpers.
"""

import pytest


@pytest.fixture(autouse=True)
def canned_precision_probe():
    """Nothing to can: no precision probe here."""
