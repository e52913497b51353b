"""A Neuron device profile's summary as a record's `neuron_profile`: engine-active %, DMA active %, MFU, MBU, HFU.

Only a device profile has per-engine figures (neuron-monitor has none). Neuron Explorer summarises a captured one;
the Neuron Profiler (`neuron-profile`) reached end of support in Neuron 2.29 and is not distributed from 2.30:

    neuron-explorer view -n file.neff -s profile.ntff --output-format summary-json > summary.json
    python -m helpers.neuron attach Experiment/results/SUITE/RUN@KEY.json summary.json

summary-json is an object keyed by an id per profile, each a flat object of fields; its *_percent fields are
fractions (tensor_engine_active_time_percent: 0.18 is 18%). The older Neuron Profiler's `--output-format json`
({"summary": [{...}]}) is read too. `attach` is the one place a record is rewritten after its run: it reads the
record, validates it, adds this section and writes it back whole (helpers.record.json_text, a temporary file
renamed over it).
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
from pathlib import Path

from helpers import record

ENGINES = ("tensor", "vector", "scalar", "gpsimd")
REQUIRED = (*(f"{e}_engine_active_time_percent" for e in ENGINES), "dma_active_time_percent")
OPTIONAL = {"mfu_estimated_percent": "mfu_pct", "mbu_estimated_percent": "mbu_pct", "hfu_estimated_percent": "hfu_pct"}


def is_number(x: object) -> bool:
    """Return whether `x` is an int or a float (not a bool)."""
    return isinstance(x, int | float) and not isinstance(x, bool)


def summary(data: dict | str | Path) -> record.NeuronProfile:
    """Return the record's `neuron_profile` from a summary (a file or its JSON): each figure's mean over the entries."""
    source = "<dict>" if isinstance(data, dict) else str(data)
    if not isinstance(data, dict):
        try:
            data = json.loads(Path(data).read_text())
        except (OSError, ValueError) as err:
            raise ValueError(f"{source}: not a readable JSON file ({err})") from err
    if not isinstance(data, dict):
        raise ValueError(f"{source}: expected a JSON object, got {type(data).__name__}")
    listed = data.get("summary")
    if isinstance(listed, list):  # the Neuron Profiler's json output
        backend, entries = "neuron-profile json", dict(enumerate(listed))
    elif any(k in data for k in REQUIRED):  # one entry's fields, unwrapped
        backend, entries = "neuron-explorer summary-json", {0: data}
    else:
        backend, entries = "neuron-explorer summary-json", {k: v for k, v in data.items() if isinstance(v, dict)}
    if not entries:
        raise ValueError(f"{source}: no summary entry (expected the fields {', '.join(REQUIRED)})")
    for key, entry in entries.items():
        if missing := [f for f in REQUIRED if not is_number(entry.get(f))]:
            raise ValueError(f"{source}: summary entry {key!r} is missing {', '.join(missing)}")
        if above := [f for f in (*REQUIRED, *OPTIONAL) if is_number(entry.get(f)) and entry[f] > 1]:
            raise ValueError(f"{source}: entry {key!r} has {above[0]}={entry[above[0]]}, above 1: not a fraction")

    def mean(field: str, scale: float = 100.0) -> float | None:
        values = [e[field] for e in entries.values() if is_number(e.get(field))]
        return round(sum(values) / len(values) * scale, 6) if values else None

    out = {f"{e}_engine_active_pct": mean(f"{e}_engine_active_time_percent") for e in ENGINES}
    out |= {name: mean(field) for field, name in OPTIONAL.items()}
    return record.NeuronProfile(
        backend=backend,
        entries=len(entries),
        dma_active_pct=mean("dma_active_time_percent"),
        total_time_s=mean("total_time", 1.0),
        **out,
    )


def attach(record_path: str | Path, summary_path: str | Path) -> dict:
    """Add a summary to a record file as `neuron_profile`, writing the record back whole; return it as written."""
    path = Path(record_path)
    data, why = record.validate(record.read_json(path))
    if why:
        raise ValueError(f"{path}: not a record this code reads ({why})")
    rec = record.RunRecord.model_validate(data)
    rec.neuron_profile = summary(summary_path)
    written = record.as_json(rec)
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    try:
        tmp.write_text(record.json_text(written))
        os.replace(tmp, path)  # a reader sees the old record or the new one, never half of one
    finally:
        tmp.unlink(missing_ok=True)
    return written


def main(argv: list[str] | None = None) -> None:
    """Add a summary to a record (attach) and print the section added."""
    parser = argparse.ArgumentParser(prog="python -m helpers.neuron", description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["attach"], help="add the summary to the record as its neuron_profile")
    parser.add_argument("record", help="the run's record file")
    parser.add_argument("summary", help="neuron-explorer view ... --output-format summary-json's output")
    args = parser.parse_args(argv)
    try:
        print(json.dumps(attach(args.record, args.summary)["neuron_profile"], indent=1))
    except (ValueError, record.RecordError) as err:
        raise SystemExit(str(err)) from None


if __name__ == "__main__":
    main()
