"""Device keys: one machine, one key; classes read from devices.csv alone."""

from __future__ import annotations

import pytest

from helpers import devices, record

ZEN4 = {
    "vendor_id": "AuthenticAMD",
    "cpu family": "25",
    "model": "17",
    "model name": "AMD EPYC",
    "flags": "avx512_bf16",
}
ZEN5 = {**ZEN4, "cpu family": "26", "model": "2"}


def test_two_generations_under_one_name_get_two_keys():
    assert devices.cpu_key(ZEN4) != devices.cpu_key(ZEN5)
    assert "f25m17" in devices.cpu_key(ZEN4) and "amd-epyc" in devices.cpu_key(ZEN4)
    assert devices.cpu_family(ZEN5) == "AuthenticAMD 26/2"


def test_a_host_that_gives_no_family_says_so_in_the_key():
    bare = {"model name": "AMD EPYC", "flags": ""}
    assert "family-unknown" in devices.cpu_key(bare) and devices.cpu_family(bare) is None


def test_this_machines_device_names_its_family():
    dev = devices.cpu_device()
    section = record.Device(**dev.section())
    assert section.key.startswith("cpu-") and ("family-unknown" in section.key) == (dev.cpu_family is None)


def test_committed_cpu_records_never_share_a_key_with_a_machine_that_names_its_family():
    found, _ = record.read(record.REPO_ROOT / record.RESULTS_DIR)
    cpu = [r["device"] for r in found if r["device"].get("type") in ("cpu", "xla") and not r["device"].get("neuron")]
    assert cpu and all("family-unknown" in d["key"] for d in cpu)


@pytest.mark.parametrize(
    "section, kind, cls",
    [
        ({"type": "cuda", "name": "NVIDIA H200"}, "h200", "gpu"),
        ({"type": "cuda", "name": "Tesla T4"}, "t4", "gpu"),
        ({"type": "cuda", "name": "NVIDIA H200 NVL"}, "h200-nvl", "gpu"),
        ({"type": "cuda", "name": "NVIDIA B200"}, "gpu-unknown", "gpu"),
        ({"type": "xla", "neuron": True}, "trn1-core", "trn1"),
        ({"type": "xla", "neuron": False}, "xla-cpu", "xla-cpu"),
        ({"type": "cpu"}, "cpu", "cpu"),
    ],
)
def test_kind_and_class_come_from_devices_csv(section, kind, cls):
    assert devices.kind(section) == kind and devices.device_class(section) == cls
