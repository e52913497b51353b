"""helpers/calc/facts.py: published device peaks and instance prices, with their sources."""

import pytest

from helpers.calc import facts


@pytest.mark.parametrize(
    "name,key",
    [
        ("NVIDIA H100 80GB HBM3", "h100"),
        ("NVIDIA H100 PCIe", "h100-pcie"),
        ("NVIDIA H200", "h200"),
        ("NVIDIA A100-SXM4-40GB", "a100-40gb"),
        ("NVIDIA A100-SXM4-80GB", "a100-80gb"),
        ("Tesla T4", "t4"),
        ("NVIDIA L4", "l4"),
        ("NVIDIA L40S", None),
        ("NVIDIA A10G", "a10g"),
        ("NVIDIA GeForce RTX 4090", None),
        ("NVIDIA A10", "a10"),
        ("NVIDIA A100 80GB PCIe", "a100-80gb-pcie"),
        # other products whose names contain a known one: their own roof, or none rather than a borrowed one
        ("NVIDIA H200 NVL", "h200-nvl"),
        ("NVIDIA GH200 480GB", None),
        ("NVIDIA GH200 144G HBM3e", None),
        ("NVIDIA H100 NVL", "h100-nvl"),
    ],
)
def test_cuda_device_key(name, key):
    assert facts.cuda_device_key(name) == key


def test_device_peaks_csv_has_every_device_with_a_source():
    peaks = facts.load_device_peaks()
    assert list(peaks.columns) == [
        "device",
        "key",
        "peak_bf16_tflops",
        "peak_fp32_tflops",
        "mem_bw_gbps",
        "memory_gib",
        "source",
    ]
    assert {"trn1-core", "trn1-chip", "t4", "l4", "a10g", "a100-40gb", "a100-80gb", "h100", "h200"} <= set(peaks["key"])
    assert (peaks["source"].str.strip().str.len() > 0).all()
    assert peaks["key"].is_unique
    # every key the name mapping can return has a roof
    for key in facts.device_column("cuda_name"):
        roof = facts.device_roof(key, "bf16")
        assert roof["peak_tflops"] > facts.device_roof(key, "fp32")["peak_tflops"] > 0
        assert roof["mem_bw_gbps"] > 0 and roof["source"]
    assert (
        facts.device_roof("trn1-chip", "bf16")["peak_tflops"]
        == 2 * facts.device_roof("trn1-core", "bf16")["peak_tflops"]
    )
    with pytest.raises(ValueError):
        facts.device_roof("host", "fp32")  # measured at run time, not published


def test_devices_csv_names_every_device_of_device_peaks_csv_and_no_other():
    """devices.csv holds names and looks, device_peaks.csv the figures: they share keys and nothing else."""
    devices, peaks = facts.load_devices(), set(facts.load_device_peaks()["key"])
    assert devices["key"].is_unique and peaks <= set(devices["key"])
    beyond = devices[~devices["key"].isin(peaks)]
    assert (beyond["key"] == beyond["family"]).all(), "a row without peaks is a family (trn1, cpu, xla-cpu)"
    assert set(facts.device_column("rank_peaks_key").values()) <= peaks  # one rank's roof is a datasheet row
    assert set(devices.columns) & set(facts.load_device_peaks().columns) == {"key"}  # no figure kept twice
    assert devices["short_name"].notna().all() and devices["short_name"].is_unique


def test_a_study_device_is_one_device_with_its_name():
    studied = facts.load_devices().query("studied == True")
    assert studied["study_name"].is_unique and studied["study_name"].notna().all()
    # a name the study printed stands for other cards too (the A100 80GB), never without the card it ran
    assert set(facts.device_column("study_name").values()) == set(studied["study_name"])
