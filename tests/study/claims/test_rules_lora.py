"""The LoRA claims reach each verdict on hand-made records of the lora suite (tests/record_fixtures.py)."""
from __future__ import annotations

import pytest

from helpers.run import records
from helpers.study.claims import rules_lora
from helpers.study.report.frame import frame
from helpers.study.report.lora_table import lora_rows
from tests.record_fixtures import record

PUB = "Experiment/published"


@pytest.fixture(autouse=True)
def no_library_versions(monkeypatch):
    monkeypatch.setattr(records, "library_versions", lambda: {})


def runs(device: str, r: int, accs: list[float], rates: list[float] | None = None, targets: str = "query,value",
         model: str = "bert-base-uncased") -> list[dict]:
    """Return one lora-suite record per seed: full fine-tuning (r=0) or LoRA r on `targets`."""
    rates = rates or [100.0] * len(accs)
    out = []
    for seed, (acc, rate) in enumerate(zip(accs, rates), 1):
        params = {"model_name": model, "lora_r": r, "seed": seed, **({"lora_targets": targets} if r else {})}
        out.append(record(device, "lora", params, run_name=f"lora-full-r{r}-{targets}-s{seed}", test_acc=acc,
                          samples_per_s=rate, model={"trainable_parameters": 10 if r else 1000,
                                                     "optimizer_state_bytes": 80 if r else 8000}))
    return out


@pytest.mark.parametrize("lora, verdict", [([0.930, 0.931, 0.929], "holds"),       # 0.1 points below
                                           ([0.900, 0.901, 0.899], "does not hold"),  # 3 points below
                                           ([0.925, 0.935, 0.915], "inconclusive")])  # ± straddles 1 point
def test_lora_accuracy_within_one_point(lora, verdict):
    found = rules_lora.lora_accuracy(frame(runs("a100", 0, [0.931, 0.932, 0.930]) + runs("a100", 8, lora)), PUB)
    assert found.verdict == verdict, (found.reason, found.measured)
    assert "gap to full" in found.measured


def test_the_accuracy_verdict_names_the_budget_both_trained_for():
    recs = runs("a100", 0, [0.931, 0.932, 0.930]) + runs("a100", 8, [0.900, 0.901, 0.899])
    for rec in recs:
        rec["params"].update(epochs=1, train_subset=8000)
    found = rules_lora.lora_accuracy(frame(recs), PUB)
    assert "1 epoch of 8,000 rows" in found.measured and "same budget" in found.claim


def test_lora_accuracy_needs_seeds_and_grades_a_proxy():
    one_seed = rules_lora.lora_accuracy(frame(runs("a100", 0, [0.93]) + runs("a100", 8, [0.93])), PUB)
    assert one_seed.verdict == "not testable here"
    proxy = rules_lora.lora_accuracy(frame(runs("cpu", 0, [0.931, 0.932, 0.930], model="minilm")
                                           + runs("cpu", 8, [0.930, 0.931, 0.929], model="minilm")), PUB)
    assert proxy.verdict == "consistent on proxy"


@pytest.mark.parametrize("rates, verdict", [([150, 152, 149], "holds"), ([70, 72, 71], "does not hold"),
                                            ([95, 130, 100], "inconclusive")])
def test_lora_speed_against_full_fine_tuning_between_runs(rates, verdict):
    recs = runs("a100", 0, [0.93] * 3, [100, 102, 98]) + runs("a100", 8, [0.92] * 3, rates)
    found = rules_lora.lora_speed(frame(recs), PUB)
    assert found.verdict == verdict, (found.reason, found.measured)


def test_the_lora_table_shows_the_gap_with_its_interval_and_what_trains():
    rows = lora_rows(frame(runs("a100", 0, [0.931, 0.932, 0.930]) + runs("a100", 8, [0.900, 0.901, 0.899])))
    lora = rows[rows["setting"] == "LoRA r=8 (query,value)"].iloc[0]
    assert lora["gap to full (points)"].startswith("+3.10 ± ") and lora["seeds"] == 3
    assert lora["trainable"] == "10" and rows[rows["setting"] == "full fine-tuning"].iloc[0]["trainable"] == "1,000"
