import math

import pytest

from helpers.calc.prices import accelerator_price, instance_price, load_instance_prices, price_per_accelerator_hour


def test_instance_prices_and_per_accelerator_price():
    assert instance_price("trn1.2xlarge") == 1.34375
    assert price_per_accelerator_hour("trn1.2xlarge") == 1.34375
    p4d = instance_price("p4d.24xlarge")
    assert price_per_accelerator_hour("p4d.24xlarge") == pytest.approx(p4d / 8)
    assert price_per_accelerator_hour("trn1.32xlarge") == pytest.approx(21.50 / 16)
    with pytest.raises(ValueError, match="no price"):
        instance_price("x1.nonexistent")


def test_price_csv_has_required_instances_and_sources():
    prices = load_instance_prices()
    assert list(prices.columns) == [
        "instance",
        "device",
        "accelerators",
        "price_per_hour_usd",
        "region",
        "date",
        "source",
    ]
    assert {
        "trn1.2xlarge",
        "trn1.32xlarge",
        "g4dn.xlarge",
        "g6.xlarge",
        "g5.xlarge",
        "p4d.24xlarge",
        "p5.48xlarge",
    } <= set(prices["instance"])
    assert (prices["source"].str.strip().str.len() > 0).all()
    assert (prices["price_per_hour_usd"] > 0).all()
    assert (prices["region"] == "us-east-1").all()


def test_accelerator_price_named_instance_or_cheapest_carrier():
    # the record's instance carries the device: its per-accelerator price, times the accelerators used
    assert accelerator_price("p4d.24xlarge", "a100-40gb") == ("p4d.24xlarge", pytest.approx(21.96 / 8), "")
    assert accelerator_price("p4d.24xlarge", "a100-40gb", 2)[1] == pytest.approx(21.96 / 4)
    # the study's "L4 (g5.xlarge)": g5.xlarge carries the A10G, so the L4 is priced on g6.xlarge
    instance, usd_h, note = accelerator_price("g5.xlarge", "l4")
    assert (instance, usd_h) == ("g6.xlarge", 0.8048) and "a10g" in note
    # no instance recorded (a CPU run): the cheapest carrier, two 2-vCPU units for 4 threads
    assert accelerator_price(None, "cpu-2vcpu", 2)[:2] == ("m6i.large", pytest.approx(0.192))
    # trn1.2xlarge and trn1.32xlarge cost the same per chip: the first listed wins
    assert accelerator_price(None, "trn1-chip")[:2] == ("trn1.2xlarge", 1.34375)
    assert math.isnan(accelerator_price("x1.nonexistent", "tpu")[1])
