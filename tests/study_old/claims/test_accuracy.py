"""What an accuracy figure can carry: a cell with one seed shows no spread and states its test set's sampling
error; an arm below the learning floor is named."""

from __future__ import annotations

import pytest

from helpers.study.claims import accuracy
from helpers.study.claims.verdict import prepare
from helpers.study.frame import frame
from tests.record_fixtures import record

pytestmark = pytest.mark.usefixtures("no_library_versions")


def test_the_sampling_error_of_2000_test_rows_is_about_1_3_points_at_90_percent():
    assert 100 * accuracy.sampling_error(0.85, 2000) == pytest.approx(1.313, abs=0.001)


def cell(accs: list[float], seeds: list[int], lr: float = 1e-4) -> list[dict]:
    return [
        record("cpu", "speedup", {"model_name": "minilm", "seed": s, "lr": lr}, run_name=f"r{lr}-{i}", test_acc=a)
        for i, (a, s) in enumerate(zip(accs, seeds))
    ]


def test_runs_sharing_one_seed_show_no_spread_but_the_test_sets_error():
    df = frame(cell([0.85, 0.85, 0.85], [1, 1, 1]))
    row = accuracy.accuracy_table(df, ["lr"]).iloc[0]
    assert row["seeds"] == "1 (3 runs)"
    assert row["test accuracy %"] == "85.00 (one seed; test-set sampling error 1.31 points, 90%)"
    seeded = accuracy.accuracy_table(frame(cell([0.84, 0.85, 0.86], [1, 2, 3])), ["lr"]).iloc[0]
    assert seeded["seeds"] == "3" and seeded["test accuracy %"].startswith("85.00 ± ")


def test_an_arm_below_the_floor_is_named_with_the_floor_and_where_it_comes_from():
    df = prepare(
        frame(
            cell([0.90, 0.91], [1, 2], lr=2e-4)
            + cell([0.60, 0.61], [1, 2], lr=2e-5)
            + cell([0.88, 0.87], [1, 2], lr=1e-4)
        )
    )
    arms = {"lr 2e-5": df[df["lr"] == 2e-5], "lr 1e-4": df[df["lr"] == 1e-4]}
    said = accuracy.unlearned(df, arms)
    assert said.startswith("an arm did not learn: lr 2e-5 (60.50%) below the floor 85.50%: 5 points below 90.50%")
    assert "lr 1e-4" not in said  # 87.5% is within 5 points of the best
    assert accuracy.unlearned(df, {"lr 1e-4": arms["lr 1e-4"]}) == ""


def test_the_floors_cell_names_whole_numbers_as_whole_even_beside_a_record_without_them():
    runs = cell([0.90, 0.91], [1, 2], lr=2e-4) + cell([0.60, 0.61], [1, 2], lr=2e-5)
    gap = record("cpu", "speedup", {"model_name": "minilm"}, run_name="died", status="failed")
    gap["params"] = {"model_name": "minilm"}  # a sweep's failure record: no batch, no max_length
    df = prepare(frame(runs + [gap]))
    said = accuracy.unlearned(df, {"lr 2e-5": df[df["lr"] == 2e-5]})
    batch = int(runs[0]["params"]["batch"])
    assert f"batch={batch}," in said and f"batch={batch}.0" not in said


@pytest.mark.parametrize(
    "low, learned", [(0.60, False), (0.87, True)]
)  # 30 points under the best: far above the majority class, and yet it did not learn; 3 under: it did
def test_the_tables_learned_is_the_claims_floor(low, learned):
    df = prepare(frame(cell([0.90, 0.91], [1, 2], lr=2e-4) + cell([low, low + 0.01], [1, 2], lr=2e-5)))
    df = df.assign(majority=0.35)  # the commonest label: every run is beyond it
    table = accuracy.accuracy_table(df.assign(learned=accuracy.learned(df)), ["lr"])
    assert table["learned?"].iloc[0].startswith("yes" if learned else "no: mean below the floor")
    assert bool(accuracy.unlearned(df, {"lr 2e-5": df[df["lr"] < 1e-4]})) is not learned  # the claims agree
