"""helpers/neuron.py: Neuron Explorer's summary-json (and the older profiler's JSON) read, its faults named, and
the section attached to a record that stays valid."""

import json

import pytest
from measure_fakes import FIXTURES

from helpers import neuron, record

EXPLORER = FIXTURES / "neuron_explorer" / "summary.json"
PROFILER = FIXTURES / "neuron_profile"


def test_explorers_summary_json_fractions_become_percent():
    out = neuron.summary(EXPLORER)
    assert out.backend == "neuron-explorer summary-json" and out.entries == 1
    assert out.tensor_engine_active_pct == pytest.approx(18.0) and out.vector_engine_active_pct == pytest.approx(26.75)
    assert out.scalar_engine_active_pct == pytest.approx(11.42) and out.gpsimd_engine_active_pct == pytest.approx(0.61)
    assert out.dma_active_pct == pytest.approx(37.18) and out.total_time_s == pytest.approx(0.041237)
    assert (out.mfu_pct, out.mbu_pct, out.hfu_pct) == pytest.approx((12.14, 28.93, 15.07))


def test_the_older_profilers_json_and_a_bare_entry_are_read_too():
    entry = json.loads((PROFILER / "summary_good.json").read_text())["profile_rank_0"]
    listed = neuron.summary({"summary": [entry, {**entry, "tensor_engine_active_time_percent": 0.251}]})
    assert listed.backend == "neuron-profile json" and listed.entries == 2
    assert listed.tensor_engine_active_pct == pytest.approx(35.1)  # the mean of 45.1 and 25.1
    bare = neuron.summary({k: v for k, v in entry.items() if not k.startswith("mfu")})
    assert bare.dma_active_pct == pytest.approx(20.46) and bare.mfu_pct is None


def test_a_summary_missing_fields_names_the_file_and_the_fields(tmp_path):
    path = PROFILER / "summary_missing_fields.json"
    with pytest.raises(ValueError) as err:
        neuron.summary(path)
    assert str(path) in str(err.value) and "gpsimd_engine_active_time_percent, dma_active_time_percent" in str(
        err.value
    )
    (tmp_path / "broken.json").write_text("{not json")
    with pytest.raises(ValueError, match="broken.json"):
        neuron.summary(tmp_path / "broken.json")


def test_percent_fields_above_one_are_refused_not_multiplied():
    entry = json.loads(EXPLORER.read_text())["3f9c2a71e0b4"]
    with pytest.raises(ValueError, match="tensor_engine_active_time_percent=18.0, above 1"):
        neuron.summary({"p": {**entry, "tensor_engine_active_time_percent": 18.0}})


def trn1_record(tmp_path):
    rec = record.start("bert-b8", {"batch": 8}, ["batch"], {"key": "xla-aws-trainium-trn1.2xlarge", "neuron": True})
    rec.status = "finished"
    return record.write(rec, record.base_path(tmp_path, None, rec.run_name, rec.device.key))


def test_attach_adds_the_section_and_the_record_stays_valid_in_its_file(tmp_path, capsys):
    path = trn1_record(tmp_path)
    neuron.main(["attach", str(path), str(EXPLORER)])
    assert json.loads(capsys.readouterr().out)["tensor_engine_active_pct"] == pytest.approx(18.0)
    found, skipped = record.read(tmp_path)
    assert not skipped and [r["_source"] for r in found] == [str(path)]  # rewritten in place: no .run2 beside it
    assert found[0]["neuron_profile"]["backend"] == "neuron-explorer summary-json"
    assert found[0]["status"] == "finished" and found[0]["params"] == {"batch": 8}


def test_attaching_to_what_is_not_a_record_says_so(tmp_path):
    with pytest.raises(SystemExit, match="missing"):
        neuron.main(["attach", str(tmp_path / "none.json"), str(EXPLORER)])
    (tmp_path / "old.json").write_text(json.dumps({"schema_version": 5, "run_name": "x"}))
    with pytest.raises(SystemExit, match="schema_version 5"):
        neuron.main(["attach", str(tmp_path / "old.json"), str(EXPLORER)])
    assert json.loads((tmp_path / "old.json").read_text()) == {"schema_version": 5, "run_name": "x"}  # untouched
