"""The Neuron environment of a run: compiler flags, runtime rounding, bf16 mode and the compile cache.

Everything here must be in `os.environ` before `torch_xla` starts (XLA_USE_BF16 is read once at
start-up, and the compiler flags of the first graph decide its cache key), so the Trainium notebook
and `Trainium/train.py` call `apply_neuron_env(cfg)` before any step that touches the device.
Sources for every variable: /work/shared/NEURON.md and the aws-neuron-sdk pages named below.
"""
from __future__ import annotations

import os
import shlex
import sys
import warnings

from helpers.config import RunConfig

def neuron_cc_flags(cfg: RunConfig) -> str:
    """Return the NEURON_CC_FLAGS string for `cfg`: model type, strategy, optlevel, auto-cast, cache."""
    flags = []
    if cfg.model_type != "none":
        flags.append(f"--model-type={cfg.model_type}")
    if cfg.distribution_strategy != "none":
        flags.append(f"--distribution-strategy={cfg.distribution_strategy}")
    flags.append(f"--optlevel={cfg.optlevel}")
    extra = shlex.split(cfg.extra_cc_flags)
    # neuronx-cc casts fp32 matmuls to bf16 by default; torch.autocast and true fp32 both need that
    # off (migration-from-xla-downcast-bf16.rst). An explicit --auto-cast in extra_cc_flags wins.
    if not any(f.startswith("--auto-cast") and not f.startswith("--auto-cast-type") for f in extra):
        flags.append("--auto-cast=none")
    if cfg.neuron_cache_dir:
        # --cache_dir takes precedence over NEURON_COMPILE_CACHE_URL (neuron-caching.rst)
        flags.append(f"--cache_dir={cfg.neuron_cache_dir}")
    return " ".join(flags + extra)


def neuron_env(cfg: RunConfig) -> dict[str, str]:
    """Return the environment variables (name -> value) a Neuron run of `cfg` needs."""
    env = {"NEURON_CC_FLAGS": neuron_cc_flags(cfg)}
    # bf16-pure-sr is realised by the runtime's stochastic rounding on Neuron (helpers/precision.py)
    rounding = cfg.stochastic_rounding or cfg.precision == "bf16-pure-sr"
    env["NEURON_RT_STOCHASTIC_ROUNDING_EN"] = "1" if rounding else "0"
    if rounding:
        env["NEURON_RT_STOCHASTIC_ROUNDING_SEED"] = str(cfg.seed)  # default 0: fixed for repeat runs
    if cfg.bf16_mode == "xla_use_bf16":
        env["XLA_USE_BF16"] = "1"
    if cfg.neuron_cache_dir:
        env["NEURON_COMPILE_CACHE_URL"] = cfg.neuron_cache_dir  # also read by neuron_parallel_compile
    if cfg.num_devices == 1 and "LOCAL_RANK" not in os.environ:
        # torchrun ranks get one NeuronCore each from torch-neuronx; a single process takes num_cores
        env["NEURON_RT_NUM_CORES"] = str(cfg.num_cores)
    return env


def apply_neuron_env(cfg: RunConfig) -> dict[str, str]:
    """Validate `cfg`, put its Neuron variables into os.environ (before torch_xla starts); return them."""
    cfg.validate()
    env = neuron_env(cfg)
    if "torch_xla" in sys.modules:
        warnings.warn("torch_xla was imported before apply_neuron_env: XLA_USE_BF16 and the runtime "
                      "variables may not take effect; restart the kernel and run this cell first",
                      stacklevel=2)
    if cfg.bf16_mode == "xla_use_bf16":
        warnings.warn("bf16_mode='xla_use_bf16' sets XLA_USE_BF16=1, deprecated since torch-neuronx "
                      "2.5 (its function is due for removal); use bf16_mode='autocast' with "
                      "precision='bf16', or precision='bf16-pure' with stochastic_rounding=True "
                      "(migration-from-xla-downcast-bf16.rst)", FutureWarning, stacklevel=2)
    if cfg.bf16_mode != "xla_use_bf16":
        os.environ.pop("XLA_USE_BF16", None)  # a leftover would silently run everything in bf16
    os.environ.update(env)
    return env
