"""Known harmless library messages, dropped at the logger that emits them, before anything imports it.

`helpers/__init__.py` installs them before `transformers` imports `torchao` (on import, through
`transformers.quantizers`); everything else those loggers say still shows.
"""

from __future__ import annotations

import logging
import re
import sys


def _cpu_torch() -> bool:
    """True when the imported torch is a build without CUDA (the CUDA-only extensions cannot load)."""
    torch = sys.modules.get("torch")
    return torch is not None and torch.version.cuda is None


# (logger, message pattern, when it is harmless): why each is harmless here
KNOWN_NOISE = (
    # torchao/__init__.py loads every bundled `_C*.so` and logs a warning for each that fails. On a CPU
    # build of torch its CUDA extensions (_C_mxfp8, _C_cutlass_90a: MX/fp8 kernels) cannot load (they
    # link libc10_cuda.so); this project uses only torchao.optim._AdamW, which is pure PyTorch. On a CUDA
    # build the message still shows, since there a failure would be worth knowing about.
    ("torchao", re.compile(r"Failed to load .*torchao/_C\w*\.\S*\.so"), _cpu_torch),
    # torch >= 2.13 deprecates register_constant() on Enum subclasses, which torchao 0.18 calls for its
    # own enums (KernelPreference, ScaleCalculationMode) on import: nothing changes for this project.
    (
        "torch.utils._pytree",
        re.compile(r"is an Enum subclass and is now natively supported by torch\.compile"),
        lambda: True,
    ),
)


class _DropKnown(logging.Filter):
    """Drop the records of one logger whose message matches `pattern` while `when()` holds."""

    def __init__(self, pattern: re.Pattern, when) -> None:
        super().__init__()
        self.pattern, self.when = pattern, when

    def filter(self, record: logging.LogRecord) -> bool:
        return not (self.pattern.search(record.getMessage()) and self.when())


def install() -> None:
    """Attach one filter per known message to its logger (idempotent)."""
    for name, pattern, when in KNOWN_NOISE:
        logger = logging.getLogger(name)
        if not any(isinstance(f, _DropKnown) and f.pattern is pattern for f in logger.filters):
            logger.addFilter(_DropKnown(pattern, when))
