"""Time to accuracy: when a run's periodic validation first reached each target (MLPerf's measure).

    crossings(record.curve)  # {"0.90": Crossing(train_time_s=212.0, step=400, ...) or Crossing(reason=...)}

The curve's points are (step, training seconds so far, validation accuracy, rows), evaluated outside the
timed windows; a target counts as reached at the first evaluation at or above it.
"""

from __future__ import annotations

from helpers.run.schema import Crossing, CurvePoint

TARGETS = (0.88, 0.90, 0.92)


def crossings(
    curve: list[CurvePoint], targets: tuple[float, ...] = TARGETS, compile_s: float | None = None
) -> dict[str, Crossing]:
    """Return, per target, the first evaluation that reached it, or why not (never reached, and the best seen)."""
    out = {}
    best = max((p.val_accuracy for p in curve if p.val_accuracy is not None), default=None)
    for target in targets:
        hit = next((p for p in curve if (p.val_accuracy or 0) >= target), None)
        if hit is None:
            seen = f"best {100 * best:.2f}% in {len(curve)} evaluations" if best is not None else "no evaluation"
            out[f"{target:.2f}"] = Crossing(train_time_s=None, reason=f"not reached ({seen})")
            continue
        out[f"{target:.2f}"] = Crossing(
            train_time_s=hit.train_time_s,
            wall_s=hit.wall_s,
            step=hit.step,
            rows=hit.rows,
            val_accuracy=hit.val_accuracy,
            test_accuracy=getattr(hit, "test_accuracy", None),
            # what a compiled device paid before its clock could reach the target
            compile_s_before=compile_s,
        )
    return out


def describe(found: dict[str, Crossing]) -> str:
    """Return the crossings as one line: seconds and step per target, the 90% checkpoint's test accuracy."""
    parts = []
    for target, hit in found.items():
        pct = f"{100 * float(target):.0f}%"
        if hit.train_time_s is None:
            parts.append(f"{pct} {hit.reason}")
            continue
        test = f", test accuracy {100 * hit.test_accuracy:.2f}%" if hit.test_accuracy is not None else ""
        parts.append(f"{pct} at {hit.train_time_s:.0f} s (step {hit.step}{test})")
    return "; ".join(parts)
