"""Hand-made records in the shape the loops write (schema 6), for devices this machine has not got.

`record(device, suite, params, **figures)` returns a record as a CUDA GPU (NVML utilization and energy,
`max_memory_allocated`), a trn1 NeuronCore (neuron-monitor utilization, the XLA section), the CPU, or XLA on the CPU
would write it: raw measurements only (shapes, steady seconds, the model's architecture), from which the frame
computes FLOP/s and MFU. Every record says it is a fixture (`fixture: true`): the report leaves such records out
unless a test asks for them, so they never reach the committed report.
"""

from __future__ import annotations

import copy
from pathlib import Path

import helpers.record
from helpers import arguments

DEVICES = {
    "a100": {
        "type": "cuda",
        "name": "NVIDIA A100-SXM4-40GB",
        "key": "cuda-nvidia-a100-sxm4-40gb",
        "instance": "p4d.24xlarge",
        "bf16_fast": True,
        "neuron": False,
        "torch_threads": 48,
        "cpu_count": 96,
    },
    "h200": {
        "type": "cuda",
        "name": "NVIDIA H200",
        "key": "cuda-nvidia-h200",
        "bf16_fast": True,
        "neuron": False,
        "torch_threads": 16,
        "cpu_count": 16,
        "cpu_capability": "AVX512+amx_bf16",
    },
    "t4": {
        "type": "cuda",
        "name": "Tesla T4",
        "key": "cuda-tesla-t4",
        "instance": "g4dn.xlarge",
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
        "bf16_fast": True,
        "neuron": True,
        "torch_threads": 8,
        "cpu_count": 8,
    },
    "cpu": {
        "type": "cpu",
        "name": "Intel(R) Xeon(R) Processor @ 2.80GHz",
        "key": "cpu-intel-xeon-processor-2.80ghz-f6m85-avx512",
        "cpu_capability": "AVX512",
        "bf16_fast": False,
        "neuron": False,
        "torch_threads": 2,
        "cpu_count": 2,
    },
    "xla-cpu": {
        "type": "xla",
        "name": "XLA CPU (Intel(R) Xeon(R) Processor @ 2.80GHz)",
        "key": "xla-cpu-intel-xeon-processor-2.80ghz-f6m85-avx512",
        "cpu_capability": "AVX512",
        "bf16_fast": False,
        "neuron": False,
        "torch_threads": 2,
        "cpu_count": 2,
    },
}
BERT_BASE = {
    "model_type": "bert",
    "hidden_size": 768,
    "num_hidden_layers": 12,
    "num_attention_heads": 12,
    "intermediate_size": 3072,
    "vocab_size": 30522,
    "max_position_embeddings": 512,
    "type_vocab_size": 2,
    "num_labels": 6,
}
CONFIGS = {"minilm": {**BERT_BASE, "hidden_size": 384, "num_hidden_layers": 6, "intermediate_size": 1536}}
UTILIZATION = {
    "cuda": {"backend": "nvml", "sm_util_pct_mean": 91.0, "sm_util_pct_p90": 97.0, "samples": 40, "interval_s": 0.5},
    "neuron": {"backend": "neuron-monitor", "neuroncore_util_pct_mean": 62.0, "neuroncore_util_pct_p90": 70.0},
    "cpu": {"backend": "psutil", "proc_cpu_util_pct_mean": 190.0, "proc_cpu_util_pct_p90": 198.0, "samples": 20},
}
ENERGY = {
    "cuda": {
        "method": "measured",
        "source": "NVML total energy counter",
        "joules": 5200.0,
        "mean_watts": 260.0,
        "seconds": 20.0,
        "window": "steady",
    },
    "neuron": {"method": None, "reason": "no published maximum power for this device"},
    "cpu": {"method": None, "reason": "no RAPL package domain"},
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
    train_s: float = 100.0,
    compile_s: float = 0.0,
    compilations: int = 0,
    run_name: str | None = None,
    **extra,
) -> dict:
    """Return a fixture record of a run of `params` on `device` (a key of DEVICES) with these figures."""
    dev = copy.deepcopy(DEVICES[device])
    kind = "neuron" if dev["neuron"] else ("cuda" if dev["type"] == "cuda" else "cpu")
    platform = arguments.TrainiumArgs if dev["type"] == "xla" else arguments.NvidiaArgs
    run = arguments.build({k: v for k, v in params.items() if k not in ("run_name", "suite")}, platform)
    name = run_name or params.get("run_name", "fixture")  # no library versions: reading them is most of the cost
    rec = helpers.record.RunRecord(
        run_name=name, suite=suite, params=run.flat(), params_given=sorted(run.given), device=dev
    )
    rec = helpers.record.as_json(rec) | {"status": status, "fixture": True, "started_at": helpers.record.now()}
    dtype = "bf16" if dev["bf16_fast"] else "fp32"
    rec["precision"] = {"requested": run.precision, "used": dtype, "compute_dtype": dtype, "mechanism": "fixture"}
    rec["model"] = {"name": run.model_name, "config": CONFIGS.get(run.model_name, BERT_BASE), "attention": "sdpa"}
    rec["data"] = {"rows": {"train": 16000, "validation": 2000, "test": 2000}, "majority_share": {"test": 0.3475}}
    steps, steady = 500, 497
    rec["shapes"] = {"distinct": 1, "counts": {f"{run.batch}x{run.max_length}": steps}}
    rec["timing"] = {
        "steps": steps,
        "warmup_steps": steps - steady,
        "steady_steps": steady,
        "train_time_s": train_s,
        "first_step_s": 2.0 + compile_s,
        "steady_time_s": steady * step_ms / 1e3,
        "samples_per_s": samples_per_s,
        "tokens_per_s": samples_per_s * run.max_length,
        "window_samples_per_s": {"min": 0.97 * samples_per_s, "median": samples_per_s, "max": 1.03 * samples_per_s},
        "step_time_median_s": step_ms / 1e3,
        "step_time_p10_s": 0.97 * step_ms / 1e3,
        "step_time_p90_s": 1.03 * step_ms / 1e3,
    }
    rec["metrics"] = {"final_loss": 0.3, "loss_curve": [[50, 1.2], [500, 0.3]]}
    if test_acc is not None:
        rec["metrics"] |= {"test_accuracy": test_acc, "test_rows": 2000, "val_accuracy": val_acc, "val_rows": 2000}
    rec["utilization"] = copy.deepcopy(UTILIZATION[kind])
    rec["energy"] = copy.deepcopy(ENERGY[kind])
    if rec["energy"].get("joules"):  # the steady windows' samples (samples/s x their seconds) per joule
        rec["energy"]["samples_per_joule"] = samples_per_s * rec["energy"]["seconds"] / rec["energy"]["joules"]
    rec["memory"] = {"cuda_max_allocated_gib": 5.5} if kind == "cuda" else {"host_peak_rss_gib": 3.0}
    if dev["type"] == "xla":
        counters = {"compile_count": compilations, "compile_time_s": compile_s, "execute_count": steps}
        rec["xla"] = {"graph_compilations": compilations, "compile_time_s": compile_s, "train": counters}
        rec["xla"]["compilations_after_warmup"] = 0
    rec["finished_at"] = helpers.record.now()
    rec.update(extra)
    return rec


def write(results: str | Path, rec: dict) -> Path:
    """Write a fixture record where a run would, through the one writer, checked as a run's is."""
    valid, why = helpers.record.validate(rec)
    assert why is None, why
    path = helpers.record.base_path(results, rec.get("suite"), rec["run_name"], rec["device"]["key"])
    return helpers.record.write(helpers.record.RunRecord.model_validate(valid), path)
