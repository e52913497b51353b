"""The bench's tests: no CPU roof measured (seconds of matmuls); every run otherwise as a user's."""

import pytest


@pytest.fixture(autouse=True)
def no_cpu_roof(monkeypatch):
    """The loop measures the CPU's roof once per results folder; each test's folder is new."""
    from helpers import peaks

    monkeypatch.setattr(peaks, "ensure_cpu_roof", lambda *a, **k: None)
