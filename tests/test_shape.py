"""The shape the design card asks for: each platform's loop in its own folder, on one screen, with no other
platform's branch; helpers a library that imports neither the study nor the bench."""

from __future__ import annotations

import ast
import io
import json
import re
import tokenize
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
FOREIGN = {
    "Nvidia": r"\btorch_xla\b|\bxm\b|\bxla\b|MpDeviceLoader|neuron",
    "Trainium": r"cudagraph|GradScaler|\bcuda\b|nccl",
}


def code_names(folder: str) -> str:
    """Return the names and operators of a platform folder's code (its train.py and its notebook's code cells)."""
    out = []
    for path in (REPO / folder).glob("*"):
        if path.suffix == ".py":
            source = path.read_text()
        elif path.suffix == ".ipynb":
            cells = json.loads(path.read_text())["cells"]
            source = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
        else:
            continue
        source = "\n".join(line for line in source.splitlines() if not line.lstrip().startswith(("!", "%")))
        tokens = tokenize.generate_tokens(io.StringIO(source).readline)
        out += [t.string for t in tokens if t.type == tokenize.NAME]
    return " ".join(out)


@pytest.mark.parametrize("folder", sorted(FOREIGN))
def test_a_platforms_loop_carries_no_other_platforms_branch(folder):
    found = sorted(set(re.findall(FOREIGN[folder], code_names(folder))))
    assert not found, f"{folder}/ names {found}: that belongs to the other platform's folder"


@pytest.mark.parametrize("folder", sorted(FOREIGN))
def test_each_loop_is_on_one_screen(folder):
    tree = ast.parse((REPO / folder / "train.py").read_text())
    (loop,) = [f for f in tree.body if isinstance(f, ast.FunctionDef) and f.name == "train"]
    assert loop.end_lineno - loop.lineno + 1 <= 120


def test_helpers_imports_neither_the_study_nor_the_bench_nor_a_loop():
    for path in (REPO / "helpers").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import | ast.ImportFrom):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
                assert not any(n.split(".")[0] in ("study", "bench", "Nvidia", "Trainium") for n in names), path
