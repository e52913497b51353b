"""The XLA environment a Trainium run sets before torch_xla starts."""

from __future__ import annotations

from helpers import arguments, xla


def flags(**values) -> str:
    return xla.cc_flags(arguments.build(values, arguments.TrainiumArgs))


def test_the_compiler_flags_and_the_users_own_last(monkeypatch):
    assert flags() == "--model-type=transformer --optlevel=2 --auto-cast=none"
    assert flags(extra_cc_flags="--auto-cast=matmult", optlevel=1).endswith("--optlevel=1 --auto-cast=matmult")
    monkeypatch.setenv("NEURON_CC_FLAGS", "--verbose=info")
    env = xla.environment(arguments.build({"precision": "bf16-pure-sr", "seed": 7}, arguments.TrainiumArgs), False)
    assert env["NEURON_CC_FLAGS"].endswith("--verbose=info") and env["NEURON_RT_STOCHASTIC_ROUNDING_EN"] == "1"
    assert env["NEURON_RT_STOCHASTIC_ROUNDING_SEED"] == "7" and env["PJRT_DEVICE"] == "CPU"
