"""The decision's fixtures: a results folder of tests/study/decide/job_records.py, and its frame."""
import pandas as pd
import pytest

from helpers.study import frame
from tests.study.decide.job_records import write_job_records


@pytest.fixture()
def results(tmp_path):
    return write_job_records(tmp_path)


@pytest.fixture()
def df(results) -> pd.DataFrame:
    return frame.load(results)[0]
