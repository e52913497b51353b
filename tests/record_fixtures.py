"""Hand-made records in the exact shape the run path writes, for devices this machine has not got.

`record(device, suite, params, **figures)` returns a record as a CUDA GPU (NVML utilization and energy,
`max_memory_allocated`), a trn1 NeuronCore (neuron-monitor utilization, the XLA section with its counters
over the run, training and evaluation, and compile cache), the CPU, or XLA on the CPU would write it. Every
record says it is a fixture (`fixture: true`): the report leaves such records out unless a test asks for them,
so they never reach the committed report.
"""

from __future__ import annotations

import copy
from pathlib import Path

from helpers.run import records, schema
from helpers.run.args import RunArgs, build_args
from helpers.run.neuron import neuron_cc_flags

DEVICES = {
    "a100": {
        "type": "cuda",
        "name": "NVIDIA A100-SXM4-40GB",
        "key": "cuda-nvidia-a100-sxm4-40gb",
        "instance": "p4d.24xlarge",
        "cpu_capability": "AVX512",
        "bf16_fast": True,
        "neuron": False,
        "torch_threads": 48,
        "cpu_count": 96,
    },
    "t4": {
        "type": "cuda",
        "name": "Tesla T4",
        "key": "cuda-tesla-t4",
        "instance": "g4dn.xlarge",
        "cpu_capability": "AVX512",
        "bf16_fast": False,
        "neuron": False,
        "torch_threads": 4,
        "cpu_count": 4,
    },
    "trn1": {
        "type": "xla",
        "name": "AWS Trainium (trn1.2xlarge)",
        "key": "xla-aws-trainium-trn1.2xlarge",
        "instance": "trn1.2xlarge",
        "cpu_capability": "AVX512",
        "bf16_fast": True,
        "neuron": True,
        "torch_threads": 8,
        "cpu_count": 8,
    },
    "cpu": {
        "type": "cpu",
        "name": "Intel(R) Xeon(R) Processor @ 2.80GHz",
        "key": "cpu-intel-xeon-processor-2.80ghz-avx512",
        "instance": None,
        "cpu_capability": "AVX512",
        "bf16_fast": False,
        "neuron": False,
        "torch_threads": 2,
        "cpu_count": 2,
    },
    "xla-cpu": {
        "type": "xla",
        "name": "XLA CPU (Intel(R) Xeon(R) Processor @ 2.80GHz)",
        "key": "xla-xla-cpu-intel-xeon-processor-2.80ghz-avx512",
        "instance": None,
        "cpu_capability": "AVX512",
        "bf16_fast": False,
        "neuron": False,
        "torch_threads": 2,
        "cpu_count": 2,
    },
}
UTILIZATION = {
    "cuda": {
        "backend": "nvml",
        "sm_util_pct_mean": 91.0,
        "sm_util_pct_p90": 97.0,
        "mem_util_pct_mean": 40.0,
        "mem_util_pct_p90": 45.0,
        "mem_used_gib_mean": 6.0,
        "mem_used_gib_p90": 6.2,
        "samples": 40,
        "nvml_errors": 0,
        "interval_s": 0.5,
    },
    "neuron": {
        "backend": "neuron-monitor",
        "neuroncore_util_pct_mean": 62.0,
        "neuroncore_util_pct_p90": 70.0,
        "neuroncore_util_pct_mean_per_core": {"0": 62.0},
        "achieved_tflops_mean": 9.5,
        "achieved_tflops_p90": 10.1,
        "device_mem_used_gib_mean": 5.0,
        "device_mem_used_gib_p90": 5.1,
        "flops_field": "effective_flops",
        "neuroncores_seen": 1,
        "runtime_errors": 0,
        "samples": 30,
        "malformed_lines": 0,
        "interval_s": 1,
    },
    "cpu": {
        "backend": "psutil",
        "cpu_util_pct_mean": 95.0,
        "cpu_util_pct_p90": 99.0,
        "proc_cpu_util_pct_mean": 190.0,
        "proc_cpu_util_pct_p90": 198.0,
        "rss_gib_mean": 1.2,
        "rss_gib_p90": 1.3,
        "samples": 20,
        "interval_s": 0.5,
    },
}
ENERGY = {
    "cuda": {
        "method": "measured",
        "source": "NVML total energy counter",
        "joules": 5200.0,
        "mean_watts": 260.0,
        "peak_watts": 300.0,
        "seconds": 20.0,
        "power_samples": 20,
        "device_type": "cuda",
        "window": "steady",
        "windows": 10,
        "covers": "the run's GPU (the current CUDA device)",
        "device_count": 1,
        "whole_run": {"joules": 6000.0, "seconds": 25.0, "mean_watts": 240.0, "peak_watts": 300.0},
    },
    "neuron": {
        "method": None,
        "source": "Neuron sysfs power utilization",
        "joules": None,
        "mean_watts": None,
        "peak_watts": None,
        "seconds": 20.0,
        "power_samples": 0,
        "reason": "no published maximum power for this device",
        "device_type": "neuron",
    },
    "cpu": {
        "method": None,
        "source": "Intel RAPL",
        "joules": None,
        "mean_watts": None,
        "peak_watts": None,
        "seconds": 20.0,
        "power_samples": 0,
        "reason": "no RAPL package domain",
        "device_type": "cpu",
    },
}


def record(
    device: str,
    suite: str | None,
    params: dict,
    *,
    status: str = "finished",
    samples_per_s: float = 100.0,
    step_ms: float = 80.0,
    test_acc: float | None = 0.9,
    val_acc: float | None = 0.9,
    tflops: float = 1.0,
    train_s: float = 100.0,
    compile_s: float = 0.0,
    compilations: int = 0,
    run_name: str | None = None,
    **extra,
) -> dict:
    """Return a fixture record of a run of `params` on `device` (a key of DEVICES) with these figures."""
    dev = copy.deepcopy(DEVICES[device])
    kind = "neuron" if dev["neuron"] else ("cuda" if dev["type"] == "cuda" else "cpu")
    args = build_args({k: v for k, v in params.items() if k not in ("run_name", "suite")})
    flat = {**args.flat(), "suite": suite, "run_name": run_name or params.get("run_name", "fixture")}
    rec = records.as_json(
        records.run_record(
            flat,
            sorted(args.given),
            status=status,
            fixture=True,
            device=dev,
            libraries=records.library_versions(),
            precision={
                "requested": flat["precision"],
                "used": "bf16" if dev["bf16_fast"] else "fp32",
                "compute_dtype": "bf16" if dev["bf16_fast"] else "fp32",
                "mechanism": "fixture",
            },
        )
    )
    rec["data"] = {
        "rows": {"train": 16000, "validation": 2000, "test": 2000},
        "majority_share": {"train": 0.335, "validation": 0.352, "test": 0.3475},
    }
    rec["timing"] = {
        "steps": 500,
        "warmup_steps": 3,
        "train_time_s": train_s,
        "first_step_s": 2.0 + compile_s,
        "steady_time_s": train_s - 2.0,
        "steady_steps": 497,
        "samples_per_s": samples_per_s,
        "tokens_per_s": samples_per_s * 22,
        "samples_processed": 16000,
        "windows": 10,
        "window_samples_per_s": {"min": 0.97 * samples_per_s, "median": samples_per_s, "max": 1.03 * samples_per_s},
        "step_time_median_s": step_ms / 1e3,
        "step_time_p10_s": 0.97 * step_ms / 1e3,
        "step_time_p90_s": 1.03 * step_ms / 1e3,
        "skipped_steps": 0,
    }
    rec["metrics"] = {"final_loss": 0.3, "loss_curve": [[50, 1.2], [500, 0.3]], "diverged_at_step": None}
    if test_acc is not None:
        rec["metrics"].update(
            test_accuracy=test_acc, test_rows=2000, test_macro_f1=test_acc - 0.05, val_accuracy=val_acc, val_rows=2000
        )
    peak = 312.0 if kind == "cuda" else 95.0
    rec["systems"] = {
        "flops_per_step": 1e12,
        "achieved_tflops": tflops,
        "arithmetic_intensity": 100.0,
        "peak_tflops": peak,
        "mfu": tflops / peak,
        "bound": "memory",
        "peak_source": "fixture",
    }
    rec["utilization"] = copy.deepcopy(UTILIZATION[kind])
    rec["energy"] = copy.deepcopy(ENERGY[kind])
    if rec["energy"]["joules"]:  # the steady windows' samples (samples/s x their seconds) per joule
        rec["energy"]["samples"] = round(samples_per_s * rec["energy"]["seconds"])
        rec["energy"]["samples_per_joule"] = samples_per_s * rec["energy"]["seconds"] / rec["energy"]["joules"]
    rec["memory"] = (
        {"cuda_max_allocated_gib": 5.5, "cuda_max_reserved_gib": 6.0, "host_peak_rss_gib": 3.0}
        if kind == "cuda"
        else {"host_peak_rss_gib": 3.0, "device": "host"}
    )
    rec["phases"] = {"load_data": 1.0, "tokenize": 2.0, "build_model": 3.0, "train": train_s, "evaluate": 5.0}
    if dev["type"] == "xla":
        rec["xla"] = xla_section(args, dev["neuron"], compilations, compile_s, rec["timing"])
    rec["finished_at"] = records.now()
    rec.update(extra)
    return rec


def counters(compiles: int, compile_s: float, executes: int) -> dict:
    """Return torch-xla's counters over a span (measure.xla.delta): every compile uncached, no persistent cache."""
    return {
        "uncached_compiles": compiles,
        "cached_compiles": 0,
        "compile_count": compiles,
        "compile_time_s": compile_s,
        "execute_count": executes,
        "execute_time_s": 0.5 * executes,
        "persistent_cache_hits": 0,
        "persistent_cache_misses": 0,
        "persistent_cache_load_failures": 0,
    }


def xla_section(args: RunArgs, neuron: bool, compilations: int, compile_s: float, timing: dict) -> dict:
    """Return the `xla` section as measure.xla.CompileLog.section writes it, every graph compiled by the first step."""
    train = counters(compilations, compile_s, timing["steps"])  # the first step's seconds hold compile_s
    evaluation = counters(0, 0.0, 64)  # a fixture's simplification: evaluation reuses the training's graphs
    cache = (
        {"kind": "Neuron compile cache (neuronx-cc)", "dir": "/var/tmp/neuron-compile-cache"}
        if neuron
        else {"kind": "torch-xla persistent compilation cache", "state": "off"}
    )
    return {
        "graph_compilations": compilations,
        "compile_time_s": compile_s,
        "run": {k: train[k] + evaluation[k] for k in train},
        "train": train,
        "eval": evaluation,
        "compilations_per_step": {"0": compilations} if compilations else {},
        "compilations_after_warmup": 0,
        "warmup_batches": timing["warmup_steps"],
        "distinct_input_shapes": 1,
        "first_step_s": timing["first_step_s"],
        "steady_step_s": timing["step_time_median_s"],
        "first_over_steady": round(timing["first_step_s"] / timing["step_time_median_s"], 2),
        "cache": cache,
        "neuron_cc_flags": neuron_cc_flags(args),
        "env": {"NEURON_CC_FLAGS": neuron_cc_flags(args), "PJRT_DEVICE": "NEURON" if neuron else "CPU"},
    }


def write(path: str | Path, rec: dict) -> Path:
    """Write a fixture record (any schema version) through the run's one writer, checked as a run's is."""
    valid, why = schema.validate(rec)
    assert why is None, why
    return records.write_record(path, schema.RunRecord.model_validate(valid))
