"""What precision=auto resolves to, and why."""

from __future__ import annotations

import pytest

from helpers import devices, precision


def device(kind, bf16, neuron=False):
    return devices.Device(kind, kind, f"a {kind}", f"{kind}-k", None, "AVX512", bf16, neuron)


@pytest.mark.parametrize(
    "dev, used, dtype",
    [
        (device("cpu", True), "bf16", "bf16"),
        (device("cpu", False), "fp32", "fp32"),
        (device("cuda", True), "bf16", "bf16"),
        (device("cuda", False), "fp16", "fp16"),
        (device("xla", True, True), "bf16", "bf16"),
    ],
)
def test_auto_takes_bf16_where_the_device_has_bf16_units(dev, used, dtype):
    choice = precision.choose("auto", dev)
    assert (choice.used, choice.compute_dtype) == (used, dtype) and choice.auto_reason


def test_xla_modes_that_keep_torch_in_fp32_and_the_compilers_auto_cast():
    xla = device("xla", True)
    assert precision.choose("auto", xla, bf16_mode="fp32").used == "fp32"
    assert precision.choose("fp32", xla, cc_flags="--auto-cast=matmult").compute_dtype == "bf16"
    assert "not AdamW" in precision.choose("auto", xla, bf16_mode="xla_use_bf16").mechanism
    assert precision.choose("bf16", device("cpu", True)).auto_reason is None  # asked for, not chosen
