"""The run record: a typed report (pydantic, one model per section), its one writer and its reader.

    Experiment/results/<suite or adhoc>/<run_name>@<device key>.json      (.run2.json, ... for a later run)

A record holds what was measured, never what can be derived from it: MFU and FLOP/s are computed from its
shapes, steady seconds and device when the report is built (study/frame.py), so a corrected formula needs no
migration. A figure not measured is None with its section's `reason` beside it; NaN and infinities become None;
an unknown key is refused. The writer never replaces a file: a second run of one name gets its own file.

    python -m helpers.record [PATH]        # headline figures of a record (default: the newest)
    python -m helpers.record --schema      # regenerate helpers/facts/record.schema.json
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import math
import numbers
import os
import platform
import re
import secrets
import socket
import sys
import time
import uuid
from collections import Counter
from importlib import metadata
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

REPO_ROOT = Path(__file__).resolve().parents[1]
RESULTS_DIR = "Experiment/results"
SCHEMA_VERSION = 6
SCHEMA_FILE = Path(__file__).resolve().parent / "facts" / "record.schema.json"
ADHOC = "adhoc"  # the folder of runs that belong to no suite
PEAKS = "_peaks"  # the per-machine CPU roofs, beside the suites' folders (folders starting with _ hold no records)
DONE = ("finished", "diverged", "oom")  # final: a resumed sweep does not run these again
# how CUDA (OutOfMemoryError), the host (MemoryError) and XLA (RESOURCE_EXHAUSTED) say out of memory
OOM_MARKERS = ("out of memory", "memoryerror", "outofmemoryerror", "resource_exhausted")
LIBRARIES = ("torch", "transformers", "datasets", "peft", "torch-xla", "torch-neuronx", "neuronx-cc", "torchao")
MIN_FREE_BYTES = 1 << 20  # room for a record (a few KiB) with a wide margin
Status = Literal["finished", "failed", "diverged", "oom", "timeout", "interrupted"]


def repo_path(path: str | Path) -> Path:
    """Return `path` as is when absolute, else relative to the repository root (not the cwd)."""
    path = Path(path)
    return path if path.is_absolute() else REPO_ROOT / path


def finite_or_none(value: Any) -> Any:
    """Return None for NaN and infinities, else the value as is."""
    if isinstance(value, numbers.Real) and not isinstance(value, bool) and not math.isfinite(value):
        return None
    return value


Num = Annotated[float | None, BeforeValidator(finite_or_none)]
Count = Annotated[int | None, BeforeValidator(finite_or_none)]


class Section(BaseModel):
    """A record section: the typed fields of its subclass and no other key."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)
    reason: str | None = None  # why a figure of the section is None


class Device(Section):
    key: str  # type, name, and for a CPU its family and model: records of one key are one machine
    type: str | None = None
    name: str | None = None
    cpu_family: str | None = None  # /proc/cpuinfo's vendor, family and model, e.g. "AuthenticAMD 25/17"
    cpu_capability: str | None = None
    bf16_fast: bool | None = None
    neuron: bool | None = None
    cpu_count: Count = None
    torch_threads: Count = None
    instance: str | None = None
    cuda_runtime: str | None = None  # the CUDA runtime torch was built with
    gpu_driver: str | None = None  # the NVIDIA driver, as NVML reports it
    neuron_driver: str | None = None  # the Neuron driver's kernel module version


class Precision(Section):
    requested: str | None = None
    used: str | None = None
    compute_dtype: str | None = None  # what the matmuls run in: the peak MFU is taken against
    mechanism: str | None = None
    auto_reason: str | None = None  # why precision=auto chose `used`


class Evaluation(Section):
    """How the run's evaluations ran: the weights' precision, attention, threads, batch rows; `reason` says why."""

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
    # the architecture's fields FLOPs and bytes are computed from (helpers/flops.py): model_type, hidden_size,
    # num_hidden_layers, num_attention_heads, intermediate_size, vocab_size, max_position_embeddings, ...
    config: dict[str, int | str] = Field(default_factory=dict)
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
    steady_samples: Count = None  # rank 0's
    steady_tokens: Count = None  # rank 0's padded tokens in the steady windows
    samples_processed: Count = None
    skipped_steps: Count = None
    window_samples_per_s: dict[str, Num] | None = Field(None, description="min/median/max over the steady windows")
    window_series: list[tuple[int, Num]] | None = None  # each steady window: [steps done at its end, samples/s]
    step_time_source: str | None = None  # what clock the per-step times come from, in words


class Memory(Section):
    """Measured peak memory, in GiB."""

    host_peak_rss_gib: Num = None
    host_source: str | None = None
    device: str | None = None  # off CUDA: whose memory the figures are, or why the device's is not measured
    cuda_max_allocated_gib: Num = None
    cuda_max_reserved_gib: Num = None


class EnergyWholeRun(Section):
    window: str | None = None
    joules: Num = None
    seconds: Num = None
    mean_watts: Num = None
    peak_watts: Num = None


class EnergyDevice(Section):
    """One device of the energy section (a GPU, a RAPL package, a Neuron device)."""

    name: str | None = None
    joules: Num = None
    mean_power_util_pct: Num = None  # Neuron: the driver's per-minute mean power, % of the maximum
    records: Count = None
    utilization_raw_text: str | None = None


class Energy(Section):
    # joules, seconds, mean_watts, peak_watts, samples: over `window` ("steady": timing's steady windows)
    joules: Num = None
    mean_watts: Num = None
    peak_watts: Num = None
    seconds: Num = None
    samples: Count = None
    samples_per_joule: Num = None
    window: str | None = None
    window_note: str | None = None
    windows: Count = None
    covers: str | None = None
    device_count: Count = None
    nodes: Count = None
    whole_run: EnergyWholeRun | None = None
    devices: dict[str, EnergyDevice] | None = None
    interval_s: Num = None
    power_samples: Count = None
    power_read_errors: Count = None
    mean_power_util_pct: Num = None
    max_watts_source: str | None = None
    peak_watts_note: str | None = None
    method: str | None = None
    source: str | None = None
    device_type: str | None = None


class Utilization(Section):
    """Utilization over the steady windows: each figure's mean and p90, None where the source sampled none."""

    backend: str | None = None  # psutil, nvml or neuron-monitor
    samples: Count = None
    interval_s: Num = None
    nvml_errors: Count = None
    gpm_reason: str | None = None
    neuroncore_util_pct_mean_per_core: dict[str, Num] | None = None
    neuroncores_seen: Count = None
    flops_field: str | None = None
    runtime_errors: Count = None
    malformed_lines: Count = None
    cpu_util_pct_mean: Num = None
    cpu_util_pct_p90: Num = None
    proc_cpu_util_pct_mean: Num = None
    proc_cpu_util_pct_p90: Num = None
    rss_gib_mean: Num = None
    rss_gib_p90: Num = None
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
    """The training batches' shapes ("batch x padded length": micro-batches), over all steps and steady ones."""

    distinct: Count = None
    counts: dict[str, int] = Field(default_factory=dict)
    steady: dict[str, int] | None = None  # the steady windows' micro-batches: what MFU is computed from
    compiled_graphs: Count = None  # step_mode compile / cudagraphs: graphs torch.compile made while training
    cudagraph_skips: Count = None  # cudagraphs: functions torch ran without graphs (torch's cudagraph_skips)


class XlaCounters(Section):
    """torch-xla's compile and execute counters over a span of the run."""

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
    kind: str | None = None
    dir: str | None = None
    state: str | None = None
    note: str | None = None


class Xla(Section):
    """What torch-xla compiled and executed."""

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
    """A profiled window's time (ms) or share per class of operator."""

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
    backend: str | None = None


class Profile(Section):
    """The profiled steps' summary (taken outside every timed window)."""

    backend: str | None = None
    window_steps: Count = None
    window_wall_ms: Num = None
    trace_path: str | None = None
    class_time_ms: OpClasses | None = None
    class_share: OpClasses | None = None
    top_ops: list[TopOp] = Field(default_factory=list)
    matmul_achieved_tflops: Num = None
    # CUDA: the union of the window's kernel and copy intervals over its wall, 0..1; the rest the device waited
    device_busy_share: Num = None
    busy_share_method: str | None = None  # how device_busy_share was measured (CUPTI kernels, graph replay)
    host_gap_definition: str | None = None
    xla_profiler_trace: str | None = None
    xla_metrics: XlaMetricsWindow | None = None


class NeuronProfile(Section):
    """A device profile's summary (Neuron Explorer's summary-json, or the older Neuron Profiler's)."""

    backend: str | None = None
    entries: Count = None
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
    rows_per_rank: list[int] = Field(default_factory=list)
    overlap_rows: Count = None  # rows more than one rank saw
    padded_rows: Count = None  # rows DistributedSampler repeated to even the shards out
    status: str | None = None


class AllReduce(Section):
    status: str | None = None
    source: str | None = None
    comm_s: Num = None
    overlap_with_backward_s: Num = None
    backward_compute_s: Num = None
    share_of_step: Num = None


class Distributed(Section):
    """A torchrun run's ranks."""

    world_size: Count = None
    nodes: Count = None
    backend: str | None = None
    per_device_batch: Count = None
    global_batch: Count = None
    global_samples_per_s: Num = None
    per_device_samples_per_s: Num = None
    shards: Shards | None = None
    allreduce: AllReduce | None = None


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
    """When a run's validation accuracy first reached one target."""

    train_time_s: Num = None  # None: not reached, `reason` says so and the best accuracy seen
    wall_s: Num = None
    step: Count = None
    rows: Count = None
    val_accuracy: Num = None
    test_accuracy: Num = None
    compile_s_before: Num = None


class Optimizer(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    class_: str = Field(alias="class")
    implementation: str | None = None
    fused: bool | None = None
    foreach: bool | None = None


class TokenStats(BaseModel):
    """Token lengths of a split, [CLS] and [SEP] included, and the length chosen."""

    model_config = ConfigDict(extra="forbid")
    split: str
    rows: int
    min: int
    max: int
    mean: float
    median: float
    p90: int
    p95: int
    p99: int
    chosen_coverage: float
    chosen_pow2: int


class Runner(BaseModel):
    """How the sweep ran a point that ended without writing its own record."""

    model_config = ConfigDict(extra="forbid")
    notebook: str | None = None
    env: str | None = None
    returncode: int | None = None
    output: str | None = None
    log: str | None = None


class CurvePoint(Section):
    step: int
    train_time_s: Num = None
    samples: Count = None
    val_accuracy: Num = None
    rows: Count = None
    test_accuracy: Num = None
    eval_s: Num = None
    wall_s: Num = None


class Phases(Section):
    """Where the command's seconds went (seconds; periodic_evals a count); they add up to `wall`."""

    startup: Num = (
        None  # a process's first run: process start -> the run's start (imports, a notebook's kernel); else 0
    )
    start: Num = None
    probes: Num = None  # the CPU's matmul roof (near 0 once on file)
    load_data: Num = None
    tokenize: Num = None
    build_model: Num = None
    train: Num = None  # the timed training windows: timing.train_time_s
    train_other: Num = None
    periodic_eval: Num = None
    periodic_evals: Count = None
    evaluate: Num = None
    save: Num = None
    record: Num = None
    other: Num = None
    wall: Num = None


class RunRecord(BaseModel):
    """One run: who ran what, on which device, with what result (schema_version 6); no other keys."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)
    schema_version: Literal[6] = SCHEMA_VERSION
    run_id: str = Field(default_factory=lambda: uuid.uuid4().hex[:12])
    run_name: str = Field(min_length=1)
    suite: str | None = None
    status: Status = "failed"  # until the run says otherwise: a record written mid-run is never "finished"
    error: str | None = None
    stopped_early: str | None = None
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
    memory: Memory | None = None
    energy: Energy | None = None
    utilization: Utilization | None = None
    metrics: Metrics | None = None
    curve: list[CurvePoint] = Field(default_factory=list)
    evaluation: Evaluation | None = None
    phases: Phases | None = None
    shapes: Shapes | None = None
    xla: Xla | None = None
    distributed: Distributed | None = None
    profile: Profile | None = None
    neuron_profile: NeuronProfile | None = None
    time_to_accuracy: dict[str, Crossing] = Field(default_factory=dict)  # per target, as "0.90"
    optimizer: Optimizer | None = None
    token_stats: TokenStats | None = None
    runner: Runner | None = None
    oversubscribed: bool | None = None
    saved_to: str | None = None
    fixture: bool | None = None  # True: a hand-made record of the tests, left out of the report


class RecordError(OSError):
    """A record cannot be read or written; the message names the path and why."""


def now() -> str:
    """Return the current UTC time as an ISO-8601 string."""
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def slug(text: str) -> str:
    """Return `text` as a file-name-safe lower-case slug."""
    return re.sub(r"[^a-z0-9.]+", "-", text.lower().replace("(r)", "").replace("(tm)", "")).strip("-.")


def start(run_name: str, params: dict, given: list[str], device: dict, suite: str | None = None) -> RunRecord:
    """Return a new record of a run starting now (ids, host, Python, library versions); failed until it ends."""
    versions = {}
    for name in LIBRARIES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return RunRecord(
        run_name=run_name,
        suite=suite,
        started_at=now(),
        host=socket.gethostname(),
        python=platform.python_version(),
        libraries=versions,
        params=params,
        params_given=sorted(given),
        device=device,
    )


def failure_status(error_text: str) -> Status:
    """Return 'oom' when an error text says a device or the host ran out of memory, else 'failed'."""
    return "oom" if any(m in error_text.lower() for m in OOM_MARKERS) else "failed"


def failed(rec: RunRecord, err: BaseException) -> None:
    """Mark how a run ended on an exception: interrupted (Ctrl-C), oom (CUDA, the host or XLA said so) or failed."""
    rec.error = f"{type(err).__name__}: {err}"
    rec.status = "interrupted" if isinstance(err, KeyboardInterrupt) else failure_status(rec.error)


def base_path(results: str | Path, suite: str | None, run_name: str, device_key: str) -> Path:
    """Return the first file a run's record takes: <results>/<suite or adhoc>/<run_name>@<device key>.json."""
    return repo_path(results) / (suite or ADHOC) / f"{run_name}@{device_key}.json"


def paths_of(base: Path) -> list[Path]:
    """Return the files of every run of one name on one device, oldest first (base, then .run2, .run3...)."""
    later = base.parent.glob(f"{glob_escape(base.stem)}.run*.json")
    numbered = sorted((int(m.group(1)), p) for p in later if (m := re.fullmatch(r".*\.run(\d+)\.json", p.name)))
    return ([base] if base.is_file() else []) + [p for _, p in numbered]


def glob_escape(text: str) -> str:
    """Return `text` with glob's special characters bracketed."""
    return re.sub(r"([*?\[])", r"[\1]", text)


def newest(results: str | Path, suite: str | None, run_name: str) -> dict:
    """Return the newest valid record of `run_name` in its folder, on any device (what torchrun's rank 0 wrote)."""
    found, _ = read(repo_path(results) / (suite or ADHOC))
    mine = [r for r in found if r["run_name"] == run_name]
    if not mine:
        raise RecordError(f"no record of {run_name!r} in {repo_path(results) / (suite or ADHOC)}")
    return max(mine, key=lambda r: os.stat(r["_source"]).st_mtime)


def check_folder(folder: str | Path, what: str = "results_path") -> Path:
    """Create `folder` and check a file can be written there with room to spare; raise RecordError naming it."""
    folder = Path(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe = folder / f".probe-{secrets.token_hex(4)}"
        probe.touch()
        probe.unlink()
        free = os.statvfs(folder).f_bavail * os.statvfs(folder).f_frsize
    except OSError as err:
        raise RecordError(f"{what}={str(folder)!r} cannot hold files ({err.strerror or err}): give a writable folder")
    if free < MIN_FREE_BYTES:
        raise RecordError(f"{what}={str(folder)!r} has {free} bytes free: free some space or give another folder")
    return folder


def as_json(record: RunRecord) -> dict:
    """Return `record` as its file's JSON data: the sections set, None left out."""
    data = record.model_dump(mode="json", exclude_none=True, by_alias=True)
    return {"schema_version": SCHEMA_VERSION, **data}


def json_text(data: Any) -> str:
    """Return JSON data as a record file holds it (sorted keys, NaN as null)."""
    return json.dumps(data, indent=1, sort_keys=True, default=str) + "\n"


def write(record: RunRecord, base: Path) -> Path:
    """Write `record` whole to `base`, or to the next free .runN file beside it; never replace a file. Return it."""
    text = json_text(as_json(record))
    tmp = base.with_name(f".{base.name}.{secrets.token_hex(4)}.tmp")
    try:
        base.parent.mkdir(parents=True, exist_ok=True)
        with open(tmp, "x", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        for n in range(1, 10_000):
            path = base if n == 1 else base.with_name(f"{base.stem}.run{n}.json")
            try:
                os.link(tmp, path)  # fails where a file exists: two runs of one name never meet in one file
                return path
            except FileExistsError:
                continue
        raise RecordError(f"{base.parent} holds 9,999 runs of {base.stem}: move some away")
    except OSError as err:
        raise RecordError(f"could not write {base} ({err.strerror or err}); nothing was replaced") from err
    finally:
        with contextlib.suppress(OSError):  # a folder that is a file holds no temporary file either
            tmp.unlink(missing_ok=True)


_runs_in_process = 0


def finish(rec: RunRecord, base: Path, t0: float, lead: bool = True) -> dict:
    """Complete the record (end time, where the wall went), write it (rank 0) and say where; return it as JSON data."""
    import psutil

    global _runs_in_process
    run_s = time.perf_counter() - t0
    # the first run of a process counts from the process's start (interpreter, imports, a notebook kernel's start
    # and whatever came before its cells ran); a later run of the same process from its own start
    startup = max(0.0, time.time() - psutil.Process().create_time() - run_s) if not _runs_in_process else 0.0
    _runs_in_process += 1
    wall = startup + run_s
    phases = rec.phases or Phases()
    measured = sum(v for k, v in phases.model_dump(exclude_none=True).items() if k not in ("reason", "periodic_evals"))
    other = max(0.0, wall - startup - measured)
    rec.phases = phases.model_copy(
        update={"startup": startup, "wall": wall, "other": other, "periodic_evals": len(rec.curve)}
    )
    rec.finished_at = now()
    data = as_json(rec)
    if not lead:
        return data
    try:
        path = write(rec, base)
    except RecordError as err:  # never lost: the whole record on stderr, and in the working folder if it takes it
        print(json_text(data), file=sys.stderr)
        try:
            path = write(rec, Path.cwd() / base.name)
        except RecordError:
            path = None
        print(
            f"record NOT written to {base}: {err}; " + (f"saved to {path}" if path else "printed above"),
            file=sys.stderr,
        )
    print(headline(data) + f"\nrecord: {rec.status}, written to {path}", flush=True)
    return {**data, "_source": str(path)}


def validate(obj: Any) -> tuple[dict | None, str | None]:
    """Return (the record as JSON data, None), or (None, why it is not a record this code reads)."""
    if not isinstance(obj, dict):
        return None, "not a JSON object"
    version = obj.get("schema_version")
    if version != SCHEMA_VERSION:
        newer = isinstance(version, int) and not isinstance(version, bool) and version > SCHEMA_VERSION
        return None, (
            f"schema_version {version!r} is newer than this code reads ({SCHEMA_VERSION}): update the code"
            if newer
            else f"schema_version {version!r} is not {SCHEMA_VERSION} (scripts/migrate_records.py upgrades older)"
        )
    try:
        return as_json(RunRecord.model_validate(obj)), None
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "record"
        return None, f"{where}: {first['msg']} ({err.error_count()} problem(s))"
    except (TypeError, ValueError, RecursionError) as err:
        return None, f"not a record ({type(err).__name__})"


def read_json(path: Path) -> Any:
    """Return the JSON value in the regular file `path`; raise RecordError saying why it holds none."""
    if not path.is_file():  # a FIFO is never opened: reading one would wait forever
        raise RecordError(f"{path}: " + ("missing" if not path.exists() else "not a regular file"))
    try:
        return json.loads(path.read_bytes())
    except OSError as err:
        raise RecordError(f"{path}: unreadable ({err.strerror or err})") from err
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise RecordError(f"{path}: empty, cut short or not JSON") from None


def read(root: str | Path) -> tuple[list[dict], Counter]:
    """Return every valid record at or below `root` (each with its file in `_source`) and the skipped, with why."""
    root = repo_path(root)
    files = (
        [root]
        if root.is_file()
        else sorted(
            p
            for p in root.rglob("*.json")
            if not any(part.startswith(("_", ".")) for part in p.relative_to(root).parts)
        )
    )
    found, skipped = [], Counter()
    for path in files:
        try:
            valid, why = validate(read_json(path))
        except RecordError as err:
            valid, why = None, str(err).removeprefix(f"{path}: ")
        if why:
            skipped[f"{path.relative_to(root) if path != root else path.name}: {why}"] += 1
        else:
            found.append({**valid, "_source": str(path)})
    return found, skipped


def headline(rec: dict) -> str:
    """Return the record's headline figures in a few lines."""
    t, m, dev = rec.get("timing") or {}, rec.get("metrics") or {}, rec.get("device") or {}
    lines = [
        f"{rec['run_name']}: {rec['status']} on {dev.get('name')} ({dev.get('key')}), "
        f"precision {(rec.get('precision') or {}).get('used')}"
    ]
    if t.get("samples_per_s"):
        lines.append(
            f"  training {t['train_time_s']:.1f} s, {t['samples_per_s']:.1f} samples/s steady, "
            f"step {t['step_time_median_s'] * 1000:.1f} ms (median)"
        )
    if m.get("test_accuracy") is not None:
        lines.append(f"  test accuracy {m['test_accuracy']:.2%}, macro-F1 {m['test_macro_f1']:.4f}")
    ninety = (rec.get("time_to_accuracy") or {}).get("0.90") or {}
    if ninety.get("train_time_s") is not None:
        lines.append(f"  90% validation accuracy at step {ninety['step']}, {ninety['train_time_s']:.0f} s of training")
    phases = rec.get("phases") or {}
    if phases.get("wall"):
        parts = ", ".join(f"{k} {v:.1f}" for k, v in phases.items() if k not in ("wall", "periodic_evals") and v)
        lines.append(f"  wall {phases['wall']:.1f} s = {parts}")
    if rec.get("error"):
        lines.append(f"  error: {str(rec['error']).splitlines()[0][:300]}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    """Print the headline of a record file, or of the newest record below a folder (or write the JSON Schema)."""
    parser = argparse.ArgumentParser(prog="python -m helpers.record", description=main.__doc__)
    parser.add_argument("path", nargs="?", default=RESULTS_DIR, help="a record file or a results folder")
    parser.add_argument("--run", help="only records of this run name")
    parser.add_argument("--schema", action="store_true", help=f"write {SCHEMA_FILE.name} and stop")
    args = parser.parse_args(argv)
    if args.schema:
        SCHEMA_FILE.write_text(json.dumps(RunRecord.model_json_schema(), indent=1, sort_keys=True) + "\n")
        return print(f"wrote {SCHEMA_FILE}")
    found, skipped = read(args.path)
    found = [r for r in found if args.run in (None, r["run_name"])]
    if not found:
        raise SystemExit(f"no record{' of ' + args.run if args.run else ''} in {repo_path(args.path)}")
    newest = max(found, key=lambda r: os.stat(r["_source"]).st_mtime)
    print(headline(newest) + f"\n  record: {newest['_source']}")


if __name__ == "__main__":
    main()
