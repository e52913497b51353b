"""The run record as a typed report (pydantic): one model per section, numbers as numbers.

A figure that was not measured is None, with the section's `reason` saying why (a string such as "not measured"
in a number field is refused; NaN and infinities become None). The record refuses a key it does not
know, and so does every section (a misspelled key is an error, not a new column); where a backend writes
keys of its own choosing (a GPU per device, a core per NeuronCore) they sit in one typed map. A file of
another schema version, or one that does not validate, is skipped by its readers, named with the reason.

    python -m helpers.run.schema --write     # regenerate helpers/facts/record.schema.json after a change
"""

from __future__ import annotations

import argparse
import json
import math
import numbers
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

SCHEMA_VERSION = 5
SCHEMA_FILE = Path(__file__).resolve().parents[1] / "facts" / "record.schema.json"
Status = Literal["finished", "failed", "diverged", "oom", "timeout", "interrupted"]  # interrupted: SIGINT, Ctrl-C


def finite_or_none(value: Any) -> Any:
    """Return None for NaN and infinities, else the value as is."""
    if isinstance(value, numbers.Real) and not isinstance(value, bool) and not math.isfinite(value):
        return None
    return value


Num = Annotated[float | None, BeforeValidator(finite_or_none)]
Count = Annotated[int | None, BeforeValidator(finite_or_none)]


class Section(BaseModel):
    """A record section: the typed fields of its subclass and no other key."""

    model_config = ConfigDict(extra="forbid")
    reason: str | None = None  # why a figure of the section is None


class Device(Section):
    key: str  # a failure recorded by the sweep knows only the device it ran for
    type: str | None = None
    name: str | None = None
    cpu_capability: str | None = None
    bf16_fast: bool | None = None
    neuron: bool | None = None
    cpu_count: Count = None
    torch_threads: Count = None
    instance: str | None = None
    cuda_runtime: str | None = None  # the CUDA runtime torch was built with
    gpu_driver: str | None = None  # the NVIDIA driver, as NVML reports it
    neuron_driver: str | None = None  # the Neuron driver's kernel module version


class PrecisionProbe(Section):
    """The CPU's bf16-vs-fp32 probe (measure.precision_probe.paired_probe): one training step each, paired."""

    ratio: Num = None  # fp32 step time / bf16 step time, median over the rounds
    fp32_step_s: Num = None
    bf16_step_s: Num = None
    per_round: list[Num] = Field(default_factory=list)
    rounds: Count = None
    workload: str | None = None
    cpu: str | None = None
    cpu_capability: str | None = None
    threads: Count = None
    measured_at: str | None = None
    load_1min: Num = None
    seconds: Num = None  # what the probe took
    source: str | None = None  # where it was measured and kept (the _peaks file)


class Precision(Section):
    requested: str | None = None
    used: str | None = None
    compute_dtype: str | None = None
    mechanism: str | None = None
    auto_reason: str | None = None  # why precision=auto chose `used` (on a CPU: the bf16 probe's ratio)
    probe: PrecisionProbe | None = None  # the CPU's bf16-vs-fp32 probe that choice rests on


class Evaluation(Section):
    """How the run's evaluations ran (run.inference): the weights' precision, attention, threads, batch rows; its
    `reason` says why."""

    precision: str | None = None
    attention: str | None = None
    threads: Count = None
    rows_per_batch: Count = None


class Data(Section):
    rows: dict[str, int] = Field(default_factory=dict)
    dropped_rows: dict[str, int] = Field(default_factory=dict)
    majority_share: dict[str, Num] = Field(default_factory=dict)
    source: str | None = None
    subset_shuffled: bool | None = None
    optimizer_steps_planned: Count = None
    tokenize_s: Num = None  # the token_lengths suite's record: seconds to tokenize the training split


class Lora(Section):
    """The LoRA adapters a run trained (run.lora.describe)."""

    r: int
    alpha: int
    dropout: float
    targets: str  # the roles as given: query,value or all-linear
    roles: list[str] = Field(default_factory=list)


class ModelInfo(Section):
    name: str | None = None
    parameters: Count = None
    trainable_parameters: Count = None
    optimizer_state_bytes: Count = None  # AdamW's two moments of the trainable parameters
    hidden_size: Count = None
    num_hidden_layers: Count = None
    attention: str | None = None
    weights: str | None = None  # what the figures are good for when the weights are random (None: real)
    lora: Lora | None = None


JOB_RATE = "the job's: every rank's samples (data parallel: a rank's rate times the ranks)"


class Timing(Section):
    train_time_s: Num = None
    samples_per_s: Num = Field(None, description=JOB_RATE)
    tokens_per_s: Num = Field(None, description=JOB_RATE)
    first_step_s: Num = None
    step_time_median_s: Num = None
    step_time_p10_s: Num = None
    step_time_p90_s: Num = None
    steady_time_s: Num = None
    warmup_time_s: Num = None
    samples_per_s_per_device: Num = Field(None, description="one rank's samples/s (data parallel runs only)")
    steps: Count = None
    steady_steps: Count = None
    warmup_steps: Count = None
    windows: Count = None
    steady_samples: Count = None  # rank 0's, as samples_processed
    samples_processed: Count = None
    skipped_steps: Count = None
    window_samples_per_s: dict[str, Num] | None = Field(
        None, description="min/median/max over the steady windows, " + JOB_RATE
    )
    # each steady window: [optimizer steps done at its end, its samples/s]
    window_series: list[tuple[int, Num]] | None = None
    step_time_source: str | None = None  # what clock the per-step times come from, in words


class Systems(Section):
    mfu: Num = None  # a fraction of peak_tflops: the one MFU, computed where the record is made
    achieved_tflops: Num = None
    peak_tflops: Num = None
    peak_source: str | None = None
    peak_measured_at: str | None = None
    flops_per_step: Num = None
    flops_definition: str | None = None
    fused_attention: bool | None = None
    arithmetic_intensity: Num = None
    attainable_tflops: Num = None
    bytes_per_step: Num = None
    mem_bw_gbps: Num = None
    ridge_point: Num = None
    bound: str | None = None
    compute_dtype: str | None = None


class Memory(Section):
    """Measured peak memory (measure.peak_memory.peak), in GiB."""

    host_peak_rss_gib: Num = None
    host_source: str | None = None  # what the host's peak covers (since the run's reset, or the process)
    device: str | None = None  # off CUDA: whose memory the figures are, or why the device's is not measured
    cuda_max_allocated_gib: Num = None
    cuda_max_reserved_gib: Num = None


class EnergyWholeRun(Section):
    window: str | None = None  # what the whole run spans, in words
    joules: Num = None
    seconds: Num = None
    mean_watts: Num = None
    peak_watts: Num = None


class EnergyDevice(Section):
    """One device of the energy section (a GPU, a RAPL package, a Neuron device)."""

    name: str | None = None
    joules: Num = None
    mean_power_util_pct: Num = None  # Neuron: the driver's per-minute mean power, % of the maximum
    records: Count = None  # Neuron: power records read
    utilization_raw_text: str | None = None  # Neuron: the driver's undocumented live file, kept as text


class Energy(Section):
    # joules, seconds, mean_watts, peak_watts, samples: over `window` ("steady": timing's steady windows)
    joules: Num = None
    mean_watts: Num = None
    peak_watts: Num = None
    seconds: Num = None
    samples: Count = None  # every rank's samples in those windows
    samples_per_joule: Num = None
    window: str | None = None  # "steady"; None in records from before energy followed the timing windows
    window_note: str | None = None
    windows: Count = None
    covers: str | None = None  # which devices the joules are, in words (a node's GPUs, its CPU packages...)
    device_count: Count = None
    nodes: Count = None
    whole_run: EnergyWholeRun | None = None
    devices: dict[str, EnergyDevice] | None = None  # per device, by its name in the reader
    interval_s: Num = None
    power_samples: Count = None
    power_read_errors: Count = None
    mean_power_util_pct: Num = None  # Neuron: over the devices
    max_watts_source: str | None = None  # Neuron: where the maximum power would have come from
    peak_watts_note: str | None = None  # several nodes: why peak_watts is None
    method: str | None = None
    source: str | None = None
    device_type: str | None = None


class Utilization(Section):
    """Utilization over the steady windows (measure.monitor): each figure's mean and p90, None where the source
    sampled none."""

    backend: str | None = None  # psutil, nvml or neuron-monitor
    samples: Count = None
    interval_s: Num = None
    nvml_errors: Count = None
    gpm_reason: str | None = None  # why NVML has no SM or tensor-pipe activity (before Hopper)
    neuroncore_util_pct_mean_per_core: dict[str, Num] | None = None  # by NeuronCore index
    neuroncores_seen: Count = None
    flops_field: str | None = None  # which neuron-monitor field the TFLOP/s come from
    runtime_errors: Count = None
    malformed_lines: Count = None

    # psutil
    cpu_util_pct_mean: Num = None
    cpu_util_pct_p90: Num = None
    proc_cpu_util_pct_mean: Num = None
    proc_cpu_util_pct_p90: Num = None
    rss_gib_mean: Num = None
    rss_gib_p90: Num = None
    # nvml
    sm_util_pct_mean: Num = None
    sm_util_pct_p90: Num = None
    sm_active_pct_mean: Num = None
    sm_active_pct_p90: Num = None
    tensor_active_pct_mean: Num = None
    tensor_active_pct_p90: Num = None
    mem_util_pct_mean: Num = None
    mem_util_pct_p90: Num = None
    mem_used_gib_mean: Num = None
    mem_used_gib_p90: Num = None
    # neuron-monitor
    neuroncore_util_pct_mean: Num = None
    neuroncore_util_pct_p90: Num = None
    achieved_tflops_mean: Num = None
    achieved_tflops_p90: Num = None
    device_mem_used_gib_mean: Num = None
    device_mem_used_gib_p90: Num = None
    runtime_host_mem_used_gib_mean: Num = None
    runtime_host_mem_used_gib_p90: Num = None
    host_vcpu_util_pct_mean: Num = None
    host_vcpu_util_pct_p90: Num = None
    host_mem_used_gib_mean: Num = None
    host_mem_used_gib_p90: Num = None


class Shapes(Section):
    """The training batches' shapes: how many steps each (batch x padded length) took."""

    distinct: Count = None
    counts: dict[str, int] = Field(default_factory=dict)  # "32x64": steps
    # step_mode compile / cudagraphs: the graphs torch.compile made while training (forward-backward and update
    # per input shape); None in eager
    compiled_graphs: Count = None


class XlaCounters(Section):
    """torch-xla's compile and execute counters over a span of the run (measure.xla.delta)."""

    uncached_compiles: Count = None
    cached_compiles: Count = None
    compile_count: Count = None
    compile_time_s: Num = None
    execute_count: Count = None
    execute_time_s: Num = None
    persistent_cache_hits: Count = None
    persistent_cache_misses: Count = None
    persistent_cache_load_failures: Count = None


class XlaCache(Section):
    """The persistent compilation cache of an XLA run: which, where, and cold or warm."""

    kind: str | None = None
    dir: str | None = None
    state: str | None = None
    note: str | None = None


class Xla(Section):
    """What torch-xla compiled and executed (measure.xla.CompileLog.section)."""

    graph_compilations: Count = None
    compile_time_s: Num = None
    run: XlaCounters | None = None
    train: XlaCounters | None = None
    eval: XlaCounters | None = None
    periodic_eval: XlaCounters | None = None  # evaluations during training, included in eval
    compilations_per_step: dict[str, int] = Field(default_factory=dict)  # by step index; zeros left out
    compilations_after_warmup: Count = None
    warmup_batches: Count = None
    distinct_input_shapes: Count = None
    first_step_s: Num = None
    steady_step_s: Num = None
    first_over_steady: Num = None
    cache: XlaCache | None = None
    neuron_cc_flags: str | None = None
    env: dict[str, str] = Field(default_factory=dict)  # the compiler's environment at the first graph
    env_changed_during_run: dict[str, str | None] | None = None


class OpClasses(Section):
    """A profiled window's time (ms) or share per class of operator (measure.profile.CLASSES)."""

    matmul: Num = None
    attention: Num = None
    elementwise_norm_act: Num = None
    optimizer: Num = None
    copy_data_movement: Num = None
    other: Num = None
    host_gap: Num = None  # the window's wall time no operator ran


class TopOp(Section):
    name: str
    self_time_ms: Num = None
    calls: Count = None


class XlaMetricsWindow(XlaCounters):
    """torch-xla's counters over the profiled window."""

    backend: str | None = None


class Profile(Section):
    """The profiled steps' summary (measure.profile.StepProfiler)."""

    backend: str | None = None
    window_steps: Count = None
    window_wall_ms: Num = None
    trace_path: str | None = None
    class_time_ms: OpClasses | None = None
    class_share: OpClasses | None = None
    top_ops: list[TopOp] = Field(default_factory=list)
    matmul_achieved_tflops: Num = None
    # CUDA: the union of the window's kernel and copy intervals over its wall, 0..1; the rest the device
    # waited on the host (launches, Python, data). Measured on every CUDA run (kernels only unless profile)
    device_busy_share: Num = None
    host_gap_definition: str | None = None
    xla_profiler_trace: str | None = None
    xla_metrics: XlaMetricsWindow | None = None


class NeuronProfile(Section):
    """The Neuron profiler's summary (measure.neuron_profile): engine-active %, MFU, MBU and HFU %."""

    backend: str | None = None
    entries: Count = None  # summary entries averaged
    tensor_engine_active_pct: Num = None
    vector_engine_active_pct: Num = None
    scalar_engine_active_pct: Num = None
    gpsimd_engine_active_pct: Num = None
    dma_active_pct: Num = None
    mfu_pct: Num = None
    mbu_pct: Num = None
    hfu_pct: Num = None
    total_time_s: Num = None


class Shards(Section):
    """Rows each rank trained on in epoch 0 (run.ddp.shard_check)."""

    rows_per_rank: list[int] = Field(default_factory=list)
    overlap_rows: Count = None  # rows more than one rank saw
    padded_rows: Count = None  # rows DistributedSampler repeated to even the shards out
    status: str | None = None  # why the shards were not checked


class AllReduce(Section):
    """The gradient all-reduce's time and share of the median step (run.ddp.allreduce_share)."""

    status: str | None = None
    source: str | None = None
    comm_s: Num = None
    overlap_with_backward_s: Num = None
    backward_compute_s: Num = None
    share_of_step: Num = None


class RankError(Section):
    """An exception a torchrun rank recorded (launch.RankError)."""

    rank: int
    exception: str
    message: str
    where: str | None = None
    written_ns: int


class Distributed(Section):
    """A torchrun run's ranks (launch.distributed_section), or why its launch failed."""

    world_size: Count = None
    nodes: Count = None
    backend: str | None = None
    per_device_batch: Count = None
    global_batch: Count = None
    global_samples_per_s: Num = None
    per_device_samples_per_s: Num = None
    launch_id: str | None = None
    shards: Shards | None = None
    allreduce: AllReduce | None = None
    exit_code: Count = None  # a failed launch: torchrun's exit code, the ranks' errors, its output's tail
    rank_errors: list[RankError] = Field(default_factory=list)
    output_tail: str | None = None


class Metrics(Section):
    final_loss: Num = None
    val_accuracy: Num = None
    val_loss: Num = None
    val_macro_f1: Num = None
    val_rows: Count = None
    test_accuracy: Num = None
    test_loss: Num = None
    test_macro_f1: Num = None
    test_rows: Count = None
    diverged_at_step: Count = None
    loss_curve: list[list[Num]] = Field(default_factory=list)


class Crossing(Section):
    """When a run's validation accuracy first reached one target (calc.accuracy_time.crossings)."""

    train_time_s: Num = None  # None: not reached, `reason` says so and the best accuracy seen
    wall_s: Num = None  # seconds from the run's start() to the end of that evaluation (what a user waited)
    step: Count = None
    rows: Count = None  # validation rows of that evaluation
    val_accuracy: Num = None
    test_accuracy: Num = None  # of that checkpoint, where the run measured it
    compile_s_before: Num = None  # what a compiled device paid before its clock could reach the target


class Optimizer(BaseModel):
    """Which optimizer trained the run."""

    model_config = ConfigDict(extra="forbid")
    class_: str = Field(alias="class")  # module-qualified, as torch.optim.adamw.AdamW (written as "class")
    implementation: str | None = None  # the `optim` parameter: adamw_torch, adamw_torch_foreach, adamw_torch_fused
    fused: bool | None = None  # set where torch's AdamW ran fused (one kernel over all parameters)
    foreach: bool | None = None  # set where it ran foreach (batched over parameters)


class TokenStats(BaseModel):
    """Token lengths of a split, [CLS] and [SEP] included (run.tokens.length_stats), and the length chosen."""

    model_config = ConfigDict(extra="forbid")
    split: str
    rows: int
    min: int
    max: int
    mean: float
    median: float
    p90: int  # the length that covers 90% of rows
    p95: int
    p99: int
    chosen_coverage: float  # the share of rows chosen_pow2 must cover
    chosen_pow2: int


class Runner(BaseModel):
    """How the sweep ran a point that ended without writing its own record."""

    model_config = ConfigDict(extra="forbid")
    notebook: str | None = None
    env: str | None = None
    returncode: int | None = None
    output: str | None = None  # the executed notebook
    log: str | None = None


class CurvePoint(Section):
    step: int
    train_time_s: Num = None
    samples: Count = None
    val_accuracy: Num = None
    rows: Count = None
    test_accuracy: Num = None  # at the first point at or above 90%: the test split's accuracy there
    eval_s: Num = None  # this evaluation's seconds (the test split's too, where the point has test_accuracy)
    wall_s: Num = None  # seconds since the run's start() when this evaluation ended


class Phases(Section):
    """Where the command's seconds went, phase by phase (seconds; periodic_evals a count); they add up to
    `wall`. Older records have only load_data, tokenize, build_model, train and evaluate."""

    startup: Num = None  # process start -> start(): interpreter, imports, a notebook's kernel (0: a later run)
    start: Num = None  # start(): checks, device, configuration, the record's name (the probes apart)
    probes: Num = None  # the CPU's bf16-vs-fp32 precision probe and its matmul roof (near 0 once on file)
    load_data: Num = None
    tokenize: Num = None
    build_model: Num = None
    train: Num = None  # the timed training windows: timing.train_time_s
    train_other: Num = None  # the rest of the train step: loader, optimizer, monitors, the loop outside its windows
    periodic_eval: Num = None  # every periodic evaluation (eval_every) together; each is its curve point's eval_s
    periodic_evals: Count = None
    evaluate: Num = None  # the final evaluation (validation and test)
    save: Num = None  # save_dir
    record: Num = None  # assembling the record (memory, systems, xla sections)
    other: Num = None  # the wall no step measured: a notebook's cells between steps, a failure's traceback
    wall: Num = None  # process start (start() for a later run of the process) -> the record assembled


class RunRecord(BaseModel):
    """One run: who ran what, on which device, with what result (schema_version 5); no other keys."""

    # the run carries one from start to finish: a section set on it is checked as it is set (a misspelled name
    # or a wrong type is refused there), a copy made by model_copy(update=...) again when validated
    model_config = ConfigDict(extra="forbid", validate_assignment=True, revalidate_instances="always")
    schema_version: Literal[5] = SCHEMA_VERSION
    run_id: str
    run_name: str = Field(min_length=1)
    suite: str | None = None
    status: Status
    error: str | None = None
    stopped_early: str | None = None  # why a finished run ended before its planned steps (stop_at_accuracy)
    started_at: str | None = None
    finished_at: str | None = None
    host: str | None = None
    python: str | None = None
    libraries: dict[str, str] = Field(default_factory=dict)
    params: dict[str, Any] = Field(default_factory=dict)
    params_given: list[str] = Field(default_factory=list)
    world_size: int = 1
    device: Device | None = None
    precision: Precision | None = None
    data: Data | None = None
    model: ModelInfo | None = None
    timing: Timing | None = None
    systems: Systems | None = None
    memory: Memory | None = None
    energy: Energy | None = None
    utilization: Utilization | None = None
    metrics: Metrics | None = None
    curve: list[CurvePoint] = Field(default_factory=list)
    evaluation: Evaluation | None = None  # how the periodic and final evaluations ran
    phases: Phases | None = None
    shapes: Shapes | None = None
    xla: Xla | None = None
    distributed: Distributed | None = None
    profile: Profile | None = None
    neuron_profile: NeuronProfile | None = None  # the Neuron profiler's summary, attached after the run
    time_to_accuracy: dict[str, Crossing] = Field(default_factory=dict)  # per target, as "0.90"
    optimizer: Optimizer | None = None
    token_stats: TokenStats | None = None  # the token_lengths suite's record: no training
    runner: Runner | None = None  # a record the sweep wrote for a point that wrote none
    oversubscribed: bool | None = None  # True: more ranks than CPU cores (allow_oversubscribe)
    saved_to: str | None = None  # the folder the trained model was saved to (save_dir)
    fixture: bool | None = None  # True: a hand-made record of the tests, left out of the report


def validate(obj: Any) -> tuple[dict | None, str | None]:
    """Return (the record as plain JSON data, None), or (None, why it is not a valid record)."""
    if not isinstance(obj, dict):
        return None, "not a JSON object"
    version = obj.get("schema_version")
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        return None, f"schema_version {version!r} is not a schema version (an integer from 1)"
    if version > SCHEMA_VERSION:
        return None, f"schema_version {version} is newer than this code reads ({SCHEMA_VERSION}): update the code"
    if version < SCHEMA_VERSION:
        return None, f"schema_version {version} is older than this code reads ({SCHEMA_VERSION})"
    try:
        return RunRecord.model_validate(obj).model_dump(mode="json", exclude_unset=True, by_alias=True), None
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "record"
        return None, f"{where}: {first['msg']} ({err.error_count()} problem(s))"
    except (TypeError, ValueError, AttributeError, RecursionError) as err:  # a value nested too deeply
        return None, f"not a record ({err})"


def json_schema() -> str:
    """Return the JSON Schema of a record, as committed in helpers/facts/record.schema.json."""
    return json.dumps(RunRecord.model_json_schema(), indent=1, sort_keys=True) + "\n"


def main(argv: list[str] | None = None) -> None:
    """Command line: print the JSON Schema, or write it to helpers/facts/record.schema.json."""
    parser = argparse.ArgumentParser(prog="python -m helpers.run.schema", description=main.__doc__)
    parser.add_argument("--write", action="store_true", help=f"write {SCHEMA_FILE.name}")
    if parser.parse_args(argv).write:
        SCHEMA_FILE.write_text(json_schema())
        print(f"wrote {SCHEMA_FILE}")
    else:
        print(json_schema(), end="")


if __name__ == "__main__":
    main()
