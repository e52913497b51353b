"""helpers/run/ddp.py: how ranks share the evaluation rows and what one rank reduces."""

import pytest

from helpers.run import ddp


@pytest.mark.parametrize("n, world", [(10, 1), (10, 2), (10, 3), (7, 4), (2, 4)])
def test_ranks_evaluate_every_row_once(n, world):
    shards = [list(ddp.eval_shard(n, rank, world)) for rank in range(world)]
    assert sorted(i for shard in shards for i in shard) == list(range(n))  # every row, none twice
    assert max(map(len, shards)) - min(map(len, shards)) <= 1
    assert [len(ddp.eval_shard(n, rank, world)) for rank in range(world)] == list(map(len, shards))


def test_one_process_reduces_nothing():
    assert ddp.reducer(1, "cpu") is None and ddp.reducer(2, "cpu") is not None
