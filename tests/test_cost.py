import pytest

from helpers.calc import cost


def test_cost_per_epoch_known_value():
    # 27.40 s at $1.34375/h (trn1.2xlarge): 27.40 / 3600 * 1.34375 = $0.010227...
    assert cost.cost_per_epoch_usd(27.40, 1.34375) == pytest.approx(27.40 * 1.34375 / 3600, rel=1e-12)
    assert round(cost.cost_per_epoch_usd(27.40, 1.34375), 4) == 0.0102


def test_cost_for_task_is_epochs_times_epoch_cost():
    assert cost.cost_for_task_usd(27.40, 1.34375) == pytest.approx(3 * 27.40 * 1.34375 / 3600, rel=1e-12)
    assert cost.cost_for_task_usd(3600, 2.0, epochs=5) == pytest.approx(10.0)


def test_samples_per_dollar():
    # 100 samples/s for an hour is 360,000 samples; at $0.50/h that is 720,000 per dollar
    assert cost.samples_per_dollar(100.0, 0.5) == pytest.approx(720_000.0)


def test_instance_prices_and_per_accelerator_price():
    assert cost.instance_price("trn1.2xlarge") == 1.34375
    assert cost.price_per_accelerator_hour("trn1.2xlarge") == 1.34375
    p4d = cost.instance_price("p4d.24xlarge")
    assert cost.price_per_accelerator_hour("p4d.24xlarge") == pytest.approx(p4d / 8)
    assert cost.price_per_accelerator_hour("trn1.32xlarge") == pytest.approx(21.50 / 16)
    with pytest.raises(ValueError, match="no price"):
        cost.instance_price("x1.nonexistent")


def test_price_csv_has_required_instances_and_sources():
    prices = cost.load_instance_prices()
    assert list(prices.columns) == ["instance", "device", "accelerators", "price_per_hour_usd", "region",
                                    "date", "source"]
    assert {"trn1.2xlarge", "trn1.32xlarge", "g4dn.xlarge", "g6.xlarge", "g5.xlarge", "p4d.24xlarge",
            "p5.48xlarge"} <= set(prices["instance"])
    assert (prices["source"].str.strip().str.len() > 0).all()
    assert (prices["price_per_hour_usd"] > 0).all()
    assert (prices["region"] == "us-east-1").all()
