"""helpers/study/decide/page.py: the decision page in words: readings said only beyond what single runs
resolve, the question first and the conclusion last."""

import pytest

from helpers.study.decide import page, ranking
from tests.study.decide.job_records import TRN1, df, results  # noqa: F401 - fixtures


@pytest.mark.parametrize("ratio, said", [(1.05, "no order can be claimed"), (1.5, "never: costs 50% more per epoch")])
def test_never_is_said_only_beyond_the_gap_single_runs_resolve(ratio, said):
    a = {"epoch_usd": ratio, "lower_bound": False, "one_off_usd": 1.0, "usd_per_h": 1.0}
    assert said in page.reading(a, {"epoch_usd": 1.0, "one_off_usd": 0.0}, None, ranking.Job())


def test_markdown_asks_first_and_concludes_last(df):
    job = ranking.Job(shared_instance=True)
    table = ranking.decision(df, job)
    lines = ranking.markdown(table, ranking.break_even(table, job), job).splitlines()
    assert (
        lines[0].startswith(
            "Which device for 3 epochs over 16,000 training rows (any model, full fine-tuning), target 94%"
        )
        and "one accelerator's share" in lines[0]
    )
    assert lines[-1].startswith(
        "For 3 epochs over 16,000 rows: bert-base-uncased, b64, L32, bf16, 16,000 rows: L4 (published) is cheapest"
    )
    assert "bert-base-uncased, b64, L32, fp32, 1,280 rows: Xeon @ 2.80GHz (proxy) is cheapest" in lines[-1]
    assert f"{TRN1} against A100-SXM4-40GB (measured): cheaper beyond 41.2 epochs" in lines[-1]
    assert "trn1 (published) against T4 (published): cheaper beyond 14.7 epochs, L4 (published): never" in lines[-1]
