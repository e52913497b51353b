"""The limits that need more than the arguments (the machine's cores, a data file, the decision's inputs):
each refused before anything runs, with an error that names what to change."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import steps
from helpers.run import data
from helpers.run.args import ConfigError, build_args

REPO = Path(__file__).resolve().parent.parent.parent


def test_more_cpu_ranks_than_cores_need_allow_oversubscribe_and_the_record_says_so(
    tiny_model_dir, tmp_path, monkeypatch
):
    monkeypatch.setattr("os.cpu_count", lambda: 2)
    base = dict(model_name=str(tiny_model_dir), device="cpu", num_devices=3, results_path=str(tmp_path))
    with pytest.raises(ConfigError, match="num_devices=3 is above this CPU's 2 cores"):
        steps.start(build_args(base))
    monkeypatch.setattr("helpers.launch.torchrun", lambda *a, **k: {"status": "finished"})  # no launch here
    run = steps.start(build_args({**base, "allow_oversubscribe": True}))
    assert run.record.oversubscribed is True


def _split(folder, rows):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return folder / "train.jsonl"


def test_an_empty_text_is_a_bad_row_and_an_all_dropped_split_says_so(tmp_path):
    path = _split(tmp_path, [{"text": "fine", "label": 1}, {"text": "  ", "label": 2}])
    with pytest.raises(data.DataError, match=r"train.jsonl:2: row has an empty 'text'"):
        data.read_split(path)
    assert data.read_split(path, drop_bad_rows=True) == ([{"text": "fine", "label": 1}], 1)
    empty = _split(tmp_path / "e", [{"text": "", "label": 1}, {"text": "", "label": 0}])
    with pytest.raises(data.DataError, match="every one of its 2 rows was malformed and dropped"):
        data.read_split(empty, drop_bad_rows=True)


@pytest.mark.parametrize(
    "argv, says",
    [
        (["--results", "no/such/folder"], "no such folder of run records"),
        (["--epochs", "inf"], "a finite 0 < --epochs <= 1,000,000"),
        (["--write", "README.md"], "--write README.md: cannot write there"),
    ],
)
def test_decide_refuses_what_it_cannot_use_naming_it(argv, says):
    out = subprocess.run(
        [sys.executable, "-m", "helpers.study.decide", *argv], capture_output=True, text=True, cwd=REPO, timeout=300
    )
    assert out.returncode == 2 and says in out.stderr and "Traceback" not in out.stderr, out.stderr[-2000:]
