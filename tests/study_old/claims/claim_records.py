"""Hand-made records (tests/record_fixtures.py) of the suites the claims read, and how a claim's finding is
judged and checked on them: shared by the claims' tests (tests/study/claims/)."""

from __future__ import annotations

from helpers.study.claims.verdict import Finding
from helpers.study.frame import frame
from tests.record_fixtures import record

PUB = "Experiment/published"
MODEL = {"quick": "minilm", "full": "bert-base-uncased"}
NAMES = {"a100": "A100", "t4": "T4", "trn1": "Trainium", "cpu": "Xeon", "xla-cpu": "XLA CPU"}


def precision_used(params: dict) -> dict:
    """Return the precision section the run path records for these params ({} without a precision)."""
    if "precision" not in params:
        return {}
    used = params["precision"]
    return {"precision": {"requested": used, "used": used, "compute_dtype": "bf16", "mechanism": "fixture"}}


def run(
    device: str,
    suite: str,
    params: dict,
    variant: str = "full",
    ai: float | None = None,
    util: float | None = None,
    shares: dict | None = None,
    like_study: bool = False,
    **figures,
) -> dict:
    """Return a fixture record of one run of `suite`'s `variant` on `device` with these params and figures."""
    params = {"model_name": MODEL[variant], **params}
    name = f"{suite}-{variant}-" + "-".join(f"{k}{v}" for k, v in sorted(params.items()) if k != "model_name")
    extra = precision_used(params)
    if ai is not None:
        extra["systems"] = {"arithmetic_intensity": ai, "achieved_tflops": 1.0}
    if util is not None and like_study:  # tensor units on both sides: GPM tensor pipes, the tensor engine
        if device in ("a100", "t4"):
            extra["utilization"] = {
                "tensor_active_pct_mean": util,
                "sm_active_pct_mean": 95.0,
                "sm_util_pct_mean": 100.0,
            }
        else:
            extra["neuron_profile"] = {"backend": "neuron-profile", "tensor_engine_active_pct": util}
    elif util is not None:  # SM activity or utilization.gpu on a GPU, neuron-monitor's busy % on a NeuronCore
        gpu = device in ("a100", "t4")
        extra["utilization"] = (
            {"sm_active_pct_mean": util, "sm_util_pct_mean": 100.0} if gpu else {"neuroncore_util_pct_mean": util}
        )
    if shares is not None:
        extra["profile"] = {"class_share": shares}
    return record(device, suite, params, run_name=name, **extra, **figures)


def steady(gap_pct: float = 0.0, device: str = "cpu") -> list[dict]:
    """Return a machine's runs of one configuration timed by two suites (models, time_to_accuracy; no claim
    reads them; no accuracy), 3 each, the second `gap_pct` faster: the drift between suites it shows. A device whose arms
    did not run interleaved and that shows no drift of its own is judged beyond the largest one any shows."""
    return [
        run(device, suite, {"batch": 32, "seed": seed}, "quick", samples_per_s=rate, test_acc=None, val_acc=None)
        for suite, rate in (("models", 100.0), ("time_to_accuracy", 100.0 * (1 + gap_pct / 100)))
        for seed in (1, 2, 3)
    ]


def judge(claim, recs: list[dict], drift: list[dict] | None = None) -> Finding:
    """Return a claim's finding on the frame of these records and a machine that shows no drift between suites
    (`drift`: other records that measure it; [] for none)."""
    return claim(frame(recs + (steady() if drift is None else drift)), PUB)


def check(found: Finding, verdict: str, device: str | None = None, variant: str = "full", runs: int | None = None):
    """Assert the verdict, and that the measured text names the device, the variant and the run count."""
    assert found.verdict == verdict, (found.verdict, found.reason, found.measured)
    if device:
        assert NAMES[device] in found.measured and variant in found.measured, found.measured
    if runs:
        assert f"{runs} run" in found.measured, found.measured


def batches(device: str, rates: list[float], variant: str = "full") -> list[dict]:
    return [
        run(device, "batch_scaling", {"batch": b}, variant, ai=50 + b, samples_per_s=s)
        for b, s in zip((8, 16, 64), rates)
    ]


def padding_runs(device: str, dynamic: tuple[int, float], variant: str = "full", multiple: int | None = 16):
    static = run(device, "padding", {"padding": "static"}, variant, compilations=1, train_s=100.0)
    params = {"padding": "dynamic"} | ({"pad_to_multiple_of": multiple} if multiple else {})
    return [static, run(device, "padding", params, variant, compilations=dynamic[0], train_s=dynamic[1])]


def flags(device: str, times: dict[int, float], variant: str = "full") -> list[dict]:
    return [
        run(device, "compiler_flags", {"optlevel": level, "distribution_strategy": "llm-training"}, variant, train_s=t)
        for level, t in times.items()
    ]


def util_runs(device: str, utils: list[float], variant: str = "full", like_study: bool = True) -> list[dict]:
    return [
        run(device, "small_batch", {"batch": b, "seed": seed}, variant, util=u, like_study=like_study)
        for b in (2, 4, 8)
        for seed, u in enumerate(utils, 1)
    ]


def presets(device: str, baseline_s: float, optimized_s: float, variant: str = "full") -> list[dict]:
    return [
        run(device, "speedup", {"preset": "baseline"}, variant, train_s=baseline_s),
        run(device, "speedup", {"preset": "optimized"}, variant, train_s=optimized_s),
    ]


def lora_runs(
    device: str,
    r: int,
    accs: list[float],
    rates: list[float] | None = None,
    targets: str = "query,value",
    model: str = "bert-base-uncased",
    lr: float = 5e-4,
    val: list[float] | None = None,
) -> list[dict]:
    """Return one lora-suite record per seed at one lr: full fine-tuning (r=0) or LoRA r on `targets`."""
    rates = rates or [100.0] * len(accs)
    out = []
    for seed, (acc, rate, v) in enumerate(zip(accs, rates, val or accs), 1):
        params = {"model_name": model, "lora_r": r, "seed": seed, "lr": lr, **({"lora_targets": targets} if r else {})}
        out.append(
            record(
                device,
                "lora",
                params,
                run_name=f"lora-full-r{r}-{targets}-lr{lr}-s{seed}",
                test_acc=acc,
                val_acc=v,
                samples_per_s=rate,
                model={"trainable_parameters": 10 if r else 1000, "optimizer_state_bytes": 80 if r else 8000},
            )
        )
    return out


def searched(device: str, r: int, accs: list[float], model: str = "bert-base-uncased", **kwargs) -> list[dict]:
    """Return a setting's runs at three lrs: `accs` at 5e-4, the best by validation, 5 points less at the others."""
    worse = [a - 0.05 for a in accs]
    return (
        lora_runs(device, r, worse, model=model, lr=2.5e-4, **kwargs)
        + lora_runs(device, r, accs, model=model, **kwargs)
        + lora_runs(device, r, worse, model=model, lr=1e-3, **kwargs)
    )
