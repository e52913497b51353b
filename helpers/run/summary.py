"""What a finished run shows its reader: the headline lines, the time to accuracy, the notebook's table."""
from __future__ import annotations


def headline(record: dict) -> str:
    """Return the record's headline figures in three lines."""
    t, m, dev = record.get("timing", {}), record.get("metrics", {}), record.get("device", {})
    lines = [f"{record['run_name']}: {record.get('status')} on {dev.get('name')} "
             f"({dev.get('cpu_capability')}), precision {record.get('precision', {}).get('used')}",
             f"  train {t.get('train_time_s') or 0:.1f} s, {t.get('samples_per_s') or 0:.1f} samples/s, "
             f"step {t.get('step_time_median_s') or 0:.3f} s (median)",
             f"  test accuracy {m.get('test_accuracy')}, macro-F1 {m.get('test_macro_f1')}, "
             f"final loss {m.get('final_loss')}"]
    if record.get("error"):
        lines.append(f"  error: {str(record['error']).splitlines()[0][:200]}")
    return "\n".join(lines)


def time_to_accuracy(curve: list[dict], targets: tuple[float, ...] = (0.85, 0.88, 0.90)) -> str:
    """Return when the periodic validation first reached each target, in training seconds and steps."""
    parts = []
    for target in targets:
        hit = next((c for c in curve if c["val_accuracy"] >= target), None)
        parts.append(f"{100 * target:.0f}% at {hit['train_time_s']:.0f} s (step {hit['step']})" if hit
                     else f"{100 * target:.0f}% not reached (best {100 * max(c['val_accuracy'] for c in curve):.1f}%)")
    return "; ".join(parts)


def summary(record: dict):
    """Return a one-column table of the record's headline figures for the notebook to show."""
    import pandas as pd

    t, m, s = record.get("timing", {}), record.get("metrics", {}), record.get("systems", {})
    rows = {
        "status": record.get("status"), "device": record.get("device", {}).get("name"),
        "precision": record.get("precision", {}).get("used"),
        "train_time_s": t.get("train_time_s"), "first_step_s": t.get("first_step_s"),
        "step_time_median_s": t.get("step_time_median_s"), "samples_per_s": t.get("samples_per_s"),
        "val_accuracy": m.get("val_accuracy"), "test_accuracy": m.get("test_accuracy"),
        "test_macro_f1": m.get("test_macro_f1"), "final_loss": m.get("final_loss"),
        "achieved_tflops": s.get("achieved_tflops"), "mfu": s.get("mfu"),
        "arithmetic_intensity": s.get("arithmetic_intensity"), "record": record.get("_source"),
    }
    if record.get("curve"):
        rows["validation curve"] = time_to_accuracy(record["curve"])
    return pd.DataFrame({"value": rows})
