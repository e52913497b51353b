"""What a finished run shows its reader: the headline lines and the notebook's table."""

from __future__ import annotations


def headline(record: dict) -> str:
    """Return the record's headline figures in three lines."""
    t, m, dev = record.get("timing") or {}, record.get("metrics", {}), record.get("device", {})
    phases, status = record.get("phases") or {}, record.get("status")
    lines = [
        f"{record['run_name']}: {status} on {dev.get('name')} "
        f"({dev.get('cpu_capability')}), precision {record.get('precision', {}).get('used')}",
        f"  train {t.get('train_time_s') or 0:.1f} s, {t.get('samples_per_s') or 0:.1f} samples/s, "
        f"step {t.get('step_time_median_s') or 0:.3f} s (median)"
        if t.get("train_time_s") is not None
        else f"  train {status} "
        + (f"after {phases['train']:.1f} s" if phases.get("train") else "before training")
        + ": no timing window closed",
        f"  test accuracy {m.get('test_accuracy')}, macro-F1 {m.get('test_macro_f1')}, "
        f"final loss {m.get('final_loss')}",
    ]
    ninety = (record.get("time_to_accuracy") or {}).get("0.90")
    if ninety:
        lines.append(
            f"  time to 90% validation accuracy: {ninety['train_time_s']:.0f} s of training (step "
            f"{ninety['step']}), test accuracy of that checkpoint {ninety.get('test_accuracy')}"
            if ninety.get("train_time_s") is not None
            else f"  time to 90% validation accuracy: {ninety['reason']}"
        )
    if phases.get("wall") is not None:
        lines.append(wall_line(phases, None if t.get("train_time_s") is not None else status))
    if record.get("error"):
        lines.append(f"  error: {str(record['error']).splitlines()[0][:200]}")
    return "\n".join(lines)


# the split's phases in the order they run, with the words a reader sees
WALL_PARTS = (
    ("startup", "start-up"),
    ("start", "checks"),
    ("probes", "probes"),
    ("load_data", "data"),
    ("tokenize", "tokens"),
    ("build_model", "model"),
    ("train", "training"),
    ("train_other", "around training"),
    ("periodic_eval", "periodic evaluation"),
    ("evaluate", "final evaluation"),
    ("save", "save"),
    ("record", "record"),
    ("other", "other"),
)


def wall_line(phases: dict, stopped: str | None = None) -> str:
    """Return the wall's seconds per phase and its multiple of training's; `stopped`: how training ended."""
    parts = [
        f"{words}{f' ({stopped})' if stopped and key == 'train' else ''} {phases[key]:.1f}"
        + (f" ({phases.get('periodic_evals')})" if key == "periodic_eval" else "")
        for key, words in WALL_PARTS
        if phases.get(key) is not None
    ]
    ratio = f"; {phases['wall'] / phases['train']:.2f}x the training seconds" if phases.get("train") else ""
    return f"  wall {phases['wall']:.1f} s = " + ", ".join(parts) + ratio


def summary(record: dict):
    """Return a one-column table of the record's headline figures for the notebook to show."""
    import pandas as pd

    t, m, s = record.get("timing", {}), record.get("metrics", {}), record.get("systems", {})
    rows = {
        "status": record.get("status"),
        "device": record.get("device", {}).get("name"),
        "precision": record.get("precision", {}).get("used"),
        "wall_s": (record.get("phases") or {}).get("wall"),
        "train_time_s": t.get("train_time_s"),
        "first_step_s": t.get("first_step_s"),
        "step_time_median_s": t.get("step_time_median_s"),
        "samples_per_s": t.get("samples_per_s"),
        "val_accuracy": m.get("val_accuracy"),
        "test_accuracy": m.get("test_accuracy"),
        "test_macro_f1": m.get("test_macro_f1"),
        "final_loss": m.get("final_loss"),
        "achieved_tflops": s.get("achieved_tflops"),
        "mfu": s.get("mfu"),
        "arithmetic_intensity": s.get("arithmetic_intensity"),
        "record": record.get("_source"),
    }
    for target, hit in (record.get("time_to_accuracy") or {}).items():  # computed once, in the record
        rows[f"time to {100 * float(target):.0f}% validation (s)"] = hit.get("train_time_s") or hit.get("reason")
        if hit.get("test_accuracy") is not None:
            rows[f"test accuracy at {100 * float(target):.0f}%"] = hit["test_accuracy"]
    return pd.DataFrame({"value": rows})
