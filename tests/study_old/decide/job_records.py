"""Record files shaped as trn1, A100, this CPU and XLA-on-CPU write them (tests/record_fixtures.py), for the
decision's tests (tests/study/decide/) and its figure's (tests/study/report/test_cost_plot.py)."""

from pathlib import Path

import pandas as pd
import pytest

from helpers.run import records
from helpers.study import frame
from helpers.study.frame import current_names
from helpers.study.sweep.suites import find_suites
from tests.record_fixtures import record, write

OPTIMIZED = {"preset": "optimized", "model_name": "bert-base-uncased"}
# 94% first reached at 8,000 samples: half an epoch of 16,000 rows
CURVE = [
    {"step": 63, "train_time_s": 10.0, "samples": 4000, "val_accuracy": 0.90},
    {"step": 125, "train_time_s": 20.0, "samples": 8000, "val_accuracy": 0.941},
    {"step": 250, "train_time_s": 40.0, "samples": 16000, "val_accuracy": 0.95},
]
LOW_CURVE = [
    {"step": 10, "train_time_s": 100.0, "samples": 640, "val_accuracy": 0.35},
    {"step": 20, "train_time_s": 200.0, "samples": 1280, "val_accuracy": 0.60},
]
TRN1 = "AWS Trainium (trn1.2xlarge) (measured)"
TRN1_USD_H, A100_USD_H, CPU_USD_H = 1.34375, 21.96 / 8, 0.096  # trn1.2xlarge, p4d.24xlarge / 8 GPUs, m6i.large
# current points of the speedup suite (the command reads only those): optimized, full and quick
SPEEDUP = sorted(current_names(find_suites())["speedup"])
FULL, QUICK = (next(n for n in SPEEDUP if n.startswith(f"speedup-{v}-preset=optimized")) for v in ("full", "quick"))


def job_records() -> list[dict]:
    """trn1 and A100 in the optimized preset over all rows, this CPU and XLA-on-CPU on a 1,280-row subset."""
    subset = {**OPTIMIZED, "train_subset": 1280}
    return [
        record(
            "trn1",
            "speedup",
            OPTIMIZED,
            samples_per_s=800.0,
            compile_s=300.0,
            compilations=4,
            run_name=FULL,
            curve=CURVE,
            fixture=False,
        ),
        record("a100", "speedup", OPTIMIZED, samples_per_s=1200.0, run_name=FULL, curve=CURVE, fixture=False),
        # a faster A100 run on a subset: rule 1 (all rows) still picks the run above
        record("a100", "speedup", subset, samples_per_s=5000.0, run_name=QUICK, fixture=False),
        record("cpu", "speedup", subset, samples_per_s=6.4, run_name=QUICK, curve=LOW_CURVE, fixture=False),
        record(
            "xla-cpu",
            "speedup",
            subset,
            samples_per_s=3.2,
            compile_s=50.0,
            compilations=3,
            run_name=QUICK,
            fixture=False,
        ),
    ]


def write_job_records(folder: Path) -> Path:
    """Write job_records() below `folder` as the run path names them; return the folder."""
    for rec in job_records():
        path = records.record_path(folder, rec["suite"], rec["run_name"], rec["device"]["key"])
        write(path, rec)
    return folder


def row_of(table: pd.DataFrame, device: str, source: str = "measured") -> pd.Series:
    """Return the one row of `table` whose device matches the pattern `device`, from `source`."""
    found = table[table["device"].str.contains(device) & (table["source"] == source)]
    assert len(found) == 1, table[["device", "source"]]
    return found.iloc[0]


@pytest.fixture()
def results(tmp_path) -> Path:
    """A results folder of job_records() (a test module imports this fixture by name)."""
    return write_job_records(tmp_path)


@pytest.fixture()
def df(results) -> pd.DataFrame:
    """The frame of `results`."""
    return frame.load(results)[0]
