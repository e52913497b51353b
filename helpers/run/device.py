"""Which device a run uses, what the host CPU can do, and which precision is fast on it."""

from __future__ import annotations

import functools
import importlib.util
import os
import platform
import re
import sys
import typing
import warnings
from dataclasses import dataclass
from pathlib import Path

import torch

from helpers.run.args import ConfigError, Device
from helpers.run.records import slug

DMI = Path("/sys/devices/virtual/dmi/id")


@dataclass(frozen=True)
class DeviceInfo:
    """The resolved device of a run and the facts the record needs about it."""

    type: str  # "cuda" | "cpu" | "xla"
    torch_device: str  # what `.to()` takes, e.g. "cuda:0", "cpu", "xla:0"
    name: str  # "NVIDIA H100 80GB HBM3", the CPU model, or "Neuron" / "XLA CPU"
    cpu_capability: str  # torch's kernel level plus AMX / avx512_bf16 flags, e.g. "AVX512+amx_bf16"
    bf16_fast: bool  # bf16 instructions / tensor cores (a CPU: AMX or AVX512-BF16; whether bf16 autocast wins
    # there is the precision probe's call, helpers/measure/precision_probe.py)
    neuron: bool = False  # torch-neuronx present (real NeuronCores)
    instance: str | None = None  # the EC2 instance type where the host reports one (trn1.2xlarge, ...)

    @property
    def key(self) -> str:
        """Return the device's identity in file names: type and name, plus the CPU's bf16 features."""
        cpu_bound = self.type == "cpu" or (self.type == "xla" and not self.neuron)
        return slug(f"{self.type}-{self.name}" + (f"-{self.cpu_capability}" if cpu_bound else ""))

    def describe(self) -> dict:
        """Return the record's `device` section."""
        return {
            "type": self.type,
            "name": self.name,
            "key": self.key,
            "instance": self.instance,
            "cpu_capability": self.cpu_capability,
            "bf16_fast": self.bf16_fast,
            "neuron": self.neuron,
            "torch_threads": torch.get_num_threads(),
            "cpu_count": os.cpu_count(),
            **system_versions(),
        }


def system_versions(neuron_driver: Path = Path("/sys/module/neuron/version")) -> dict:
    """Return the CUDA runtime torch was built with, the NVIDIA driver and the Neuron driver, where present."""
    out = {}
    if torch.version.cuda and torch.cuda.is_available():
        out["cuda_runtime"] = torch.version.cuda
        try:
            import pynvml

            pynvml.nvmlInit()
            out["gpu_driver"] = pynvml.nvmlSystemGetDriverVersion()
        except Exception as err:  # noqa: BLE001 - a version we cannot read is said, never fatal
            out["gpu_driver"] = f"unreadable ({type(err).__name__})"
    if neuron_driver.is_file():
        out["neuron_driver"] = neuron_driver.read_text().strip()
    return out


@functools.cache
def cpuinfo(field: str) -> str:
    """Return the value of the first `field` line of /proc/cpuinfo ('' where there is none)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith(field):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return ""


def cpu_flags() -> frozenset[str]:
    """Return the CPU feature flags of this host (empty where /proc/cpuinfo is absent)."""
    return frozenset(cpuinfo("flags").split())


def cpu_capability() -> str:
    """Return torch's CPU kernel level plus the bf16 matmul features, e.g. 'AVX512+amx_bf16'."""
    level = torch.backends.cpu.get_cpu_capability()
    extras = [f for f in ("amx_bf16", "avx512_bf16") if f in cpu_flags()]
    return "+".join([level, *extras])


def cpu_bf16_fast() -> bool:
    """True where this CPU has bf16 instructions (AMX or AVX512-BF16); False on AVX2-only."""
    # On AVX2-only hosts (AMD EPYC here) oneDNN emulates bf16 and autocast is ~20x slower.
    return bool({"amx_bf16", "avx512_bf16"} & cpu_flags())


def cpu_name() -> str:
    """Return the CPU model string."""
    return cpuinfo("model name") or platform.processor() or platform.machine()


@functools.cache
def instance_type(dmi: Path = DMI) -> str | None:
    """Return the EC2 instance type (its DMI product name, e.g. 'trn1.2xlarge'), None off EC2."""
    try:
        vendor = (dmi / "sys_vendor").read_text().strip()
        product = (dmi / "product_name").read_text().strip()
    except OSError:
        return None
    return product if vendor == "Amazon EC2" and re.fullmatch(r"[a-z0-9-]+\.[0-9]*[a-z]+", product) else None


def neuron_available() -> bool:
    """True when torch-neuronx is installed (a trn1/inf2 host with the Neuron SDK)."""
    return importlib.util.find_spec("torch_neuronx") is not None


def xla_available() -> bool:
    """True when torch_xla imports in this environment."""
    return importlib.util.find_spec("torch_xla") is not None


def resolve_device(requested: str) -> DeviceInfo:
    """Return the device for `requested` (auto|cuda|cpu|xla) or raise ConfigError if absent."""
    if requested == "auto":
        requested = "cuda" if torch.cuda.is_available() else ("xla" if neuron_available() else "cpu")
    capability = cpu_capability()
    if requested == "cuda":
        if not torch.cuda.is_available():
            raise ConfigError(
                "device='cuda' but no CUDA GPU is visible to torch: allowed here "
                "auto, cpu" + (", xla" if xla_available() else "")
            )
        index = torch.cuda.current_device()
        major, _ = torch.cuda.get_device_capability(index)
        return DeviceInfo(
            "cuda",
            f"cuda:{index}",
            torch.cuda.get_device_name(index),
            capability,
            bf16_fast=major >= 8,
            instance=instance_type(),
        )
    if requested == "xla":
        if not xla_available():
            raise ConfigError(
                "device='xla' but torch_xla is not installed in this environment: "
                "use the XLA environment (`make xla-venv`, .venv-xla) or a Neuron AMI"
            )
        neuron = neuron_available()
        if not neuron:
            os.environ.setdefault("PJRT_DEVICE", "CPU")
        import torch_xla  # noqa: F401 - fails here, not mid-run, if the install is broken

        # Named, not opened: torch_xla.device() would start the runtime, and on Neuron a notebook that
        # hands the run to torchrun must not hold the NeuronCores its ranks need. Each process
        # (torchrun rank or single run) sees its own device as xla:0.
        instance = instance_type()
        name = (
            f"AWS Trainium ({instance or 'Neuron, instance unknown'})"
            if neuron
            else f"XLA {os.environ.get('PJRT_DEVICE', 'CPU')} ({cpu_name()})"
        )
        return DeviceInfo(
            "xla", "xla:0", name, capability, bf16_fast=neuron or cpu_bf16_fast(), neuron=neuron, instance=instance
        )
    if requested == "cpu":
        return DeviceInfo("cpu", "cpu", cpu_name(), capability, bf16_fast=cpu_bf16_fast(), instance=instance_type())
    raise ConfigError(f"device={requested!r} is unknown: allowed {', '.join(typing.get_args(Device))}")


def resolve_precision(requested: str, dev: DeviceInfo, bf16_mode: str = "autocast") -> str:
    """Return the precision to run: `auto` picks bf16 where fast, else fp16 on GPUs and fp32 on CPUs."""
    # a run's `auto` on a CPU is measured instead (precision_probe.resolve); on XLA, bf16_mode xla_use_bf16
    # (XLA_USE_BF16=1 casts every float tensor) and fp32 keep torch itself in fp32
    if dev.type == "xla" and bf16_mode != "autocast":
        if requested not in ("auto", "fp32"):
            raise ConfigError(
                f"precision={requested!r} with bf16_mode={bf16_mode!r}: this mode keeps "
                "torch in fp32, allowed precision auto, fp32 (or use bf16_mode='autocast')"
            )
        return "fp32"
    if requested == "auto":
        if dev.bf16_fast:
            return "bf16"
        return "fp16" if dev.type == "cuda" else "fp32"  # T4 (sm_75): fp16 tensor cores, no bf16
    if requested.startswith("bf16") and not dev.bf16_fast:
        warnings.warn(
            f"precision={requested!r} on {dev.name} ({dev.cpu_capability}): this device has "
            "no fast bf16 matmuls, expect steps many times slower than fp32 "
            "(use precision='auto' or 'fp32')",
            stacklevel=2,
        )
    if requested == "fp16" and dev.type == "xla":
        raise ConfigError(
            "precision='fp16' is not supported on XLA/Neuron here: allowed auto, bf16, fp32, bf16-pure, bf16-pure-sr"
        )
    return requested


def compute_dtype(precision: str, bf16_mode: str = "autocast", extra_cc_flags: str = "") -> str:
    """Return the dtype the matmuls run in (the peak MFU is taken against): bf16, fp16 or fp32."""
    if precision.startswith("bf16") or bf16_mode == "xla_use_bf16":
        return "bf16"
    # neuronx-cc's --auto-cast=matmult/all computes in bf16 while torch keeps fp32
    if re.search(r"--auto-cast[= ](matmult|all)\b", extra_cc_flags):
        return "bf16"
    return "fp16" if precision == "fp16" else "fp32"


def synchronize(dev: DeviceInfo) -> None:
    """Block until queued device work is done, so a clock read after it is honest."""
    if dev.type == "cuda":
        torch.cuda.synchronize()
    elif dev.type == "xla":
        import torch_xla

        torch_xla.sync()
        import torch_xla.core.xla_model as xm

        xm.wait_device_ops()


def device_loader(loader, dev: DeviceInfo):
    """Return `loader` as torch-xla's MpDeviceLoader on XLA (batches copied while a step runs), else unchanged."""
    if dev.type != "xla":
        return loader
    from torch_xla.distributed.parallel_loader import MpDeviceLoader

    # the loop cuts the graph itself, once per optimizer step: with batches_per_execution the loader would
    # add a sync of its own between the micro-batches of gradient accumulation (a graph per micro-batch)
    wrapped = MpDeviceLoader(loader, dev.torch_device, batches_per_execution=sys.maxsize)
    wrapped.batch_size = loader.batch_size  # what the loop and the compile counters read of a DataLoader
    return wrapped


def oversubscribed(dev: DeviceInfo, num_devices: int, allow: bool) -> bool:
    """Return True when CPU ranks would outnumber the cores (allowed); raise ConfigError when not allowed."""
    cores = os.cpu_count() or 1
    if dev.type != "cpu" or num_devices <= cores:
        return False
    if not allow:
        raise ConfigError(
            f"num_devices={num_devices} is above this CPU's {cores} cores: the ranks would share "
            f"cores and time each other's waiting; give num_devices <= {cores}, or "
            "allow_oversubscribe=True (the record is then marked oversubscribed)"
        )
    return True


def main(argv: list[str] | None = None) -> None:
    """Print the device section a run would record for `auto | cuda | cpu | xla`, as JSON."""
    import argparse
    import json

    parser = argparse.ArgumentParser(prog="python -m helpers.run.device", description=main.__doc__)
    parser.add_argument("device", nargs="?", default="auto", choices=typing.get_args(Device))
    requested = parser.parse_args(argv).device
    if requested == "xla":
        os.environ.setdefault("PJRT_DEVICE", "CPU")
    print(json.dumps(resolve_device(requested).describe()))


if __name__ == "__main__":
    main()
