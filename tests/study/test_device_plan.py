"""The device plan (scripts/device_plan.sh) and its suites (cloud/gpu_step.toml, cloud/gpu_grid.toml): a bad budget or
a torch it would not trust refused before any stage, stages in the order of what they answer and each bounded by
what is left, one output folder, and a stage that failed (or a graphed run torch did not graph) failing the plan.
The script runs for real, in a copy of the repository's layout whose python answers for torch and the sweep."""

from __future__ import annotations

import itertools
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from helpers import record

REPO = Path(__file__).resolve().parents[2]
PIN = re.search(r"^torch==(\S+)", (REPO / "requirements.txt").read_text(), re.M)[1]
# the python the plan is given: torch's answer from FAKE_TORCH, the sweep's exit status from FAKE_SWEEP, the check
# and the bench pass; the summary (a script on stdin) runs in this test's own python, which reads the records
FAKE_PYTHON = f"""#!/bin/bash
echo "$*" >> "$CALLS"
case "$*" in
  *torch.version.cuda*) echo "$FAKE_TORCH" ;;
  "-m study.sweep"*) exit "${{FAKE_SWEEP:-0}}" ;;
  -) exec {sys.executable} "$@" ;;
  "- "*) exec {sys.executable} "$@" ;;
esac
"""


def sandbox(tmp_path: Path) -> Path:
    """Return a root holding the plan, requirements.txt and a .venv whose python is FAKE_PYTHON."""
    root = tmp_path / "repo"
    (root / "scripts").mkdir(parents=True)
    shutil.copy(REPO / "scripts" / "device_plan.sh", root / "scripts")
    shutil.copy(REPO / "requirements.txt", root)
    (root / ".venv" / "bin").mkdir(parents=True)
    (root / ".venv" / "bin" / "python").write_text(FAKE_PYTHON)
    (root / ".venv" / "bin" / "python").chmod(0o755)
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "train.jsonl").write_text('{"text": "i feel happy", "label": 1}\n')
    return root


def plan(tmp_path: Path, *args: str, torch: str = f"{PIN} 13.0 1", **env: str) -> subprocess.CompletedProcess:
    """Run the plan in the sandbox with `args` and `env`; its python's calls are logged to tmp_path/calls."""
    root = sandbox(tmp_path)
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "CALLS": str(tmp_path / "calls"),
        "FAKE_TORCH": torch,
        "EMOTION_DATA_DIR": str(tmp_path / "data"),
        "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}",
        **env,
    }
    (tmp_path / "bin").mkdir(exist_ok=True)  # no nvidia-smi, no lscpu surprises: the plan's own probes only
    return subprocess.run(
        ["bash", str(root / "scripts" / "device_plan.sh"), *args], env=env, capture_output=True, text=True, timeout=300
    )


def calls(tmp_path: Path) -> list[str]:
    """Return the python invocations the plan made, in order."""
    path = tmp_path / "calls"
    return path.read_text().splitlines() if path.exists() else []


# ----------------------------------------------------------------------------- refused before any stage
@pytest.mark.parametrize("budget", ["abc", "1e3", "10m", "0", "-5"])
def test_a_budget_that_is_not_whole_seconds_is_refused_before_anything_runs(budget, tmp_path):
    done = plan(tmp_path, "gpu", str(tmp_path / "out"), PLAN_BUDGET_S=budget)
    assert done.returncode == 2 and f"PLAN_BUDGET_S={budget} is not a whole number of seconds" in done.stderr
    assert "===" not in done.stdout and not calls(tmp_path) and not (tmp_path / "out").exists()


def test_an_unknown_mode_is_refused_with_the_usage(tmp_path):
    done = plan(tmp_path, "gpus")
    assert done.returncode == 2 and "usage: scripts/device_plan.sh gpu|rehearsal [OUT_DIR]" in done.stderr


@pytest.mark.parametrize(
    "torch, says",
    [
        ("2.11.0 12.8 1", f"has torch 2.11.0, requirements.txt pins {PIN}: rebuild .venv"),
        (f"{PIN} None 0", "is a CPU build: on the GPU machine `make venv` installs PyPI's CUDA build"),
        (f"{PIN} 13.0 0", "sees no GPU: nvidia-smi; an empty CUDA_VISIBLE_DEVICES hides them all"),
    ],
)
def test_a_torch_the_plan_would_not_trust_is_refused_on_a_gpu(torch, says, tmp_path):
    done = plan(tmp_path, "gpu", str(tmp_path / "out"), torch=torch)
    assert done.returncode == 2 and says in done.stderr and "===" not in done.stdout


def test_another_torch_runs_only_when_asked_and_says_so(tmp_path):
    done = plan(tmp_path, "rehearsal", str(tmp_path / "out"), torch="2.11.0 None 0", PLAN_UNPINNED="1")
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"WARNING: .venv/bin/python has torch 2.11.0, not the pinned {PIN}" in done.stderr


# ----------------------------------------------------------------------------- the stages
def test_stages_run_in_the_order_of_what_they_answer_each_bounded_by_what_is_left_into_one_folder(tmp_path):
    out = tmp_path / "out"
    done = plan(tmp_path, "gpu", str(out), PLAN_BUDGET_S="900")
    assert done.returncode == 0, done.stdout + done.stderr
    ran = [c for c in calls(tmp_path) if c.startswith("-m ")]
    assert "cloud/gpu_step.toml --variant full" in ran[0] and ran[1].startswith("-m helpers.check --device cuda")
    assert ran[2].startswith("-m bench") and "cloud/gpu_grid.toml" in ran[3] and "speedup" in ran[4]
    bounds = [int(b) for b in re.findall(r"\(at most (\d+) s\)", done.stdout)]
    assert bounds and all(b <= 900 for b in bounds) and bounds == sorted(bounds, reverse=True)
    for call in ran:  # every record, log and trace in the one folder given
        for where in re.findall(r"(?:--results|--runs-dir|profile_dir=)\s*(\S+)", call):
            assert Path(where).is_relative_to(out)
    assert (out / "plan.log").read_text().count("===") >= 5


def test_a_stage_whose_points_failed_fails_the_plan(tmp_path):
    done = plan(tmp_path, "rehearsal", str(tmp_path / "out"), FAKE_SWEEP="1")
    assert done.returncode == 1
    assert "=== step paths: FAILED (exit 1)" in done.stdout and "=== FAILED: step paths (exit 1)" in done.stdout


def test_a_stage_the_budget_cut_short_is_named_not_failed(tmp_path):
    done = plan(tmp_path, "rehearsal", str(tmp_path / "out"), FAKE_SWEEP="124")  # timeout's status when it killed
    assert done.returncode == 0, done.stdout + done.stderr
    assert (
        "=== step paths: cut at the end of the budget" in done.stdout and "=== skipped: step paths (cut)" in done.stdout
    )


@pytest.mark.parametrize("skips, status", [(0, 0), (2, 1), (None, 1)])
def test_a_graphed_run_torch_did_not_graph_fails_the_plan(skips, status, tmp_path):
    out = tmp_path / "out"
    rec = record.RunRecord(
        run_name="step-graphed", suite="gpu_step", status="finished", params={"step_mode": "cudagraphs"}
    )
    rec.shapes = record.Shapes(cudagraph_skips=skips)
    record.write(rec, record.base_path(out / "results", "gpu_step", "step-graphed", "cuda-nvidia-h200"))
    done = plan(tmp_path, "gpu", str(out))
    assert done.returncode == status, done.stdout + done.stderr
    assert re.search(rf" {'-' if skips is None else skips} gpu_step/step-graphed\n", done.stdout)
    assert ("cudagraph_skips > 0" in done.stdout) == bool(status)


# ----------------------------------------------------------------------------- the plan's suites
def points(path: str, variant: str) -> list[dict]:
    """Return the parameters of every point of a plan suite's variant: shared, variant, case, then grid values."""
    suite = tomllib.loads((REPO / path).read_text())
    table = suite[variant]
    grid = [dict(zip(table.get("grid", {}), v)) for v in itertools.product(*table.get("grid", {}).values())]
    return [{**suite["params"], **table["params"], **c, **g} for c in table.get("cases", [{}]) for g in grid]


@pytest.mark.parametrize("path", ["cloud/gpu_step.toml", "cloud/gpu_grid.toml"])
@pytest.mark.parametrize("variant", ["quick", "full"])
def test_no_epoch_boundary_falls_inside_a_timed_window(path, variant):
    for p in points(path, variant):  # every step in the first epoch: the compiled step drops the short last batch
        assert p["train_subset"] // p["batch"] >= p["max_steps"], p


def test_the_first_points_on_a_gpu_are_eager_and_graphed_bert_base_b64_bf16_at_both_lengths():
    first = points("cloud/gpu_step.toml", "full")[:4]
    assert [(p["step_mode"], p["max_length"]) for p in first] == [
        ("eager", 32),
        ("cudagraphs", 32),
        ("eager", 128),
        ("cudagraphs", 128),
    ]
    assert all((p["model_name"], p["batch"], p["precision"]) == ("bert-base-random", 64, "bf16") for p in first)
    for path in ("cloud/gpu_step.toml", "cloud/gpu_grid.toml"):  # the rehearsal never asks a CPU for CUDA graphs
        assert all(p.get("step_mode") != "cudagraphs" for p in points(path, "quick"))
