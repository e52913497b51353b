"""The Neuron profiler's summary: engine-active % (tensor, vector, scalar, gpsimd engines, DMA) and MFU/MBU.

    neuron-profile view -n graph.neff -s graph.ntff --output-format summary-json > summary.json
    python -m helpers.measure.neuron_profile summary.json --record Experiment/results/SUITE/RUN@KEY.json

The report reads the record's `neuron_profile` section as the NeuronCore's tensor-engine utilization (the
study's figure): only a device profile has per-engine figures (docs/RUNNING.md, "Profiling on Trainium").
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from helpers.run import records
from helpers.run.schema import NeuronProfile, RunRecord

_ENGINES = ("tensor", "vector", "scalar", "gpsimd")
_REQUIRED = tuple(f"{e}_engine_active_time_percent" for e in _ENGINES) + ("dma_active_time_percent",)
_OPTIONAL = {"mfu_estimated_percent": "mfu_pct", "mbu_estimated_percent": "mbu_pct", "hfu_estimated_percent": "hfu_pct"}


def parse_neuron_profile_summary(path_or_dict, percent_fields_are_fractions: bool = True) -> NeuronProfile:
    """Engine and DMA active %, MFU/MBU % (the mean over entries) from `neuron-profile view`'s JSON."""
    source = "<dict>"
    data = path_or_dict
    if not isinstance(path_or_dict, dict):
        source = str(path_or_dict)
        try:
            data = json.loads(Path(path_or_dict).read_text())
        except (OSError, ValueError) as err:
            raise ValueError(f"{source}: not a readable JSON file ({err})") from err
    if not isinstance(data, dict):
        raise ValueError(f"{source}: expected a JSON object, got {type(data).__name__}")
    # summary-json's {"<profile>": {fields}}, the `json` output's {"summary": [{fields}]}, or one flat field dict
    summary = data.get("summary", data.get("Summary"))
    if isinstance(summary, list):
        entries = {str(i): e for i, e in enumerate(summary)}
    elif any(k in data for k in _REQUIRED):
        entries = {"0": data}
    else:
        entries = {k: v for k, v in data.items() if isinstance(v, dict)}
    if not entries:
        raise ValueError(f"{source}: no summary entry (expected fields {', '.join(_REQUIRED)})")
    # the docs give the *_percent fields the unit percent, but real captures hold 0-1 fractions
    scale = 100.0 if percent_fields_are_fractions else 1.0
    rows = []
    for key, entry in entries.items():
        missing = [f for f in _REQUIRED if not isinstance(entry.get(f), (int, float))]
        if missing:
            raise ValueError(f"{source}: summary entry {key!r} is missing {', '.join(missing)}")
        fields = {f: entry[f] for f in (*_REQUIRED, *_OPTIONAL) if isinstance(entry.get(f), (int, float))}
        if percent_fields_are_fractions and any(v > 1.0 for v in fields.values()):
            raise ValueError(
                f"{source}: entry {key!r} has a *_percent field above 1, so it is not a "
                "fraction; pass percent_fields_are_fractions=False"
            )
        rows.append((entry, fields))
    out = {"backend": "neuron-profile", "entries": len(rows)}
    for engine in _ENGINES:
        out[f"{engine}_engine_active_pct"] = _mean_pct(rows, f"{engine}_engine_active_time_percent", scale)
    out["dma_active_pct"] = _mean_pct(rows, "dma_active_time_percent", scale)
    for field, key in _OPTIONAL.items():
        out[key] = _mean_pct(rows, field, scale)
    times = [e["total_time"] for e, _ in rows if isinstance(e.get("total_time"), (int, float))]
    out["total_time_s"] = round(sum(times) / len(times), 6) if times else None
    return NeuronProfile(**out)


def _mean_pct(rows: list, field: str, scale: float) -> float | str:
    values = [fields[field] for _, fields in rows if field in fields]
    return round(sum(values) / len(values) * scale, 3) if values else None


def attach(record_path: str | Path, summary, percent_fields_are_fractions: bool = True) -> dict:
    """Add the profiler's summary to a record as `neuron_profile`, rewriting it atomically; return it as written."""
    found = records.read_record(record_path)
    if found is None:
        raise ValueError(f"{record_path}: no valid record to attach the profile to")
    record = RunRecord.model_validate(found)
    record.neuron_profile = parse_neuron_profile_summary(summary, percent_fields_are_fractions)
    records.write_record(record_path, record)
    return records.as_json(record)


def main(argv: list[str] | None = None) -> None:
    """Print a summary's figures, or attach them to a record with --record."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("summary", help="neuron-profile view --output-format summary-json output")
    parser.add_argument("--record", help="the run's record file to attach the figures to")
    parser.add_argument("--percent", action="store_true", help="the *_percent fields are already in %%")
    args = parser.parse_args(argv)
    if args.record:
        print(json.dumps(attach(args.record, args.summary, not args.percent)["neuron_profile"], indent=1))
    else:
        summary = parse_neuron_profile_summary(args.summary, not args.percent)
        print(json.dumps(summary.model_dump(exclude_unset=True), indent=1))


if __name__ == "__main__":
    main()
