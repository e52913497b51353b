"""The claims' tests build many records: their library versions are not read (most of a record's cost)."""
import pytest

from helpers.run import records


@pytest.fixture(autouse=True)
def no_library_versions(monkeypatch):
    """Skip reading installed packages' metadata for every fixture record (most of a record's cost)."""
    monkeypatch.setattr(records, "library_versions", lambda: {})
