"""helpers/study/claims/recipe.py: stochastic rounding's effect by sequence length and the tuned learning rate
with LLRD reach each of their verdicts on hand-made records, and an arm that did not learn, or arms on different
optimizers, leave the verdict inconclusive and say why."""

from __future__ import annotations

import pytest

from helpers.study.claims import recipe
from tests.study.claims.claim_records import check, judge, run

pytestmark = pytest.mark.usefixtures("no_library_versions")


def precision_runs(device: str, effects: dict[int, float], variant: str = "full") -> list[dict]:
    """Five seeds per length: bf16-pure at a base accuracy, bf16-pure-sr shifted by the length's effect ± noise."""
    recs = []
    for length, effect in effects.items():
        for seed, noise in zip(range(1, 6), (0.0, 0.004, -0.004, 0.002, -0.002)):
            base = 0.80 + seed / 100
            recs.append(
                run(
                    device,
                    "precision",
                    {"precision": "bf16-pure", "max_length": length, "seed": seed},
                    variant,
                    test_acc=base,
                )
            )
            recs.append(
                run(
                    device,
                    "precision",
                    {"precision": "bf16-pure-sr", "max_length": length, "seed": seed},
                    variant,
                    test_acc=base + effect + noise,
                )
            )
    return recs


@pytest.mark.parametrize(
    "effects, verdict",
    [
        ({16: 0.02, 32: -0.02}, "holds"),
        ({16: -0.02, 32: -0.02}, "does not hold"),
        ({16: 0.0, 32: -0.02}, "inconclusive"),
    ],
)
def test_stochastic_rounding(effects, verdict):
    found = judge(recipe.stochastic_rounding, precision_runs("a100", effects))
    check(found, verdict, "a100", "full", 20)
    assert ("resolve an SR effect of ±" in found.reason) == (verdict == "inconclusive")
    assert "did not learn" not in found.reason


def test_stochastic_rounding_on_an_arm_that_did_not_learn_is_inconclusive_and_names_it():
    # the effects that hold above, with round-to-nearest 30 points under SR at L=16: a baseline that did not learn
    recs = precision_runs("a100", {16: 0.30, 32: -0.02})
    found = judge(recipe.stochastic_rounding, recs)
    assert found.verdict == "inconclusive", found.reason
    assert found.reason.startswith("an arm did not learn: bf16-pure L=16"), found.reason
    assert "5 points below" in found.reason and "bf16-pure-sr L=16" not in found.reason.split(" below")[0]


def test_stochastic_rounding_with_different_optimizers_says_so():
    recs = precision_runs("a100", {16: 0.02, 32: -0.02})
    for r in recs:
        r["optimizer"] = {
            "class": "torchao.optim.adam._AdamW"
            if r["params"]["precision"] == "bf16-pure-sr"
            else "torch.optim.adamw.AdamW"
        }
    found = judge(recipe.stochastic_rounding, recs)
    assert found.verdict == "inconclusive"
    assert "the arms use different optimizers" in found.reason and "torchao" in found.reason


def test_stochastic_rounding_untestable_and_proxy():
    only_pure = [r for r in precision_runs("a100", {16: 0.05}) if r["params"]["precision"] == "bf16-pure"]
    check(judge(recipe.stochastic_rounding, only_pure), "not testable here", "a100", "full", 5)
    proxy = judge(recipe.stochastic_rounding, precision_runs("cpu", {16: 0.02, 32: -0.02}, "quick"))
    check(proxy, "consistent on proxy", "cpu", "quick", 20)
    assert "on proxy: minilm on CPU" in proxy.reason


def llrd_runs(device: str, accs: dict[tuple[float, float | None], list[float]], variant: str = "full") -> list[dict]:
    """Return runs of the lr x LLRD 2x2: accuracy per seed for each (lr, llrd_decay) cell given."""
    return [
        run(device, "lr_llrd", {"lr": lr, **({"llrd_decay": d} if d else {}), "seed": seed}, variant, test_acc=acc)
        for (lr, d), values in accs.items()
        for seed, acc in enumerate(values, 1)
    ]


def grid(lo_none, lo_llrd, hi_none, hi_llrd) -> dict:
    return {(2e-5, None): lo_none, (2e-5, 0.95): lo_llrd, (1.5e-4, None): hi_none, (1.5e-4, 0.95): hi_llrd}


@pytest.mark.parametrize(
    "accs, verdict",
    [
        (grid([0.90, 0.902], [0.93, 0.932], [0.92, 0.922], [0.95, 0.952]), "holds"),  # tuned 5 points up
        (grid([0.93, 0.932], [0.92, 0.922], [0.91, 0.912], [0.90, 0.902]), "does not hold"),  # tuned 3 points down
        (grid([0.92, 0.93], [0.92, 0.93], [0.92, 0.93], [0.925, 0.935]), "inconclusive"),  # within the seeds' noise
        (grid([0.35, 0.36], [0.91, 0.92], [0.91, 0.92], [0.91, 0.92]), "inconclusive"),
    ],
)  # the baseline learned nothing
def test_lr_llrd_tests_the_studys_tuned_against_baseline(accs, verdict):
    found = judge(recipe.lr_llrd, llrd_runs("trn1", accs))
    check(found, verdict, "trn1", "full", 8)
    assert "ours: LLRD's effect apart from the lr" in found.measured
    if min(accs[2e-5, None]) < 0.5:
        assert found.reason.startswith("an arm did not learn: lr 2e-5 without LLRD"), found.reason


def test_lr_llrd_shows_llrd_apart_from_the_lr_as_ours_and_never_credits_it():
    # the study's own pattern: the tuned corner is higher, all of it the learning rate's
    found = judge(recipe.lr_llrd, llrd_runs("trn1", grid([0.90, 0.902], [0.90, 0.902], [0.94, 0.942], [0.94, 0.942])))
    assert found.verdict == "holds"
    assert "LLRD's effect apart from the lr +0.00 points" in found.measured
    assert "credited to LLRD" not in found.published and "(ours)" in found.published


def test_lr_llrd_untestable_without_both_corners():
    corners = llrd_runs("a100", {(2e-5, None): [0.9], (1.5e-4, None): [0.94]})
    check(judge(recipe.lr_llrd, corners), "not testable here", "a100", "full", 2)
