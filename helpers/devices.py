"""Which device a run uses, the name it is recorded under, and its row in helpers/facts/devices.csv.

A device key names one kind of machine: records of one key are timed as one machine (their roof, their drift,
what a sweep resumes). For a CPU it carries /proc/cpuinfo's vendor, family and model beside the model name, since
a hypervisor may call two generations by one name ("AMD EPYC": a Zen 4 is family 25, a Zen 5 family 26).

    python -m helpers.devices [auto|cuda|cpu|xla]      # the device section a run here would record, as JSON
"""

from __future__ import annotations

import functools
import json
import os
import platform
import re
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

import pandas as pd
import torch

from helpers.record import slug

FACTS = Path(__file__).resolve().parent / "facts"
DMI = Path("/sys/devices/virtual/dmi/id")
NEURON_DRIVER = Path("/sys/module/neuron/version")


@functools.cache
def cpuinfo(path: str = "/proc/cpuinfo") -> dict[str, str]:
    """Return the first processor's fields of /proc/cpuinfo ({} where there is none)."""
    out: dict[str, str] = {}
    try:
        with open(path) as f:
            for line in f:
                if not line.strip():
                    break
                name, _, value = line.partition(":")
                out.setdefault(name.strip(), value.strip())
    except OSError:
        pass
    return out


def cpu_family(info: dict[str, str] | None = None) -> str | None:
    """Return the CPU's vendor, family and model ("GenuineIntel 6/207"), None where the host gives none."""
    info = cpuinfo() if info is None else info
    family, model = info.get("cpu family"), info.get("model")
    return f"{info.get('vendor_id', 'unknown')} {family}/{model}" if family and model else None


def cpu_capability(info: dict[str, str] | None = None) -> str:
    """Return torch's CPU kernel level plus the bf16 matmul units, e.g. 'AVX512+amx_bf16+avx512_bf16'."""
    flags = set((cpuinfo() if info is None else info).get("flags", "").split())
    return "+".join([torch.backends.cpu.get_cpu_capability(), *(f for f in ("amx_bf16", "avx512_bf16") if f in flags)])


def cpu_key(info: dict[str, str] | None = None) -> str:
    """Return a CPU's key: model name, family and model (or 'family-unknown'), bf16 units."""
    info = cpuinfo() if info is None else info
    name = info.get("model name") or platform.processor() or platform.machine()
    family = cpu_family(info)
    fam = "f{}m{}".format(*family.split()[-1].split("/")) if family else "family-unknown"
    return slug(f"{name}-{fam}-{cpu_capability(info)}")


@dataclass(frozen=True)
class Device:
    """The device a run trains on and what its record says of it."""

    type: str  # cuda | cpu | xla
    torch_device: str  # what .to() takes: cuda:0, cpu, xla:0
    name: str
    key: str
    cpu_family: str | None
    cpu_capability: str
    bf16_fast: bool  # bf16 units: a GPU of sm_80+, a NeuronCore, a CPU with AMX or AVX512-BF16
    neuron: bool = False
    instance: str | None = None

    def section(self) -> dict:
        """Return the record's `device` section."""
        out = {k: v for k, v in asdict(self).items() if k != "torch_device"}
        out |= {"torch_threads": torch.get_num_threads(), "cpu_count": os.cpu_count()}
        if self.type == "cuda" and torch.version.cuda:
            out["cuda_runtime"] = torch.version.cuda
            try:
                import pynvml

                pynvml.nvmlInit()
                out["gpu_driver"] = pynvml.nvmlSystemGetDriverVersion()
            except Exception as err:  # noqa: BLE001 - a version we cannot read is said, never fatal
                out["gpu_driver"] = f"unreadable ({type(err).__name__})"
        if NEURON_DRIVER.is_file():
            out["neuron_driver"] = NEURON_DRIVER.read_text().strip()
        return out


@functools.cache
def instance_type(dmi: Path = DMI) -> str | None:
    """Return the EC2 instance type (its DMI product name, e.g. 'trn1.2xlarge'), None off EC2."""
    try:
        vendor, product = ((dmi / f).read_text().strip() for f in ("sys_vendor", "product_name"))
    except OSError:
        return None
    return product if vendor == "Amazon EC2" and re.fullmatch(r"[a-z0-9-]+\.[0-9]*[a-z]+", product) else None


def cpu_device() -> Device:
    """Return this host's CPU as a training device."""
    info, capability = cpuinfo(), cpu_capability()
    name = info.get("model name") or platform.processor() or platform.machine()
    bf16 = "bf16" in capability
    return Device("cpu", "cpu", name, f"cpu-{cpu_key()}", cpu_family(), capability, bf16, instance=instance_type())


def cuda_device(index: int | None = None) -> Device:
    """Return the CUDA GPU torch uses (its current device unless `index`)."""
    index = torch.cuda.current_device() if index is None else index
    name = torch.cuda.get_device_name(index)
    bf16 = torch.cuda.get_device_capability(index)[0] >= 8  # Ampere and newer; a T4 (sm_75) has fp16 only
    return Device(
        "cuda",
        f"cuda:{index}",
        name,
        slug(f"cuda-{name}"),
        cpu_family(),
        cpu_capability(),
        bf16,
        instance=instance_type(),
    )


def xla_device(neuron: bool) -> Device:
    """Return the XLA device: a NeuronCore where torch-neuronx is installed, else torch-xla's CPU backend."""
    if neuron:
        instance = instance_type()
        name = f"AWS Trainium ({instance or 'instance unknown'})"
        return Device("xla", "xla:0", name, slug(f"xla-{name}"), cpu_family(), cpu_capability(), True, True, instance)
    cpu = cpu_device()
    return Device(
        "xla",
        "xla:0",
        f"XLA CPU ({cpu.name})",
        f"xla-{cpu.key}",
        cpu.cpu_family,
        cpu.cpu_capability,
        cpu.bf16_fast,
        instance=cpu.instance,
    )


@functools.cache
def facts() -> pd.DataFrame:
    """Return devices.csv by key: each device kind's class, family, names, looks and peaks row."""
    return pd.read_csv(FACTS / "devices.csv").set_index("key", drop=False)


def kind(section: dict) -> str:
    """Return the devices.csv key of a record's device section (a GPU's own row, trn1-core, cpu or xla-cpu)."""
    if section.get("type") == "cuda":
        for key, pattern in facts()["cuda_name"].dropna().items():
            if re.fullmatch(pattern, str(section.get("name", "")).strip()):
                return key
        return "gpu-unknown"
    if section.get("type") == "xla":
        return "trn1-core" if section.get("neuron") else "xla-cpu"
    return "cpu"


def device_class(section: dict) -> str:
    """Return a record's device class from devices.csv: gpu, trn1, trn2, inf2, xla-cpu or cpu."""
    key = kind(section)
    return "gpu" if key == "gpu-unknown" else str(facts().loc[key, "class"])


def main(argv: list[str] | None = None) -> None:
    """Print the device section a run here would record for auto | cuda | cpu | xla, as JSON."""
    want = (argv if argv is not None else sys.argv[1:]) or ["auto"]
    neuron = importlib_find("torch_neuronx")
    if want[0] == "auto":
        want = ["cuda" if torch.cuda.is_available() else "xla" if neuron else "cpu"]
    if want[0] == "xla":
        os.environ.setdefault("PJRT_DEVICE", "CPU")
    dev = {"cpu": cpu_device, "cuda": cuda_device, "xla": lambda: xla_device(neuron)}[want[0]]()
    print(json.dumps(dev.section()))


def importlib_find(name: str) -> bool:
    """Return whether a module can be imported here (without importing it)."""
    import importlib.util

    return importlib.util.find_spec(name) is not None


if __name__ == "__main__":
    main()
