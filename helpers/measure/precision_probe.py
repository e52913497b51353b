"""Whether bf16 autocast trains faster than fp32 on this CPU: a short paired probe, kept beside the roofs.

    choice = resolve("auto", dev, "autocast", peaks_dir)   # steps.start: the precision, why, the probe
    probe = cpu_probe(dev.key, peaks_dir)                  # measured on first use, then read

A CPU's flags say it has bf16 instructions, not that bf16 autocast wins: on a Xeon with avx512_bf16 but
no AMX, a paired probe found bf16 autocast slower than fp32 (0.81-0.85 s against 0.65-0.67 s a step,
MiniLM B=32 L=32, 2 threads), and where only AVX2 exists oneDNN emulates bf16 (~20x slower). The probe
runs once per machine and thread count, a few seconds, kept in `<results>/_peaks/<device>.precision.json`.
"""

from __future__ import annotations

import os
import statistics
import time
from pathlib import Path

import torch

from helpers.measure.peaks import busy_problem, cpu_mark, keep, others_cores, read_kept
from helpers.run.args import NeuronArgs
from helpers.run.device import DeviceInfo, compute_dtype, cpu_capability, cpu_name, resolve_precision
from helpers.run.precision import autocast, mechanism
from helpers.run.records import PEAKS, now
from helpers.run.schema import Precision

MARGIN = 1.10  # bf16 autocast must make steps >= 10% faster than fp32 to be chosen: less is within drift
# MiniLM-L6-H384 (models.py's `minilm`), random weights: the shape the CPU runs of the study train (its vocabulary
# and positions are BertConfig's defaults, bert-base-uncased's)
PROBE_SHAPE = dict(hidden_size=384, num_hidden_layers=6, num_attention_heads=12, intermediate_size=1536, num_labels=6)
BATCH, SEQ_LEN = 32, 32
ROUNDS, MIN_ROUNDS, CAP_S = 5, 3, 5.0  # rounds after MIN_ROUNDS start only within CAP_S seconds (warm-up included)
NO_BF16 = "fp32: this CPU has no bf16 instructions (no AMX, no AVX512-BF16): bf16 would be emulated; not probed"
_MEASURED: dict[tuple[str, str], dict] = {}  # this process's probes: a file that cannot be kept is not re-probed


def paired_probe(
    shape: dict | None = None, batch: int = BATCH, seq_len: int = SEQ_LEN, rounds: int = ROUNDS, cap_s: float = CAP_S
) -> dict:
    """Return the median fp32 and bf16-autocast step times (s) of a PROBE_SHAPE BERT and their ratio (> 1: bf16)."""
    from transformers import BertConfig

    cfg = BertConfig(**(PROBE_SHAPE | (shape or {})))
    with torch.random.fork_rng():  # the caller's random state is left as it was (a run seeds after this)
        torch.manual_seed(0)
        return _paired_rounds(cfg, batch, seq_len, rounds, cap_s)


def _paired_rounds(cfg, batch: int, seq_len: int, rounds: int, cap_s: float) -> dict:
    """Return paired_probe's figures for the BertConfig `cfg` (the random state seeded by the caller)."""
    from transformers import BertForSequenceClassification

    model = BertForSequenceClassification(cfg).train()  # one model: both precisions step the same weights
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    g = torch.Generator().manual_seed(0)
    inputs = {
        "input_ids": torch.randint(0, cfg.vocab_size, (batch, seq_len), generator=g),
        "attention_mask": torch.ones(batch, seq_len, dtype=torch.long),
        "labels": torch.randint(0, cfg.num_labels, (batch,), generator=g),
    }

    def step(precision: str) -> float:
        t0 = time.perf_counter()  # the CPU finishes its ops before they return: no sync needed
        with autocast(precision, "cpu"):
            loss = model(**inputs).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return time.perf_counter() - t0

    start, mark = time.perf_counter(), cpu_mark()
    step("fp32"), step("bf16")  # warm-up: oneDNN picks and JITs its kernels on the first call of each dtype
    times_s: dict[str, list[float]] = {"fp32": [], "bf16": []}
    for r in range(rounds):
        if r >= MIN_ROUNDS and time.perf_counter() - start > cap_s:
            break
        # order alternates, in one process: the machine's drift cancels in each round's ratio
        for precision in ("fp32", "bf16") if r % 2 == 0 else ("bf16", "fp32"):
            times_s[precision].append(step(precision))
    per_round = [f / b for f, b in zip(times_s["fp32"], times_s["bf16"])]
    return {
        "ratio": statistics.median(per_round),
        "fp32_step_s": statistics.median(times_s["fp32"]),
        "bf16_step_s": statistics.median(times_s["bf16"]),
        "per_round": per_round,
        "rounds": len(per_round),
        "workload": f"BERT classifier {cfg.num_hidden_layers}x{cfg.hidden_size} (MiniLM-shaped, random "
        f"weights), batch {batch}, L={seq_len}, AdamW, one step a precision a round",
        "cpu": cpu_name(),
        "cpu_capability": cpu_capability(),
        "threads": torch.get_num_threads(),
        "measured_at": now(),
        "load_1min": os.getloadavg()[0],
        "others_cores": round(others_cores(mark), 3),
        "cpu_count": os.cpu_count(),
        "seconds": round(time.perf_counter() - start, 2),
    }


def _complete(probe: object) -> bool:
    """True when a kept probe has the figures the choice reads (older or hand-edited files may not)."""
    return isinstance(probe, dict) and all(
        isinstance(probe.get(k), (int, float)) and not isinstance(probe.get(k), bool) and probe[k] > 0
        for k in ("ratio", "fp32_step_s", "bf16_step_s", "rounds", "threads")
    )


def probe_key(threads: int) -> str:
    """Return the probe's key in its file: one probe per thread count, as the roofs are kept."""
    return f"bf16 autocast vs fp32, {threads} threads"


def cpu_probe(device_key: str, peaks_dir: str | Path | None) -> dict:
    """Return this machine's bf16-vs-fp32 probe at the current threads: kept in `<peaks_dir>`, else measured now."""
    key = probe_key(torch.get_num_threads())
    path = Path(peaks_dir) / f"{device_key}.precision.json" if peaks_dir else None
    known, kept = read_kept(path), ""
    if not _complete(known.get(key)) or busy_problem(known[key]):
        probe = _MEASURED.get((device_key, key)) or paired_probe()
        if busy := busy_problem(probe):  # this run's choice, never a later quiet run's
            return recorded(probe, f"measured on this machine now, not kept: {busy}")
        known[key] = _MEASURED[(device_key, key)] = probe
        kept = keep(path, known)
    where = f" (_peaks/{path.name}{kept})" if path else ""  # relative: a record never names a checkout's path
    return recorded(known[key], f"measured on this machine at {known[key]['threads']} threads{where}")


def recorded(probe: dict, source: str) -> dict:
    """Return the probe as the record's `precision.probe` holds it: with its source, less the others' CPU share."""
    return {**{k: v for k, v in probe.items() if k not in ("others_cores", "cpu_count")}, "source": source}


def choose(probe: dict | None, has_bf16: bool) -> tuple[str, str]:
    """Return the CPU's precision for `auto` and why: bf16 where the probe's fp32 / bf16 ratio is >= MARGIN."""
    if not has_bf16:
        return "fp32", NO_BF16
    ratio = (probe or {}).get("ratio")
    if not ratio:
        return "fp32", f"fp32: no bf16 probe result ({(probe or {}).get('reason', 'none')})"
    rounds = f"median of {probe.get('rounds')} paired rounds at {probe.get('threads')} threads"
    if ratio >= MARGIN:
        return "bf16", f"bf16 autocast: probe {ratio:.2f}x faster than fp32 on this CPU ({rounds})"
    return "fp32", (
        f"fp32: bf16 autocast probe {ratio:.2f}x fp32's speed on this CPU ({rounds}; bf16 needs >= {MARGIN:.2f}x)"
    )


def resolve(requested: str, dev: DeviceInfo, neuron: NeuronArgs, peaks_dir: str | Path | None) -> Precision:
    """Return the record's `precision` section: device.resolve_precision's, except `auto` on a CPU (probed)."""
    used, reason, probe = decide(requested, dev, neuron.bf16_mode, peaks_dir)
    return Precision(
        requested=requested,
        used=used,
        compute_dtype=compute_dtype(used, neuron.bf16_mode, neuron.extra_cc_flags),
        mechanism=mechanism(used, dev.type, dev.neuron, neuron.bf16_mode),
        auto_reason=reason,
        probe=probe,
    )


def decide(requested: str, dev: DeviceInfo, bf16_mode: str, peaks_dir: str | Path | None) -> tuple:
    """Return (precision, why auto chose it or None, the CPU probe or None)."""
    if requested != "auto" or dev.type != "cpu":
        used = resolve_precision(requested, dev, bf16_mode)
        why = f"{used}: by the device ({dev.name}: {'fast' if dev.bf16_fast else 'no fast'} bf16)"
        return used, why if requested == "auto" else None, None
    if not dev.bf16_fast:  # no bf16 instructions at all: nothing to probe
        return *choose(None, has_bf16=False), None
    try:
        probe = cpu_probe(dev.key, peaks_dir)
    except Exception as err:  # noqa: BLE001 - a probe that fails costs the choice of bf16, never the run
        return "fp32", f"fp32: the bf16 probe failed ({type(err).__name__}: {err})", None
    return *choose(probe, has_bf16=True), probe


def main(argv: list[str] | None = None) -> None:
    """Probe bf16 autocast against fp32 now (on a quiet machine) and store it, replacing what was there."""
    import argparse

    from helpers.run.device import resolve_device
    from helpers.run.paths import RESULTS_DIR, repo_path

    parser = argparse.ArgumentParser(prog="python -m helpers.measure.precision_probe", description=main.__doc__)
    parser.add_argument("--threads", type=int, nargs="+", default=[torch.get_num_threads()])
    parser.add_argument("--results", default=RESULTS_DIR, help="results folder (its _peaks/ keeps the probe)")
    args = parser.parse_args(argv)
    dev = resolve_device("cpu")
    path = repo_path(args.results) / PEAKS / f"{dev.key}.precision.json"
    known = read_kept(path)
    for threads in args.threads:
        torch.set_num_threads(threads)
        probe = paired_probe()
        busy = busy_problem(probe)
        print(
            f"{threads} threads: fp32 {probe['fp32_step_s']:.3f} s, bf16 autocast {probe['bf16_step_s']:.3f} s a "
            f"step; {choose(probe, dev.bf16_fast)[1]}" + (f": NOT kept: {busy}" if busy else "")
        )
        if not busy:
            known[probe_key(threads)] = probe
    print(f"wrote {path}{keep(path, known) or ''}")


if __name__ == "__main__":
    main()
