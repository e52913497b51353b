import warnings

import pytest
import torch

from helpers.run import device
from helpers.run.args import ConfigError


def test_auto_picks_cpu_without_gpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(device, "neuron_available", lambda: False)
    dev = device.resolve_device("auto")
    assert dev.type == "cpu" and dev.cpu_capability.startswith(torch.backends.cpu.get_cpu_capability())


def test_cuda_requested_without_gpu_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ConfigError, match="device='cuda' but no CUDA GPU"):
        device.resolve_device("cuda")


def test_xla_without_torch_xla_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(device, "xla_available", lambda: False)
    with pytest.raises(ConfigError, match="torch_xla is not installed"):
        device.resolve_device("xla")


def _cpu(bf16_fast):
    return device.DeviceInfo("cpu", "cpu", "test cpu", "AVX2", bf16_fast=bf16_fast)


def test_auto_precision_follows_bf16_speed():
    assert device.resolve_precision("auto", _cpu(True)) == "bf16"
    assert device.resolve_precision("auto", _cpu(False)) == "fp32"


def test_forcing_bf16_where_slow_warns_but_runs():
    with pytest.warns(UserWarning, match="no fast bf16"):
        assert device.resolve_precision("bf16", _cpu(False)) == "bf16"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        device.resolve_precision("bf16", _cpu(True))


def test_capability_flags_read_from_cpuinfo(monkeypatch):
    monkeypatch.setattr(device, "cpu_flags", lambda: frozenset({"avx2", "fma"}))
    assert device.cpu_bf16_fast() is False and "amx" not in device.cpu_capability()
    monkeypatch.setattr(device, "cpu_flags", lambda: frozenset({"avx2", "amx_bf16", "avx512_bf16"}))
    assert device.cpu_bf16_fast() is True and device.cpu_capability().endswith("+amx_bf16+avx512_bf16")


def test_cuda_device_info_from_torch(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda i: (7, 5))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda i: "Tesla T4")
    dev = device.resolve_device("auto")
    assert (dev.type, dev.torch_device, dev.bf16_fast) == ("cuda", "cuda:0", False)  # T4: no bf16
    assert device.resolve_precision("auto", dev) == "fp16"  # with grad scaling


def test_the_device_module_lists_the_device_literal(monkeypatch, capsys):
    import typing

    from helpers.run.args import Device

    allowed = ", ".join(typing.get_args(Device))
    monkeypatch.setattr(device, "cpu_capability", lambda: None)
    with pytest.raises(ConfigError, match=f"allowed {allowed}$"):
        device.resolve_device("tpu")
    with pytest.raises(SystemExit):
        device.main(["tpu"])
    assert "{" + allowed.replace(", ", ",") + "}" in capsys.readouterr().err
