"""Property-based: every combination of parameter values either validates or raises ConfigError."""
from hypothesis import given, settings, strategies as st

from helpers.config import ConfigError, RunConfig

ANY = st.one_of(st.none(), st.booleans(), st.integers(-10, 600), st.floats(allow_nan=True),
                st.text(max_size=8), st.sampled_from(["None", "True", "64", "5e-5", "static", "dynamic",
                                                      "bf16", "auto", "cpu", "xla", "optimized"]))
FIELDS = ["batch", "max_length", "padding", "lr", "llrd_decay", "epochs", "weight_decay", "warmup_ratio",
          "precision", "device", "seed", "train_subset", "optim", "preset", "gradient_accumulation_steps",
          "gradient_checkpointing", "optlevel", "bf16_mode", "num_cores", "max_grad_norm", "profile",
          "pad_to_multiple_of", "model_type", "distribution_strategy", "num_devices", "max_steps"]


@settings(max_examples=400, deadline=None)
@given(st.dictionaries(st.sampled_from(FIELDS), ANY, max_size=6))
def test_any_parameters_validate_or_raise_config_error(params):
    try:
        cfg = RunConfig(**params).validate()
    except ConfigError as err:
        assert any(name in str(err) for name in FIELDS + ["pad_to_multiple_of"]), str(err)
        return
    assert cfg.batch > 0 and cfg.lr > 0 and cfg.max_length > 2
    assert cfg.llrd_decay is None or 0 < cfg.llrd_decay <= 1
    assert cfg.weight_decay >= 0 and 0 <= cfg.warmup_ratio < 1


def test_non_finite_numbers_are_rejected():
    for name in ("lr", "weight_decay", "warmup_ratio", "llrd_decay", "max_grad_norm"):
        for bad in (float("nan"), float("inf")):
            try:
                RunConfig(**{name: bad}).validate()
            except ConfigError as err:
                assert name in str(err)
            else:
                raise AssertionError(f"{name}={bad} accepted")
