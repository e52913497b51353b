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
         model: str = "bert-base-uncased", lr: float = 5e-4, val: list[float] | None = None) -> list[dict]:
    """Return one lora-suite record per seed at one lr: full fine-tuning (r=0) or LoRA r on `targets`."""
    rates = rates or [100.0] * len(accs)
    out = []
    for seed, (acc, rate, v) in enumerate(zip(accs, rates, val or accs), 1):
        params = {"model_name": model, "lora_r": r, "seed": seed, "lr": lr, **({"lora_targets": targets} if r else {})}
        out.append(record(device, "lora", params, run_name=f"lora-full-r{r}-{targets}-lr{lr}-s{seed}", test_acc=acc,
                          val_acc=v, samples_per_s=rate, model={"trainable_parameters": 10 if r else 1000,
                                                                "optimizer_state_bytes": 80 if r else 8000}))
    return out


def searched(device: str, r: int, accs: list[float], model: str = "bert-base-uncased", **kwargs) -> list[dict]:
    """Return a setting's runs at three lrs: `accs` at 5e-4, the best by validation, 5 points less at the others."""
    worse = [a - 0.05 for a in accs]
    return (runs(device, r, worse, model=model, lr=2.5e-4, **kwargs) + runs(device, r, accs, model=model, **kwargs)
            + runs(device, r, worse, model=model, lr=1e-3, **kwargs))


@pytest.mark.parametrize("lora, verdict", [([0.930, 0.931, 0.929], "holds"),       # 0.1 points below
                                           ([0.900, 0.901, 0.899], "does not hold"),  # 3 points below
                                           ([0.925, 0.935, 0.915], "inconclusive")])  # ± straddles 1 point
def test_lora_accuracy_within_one_point(lora, verdict):
    found = rules_lora.lora_accuracy(frame(searched("a100", 0, [0.931, 0.932, 0.930]) + searched("a100", 8, lora)),
                                     PUB)
    assert found.verdict == verdict, (found.reason, found.measured)
    assert "gap to full" in found.measured and "0.0005 (of 0.00025, 0.0005, 0.001); 9 runs" in found.measured


def test_lora_accuracy_without_the_learning_rate_search_says_so():
    found = rules_lora.lora_accuracy(frame(runs("a100", 0, [0.931, 0.932, 0.930])
                                           + runs("a100", 8, [0.930, 0.931, 0.929])), PUB)
    assert found.verdict == "inconclusive"
    assert found.reason.startswith("the learning-rate search has not been run"), found.reason
    assert "`python -m helpers.study.sweep lora`" in found.reason


def test_each_setting_takes_its_best_lr_by_validation_and_the_table_counts_every_run():
    # at 1e-3 one seed collapses to the majority class; at 2.5e-4 the test accuracy is higher but validation lower
    recs = (runs("a100", 8, [0.95, 0.95, 0.95], lr=2.5e-4, val=[0.80] * 3) + runs("a100", 8, [0.90, 0.91, 0.92])
            + runs("a100", 8, [0.36, 0.85, 0.86], lr=1e-3, val=[0.36, 0.85, 0.86]) + searched("a100", 0, [0.93] * 3))
    row = lora_rows(frame(recs)).set_index("setting").loc["LoRA r=8 (query,value)"]
    assert row["lr: best by validation (searched); runs"] == "0.0005 (of 0.00025, 0.0005, 0.001); 9 runs, 1 collapsed"
    assert row["test accuracy %"].startswith("91.00 ± ")


def test_the_accuracy_verdict_names_the_budget_both_trained_for():
    recs = searched("a100", 0, [0.931, 0.932, 0.930]) + searched("a100", 8, [0.900, 0.901, 0.899])
    for rec in recs:
        rec["params"].update(epochs=1, train_subset=8000)
    found = rules_lora.lora_accuracy(frame(recs), PUB)
    assert "1 epoch of 8,000 rows" in found.measured and "same budget" in found.claim


def test_lora_accuracy_needs_seeds_and_grades_a_proxy():
    one_seed = rules_lora.lora_accuracy(frame(runs("a100", 0, [0.93]) + runs("a100", 8, [0.93])), PUB)
    assert one_seed.verdict == "not testable here"
    proxy = rules_lora.lora_accuracy(frame(searched("cpu", 0, [0.931, 0.932, 0.930], model="minilm")
                                           + searched("cpu", 8, [0.930, 0.931, 0.929], model="minilm")), PUB)
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


def _reaching(recs: list[dict], seconds: list[float | None]) -> list[dict]:
    """Return the records with a time_to_accuracy section: 88% reached at `seconds` (None: not reached)."""
    for rec, s in zip(recs, seconds):
        rec["curve"] = [{"step": 100, "train_time_s": s or 100.0, "val_accuracy": 0.88 if s else 0.8, "rows": 2000}]
        rec["time_to_accuracy"] = {"0.88": {"train_time_s": s, "step": 100} if s else
                                   {"train_time_s": None, "reason": "not reached (best 80.00% in 10 evaluations)"}}
    return recs


def test_the_lora_table_gives_the_time_and_dollars_to_88_percent_and_who_never_got_there():
    recs = _reaching(runs("a100", 0, [0.93] * 3), [100.0, 110.0, 120.0]) + \
        _reaching(runs("a100", 8, [0.85] * 3), [None, 300.0, None]) + \
        _reaching(runs("a100", 8, [0.80] * 3, targets="all-linear"), [None, None, None])
    rows = lora_rows(frame(recs)).set_index("setting")
    full = rows.loc["full fine-tuning", "to 88% (s, ≤)"]
    assert full.startswith("≤ 110 ± ") and "(3/3)" in full  # the first evaluation past it: an upper bound
    assert rows.loc["LoRA r=8 (query,value)", "to 88% (s, ≤)"] == "≤ 300 (1/3)"
    assert rows.loc["LoRA r=8 (all-linear)", "to 88% (s, ≤)"] == "not reached (0/3; best 80.0%)"
    # p4d.24xlarge: $21.96 an hour for 8 A100s, one used: 110 s cost 110 / 3600 x 2.745
    assert rows.loc["full fine-tuning", "USD to 88%"] == f"{110 / 3600 * 21.96 / 8:.4f}"
    assert rows.loc["LoRA r=8 (all-linear)", "USD to 88%"] == "—"
    # runs without a validation curve measured no time to accuracy: a dash, not "not reached"
    plain = lora_rows(frame(runs("a100", 0, [0.93] * 3) + runs("a100", 8, [0.85] * 3))).set_index("setting")
    assert (plain["to 88% (s, ≤)"] == "—").all()


def test_the_lora_section_adds_the_largest_bert_base_batch_each_setting_fits():
    from helpers.study.report.lora_table import fits

    settings = frame(runs("a100", 0, [0.9]) + runs("a100", 8, [0.9]) + runs("a100", 8, [0.9], targets="all-linear"))
    table = fits(settings[["lora_r", "lora_targets"]].drop_duplicates(), 32)
    t4 = next(c for c in table.columns if c.startswith("NVIDIA T4"))
    assert list(table.index) == ["full fine-tuning", "LoRA r=8 (query,value)", "LoRA r=8 (all-linear)"]
    # frozen weights keep no gradient and no AdamW moments: more room for activations, a larger batch
    assert table.loc["LoRA r=8 (query,value)", t4] > table.loc["full fine-tuning", t4] > 0
    assert (table[t4] < table[next(c for c in table.columns if c.startswith("NVIDIA H100"))]).all()
