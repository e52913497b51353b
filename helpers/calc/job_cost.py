"""What a fine-tuning job costs on one device: seconds, dollars and joules, from one run's figures.

    one_off = one_off_s(compile_s=310.0, first_step_s=312.1, step_s=0.08)      # 312.0 s
    share = one_off_share_s(one_off, runs_sharing_cache=4)                     # 78.0 s each
    wall_s(share, per_epoch_s(16_000, 584.0), epochs=3)                        # 160.2 s
    samples_per_joule(16_000, {"method": "measured", "joules": 4000.0})        # 4.0
    energy_j(3 * 16_000, samples_per_joule=4.0)                                 # 12000.0 J

A job is `epochs` passes over `rows` training rows. Its wall time is a one-off part (XLA / Neuron graph
compilation, torch.compile, the first step's warm-up) plus epochs x the steady per-epoch time. Compiled
graphs land in a compile cache: runs that share it (same shapes, flags, compiler) split the one-off,
and a run that finds the cache warm pays ~none (loading cached graphs takes seconds; not measured here).
Process warm-up that no cache keeps (CUDA context, allocator) is paid by every run. A job's energy is its
training samples over the run's steady samples per joule: the record's energy section covers the same
steady windows as its samples/s and every device of the run (every node's), so no power x time product
and no scaling by ranks is needed here.
"""

from __future__ import annotations

import math
import numbers

SECONDS_PER_HOUR = 3600


def number(value) -> float:
    """Return `value` as a float, NaN when it is None, text, a boolean or not finite ("not measured")."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):  # numpy scalars are Real, np.bool_ not
        return math.nan
    return float(value) if math.isfinite(value) else math.nan


def one_off_s(compile_s: float | None, first_step_s: float | None, step_s: float | None) -> float:
    """Return a run's one-off seconds (NaN when neither figure was recorded)."""
    # every graph the run compiled (torch_xla CompileTime), during warm-up or later (eval, last batch)
    compiled = number(compile_s)
    # the first step's excess over a steady one: first compilation, transfers, runtime load, CUDA context
    first_excess = number(first_step_s) - number(step_s)
    # the larger of the two: each misses part of what the other sees, neither double-counts
    known = [v for v in (compiled, first_excess) if not math.isnan(v)]
    return max(0.0, *known) if known else math.nan


def one_off_share_s(
    one_off: float, runs_sharing_cache: int = 1, cacheable: bool = True, warm_cache: bool = False
) -> float:
    """Return the one-off seconds one run pays: all of it, its share of a shared cache, or 0 when warm."""
    if runs_sharing_cache < 1:
        raise ValueError(f"runs_sharing_cache={runs_sharing_cache}: at least one run pays the compilation")
    if not cacheable:
        # process warm-up (CUDA context, allocator, autotuning) is not kept by any cache
        return one_off
    if warm_cache:
        # the graphs load from the cache; that load (seconds) is not measured here
        return 0.0
    # one cold compilation, shared by every run that reuses the cache
    return one_off / runs_sharing_cache


def per_epoch_s(rows: int, samples_per_s: float) -> float:
    """Return the seconds of one epoch at the steady rate: rows / (samples/s)."""
    return rows / samples_per_s


def wall_s(one_off_share: float, epoch_s: float, epochs: float) -> float:
    """Return a run's wall seconds: its one-off share plus `epochs` steady epochs."""
    # paid once per run
    once = one_off_share
    # paid every epoch
    steady = epochs * epoch_s
    return once + steady


def usd(seconds: float, price_per_hour_usd: float) -> float:
    """Return the dollars of `seconds` on an instance (or accelerator share) billed per hour."""
    # billed hours (per second on EC2 Linux on-demand, 60 s minimum: ignored, jobs here run longer)
    hours = seconds / SECONDS_PER_HOUR
    return hours * price_per_hour_usd


def energy_j(samples: float, samples_per_joule: float) -> float:
    """Return the joules of `samples` training samples at a run's steady samples per joule (all its devices)."""
    return samples / samples_per_joule


def epochs_to_target(curve: list[dict], target: float, run_rows: int, samples_scale: float = 1.0) -> float | None:
    """Return the epochs a run took to first reach `target` validation accuracy; None if it never did."""
    for point in sorted(curve, key=lambda p: p["samples"]):
        if point["val_accuracy"] >= target:
            # training samples seen by then (x ranks when the curve counts one rank's samples) ...
            seen = point["samples"] * samples_scale
            # ... in epochs of the run's own rows, so a job over other rows scales by epochs, not samples
            return seen / run_rows
    return None


def epochs_covered(curve: list[dict], run_rows: int, samples_scale: float = 1.0) -> float:
    """Return the epochs a curve covers: its last point's samples over the run's rows (0 if empty)."""
    return max((p["samples"] for p in curve), default=0) * samples_scale / run_rows


def break_even_epochs(
    one_off_a_usd: float, epoch_a_usd: float, one_off_b_usd: float, epoch_b_usd: float
) -> float | None:
    """Return the epochs at which devices a and b cost the same; None when the lines never cross at > 0."""
    # what a pays up front beyond b (compilation)
    extra_one_off = one_off_a_usd - one_off_b_usd
    # what a saves on every epoch
    saving_per_epoch = epoch_b_usd - epoch_a_usd
    if saving_per_epoch == 0 or math.isnan(extra_one_off) or math.isnan(saving_per_epoch):
        return None
    # the extra one-off repaid by the per-epoch saving (negative: the costs part, never meet)
    epochs = extra_one_off / saving_per_epoch
    return epochs if epochs > 0 else None


def one_off_budget_s(
    epochs: float, epoch_a_usd: float, one_off_b_usd: float, epoch_b_usd: float, price_a_per_hour_usd: float
) -> float:
    """Return the most one-off seconds device a can spend and still cost no more than b for `epochs`."""
    # b's whole job
    b_total = one_off_b_usd + epochs * epoch_b_usd
    # less a's epochs leaves a's one-off budget in dollars (negative: a loses even with no compilation)
    budget_usd = b_total - epochs * epoch_a_usd
    # in seconds of a's instance time
    return budget_usd / price_a_per_hour_usd * SECONDS_PER_HOUR


def samples_per_joule(samples: float, energy: dict) -> float | None:
    """Return `samples` (the energy window's, every rank's) per joule; None when energy was not measured."""
    joules = energy.get("joules")
    if energy.get("method") is None or not isinstance(joules, (int, float)) or joules <= 0:
        return None
    return samples / joules
