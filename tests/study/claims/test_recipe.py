"""study/claims/recipe.py: stochastic rounding and the tuned lr come out each way over seeds, and say so when an
arm did not learn or the arms' optimizers differ."""

from __future__ import annotations

import pytest

from study.claims import recipe
from tests.study.claims.claim_records import check, judge, seeds

ADAMW = "torch.optim.adamw.AdamW"
UP, DOWN, ACROSS = [0.007, 0.008, 0.0075], [-0.007, -0.008, -0.0075], [0.01, -0.012, 0.004]


def rounding(l16: list[float], l32: list[float], device: str = "trn1", sr_optimizer: str = ADAMW, variant="full"):
    """Return precision runs whose SR - no SR by seed is `l16` at L=16 and `l32` at L=32."""
    out = []
    for length, diffs in ((16, l16), (32, l32)):
        base = [0.93 + 0.001 * s for s in range(len(diffs))]
        for mode, accs, opt in (
            ("bf16-pure", base, ADAMW),
            ("bf16-pure-sr", [b + d for b, d in zip(base, diffs)], sr_optimizer),
        ):
            out += seeds(device, "precision", {"precision": mode, "max_length": length}, accs, variant, optimizer=opt)
    return out


@pytest.mark.parametrize(
    "l16, l32, verdict",
    [(UP, DOWN, "holds"), (DOWN, DOWN, "does not hold"), (UP, UP, "does not hold"), (ACROSS, DOWN, "inconclusive")],
)
def test_stochastic_rounding(l16, l32, verdict):
    found = judge(recipe.stochastic_rounding, rounding(l16, l32))
    check(found, verdict, "Trainium", "accuracy points (3 pairs by seed)")
    assert "accuracy points" in found.headline  # the unit beside every difference


def test_stochastic_rounding_on_a_proxy_and_what_keeps_it_from_speaking():
    check(judge(recipe.stochastic_rounding, rounding(UP, DOWN, "cpu", variant="quick")), "consistent on proxy")
    found = judge(recipe.stochastic_rounding, rounding(UP, DOWN, sr_optimizer="torchao.optim.adam._AdamW"))
    check(found, "inconclusive")
    assert found.reason.startswith("the arms use different optimizers")
    one = judge(recipe.stochastic_rounding, rounding(UP[:1], DOWN[:1]))
    check(one, "inconclusive")  # one pair: no spread over seeds


def tuning(base: list[float], tuned: list[float], device: str = "trn1", variant: str = "full") -> list[dict]:
    return seeds(device, "lr_llrd", {"lr": 2e-5}, base, variant) + seeds(
        device, "lr_llrd", {"lr": 1.5e-4, "llrd_decay": 0.95}, tuned, variant
    )


@pytest.mark.parametrize(
    "tuned, verdict",
    [([0.945, 0.946, 0.947], "holds"), ([0.905, 0.906, 0.907], "does not hold"), ([0.93, 0.92, 0.925], "inconclusive")],
)
def test_lr_llrd(tuned, verdict):
    check(judge(recipe.lr_llrd, tuning([0.928, 0.929, 0.930], tuned)), verdict, "Trainium", "tuned − baseline")


def test_lr_llrd_says_when_an_arm_did_not_learn():
    found = judge(recipe.lr_llrd, tuning([0.50, 0.51, 0.52], [0.93, 0.94, 0.935]))
    check(found, "inconclusive")
    assert found.reason.startswith("an arm did not learn: lr 2e-5 without LLRD (51.00%) below the floor")
