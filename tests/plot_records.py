"""Fixture records of every plotted suite on several devices, with figures shaped like real ones."""

from __future__ import annotations

from record_fixtures import record

# device: (variant, model, samples/s at large batch)
SPEED = {
    "a100": ("full", "bert-base-uncased", 420.0),
    "h200": ("quick", "minilm", 2900.0),  # a step flat across batches: the host sets its pace
    "t4": ("full", "bert-base-uncased", 60.0),
    "trn1": ("full", "bert-base-uncased", 260.0),
    "cpu": ("quick", "minilm", 30.0),
    "xla-cpu": ("quick", "minilm", 9.0),
}
SHARE = {
    "matmul": 0.45,
    "attention": 0.12,
    "elementwise_norm_act": 0.2,
    "optimizer": 0.08,
    "copy_data_movement": 0.07,
    "other": 0.05,
    "host_gap": 0.03,
}


def _one(device, suite, point: dict, sps: float, *, acc=0.9, mode=None, util=None, mem=None, **figures) -> dict:
    """Return one fixture record of `suite` at `point` on `device` running `sps` samples/s."""
    variant, model, _ = SPEED[device]
    name = f"{suite}-{variant}-" + "-".join(f"{k}{v}" for k, v in point.items())
    batch = point.get("batch", 16)
    rec = record(
        device,
        suite,
        {"model_name": model, **point},
        run_name=name,
        samples_per_s=sps,
        step_ms=19.0 if device == "h200" else 1000 * batch / sps,
        test_acc=acc,
        val_acc=acc,
        **figures,
    )
    rec["timing"]["tokens_per_s"] = sps * point.get("max_length", 32)
    if mode:
        rec["precision"].update(used=mode, compute_dtype="fp32" if mode == "fp32" else "bf16")
    if util is not None:
        key = {"cuda": "sm_util_pct_mean", "xla": "neuroncore_util_pct_mean"}.get(
            rec["device"]["type"], "proc_cpu_util_pct_mean"
        )
        rec["utilization"][key] = util * (rec["device"]["torch_threads"] if key.startswith("proc") else 1)
    if mem is not None:
        rec["memory"] = (
            {"cuda_max_allocated_gib": mem} if rec["device"]["type"] == "cuda" else {"host_peak_rss_gib": mem}
        )
    return rec


def study_records(devices=("a100", "h200", "t4", "trn1", "cpu", "xla-cpu")) -> list[dict]:
    """Return records of every plotted suite on `devices` (padding on the XLA ones only)."""
    out = []
    for dev in devices:
        _, _, top = SPEED[dev]
        xla = dev in ("trn1", "xla-cpu")
        suite_length = 32 if SPEED[dev][0] == "quick" else 128  # as the suites run them
        for b in (8, 16, 32, 48, 64):
            out.append(
                _one(
                    dev,
                    "batch_scaling",
                    {"batch": b, "max_length": suite_length},
                    top * b / (b + 12),
                    mem=1.4 + 0.09 * b if dev in ("a100", "t4", "h200") else 2.2 + 0.01 * b,
                )
            )
        for length in (16, 32, 64, 128):
            out.append(_one(dev, "seq_len", {"max_length": length, "batch": 16}, top * 40 / (length + 24)))
        for b in (2, 4, 8, 16, 32):
            out.append(
                _one(
                    dev,
                    "small_batch",
                    {"batch": b, "max_length": suite_length},
                    top * b / (b + 12),
                    util=None if dev == "xla-cpu" else min(95.0, 20 + 22 * b**0.5),
                    mem=1.2 + 0.05 * b,
                )
            )
        for length in (32, 128):
            share = {**SHARE, "attention": SHARE["attention"] * length / 64}
            out.append(
                _one(
                    dev,
                    "profile_memory",
                    {"max_length": length, "batch": 16},
                    top / 2,
                    profile={"class_share": {k: v / sum(share.values()) for k, v in share.items()}},
                )
            )
        for preset, seconds in (("baseline", 900 * 60 / top), ("optimized", 150 * 60 / top)):
            out.append(_one(dev, "speedup", {"preset": preset}, top, train_s=seconds))
        quick = SPEED[dev][0] == "quick"
        for lr in (2e-5, 5e-5, 8e-5, 1.5e-4, 3e-4):
            for decay in (None, 0.95, 0.9):
                for seed in (1, 2):
                    acc = (
                        (0.36 if lr < 4e-5 else 0.5 + 200 * lr)
                        if quick
                        else 0.92 + 40 * lr - (decay or 1) * 0.003 + 0.002 * seed
                    )
                    out.append(
                        _one(
                            dev,
                            "lr_llrd",
                            {"lr": lr, "llrd_decay": decay, "seed": seed, "batch": 16},
                            top,
                            acc=min(acc, 0.95),
                        )
                    )
        if dev in ("a100", "trn1", "cpu"):
            for mode in ("fp32", "bf16", "bf16-pure", "bf16-pure-sr"):
                for length in (16, 32):
                    for seed in range(1, 6):
                        acc = (
                            0.935 - (0.02 if mode == "bf16-pure" and length == 16 else 0) + 0.002 * ((seed * 7) % 5 - 2)
                        )
                        out.append(
                            _one(
                                dev,
                                "precision",
                                {"precision": mode, "max_length": length, "seed": seed},
                                top,
                                acc=acc,
                                mode=mode,
                            )
                        )
        if xla:
            for case, comps in (
                ({"padding": "static"}, 2),
                ({"padding": "dynamic", "pad_to_multiple_of": 8}, 5),
                ({"padding": "dynamic"}, 19),
            ):
                out.append(
                    _one(
                        dev,
                        "padding",
                        {**case, "max_length": 32, "batch": 8},
                        top,
                        compilations=comps,
                        compile_s=comps * (40 if dev == "xla-cpu" else 25),
                        train_s=200 + comps * 50,
                    )
                )
    return out
