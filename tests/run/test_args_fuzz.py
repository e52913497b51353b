"""Property-based: any mapping of names and values through the notebooks' entry is a clear ConfigError
or valid arguments, never another exception."""
from hypothesis import given, settings, strategies as st

from helpers.run.args import FIELDS, ConfigError
from helpers.run.argv import notebook_args

ANY = st.one_of(st.none(), st.booleans(), st.integers(-10, 600), st.floats(allow_nan=True),
                st.text(max_size=8), st.sampled_from(["None", "True", "64", "5e-5", "static", "dynamic",
                                                      "bf16", "auto", "cpu", "xla", "optimized", "../x"]))
NAMES = st.one_of(st.sampled_from(sorted(FIELDS)), st.sampled_from(["learning_rate", "bach", "lrr"]),
                  st.from_regex(r"[a-z][a-z_]{0,12}", fullmatch=True))


@settings(max_examples=500, deadline=None)
@given(st.dictionaries(NAMES, ANY, max_size=6), st.booleans())
def test_any_mapping_is_valid_or_a_config_error_naming_a_parameter(params, injected):
    history = ["# Parameters\n" + "".join(f"{k} = 0\n" for k in params)] if injected else []
    try:
        args = notebook_args({**params, "In": history})
    except ConfigError as err:
        assert any(name in str(err) for name in list(FIELDS) + list(params)), str(err)
        return
    t, tr = args.task, args.train
    assert tr.batch > 0 and tr.lr > 0 and t.max_length > 2
    assert tr.llrd_decay is None or 0 < tr.llrd_decay <= 1
    assert tr.weight_decay >= 0 and 0 <= tr.warmup_ratio < 1 and 0 <= tr.seed <= 2**32 - 1


def test_non_finite_numbers_are_rejected():
    for name in ("lr", "weight_decay", "warmup_ratio", "llrd_decay", "max_grad_norm", "diverge_factor"):
        for bad in (float("nan"), float("inf")):
            try:
                notebook_args({name: bad})
            except ConfigError as err:
                assert name in str(err)
            else:
                raise AssertionError(f"{name}={bad} accepted")
