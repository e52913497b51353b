"""The XLA environment of a run: Neuron compiler flags, runtime rounding, bf16 mode, compile caches.

Everything here must be in `os.environ` before `torch_xla` starts (XLA_USE_BF16 and XLA_FLAGS are read
once at start-up, and the compiler flags of the first graph decide its cache key), so `steps.start`
calls `apply_env(args)` before it names the device. Sources for every variable: shared/NEURON.md and
the aws-neuron-sdk pages named below.
"""

from __future__ import annotations

import importlib.util
import os
import shlex
import sys
import warnings
from pathlib import Path

from helpers.run.args import ConfigError, RunArgs

FAST_COMPILE = "--xla_backend_optimization_level=0"
NEURON_DEVICE = Path("/dev/neuron0")  # the first Neuron device, present where the driver found NeuronCores
# the NEURON_CC_FLAGS the user had before this process's first run set them (extended, never replaced)
USER_CC_FLAGS = "ACCELBENCH_USER_NEURON_CC_FLAGS"


def neuron_cc_flags(args: RunArgs) -> str:
    """Return the NEURON_CC_FLAGS string: model type, strategy, optlevel, auto-cast, cache."""
    n = args.neuron
    flags = []
    if n.model_type != "none":
        flags.append(f"--model-type={n.model_type}")
    if n.distribution_strategy != "none":
        flags.append(f"--distribution-strategy={n.distribution_strategy}")
    flags.append(f"--optlevel={n.optlevel}")
    extra = shlex.split(n.extra_cc_flags)
    # neuronx-cc casts fp32 matmuls to bf16 by default; torch.autocast and true fp32 both need that
    # off (migration-from-xla-downcast-bf16.rst). An explicit --auto-cast in extra_cc_flags wins.
    if not any(f.startswith("--auto-cast") and not f.startswith("--auto-cast-type") for f in extra):
        flags.append("--auto-cast=none")
    if n.neuron_cache_dir:
        # --cache_dir takes precedence over NEURON_COMPILE_CACHE_URL (neuron-caching.rst)
        flags.append(f"--cache_dir={n.neuron_cache_dir}")
    return " ".join(flags + extra)


def neuron_env(args: RunArgs) -> dict[str, str]:
    """Return the environment variables (name -> value) a Neuron run of `args` needs."""
    # a user's own NEURON_CC_FLAGS (from before this process's first run) come after the run's, so they win
    user = os.environ.get(USER_CC_FLAGS, os.environ.get("NEURON_CC_FLAGS", ""))
    env = {"NEURON_CC_FLAGS": " ".join(f for f in (neuron_cc_flags(args), user) if f)}
    # bf16-pure-sr is realised by the runtime's stochastic rounding on Neuron (helpers/run/optim.py)
    rounding = args.neuron.stochastic_rounding or args.train.precision == "bf16-pure-sr"
    env["NEURON_RT_STOCHASTIC_ROUNDING_EN"] = "1" if rounding else "0"
    if rounding:
        env["NEURON_RT_STOCHASTIC_ROUNDING_SEED"] = str(args.train.seed)  # default 0: fixed for repeats
    if args.neuron.bf16_mode == "xla_use_bf16":
        env["XLA_USE_BF16"] = "1"
    if args.neuron.neuron_cache_dir:
        env["NEURON_COMPILE_CACHE_URL"] = args.neuron.neuron_cache_dir  # neuron_parallel_compile reads it
    if "LOCAL_RANK" not in os.environ:
        # one process drives one NeuronCore (args.py refuses num_cores > 1 without as many ranks);
        # torchrun ranks get one core each from torch-neuronx
        env["NEURON_RT_NUM_CORES"] = "1"
    return env


def cpu_xla_env(args: RunArgs) -> dict[str, str]:
    """Return XLA_FLAGS for torch-xla's CPU backend: fast compilation unless switched off."""
    flags = os.environ.get("XLA_FLAGS", "")
    if args.neuron.xla_fast_compile and "xla_backend_optimization_level" not in flags:
        # LLVM at -O0 compiles a BERT graph several times faster; the graph and its results are the same
        flags = f"{flags} {FAST_COMPILE}".strip()
    return {"PJRT_DEVICE": os.environ.get("PJRT_DEVICE", "CPU"), **({"XLA_FLAGS": flags} if flags else {})}


def apply_env(args: RunArgs) -> dict[str, str]:
    """Put the XLA environment of `args` into os.environ before torch_xla starts; return what was set."""
    neuron = importlib.util.find_spec("torch_neuronx") is not None
    if neuron and os.environ.get("PJRT_DEVICE") == "CPU" and NEURON_DEVICE.exists():
        # a leftover from a CPU test session: torch-xla would run on the host and the record say "Neuron"
        raise ConfigError(
            f"PJRT_DEVICE=CPU is set on a machine with NeuronCores ({NEURON_DEVICE}): the run "
            "would train on the host CPU; unset it (`unset PJRT_DEVICE`) and restart the kernel"
        )
    os.environ.setdefault(USER_CC_FLAGS, os.environ.get("NEURON_CC_FLAGS", ""))  # the user's, kept once
    # the Neuron variables are set on the CPU backend too: harmless there, and the path is exercised
    env = neuron_env(args) | ({} if neuron else cpu_xla_env(args))
    if "torch_xla" in sys.modules:
        warnings.warn(
            "torch_xla was imported before the run set its environment: XLA_USE_BF16, "
            "XLA_FLAGS and the runtime variables may not take effect; restart the kernel and "
            "run the cells from the top",
            stacklevel=2,
        )
    if args.neuron.bf16_mode == "xla_use_bf16":
        warnings.warn(
            "bf16_mode='xla_use_bf16' sets XLA_USE_BF16=1, deprecated since torch-neuronx 2.5 "
            "(its function is due for removal); use bf16_mode='autocast' with precision='bf16', "
            "or precision='bf16-pure' with stochastic_rounding=True "
            "(migration-from-xla-downcast-bf16.rst)",
            FutureWarning,
            stacklevel=2,
        )
    else:
        os.environ.pop("XLA_USE_BF16", None)  # a leftover would silently run everything in bf16
    os.environ.update(env)
    return env
