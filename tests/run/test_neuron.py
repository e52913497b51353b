"""The Neuron environment built from run parameters (no torch_xla needed)."""

from __future__ import annotations

import os
import sys

import pytest

from helpers.run import neuron
from helpers.run.args import ConfigError, build_args


def test_cc_flags_from_parameters():
    cfg = build_args(
        dict(
            optlevel=3,
            model_type="transformer",
            distribution_strategy="llm-training",
            extra_cc_flags="--verbose=info",
            neuron_cache_dir="/tmp/neuron-cache",
        )
    )
    assert neuron.neuron_cc_flags(cfg) == (
        "--model-type=transformer --distribution-strategy=llm-training "
        "--optlevel=3 --auto-cast=none --cache_dir=/tmp/neuron-cache "
        "--verbose=info"
    )


def test_cc_flags_defaults_and_none_values():
    default = "--model-type=transformer --optlevel=2 --auto-cast=none"
    assert neuron.neuron_cc_flags(build_args(dict())) == default
    cfg = build_args(dict(model_type="none", optlevel=1))
    assert neuron.neuron_cc_flags(cfg) == "--optlevel=1 --auto-cast=none"


def test_explicit_auto_cast_in_extra_flags_wins():
    cfg = build_args(dict(extra_cc_flags="--auto-cast=matmult --auto-cast-type=bf16"))
    flags = neuron.neuron_cc_flags(cfg)
    assert "--auto-cast=none" not in flags
    assert flags.endswith("--auto-cast=matmult --auto-cast-type=bf16")
    # --auto-cast-type alone does not turn the compiler's casting back on
    assert "--auto-cast=none" in neuron.neuron_cc_flags(build_args(dict(extra_cc_flags="--auto-cast-type=bf16")))


def test_env_rounding_bf16_mode_and_cache():
    cfg = build_args(dict(stochastic_rounding=True, seed=7, neuron_cache_dir="s3://b/c"))
    env = neuron.neuron_env(cfg)
    assert env["NEURON_RT_STOCHASTIC_ROUNDING_EN"] == "1"
    assert env["NEURON_RT_STOCHASTIC_ROUNDING_SEED"] == "7"
    assert env["NEURON_COMPILE_CACHE_URL"] == "s3://b/c"
    assert "XLA_USE_BF16" not in env
    assert neuron.neuron_env(build_args(dict()))["NEURON_RT_STOCHASTIC_ROUNDING_EN"] == "0"
    # bf16-pure-sr is the runtime's stochastic rounding on Neuron, whatever stochastic_rounding says
    sr = neuron.neuron_env(build_args(dict(precision="bf16-pure-sr")))
    assert sr["NEURON_RT_STOCHASTIC_ROUNDING_EN"] == "1"
    assert neuron.neuron_env(build_args(dict(bf16_mode="xla_use_bf16")))["XLA_USE_BF16"] == "1"
    assert neuron.neuron_env(build_args(dict()))["NEURON_RT_NUM_CORES"] == "1"  # one process, one core


def test_apply_sets_environment_and_warns_on_xla_use_bf16(monkeypatch):
    for name in ("NEURON_CC_FLAGS", "XLA_USE_BF16", "NEURON_RT_STOCHASTIC_ROUNDING_EN", neuron.USER_CC_FLAGS):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delitem(sys.modules, "torch_xla", raising=False)
    with pytest.warns(FutureWarning, match="deprecated"):
        env = neuron.apply_env(build_args(dict(bf16_mode="xla_use_bf16", optlevel=1)))
    assert os.environ["XLA_USE_BF16"] == "1"
    flags = "--model-type=transformer --optlevel=1 --auto-cast=none"
    assert os.environ["NEURON_CC_FLAGS"] == env["NEURON_CC_FLAGS"] == flags
    neuron.apply_env(build_args(dict()))  # a leftover XLA_USE_BF16 would turn the next run bf16
    assert "XLA_USE_BF16" not in os.environ


def test_a_users_own_neuron_cc_flags_are_extended_not_replaced(monkeypatch):
    monkeypatch.delenv(neuron.USER_CC_FLAGS, raising=False)
    monkeypatch.setenv("NEURON_CC_FLAGS", "--verbose=debug --retry_failed_compilation")
    ours = "--model-type=transformer --optlevel=2 --auto-cast=none"
    for _ in range(2):  # a notebook cell run again: the user's flags once, never the run's twice
        neuron.apply_env(build_args(dict()))
        assert os.environ["NEURON_CC_FLAGS"] == ours + " --verbose=debug --retry_failed_compilation"


def test_the_record_keeps_the_flags_the_first_compilation_saw(monkeypatch):
    from helpers.measure import xla

    monkeypatch.setenv("NEURON_CC_FLAGS", "--optlevel=1")
    log = xla.CompileLog.__new__(xla.CompileLog)  # snapshot() needs torch_xla: only the env part here
    log.env = {k: os.environ[k] for k in xla.XLA_ENV if k in os.environ}
    monkeypatch.setenv("NEURON_CC_FLAGS", "--optlevel=3")
    assert log.env["NEURON_CC_FLAGS"] == "--optlevel=1"


def test_bad_optlevel_is_refused():
    from helpers.run.args import ConfigError

    with pytest.raises(ConfigError, match="optlevel"):
        build_args(dict(optlevel=4))


def test_bf16_mode_keeps_torch_in_fp32_on_xla():
    from helpers.run.args import ConfigError
    from helpers.run.device import DeviceInfo, resolve_precision

    xla = DeviceInfo("xla", "xla:0", "Neuron", "AVX2", bf16_fast=True, neuron=True)
    assert resolve_precision("auto", xla) == "bf16"  # autocast mode: the precision decides
    assert resolve_precision("auto", xla, "xla_use_bf16") == "fp32"  # XLA_USE_BF16 does the casting
    assert resolve_precision("fp32", xla, "fp32") == "fp32"
    with pytest.raises(ConfigError, match="bf16_mode='fp32'"):
        resolve_precision("bf16", xla, "fp32")
    cpu = DeviceInfo("cpu", "cpu", "CPU", "AVX2", bf16_fast=False)
    assert resolve_precision("auto", cpu, "fp32") == "fp32"  # bf16_mode means nothing off XLA


def test_fast_compilation_on_the_cpu_backend_only_when_asked(monkeypatch):
    # off by default: LLVM -O0 compiles MiniLM's step ~2x faster but runs it 4-6x slower (docs/RUNNING.md)
    monkeypatch.delenv("XLA_FLAGS", raising=False)
    assert "XLA_FLAGS" not in neuron.cpu_xla_env(build_args({}))
    assert neuron.cpu_xla_env(build_args({"xla_fast_compile": True}))["XLA_FLAGS"] == neuron.FAST_COMPILE
    monkeypatch.setenv("XLA_FLAGS", "--xla_backend_optimization_level=2")  # the user's own level wins
    assert neuron.cpu_xla_env(build_args({}))["XLA_FLAGS"] == "--xla_backend_optimization_level=2"


def test_the_compute_dtype_follows_what_the_matmuls_run_in():
    from helpers.run.device import compute_dtype

    assert compute_dtype("fp32", "xla_use_bf16") == "bf16"  # XLA_USE_BF16 casts while torch says fp32
    assert compute_dtype("fp32", "autocast", "--auto-cast=matmult --auto-cast-type=bf16") == "bf16"
    assert compute_dtype("fp32", "autocast", "--auto-cast=none") == "fp32"
    assert compute_dtype("bf16-pure-sr") == "bf16" and compute_dtype("fp16") == "fp16"


def test_a_leftover_pjrt_device_cpu_on_a_neuron_machine_is_refused(monkeypatch, tmp_path):
    from helpers.run.args import ConfigError

    device = tmp_path / "neuron0"
    device.touch()
    monkeypatch.setattr(neuron, "NEURON_DEVICE", device)
    monkeypatch.setattr(neuron.importlib.util, "find_spec", lambda name: object() if name == "torch_neuronx" else None)
    monkeypatch.setattr(os, "environ", {**os.environ, "PJRT_DEVICE": "CPU"})  # apply_env writes: kept to this test
    with pytest.raises(ConfigError, match="PJRT_DEVICE=CPU is set on a machine with NeuronCores"):
        neuron.apply_env(build_args(dict()))
    device.unlink()  # no NeuronCores: PJRT_DEVICE=CPU is the CPU backend, as meant
    neuron.apply_env(build_args(dict()))


def test_the_record_names_the_drivers_where_present(tmp_path):
    from helpers.run import device

    version = tmp_path / "version"
    version.write_text("2.22.4.0\n")
    assert device.system_versions(version)["neuron_driver"] == "2.22.4.0"
    assert "neuron_driver" not in device.system_versions(tmp_path / "absent")


def test_extra_cc_flags_a_shell_cannot_split_are_refused_naming_the_parameter():
    with pytest.raises(ConfigError, match="extra_cc_flags='\"--unbalanced' is invalid: No closing quotation"):
        build_args({"extra_cc_flags": '"--unbalanced'})
    assert "--verbose=info" in neuron.neuron_cc_flags(build_args({"extra_cc_flags": "'--verbose=info'"}))
