"""Known harmless library messages are dropped at their loggers; everything else those loggers say shows."""

import importlib.util
import logging
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import log_filters

REPO = Path(__file__).resolve().parent.parent
SO = "/venv/lib/python3.11/site-packages/torchao/_C_cutlass_90a.abi3.so"


class Collect(logging.Handler):
    def __init__(self):
        super().__init__()
        self.messages = []

    def emit(self, record):
        self.messages.append(record.getMessage())


@pytest.fixture()
def collect():
    """A handler on each filtered logger: what reaches it would reach a notebook's stderr."""
    handler = Collect()
    loggers = [logging.getLogger(name) for name, _, _ in log_filters.KNOWN_NOISE]
    for logger in loggers:
        logger.addHandler(handler)
    yield handler.messages
    for logger in loggers:
        logger.removeHandler(handler)


def test_only_the_listed_messages_are_dropped(collect, monkeypatch):
    import torch

    log_filters.install()
    log_filters.install()  # idempotent: one filter per message
    assert sum(isinstance(f, log_filters._DropKnown) for f in logging.getLogger("torchao").filters) == 1
    monkeypatch.setattr(torch.version, "cuda", None)  # a CPU build: the CUDA extensions cannot load
    logging.getLogger("torchao").warning("Failed to load %s: Could not load this library: %s", SO, SO)
    logging.getLogger("torchao").warning("Skipping import of cpp extensions due to incompatible torch version")
    logging.getLogger("torch.utils._pytree").warning(
        "%s is an Enum subclass and is now natively supported by torch.compile as an opaque value type.", "E"
    )
    logging.getLogger("torch.utils._pytree").warning("something else about pytrees")
    logging.getLogger("zeus.device.gpu.amd").warning(  # the energy meter's zeus, on a machine without NVML
        "Failed to import amdsmi due to a key error on: [%s]. Ensure that amdsmi is installed on your system.",
        "'libamd_smi.so'",
    )
    logging.getLogger("zeus.device.gpu.amd").warning("amdsmi could not initialize")
    assert collect == [
        "Skipping import of cpp extensions due to incompatible torch version",
        "something else about pytrees",
        "amdsmi could not initialize",
    ]


def test_a_cuda_build_still_shows_a_failed_extension(collect, monkeypatch):
    import torch

    log_filters.install()
    monkeypatch.setattr(torch.version, "cuda", "12.8")
    logging.getLogger("torchao").warning("Failed to load %s: Could not load this library: %s", SO, SO)
    assert len(collect) == 1


@pytest.mark.skipif(importlib.util.find_spec("torchao") is None, reason="torchao is not installed here")
def test_importing_helpers_then_transformers_prints_nothing_from_torchao():
    code = "import helpers.run.models, torchao"  # it imports transformers, which imports torchao
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "Failed to load" not in proc.stderr and "is an Enum subclass" not in proc.stderr, proc.stderr
