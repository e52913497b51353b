"""scripts/migrate_records.py: schema 5 records upgraded once, their CPU keys saying the family was never recorded."""

from __future__ import annotations

import json
import runpy
import shutil
from pathlib import Path

import pytest

from helpers import record

V5 = Path(__file__).parent / "fixtures" / "v5" / "minilm-baseline@cpu-amd-epyc-avx512-avx512-bf16.json"
MIGRATE = record.REPO_ROOT / "scripts" / "migrate_records.py"


def script() -> dict:
    """Return the script's names (it is run as a file, as a user runs it)."""
    return runpy.run_path(str(MIGRATE))


def test_a_schema_5_record_is_upgraded_once_and_its_cpu_key_says_family_unknown(tmp_path):
    (tmp_path / "adhoc").mkdir()
    shutil.copy(V5, tmp_path / "adhoc" / V5.name)
    (tmp_path / "_peaks").mkdir()
    (tmp_path / "_peaks" / "cpu-amd-epyc-avx512-avx512-bf16.json").write_text("{}")
    (tmp_path / "_peaks" / "cpu-amd-epyc-avx512-avx512-bf16.precision.json").write_text("{}")
    assert script()["main"]([str(tmp_path)]) == 0
    (new,) = (tmp_path / "adhoc").glob("*.json")
    assert new.name == "minilm-baseline@cpu-amd-epyc-family-unknown-avx512-avx512-bf16.json"
    rec = json.loads(new.read_text())
    assert rec["schema_version"] == 6 and "systems" not in rec and "probe" not in rec["precision"]
    assert rec["device"]["key"] == "cpu-amd-epyc-family-unknown-avx512-avx512-bf16"
    assert rec["model"]["config"]["hidden_size"] == 384 and record.validate(rec)[1] is None
    assert [p.name for p in (tmp_path / "_peaks").iterdir()] == ["cpu-amd-epyc-family-unknown-avx512-avx512-bf16.json"]
    text = new.read_text()
    assert script()["main"]([str(tmp_path)]) == 0 and new.read_text() == text  # a second run changes nothing


def test_a_missing_folder_is_an_error_and_a_file_it_cannot_read_is_named_and_left(tmp_path, capsys):
    assert script()["main"]([str(tmp_path / "nowhere")]) == 2 and "no such folder" in capsys.readouterr().err
    (tmp_path / "cut.json").write_text('{"schema_version": 5, "run_n')
    assert script()["main"]([str(tmp_path)]) == 1 and "left as it is" in capsys.readouterr().err
    assert (tmp_path / "cut.json").read_text().startswith('{"schema_version": 5')


@pytest.mark.parametrize(
    "device", [{"key": "cuda-nvidia-h200", "type": "cuda"}, {"key": "x", "type": "xla", "neuron": True}]
)
def test_only_cpu_keys_change(device):
    assert script()["new_key"](device) == device["key"]
