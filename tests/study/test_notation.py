"""study/notation.py: numbers to 4 significant digits (thousands with separators), the dash for no
value, and device names short enough for a column header."""

import math

import pytest

from study.notation import DASH, fmt, short_device


@pytest.mark.parametrize(
    "value, shown",
    [
        (0.012345, "0.01235"),
        (123.456, "123.5"),
        (999.96, "1000"),
        (1234.5, "1,234"),
        (1_250_000, "1,250,000"),
        (-2048.0, "-2,048"),
        ("3.7–7.3x", "3.7–7.3x"),
        (None, DASH),
        (math.nan, DASH),
        (math.inf, DASH),
    ],
)
def test_a_number_is_written_to_four_significant_digits_or_the_dash(value, shown):
    assert fmt(value) == shown


@pytest.mark.parametrize(
    "name, short",
    [
        ("Intel(R) Xeon(R) Processor @ 2.80GHz", "Xeon @ 2.80GHz"),
        ("NVIDIA A100-SXM4-40GB", "A100-SXM4-40GB"),
        ("AMD EPYC 7B13 64-Core Processor", "EPYC 7B13 64-Core"),
        ("Intel(R) Core(TM) i7-1185G7", "Intel Core i7-1185G7"),
        ("Tesla T4", "Tesla T4"),
    ],
)
def test_a_device_name_is_short_enough_for_a_column_header(name, short):
    assert short_device(name) == short
