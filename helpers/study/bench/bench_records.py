"""The benchmark's configurations as run records: one `schema.RunRecord` per timed configuration.

A configuration that trains (the presets, `fit`, the bare loop, Trainer, a lever's control and variant)
becomes a record like a study run's: its parameters, device and precision from the run path's own
`start()`, its median samples/s as `timing`, and, where a peak is known, `systems.mfu` computed here
with `calc.flops.estimate_mfu` (the one MFU; the render reads it). The timed windows go in a `bench`
section. Records are written through helpers.run.records to `<results>/_bench/<section>/`, a folder
the report never reads as study runs.
"""
from __future__ import annotations

import statistics
from pathlib import Path

from helpers.calc.flops import estimate_mfu
from helpers.run import records, schema

PEAK = "matmul peak"  # the bench's workload timing the device's peak in the same rounds


def systems(windows: list[dict], peak_windows: list[dict] | None = None, peak: dict | None = None) -> dict:
    """Return a configuration's achieved TFLOP/s, peak TFLOP/s and MFU (fraction) from its windows.

    With a matmul peak timed in the same rounds, MFU is the median over rounds of each round's
    `estimate_mfu` against that round's peak (the machine's drift cancels); else it is against `peak`.
    """
    flops = [w["flops"] for w in windows if w.get("flops")]
    if not flops:
        return {"mfu": None, "reason": "the configuration's windows counted no FLOPs"}
    achieved = statistics.median(flops) / 1e12
    out = {"achieved_tflops": achieved, "flops_definition": "model FLOPs: forward + backward matmuls "
           "(calc.flops.model_flops), padded length"}
    if peak_windows:
        per_round = [estimate_mfu(w["flops"], 1.0, p["flops"] / 1e12) for w, p in zip(windows, peak_windows)]
        return out | {"peak_tflops": statistics.median(p["flops"] for p in peak_windows) / 1e12,
                      "peak_source": (peak or {}).get("source"), "mfu": statistics.median(per_round),
                      "mfu_per_round": per_round}
    peak_tflops = (peak or {}).get("peak_tflops")
    if not peak_tflops:
        return out | {"mfu": None, "reason": f"no peak TFLOP/s ({(peak or {}).get('source', 'none given')})"}
    return out | {"peak_tflops": peak_tflops, "peak_source": peak.get("source"),
                  "mfu": estimate_mfu(achieved * 1e12, 1.0, peak_tflops)}


def config_record(section: str, name: str, windows: list[dict], head: dict | None = None,
                  systems_section: dict | None = None, meta: dict | None = None) -> dict:
    """Return one configuration's record: `head` (a run's opening from steps.start) plus its figures."""
    head = dict(head or {})
    run_name = records.slug(f"bench-{section}-{name}") or "bench"
    params = {**head.get("params", {}), "run_name": run_name, "suite": None}
    rec = records.new_record(params, head.get("params_given"), status="finished",
                             **{k: head[k] for k in ("device", "precision") if k in head})
    rates = [w["samples"] for w in windows if w.get("samples")]
    rec["timing"] = {"samples_per_s": statistics.median(rates) if rates else None,
                     "windows": len(windows), "train_time_s": sum(w.get("seconds") or 0.0 for w in windows)}
    if systems_section is not None:
        rec["systems"] = systems_section
    rec["bench"] = {"section": section, "configuration": name, "windows": windows,
                    **({"command": meta.get("command"), "date": meta.get("date")} if meta else {})}
    rec["finished_at"] = records.now()
    return _checked(rec)


def _checked(rec: dict) -> dict:
    """Return `rec` as the schema has it; raise ValueError saying why when it is no valid record."""
    valid, why = schema.validate(records.jsonable(rec))
    if why:
        raise ValueError(f"bench record {rec.get('run_name')}: {why}")
    return valid


def section_records(section: str, result: dict, heads: dict[str, dict] | None = None,
                    meta: dict | None = None) -> dict[str, dict]:
    """Return the records of a section's configurations by name (the peak workload is no configuration)."""
    heads = heads or {}
    out: dict[str, dict] = {}
    if section == "levers":
        for lever in result.get("levers", []):
            for side in ("control", "variant"):
                name = f"{lever['name']}: {side}"
                out[name] = config_record(section, name, lever["rates"][side], heads.get(name), meta=meta)
        return out
    rates = result.get("rates") or {}
    peak_windows = rates.get(PEAK)
    for name, windows in rates.items():
        if name == PEAK:
            continue
        sys_section = systems(windows, peak_windows, result.get("peak")) if section == "speedup" else None
        out[name] = config_record(section, name, windows, heads.get(name), sys_section, meta)
    return out


def records_of(section: str, result: dict) -> dict[str, dict]:
    """Return the records a section's result carries (built from its windows for a raw row without them)."""
    return result.get("records") or section_records(section, result)


def write_section_records(root: str | Path, section: str, found: dict[str, dict]) -> list[Path]:
    """Write each record to `<root>/_bench/<section>/<run_name>@<device key>.json`; return the paths."""
    paths = []
    for rec in found.values():
        key = (rec.get("device") or {}).get("key") or "unknown-device"
        paths.append(records.write_record(Path(root) / "_bench" / section / f"{rec['run_name']}@{key}.json", rec))
    return paths
