"""The Neuron environment built from run parameters (no torch_xla needed)."""
from __future__ import annotations

import os
import sys

import pytest

from helpers import neuron
from helpers.config import RunConfig


def test_cc_flags_from_parameters():
    cfg = RunConfig(optlevel=3, model_type="transformer", distribution_strategy="llm-training",
                    extra_cc_flags="--verbose=info", neuron_cache_dir="/tmp/neuron-cache").validate()
    assert neuron.neuron_cc_flags(cfg) == ("--model-type=transformer --distribution-strategy=llm-training "
                                           "--optlevel=3 --auto-cast=none --cache_dir=/tmp/neuron-cache "
                                           "--verbose=info")


def test_cc_flags_defaults_and_none_values():
    default = "--model-type=transformer --optlevel=2 --auto-cast=none"
    assert neuron.neuron_cc_flags(RunConfig().validate()) == default
    cfg = RunConfig(model_type="none", optlevel=1).validate()
    assert neuron.neuron_cc_flags(cfg) == "--optlevel=1 --auto-cast=none"


def test_explicit_auto_cast_in_extra_flags_wins():
    cfg = RunConfig(extra_cc_flags="--auto-cast=matmult --auto-cast-type=bf16").validate()
    flags = neuron.neuron_cc_flags(cfg)
    assert "--auto-cast=none" not in flags
    assert flags.endswith("--auto-cast=matmult --auto-cast-type=bf16")
    # --auto-cast-type alone does not turn the compiler's casting back on
    assert "--auto-cast=none" in neuron.neuron_cc_flags(RunConfig(extra_cc_flags="--auto-cast-type=bf16"))


def test_env_rounding_bf16_mode_and_cache():
    cfg = RunConfig(stochastic_rounding=True, seed=7, neuron_cache_dir="s3://b/c").validate()
    env = neuron.neuron_env(cfg)
    assert env["NEURON_RT_STOCHASTIC_ROUNDING_EN"] == "1"
    assert env["NEURON_RT_STOCHASTIC_ROUNDING_SEED"] == "7"
    assert env["NEURON_COMPILE_CACHE_URL"] == "s3://b/c"
    assert "XLA_USE_BF16" not in env
    assert neuron.neuron_env(RunConfig().validate())["NEURON_RT_STOCHASTIC_ROUNDING_EN"] == "0"
    # bf16-pure-sr is the runtime's stochastic rounding on Neuron, whatever stochastic_rounding says
    sr = neuron.neuron_env(RunConfig(precision="bf16-pure-sr").validate())
    assert sr["NEURON_RT_STOCHASTIC_ROUNDING_EN"] == "1"
    assert neuron.neuron_env(RunConfig(bf16_mode="xla_use_bf16").validate())["XLA_USE_BF16"] == "1"
    assert neuron.neuron_env(RunConfig(num_cores=2).validate())["NEURON_RT_NUM_CORES"] == "2"
    assert "NEURON_RT_NUM_CORES" not in neuron.neuron_env(RunConfig(num_devices=2).validate())


def test_apply_sets_environment_and_warns_on_xla_use_bf16(monkeypatch):
    for name in ("NEURON_CC_FLAGS", "XLA_USE_BF16", "NEURON_RT_STOCHASTIC_ROUNDING_EN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delitem(sys.modules, "torch_xla", raising=False)
    with pytest.warns(FutureWarning, match="deprecated"):
        env = neuron.apply_neuron_env(RunConfig(bf16_mode="xla_use_bf16", optlevel="1"))  # papermill string
    assert os.environ["XLA_USE_BF16"] == "1"
    flags = "--model-type=transformer --optlevel=1 --auto-cast=none"
    assert os.environ["NEURON_CC_FLAGS"] == env["NEURON_CC_FLAGS"] == flags
    neuron.apply_neuron_env(RunConfig())  # a leftover XLA_USE_BF16 would turn the next run bf16
    assert "XLA_USE_BF16" not in os.environ


def test_bad_optlevel_is_refused():
    from helpers.config import ConfigError

    with pytest.raises(ConfigError, match="optlevel"):
        neuron.neuron_env(RunConfig(optlevel=4).validate())


def test_bf16_mode_keeps_torch_in_fp32_on_xla():
    from helpers.config import ConfigError
    from helpers.device import DeviceInfo, resolve_precision

    xla = DeviceInfo("xla", "xla:0", "Neuron", "AVX2", bf16_fast=True, neuron=True)
    assert resolve_precision("auto", xla) == "bf16"  # autocast mode: the precision decides
    assert resolve_precision("auto", xla, "xla_use_bf16") == "fp32"  # XLA_USE_BF16 does the casting
    assert resolve_precision("fp32", xla, "fp32") == "fp32"
    with pytest.raises(ConfigError, match="bf16_mode='fp32'"):
        resolve_precision("bf16", xla, "fp32")
    cpu = DeviceInfo("cpu", "cpu", "CPU", "AVX2", bf16_fast=False)
    assert resolve_precision("auto", cpu, "fp32") == "fp32"  # bf16_mode means nothing off XLA
