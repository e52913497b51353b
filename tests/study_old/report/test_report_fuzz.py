"""Property: whatever JSON value a foreign record holds in its params or sections, reading the records and
building the report's tables never crash, and every record is either in the frame with its figures or named
as skipped, in the report too."""

from __future__ import annotations

import copy
import json
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from record_fixtures import record

from helpers.run import records
from helpers.study import frame
from helpers.study.report.build import build_report
from helpers.study.sweep.suites import expand, resolve_suite

# (record path, ...) a foreign record may hold anything at: parameters the tables group by, figures they show
PATHS = [
    ("params", k)
    for k in (
        "batch",
        "max_length",
        "lr",
        "llrd_decay",
        "seed",
        "padding",
        "preset",
        "precision",
        "num_devices",
        "model_name",
        "epochs",
        "train_subset",
        "gradient_accumulation_steps",
        "pad_to_multiple_of",
        "eval_every",
    )
] + [
    ("timing", "samples_per_s"),
    ("timing", "step_time_median_s"),
    ("timing", "window_samples_per_s"),
    ("timing", "steps"),
    ("timing", "train_time_s"),
    ("systems", "mfu"),
    ("systems", "achieved_tflops"),
    ("systems", "peak_tflops"),
    ("systems", "peak_source"),
    ("systems", "arithmetic_intensity"),
    ("energy", "method"),
    ("energy", "joules"),
    ("metrics", "test_accuracy"),
    ("metrics", "val_accuracy"),
    ("device", "name"),
    ("device", "type"),
    ("device", "torch_threads"),
    ("device", "neuron"),
    ("device", "key"),
    ("precision", "compute_dtype"),
    ("precision", "used"),
    ("data", "majority_share"),
    ("xla", "compile_time_s"),
    ("xla", "graph_compilations"),
    ("utilization", "proc_cpu_util_pct_mean"),
    ("memory", "host_peak_rss_gib"),
    ("profile", "class_share"),
    ("phases", "train"),
    ("suite",),
    ("status",),
    ("curve",),
    ("finished_at",),
    ("run_name",),
    ("fixture",),
]
JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**6), 10**6) | st.floats(allow_nan=True) | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=6,
)


def _base() -> list[dict]:
    """Records of three machines on points of two suites, as the run path writes them."""
    out = []
    for device, rate in (("cpu", 6.0), ("a100", 900.0), ("trn1", 800.0)):
        for p in expand(resolve_suite("batch_scaling"), "quick")[:2]:
            out.append(
                record(device, "batch_scaling", p.params, run_name=p.run_name, samples_per_s=rate, fixture=False)
            )
    p = next(p for p in expand(resolve_suite("speedup"), "quick") if p.params.get("preset") == "optimized")
    out.append(record("cpu", "speedup", p.params, run_name=p.run_name, fixture=False))
    return json.loads(json.dumps(records.jsonable(out)))


BASE = _base()


def _put(rec: dict, path: tuple, value) -> None:
    """Set `rec[path]` to `value`, making the sections on the way (replacing what is not a dict)."""
    for key in path[:-1]:
        if not isinstance(rec.get(key), dict):
            rec[key] = {}
        rec = rec[key]
    rec[path[-1]] = value


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@example([(0, ("params", "batch"), [])])  # found by this test: a list to group by crashed the tables
@example([(1, ("params", "lr"), "fast"), (2, ("device", "torch_threads"), float("nan"))])
@given(st.lists(st.tuples(st.integers(0, len(BASE) - 1), st.sampled_from(PATHS), JSON), min_size=1, max_size=4))
def test_arbitrary_values_in_records_never_crash_the_frame_or_the_report(changes):
    recs = copy.deepcopy(BASE)
    for i, path, value in changes:
        _put(recs[i], path, value)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "results"
        for n, rec in enumerate(recs):  # written as another machine would: raw JSON, not validated here
            folder = root / "batch_scaling"
            folder.mkdir(parents=True, exist_ok=True)
            (folder / f"r{n}@dev.json").write_text(json.dumps(rec, allow_nan=True))
        df, skipped = frame.load(root)
        rates = dict(zip(df["source"], df["samples_per_s"]))
        for n in range(len(recs)):
            path = root / "batch_scaling" / f"r{n}@dev.json"
            named = [k for k in skipped if k.startswith(f"batch_scaling/r{n}@dev.json: ")]
            fixture = (records.read_record(path) or {}).get("fixture") is True  # left out by design
            assert (str(path) in rates) + len(named) + fixture == 1, (n, named, changes)  # one fate each
            if n not in {i for i, _, _ in changes}:  # an untouched record keeps its figures
                assert rates[str(path)] == BASE[n]["timing"]["samples_per_s"], (n, changes)
        written = build_report(
            root,
            Path(tmp) / "Experiment",
            Path(tmp) / "Pictures",
            plots=False,
            command="python -m helpers.study.report",
        )
        text = (Path(tmp) / "Experiment" / "REPORT.md").read_text()
        assert (Path(tmp) / "Experiment" / "REPORT.md") in written and f"{len(df)} records below" in text
        assert all(f"{n} {why}" in text for why, n in skipped.items())  # each skipped file named, with why


def test_a_record_whose_parameters_cannot_be_grouped_is_named_and_left_out(tmp_path):
    good, odd = copy.deepcopy(BASE[0]), {**copy.deepcopy(BASE[1]), "params": {**BASE[1]["params"], "batch": [8]}}
    for name, rec in (("good@d.json", good), ("odd@d.json", odd)):
        (tmp_path / "batch_scaling").mkdir(exist_ok=True)
        (tmp_path / "batch_scaling" / name).write_text(json.dumps(rec))
    df, skipped = frame.load(tmp_path)
    assert list(df["run_name"]) == [good["run_name"]]
    assert skipped == {"batch_scaling/odd@d.json: params.batch: Input should be a valid number, not list '[8]'": 1}
