"""helpers/measure/neuron_profile.py: the Neuron profiler's summary, in its shapes, and its faults named."""

import json
from pathlib import Path

import pytest

from helpers.measure.neuron_profile import parse_neuron_profile_summary
from helpers.run import schema

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "neuron_profile"


def test_neuron_profile_summary_good():
    out = parse_neuron_profile_summary(FIXTURES / "summary_good.json")
    assert out.tensor_engine_active_pct == pytest.approx(45.1)
    assert out.vector_engine_active_pct == pytest.approx(22.33)
    assert out.scalar_engine_active_pct == pytest.approx(18.75)
    assert out.gpsimd_engine_active_pct == pytest.approx(1.25)
    assert out.dma_active_pct == pytest.approx(20.46)
    assert out.mfu_pct == pytest.approx(37.84) and out.mbu_pct == pytest.approx(25.12)
    assert out.total_time_s == pytest.approx(0.012345) and out.entries == 1
    assert isinstance(out, schema.NeuronProfile)  # the record's section, typed where it is made


def test_neuron_profile_summary_other_shapes():
    entry = json.loads((FIXTURES / "summary_good.json").read_text())["profile_rank_0"]
    entry = {k: v for k, v in entry.items() if not k.startswith(("mfu", "mbu", "hfu"))}
    for doc in ({"summary": [entry]}, entry):
        out = parse_neuron_profile_summary(doc)
        assert out.tensor_engine_active_pct == pytest.approx(45.1)
        assert out.mfu_pct is None
    as_percent = {k: (v * 100 if k.endswith("_percent") else v) for k, v in entry.items()}
    out = parse_neuron_profile_summary(as_percent, percent_fields_are_fractions=False)
    assert out.dma_active_pct == pytest.approx(20.46)
    with pytest.raises(ValueError, match="fraction"):
        parse_neuron_profile_summary(as_percent)


def test_neuron_profile_summary_malformed_names_file_and_fields(tmp_path):
    path = FIXTURES / "summary_missing_fields.json"
    with pytest.raises(ValueError) as err:
        parse_neuron_profile_summary(path)
    message = str(err.value)
    assert str(path) in message
    assert "gpsimd_engine_active_time_percent" in message and "dma_active_time_percent" in message
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    with pytest.raises(ValueError, match="broken.json"):
        parse_neuron_profile_summary(broken)


def test_an_attached_profile_becomes_the_records_tensor_engine_utilization(tmp_path):
    from record_fixtures import record, write

    from helpers.measure.neuron_profile import main
    from helpers.run import records
    from helpers.study.frame import frame

    path = tmp_path / "small_batch-full-batch8@trn1.json"
    write(path, record("trn1", "small_batch", {"batch": 8}, run_name="small_batch-full-batch8"))
    before = frame([records.read_record(path)]).iloc[0]
    assert "neuron-monitor" in before["util_metric"] and not before["util_like_study"]
    main([str(FIXTURES / "summary_good.json"), "--record", str(path)])
    after = frame([records.read_record(path)]).iloc[0]
    assert after["util_pct"] == pytest.approx(45.1) and after["util_like_study"]
    assert "tensor engine" in after["util_metric"]


def test_attaching_to_a_missing_record_says_so(tmp_path):
    from helpers.measure.neuron_profile import attach

    with pytest.raises(ValueError, match="no valid record"):
        attach(tmp_path / "none.json", FIXTURES / "summary_good.json")
