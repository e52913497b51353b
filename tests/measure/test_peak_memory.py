"""helpers/measure/peak_memory.py: the host's resident-set peak is the run's, from its reset on."""

from helpers.measure import peak_memory


def test_a_reset_forgets_the_peak_of_what_ran_before():
    """A second run in one process (the benchmark's presets, a re-run cell) reports its own peak."""
    buffer = bytearray(256 * 2**20)  # 256 MiB touched: the resident set's high-water mark rises past it
    del buffer
    before, source = peak_memory.host_peak_gib()
    peak_memory.reset_peak("cpu")
    after, _ = peak_memory.host_peak_gib()
    assert source.startswith("VmHWM") and before - after > 0.2
