"""The environments: the XLA one (.venv-xla) holds everything the trn1 path imports, and the Neuron one is
that list plus the Neuron wheels, built only on a trn1.

requirements-neuron.txt includes requirements-xla.txt, so what is installed and imported here in CI
(`make test-xla`) is what a trn1 gets: every module of `helpers`, the sweep's plan and the report.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import os
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import helpers

REPO = Path(__file__).resolve().parent.parent


def requirement_lines(name: str) -> list[str]:
    """Return the requirement and option lines of a requirements file, comments dropped."""
    lines = (line.split(" #")[0].strip() for line in (REPO / name).read_text().splitlines())
    return [line for line in lines if line and not line.startswith("#")]


def test_the_neuron_list_is_the_xla_list_plus_the_neuron_wheels():
    lines = requirement_lines("requirements-neuron.txt")
    assert "-r requirements-xla.txt" in lines
    own = [line for line in lines if not line.startswith("-")]
    assert {line.split("==")[0] for line in own} == {"neuronx-cc", "torch-neuronx"}  # torch: the XLA list's
    assert any(line.startswith("--extra-index-url https://pip.repos.neuron.amazonaws.com") for line in lines)


def make_neuron_venv(target: Path, **variables: Path) -> subprocess.CompletedProcess:
    """Run `make neuron-venv` into `target` with the Makefile's variables overridden."""
    args = [f"{name}={value}" for name, value in {"NEURON_VENV": target, **variables}.items()]
    return subprocess.run(["make", "-s", "neuron-venv", *args], cwd=REPO, capture_output=True, text=True, timeout=60)


def test_make_neuron_venv_refuses_off_a_trn1_before_installing_anything(tmp_path):
    target = tmp_path / "venv-neuron"
    proc = make_neuron_venv(target, NEURON_HOME=tmp_path / "none")
    assert proc.returncode != 0 and "not a Neuron DLAMI" in proc.stdout + proc.stderr
    assert not target.exists()
    (tmp_path / "neuron-home").mkdir()  # a DLAMI's /opt/aws/neuron, but no Neuron device
    proc = make_neuron_venv(target, NEURON_HOME=tmp_path / "neuron-home", NEURON_DEVICES=tmp_path / "neuron0")
    assert proc.returncode != 0 and "no Neuron device" in proc.stdout + proc.stderr
    assert not target.exists()


@pytest.mark.parametrize("goal, folder", [("venv", "VENV"), ("xla-venv", "XLA_VENV"), ("cloud-venv", "CLOUD_VENV")])
def test_an_environment_is_not_built_where_the_disk_cannot_hold_it(tmp_path, goal, folder):
    target = tmp_path / "new" / "env"  # its folder does not exist yet: the free space is read above it
    proc = subprocess.run(
        ["make", "-s", goal, f"{folder}={target}", f"{folder}_GIB=1000000"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    said = proc.stdout + proc.stderr
    assert proc.returncode != 0 and f"{target}: 1000000 GiB of free disk needed" in said, said
    assert f"GiB free on {tmp_path}" in said and not target.exists()


# ----------------------------------------------------------------------------- in the XLA environment
@pytest.mark.xla
def test_every_module_of_helpers_imports_in_the_xla_environment():
    pytest.importorskip("torch_xla", reason="needs torch-xla: run in .venv-xla (make test-xla)")
    names = [m.name for m in pkgutil.walk_packages(helpers.__path__, "helpers.")]
    failed = {}
    for name in names:
        try:
            importlib.import_module(name)
        except Exception as err:  # noqa: BLE001 - every module's failure is listed, not only the first
            failed[name] = f"{type(err).__name__}: {err}"
    assert len(names) > 80 and not failed, failed


# torchao: bf16-pure-sr's AdamW on the CPU and CUDA only (XLA has its own, helpers/run/optim.py)
NOT_ON_XLA = {"torchao"}


def imported_packages() -> set[str]:
    """Return the top-level names of the packages `helpers` imports, at a module's top or in a function."""
    found = set()
    for path in Path(helpers.__path__[0]).rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.add(node.module.split(".")[0])
    return found - set(sys.stdlib_module_names) - {"helpers", "__future__"}


@pytest.mark.xla
def test_every_package_helpers_imports_anywhere_is_in_the_xla_environment():
    pytest.importorskip("torch_xla", reason="needs torch-xla: run in .venv-xla (make test-xla)")
    wanted = imported_packages() - NOT_ON_XLA
    missing = sorted(name for name in wanted if importlib.util.find_spec(name) is None)
    assert {"nbconvert", "torch_xla", "pandas"} <= wanted  # nbconvert: imported inside a function
    assert not missing, f"imported by helpers, not installed by requirements-xla.txt: {missing}"


def run_here(*args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    """Run `python -m ...` in this environment from the repository root; return the finished process."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run(
        [sys.executable, "-m", *args], cwd=REPO, capture_output=True, text=True, env=env, timeout=timeout
    )


@pytest.mark.xla
def test_the_trn1_plan_prints_from_the_xla_environment():
    pytest.importorskip("torch_xla", reason="needs torch-xla: run in .venv-xla (make test-xla)")
    proc = run_here("helpers.study.sweep", "all", "--variant", "full", "--target", "trainium", "--plan")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "| suite |" in proc.stdout or "|---" in proc.stdout  # tables: DataFrame.to_markdown (tabulate)
    assert "trn1.2xlarge" in proc.stdout


@pytest.mark.xla
def test_the_report_builds_from_the_xla_environment_into_another_folder(tmp_path):
    pytest.importorskip("torch_xla", reason="needs torch-xla: run in .venv-xla (make test-xla)")
    proc = run_here(
        "helpers.study.report", "--out-dir", str(tmp_path / "Experiment"), "--pictures", str(tmp_path / "Pictures")
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (tmp_path / "Experiment" / "REPORT.md").read_text().startswith("<!-- Written by")
    assert list((tmp_path / "Pictures").glob("*.png"))  # seaborn and matplotlib drew the figures
