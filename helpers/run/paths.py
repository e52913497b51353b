"""Where the repository is on this machine, and where its records go by default."""

from __future__ import annotations

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
RESULTS_DIR = "Experiment/results"


def repo_path(path: str | Path) -> Path:
    """Return `path` as is when absolute, else relative to the repository root (not the cwd)."""
    path = Path(path)
    return path if path.is_absolute() else REPO_ROOT / path
