"""The arguments of a run: pydantic dataclasses grouped by concern, the presets, and `build_args`.

    args = build_args({"model_name": "minilm", "batch": 32})   # notebooks, suites, the benchmark
    args.task.max_length, args.train.batch, args.measure.results_path, args.neuron.optlevel

TaskArgs is what is trained, TrainArgs how, MeasureArgs how it is measured and where it reports, NeuronArgs
what only Neuron / XLA reads; RunArgs refuses what clashes across them. A value is converted to its field's
type (the text "64" or a TOML 64.0 to 64, the text "None" to None where allowed) and checked as a group is
built: no instance holds a bad value. helpers/run/argv.py reads a command line or a notebook's globals.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar, Union, get_args, get_origin

import pydantic
from pydantic import (
    BeforeValidator,
    Field,
    NonNegativeFloat,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    StringConstraints,
)

from helpers.run.paths import RESULTS_DIR, repo_path


class ConfigError(ValueError):
    """A parameter has a value outside what the run accepts; the message names both."""


def none_text(value: Any) -> Any:
    """Return None for the text None / none / null or no text (TOML has no null; a command line only text)."""
    return None if isinstance(value, str) and value.strip() in ("None", "none", "null", "") else value


T = TypeVar("T")
Maybe = Annotated[T | None, BeforeValidator(none_text)]  # a value of type T, or None (also written as text)

# Choice lists, one copy each: the fields below and helpers/check.py use these types, and
# pydantic's "Input should be ..." message lists them.
Padding = Literal["static", "dynamic"]
Precision = Literal["auto", "bf16", "fp16", "fp32", "bf16-pure", "bf16-pure-sr"]
Device = Literal["auto", "cuda", "cpu", "xla"]
StepMode = Literal["eager", "compile", "cudagraphs"]
RECOMPILE_LIMIT = 8  # torch._dynamo.config.recompile_limit's default: graphs of one function before it runs eager
# the six linears of an encoder layer, by role (helpers/run/lora.py maps them to each architecture's names)
LORA_ROLES = ("query", "key", "value", "attention_output", "ffn_up", "ffn_down")
Share = Annotated[float, Field(ge=0, lt=1)]  # a fraction in [0, 1)
SafeName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9._=,+-]{0,199}$")]  # a file name
# every float finite; a number given for a text field (papermill's `-p run_name 42`) read as its text
CHECKED = pydantic.ConfigDict(allow_inf_nan=False, coerce_numbers_to_str=True)


def arg(default: Any, help: str, aliases: tuple[str, ...] = ()) -> Any:
    """Return a dataclass field with its help text and the scripts' alternative flag names."""
    meta = {"help": help, **({"aliases": list(aliases)} if aliases else {})}
    return field(default=default, metadata=meta)


def lora_roles(targets: str) -> tuple[str, ...]:
    """Return the roles `targets` names ('all-linear' or a comma list of LORA_ROLES), in LORA_ROLES order."""
    if targets.strip() == "all-linear":
        return LORA_ROLES
    names = {n.strip() for n in targets.split(",") if n.strip()}
    if names - set(LORA_ROLES) or not names:
        raise ConfigError(
            f"lora_targets={targets!r} is invalid: expected 'all-linear' or a comma list of {', '.join(LORA_ROLES)}"
        )
    return tuple(r for r in LORA_ROLES if r in names)


@pydantic.dataclasses.dataclass(frozen=True, config=CHECKED)
class TaskArgs:
    """What is trained: the model, the data and how it is cut into tokens."""

    model_name: str = arg(
        "bert-base-uncased",
        "hub id, local folder, or offline alias minilm / bert-base-random",
        ("--model_name_or_path",),
    )
    data_dir: Maybe[str] = arg(None, "folder of train/validation/test.jsonl; None: $EMOTION_DATA_DIR, else the hub")
    train_subset: Maybe[PositiveInt] = arg(None, "first N training rows; None: all 16,000", ("--max_train_samples",))
    eval_subset: Maybe[PositiveInt] = arg(
        None, "first N validation and test rows; None: all 2,000", ("--max_eval_samples",)
    )
    shuffle_subset: bool = arg(False, "take the subsets after a seeded shuffle instead of the first rows")
    drop_bad_rows: bool = arg(False, "drop (and count) malformed data rows instead of stopping")
    max_length: Annotated[int, Field(gt=2)] = arg(
        128,
        "tokens per sequence, > 2 ([CLS] and [SEP] take two) and at most the model's position limit; "
        "static padding pads every batch to it",
        ("--max_seq_length", "--train_max_length"),
    )
    padding: Padding = arg("static", "static: pad to max_length; dynamic: pad to the longest row of each batch")
    pad_to_multiple_of: Maybe[PositiveInt] = arg(None, "dynamic padding only: round each batch's length up")
    group_by_length: bool = arg(
        False,
        "dynamic padding only: batches of rows of similar length (transformers' LengthGroupedSampler), less padding",
    )
    # LoRA through peft (helpers/run/lora.py)
    lora_r: NonNegativeInt = arg(0, "LoRA rank; 0: full fine-tuning")
    lora_alpha: PositiveInt = arg(16, "LoRA scaling numerator (adapter output x alpha / r)")
    lora_dropout: Share = arg(0.0, "dropout on the LoRA adapters' input")
    lora_targets: str = arg(
        "query,value",
        "linears given adapters: all-linear, or a comma list of query, key, value, attention_output, ffn_up, ffn_down",
    )

    @pydantic.field_validator("lora_targets")
    @classmethod
    def _known_roles(cls, targets: str) -> str:
        """Refuse LoRA targets other than all-linear or a comma list of LORA_ROLES."""
        lora_roles(targets)
        return targets

    def __post_init__(self) -> None:
        """Refuse padding settings that have no effect with static padding."""
        if self.padding == "static" and self.group_by_length:
            raise ConfigError(
                "group_by_length=True applies to padding='dynamic' only: static batches are "
                "all max_length long, so grouping saves nothing"
            )
        if self.padding == "static" and self.pad_to_multiple_of is not None:
            raise ConfigError(
                "pad_to_multiple_of applies to padding='dynamic' only; static padding always pads to max_length"
            )

    def check_positions(self, max_positions: int) -> None:
        """Raise ConfigError when the sequences pad past the model's position embeddings (max_positions)."""
        if self.max_length > max_positions:
            raise ConfigError(
                f"max_length={self.max_length} is above {self.model_name}'s position "
                f"limit ({max_positions}): allowed 3..{max_positions}"
            )
        multiple = self.pad_to_multiple_of
        padded = math.ceil(self.max_length / multiple) * multiple if multiple else self.max_length
        if padded > max_positions:
            raise ConfigError(
                f"pad_to_multiple_of={multiple} rounds max_length={self.max_length} up to "
                f"{padded}, above {self.model_name}'s position limit ({max_positions}): give a "
                f"multiple that divides {max_positions}"
            )


@pydantic.dataclasses.dataclass(frozen=True, config=CHECKED)
class TrainArgs:
    """How it trains: batch, optimizer, schedule, precision, device."""

    batch: PositiveInt = arg(8, "training batch per device (per torchrun rank)", ("--per_device_train_batch_size",))
    lr: PositiveFloat = arg(2e-5, "peak AdamW learning rate", ("--learning_rate",))
    llrd_decay: Maybe[Annotated[float, Field(gt=0, le=1)]] = arg(
        None,
        "layer-wise LR decay in (0, 1]: head at lr, layer i at lr*d^(N-i), embeddings at lr*d^(N+1); None: one flat LR",
    )
    epochs: PositiveInt = arg(3, "passes over the training split", ("--num_train_epochs",))
    max_steps: Maybe[PositiveInt] = arg(None, "stop after this many optimizer steps")
    weight_decay: NonNegativeFloat = arg(0.01, "AdamW weight decay (not on biases and LayerNorm)")
    warmup_ratio: Share = arg(0.1, "share of the steps with a linear LR warm-up")
    max_grad_norm: Maybe[PositiveFloat] = arg(1.0, "gradient clipping norm; None: no clipping")
    gradient_accumulation_steps: PositiveInt = arg(
        1, "micro-batches per optimizer step; an epoch's last batches that do not fill a step are left out"
    )
    gradient_checkpointing: bool = arg(
        False, "recompute activations in backward (on XLA and Neuron through torch_xla.utils.checkpoint)"
    )
    # fused by default, as Trainer's is with torch >= 2.8: the for-loop's update to float tolerance
    # (tests/run/test_optim.py); its optimizer step alone 4.6x as fast on MiniLM, the whole step's gain not
    # resolved on a loaded machine (BENCHMARKS.md, "Where a run's wall goes")
    optim: Literal["adamw_torch", "adamw_torch_foreach", "adamw_torch_fused"] = arg(
        "adamw_torch_fused", "AdamW implementation (fused / foreach: CPU and CUDA only)"
    )
    precision: Precision = arg(
        "auto",
        "auto: bf16 on GPUs with bf16 and on Neuron, else fp16 on GPUs; on "
        "a CPU bf16 autocast where a paired probe finds it at least 1.1x as fast as "
        "fp32, else fp32",
    )
    compile: bool = arg(False, "torch.compile the model (inductor; openxla on XLA)")
    step_mode: StepMode = arg(
        "eager",
        "eager: PyTorch launches each op; compile: the forward/backward and the clip + AdamW update compiled "
        "by torch.compile (inductor), one graph per input shape; cudagraphs: the same graphs captured and "
        "replayed as CUDA graphs (mode reduce-overhead; CUDA only)",
    )
    data_on_device: bool = arg(
        False,
        "place the tokenized training split on the device once and slice each batch there, in the order and "
        "padding the DataLoader gives (no collate, no host-to-device copy per step); CUDA and the CPU",
    )
    seed: Annotated[int, Field(ge=0, le=2**32 - 1)] = arg(  # numpy's seed range
        42, "seed of the head, the data order and everything random"
    )
    preset: Literal["none", "baseline", "optimized"] = arg(
        "none", "the study's configurations; fill in only the parameters not given"
    )
    device: Device = arg("auto", "auto: CUDA, else Neuron, else the CPU")
    num_devices: PositiveInt = arg(1, "> 1: data parallel, one torchrun rank per device")
    allow_oversubscribe: bool = arg(
        False,
        "on a CPU, allow num_devices above the cores (ranks then share cores; the record is marked oversubscribed)",
    )

    def check_device(self, device_type: str) -> None:
        """Raise ConfigError when the step settings cannot run on `device_type` (cuda, cpu, xla; auto: any)."""
        if self.step_mode == "cudagraphs" and device_type in ("cpu", "xla"):
            raise ConfigError(f"step_mode='cudagraphs' needs CUDA, not device={device_type!r}: use step_mode='compile'")
        if device_type == "xla" and (self.data_on_device or self.step_mode != "eager"):
            raise ConfigError(
                "data_on_device and step_mode are for CUDA and the CPU: XLA compiles the step as a graph already "
                "and its loader copies in the background"
            )


@pydantic.dataclasses.dataclass(frozen=True, config=CHECKED)
class MeasureArgs:
    """How the run is measured and where it reports."""

    log_every: PositiveInt = arg(
        50,
        "optimizer steps per timing window: the loss is read and the device synced once per window",
        ("--logging_steps",),
    )
    timing_warmup_steps: NonNegativeInt = arg(
        3, "first steps timed apart from the steady state (compilation, allocator warm-up)"
    )
    eval_every: Maybe[PositiveInt] = arg(
        None,
        "evaluate on `curve_rows` validation rows every N optimizer "
        "steps (outside the timed windows): time to accuracy",
    )
    curve_rows: Maybe[PositiveInt] = arg(
        None,
        "validation rows of each periodic evaluation (eval_every); "
        "None: the whole split (2,000 rows: time to accuracy is read on it)",
    )
    stop_at_accuracy: Maybe[Annotated[float, Field(gt=0, le=1)]] = arg(
        None,
        "end training at the first periodic evaluation (eval_every) at or above this validation "
        "accuracy, in (0, 1]; None: never stop early",
    )
    diverge_factor: Annotated[float, Field(gt=1)] = arg(
        10.0, "a window's loss above this many times the first window's ends the run as diverged"
    )
    profile: bool = arg(False, "profile a steady-state window (trace + time per op class)")
    profile_steps: PositiveInt = arg(5, "optimizer steps in the profiled window")
    profile_dir: str = arg("Experiment/profiles", "traces go to <profile_dir>/<run_name>/")
    progress: bool = arg(True, "progress bars while training; False: a loss line per timing window instead (logs)")
    results_path: Annotated[str, StringConstraints(pattern=r"\S")] = arg(
        RESULTS_DIR,
        "folder of the run records: <results_path>/<suite or adhoc>/<run_name>@<device>.json",
    )
    run_name: Maybe[SafeName] = arg(
        None,
        "name of the run (letters, digits, the equals sign and . _ , + - "
        "only, at most 200, not starting with '.': it becomes a file name); "
        "None: built from the parameters",
    )
    suite: Maybe[SafeName] = arg(None, "suite the run belongs to (set by the sweep; a file name, as run_name)")
    save_dir: Maybe[str] = arg(None, "save the fine-tuned model and tokenizer here", ("--output_dir",))
    replace_record: bool = arg(
        False,
        "run even though a finished record of this run_name exists on this device (a finished rerun "
        "replaces it; a failed or interrupted one is written to _reruns/ beside it); False: refused before training",
    )

    def __post_init__(self) -> None:
        """Refuse an early stop that no periodic evaluation could trigger."""
        if self.stop_at_accuracy is not None and not self.eval_every:
            raise ConfigError(
                f"stop_at_accuracy={self.stop_at_accuracy} is invalid without eval_every (it "
                "is read at the periodic evaluations): give eval_every, or None: never stop "
                "early"
            )


@pydantic.dataclasses.dataclass(frozen=True, config=CHECKED)
class NeuronArgs:
    """What only the Neuron / XLA path reads (ignored on CUDA and the CPU)."""

    optlevel: Literal[1, 2, 3] = arg(2, "neuronx-cc --optlevel")
    model_type: Literal["transformer", "none"] = arg("transformer", "neuronx-cc --model-type")
    distribution_strategy: Literal["llm-training", "none"] = arg("none", "neuronx-cc --distribution-strategy")
    extra_cc_flags: str = arg("", "appended to NEURON_CC_FLAGS as is")
    stochastic_rounding: bool = arg(False, "NEURON_RT_STOCHASTIC_ROUNDING_EN (on for bf16-pure-sr too)")
    bf16_mode: Literal["autocast", "xla_use_bf16", "fp32"] = arg(
        "autocast",
        "autocast: precision decides; xla_use_bf16: the deprecated XLA_USE_BF16 set to 1 "
        "(all bf16: not AdamW, its second moment never decays); fp32",
    )
    num_cores: PositiveInt = arg(1, "NeuronCores: one per process; more cores: num_devices torchrun ranks")
    neuron_cache_dir: Maybe[str] = arg(None, "Neuron compile cache (--cache_dir); None: /var/tmp/neuron-compile-cache")
    xla_cache_dir: Maybe[str] = arg(
        None,
        "torch-xla persistent compilation cache (XLA without Neuron); "
        "None: off (torch-xla 2.9's CPU backend cannot load what it writes)",
    )
    xla_fast_compile: bool = arg(
        False,
        "XLA on the CPU (no Neuron): compile at "
        "--xla_backend_optimization_level 0: graphs compile ~2x faster but run 4-6x "
        "slower, a gain for tiny models only (same graphs, same results)",
    )

    @pydantic.field_validator("extra_cc_flags")
    @classmethod
    def _shell_words(cls, flags: str) -> str:
        """Refuse flags a shell could not split (neuron.neuron_cc_flags splits them with shlex)."""
        try:
            shlex.split(flags)
        except ValueError as err:
            raise ConfigError(
                f"extra_cc_flags={flags!r} is invalid: {err} (the flags are split as a shell "
                "would: close each quote, or escape it)"
            ) from None
        return flags


GROUPS = {"task": TaskArgs, "train": TrainArgs, "measure": MeasureArgs, "neuron": NeuronArgs}
FIELDS: dict[str, tuple[str, dataclasses.Field]] = {
    f.name: (group, f) for group, cls in GROUPS.items() for f in fields(cls)
}
ALIASES = {a.lstrip("-"): name for name, (_, f) in FIELDS.items() for a in f.metadata.get("aliases", ())}

# The study's two configurations (report 5.8): merged under the names the caller gave.
PRESETS: dict[str, dict[str, Any]] = {
    "none": {},
    "baseline": dict(
        batch=8, max_length=128, lr=2e-5, llrd_decay=None, padding="static", precision="fp32", optim="adamw_torch"
    ),
    "optimized": dict(
        batch=64,
        max_length=32,
        lr=1.5e-4,
        llrd_decay=0.95,
        padding="static",
        precision="auto",
        optim="adamw_torch_fused",
        log_every=100,
    ),
}


@dataclass(frozen=True)
class RunArgs:
    """Every argument of one run, by group; `given` names what the caller set (the preset filled the rest)."""

    task: TaskArgs = TaskArgs()
    train: TrainArgs = TrainArgs()
    measure: MeasureArgs = MeasureArgs()
    neuron: NeuronArgs = NeuronArgs()
    given: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        """Refuse values of different groups that are fine alone but not together (each checks its own)."""
        settings = sorted({"lora_alpha", "lora_dropout", "lora_targets"} & self.given)
        if self.task.lora_r == 0 and settings:
            raise ConfigError(
                f"{settings[0]} is given with lora_r=0 (full fine-tuning), which has no "
                f"adapters: give lora_r > 0 for LoRA, or leave out {', '.join(settings)}"
            )
        tr = self.train
        if tr.step_mode != "eager" and tr.compile:
            raise ConfigError(
                f"compile=True is given with step_mode={tr.step_mode!r}, which compiles the model itself: "
                "leave out compile"
            )
        if tr.step_mode != "eager" and tr.precision in ("fp16", "bf16-pure-sr"):
            raise ConfigError(
                f"step_mode={tr.step_mode!r} is invalid with precision={tr.precision!r}: its update reads "
                "back to the host each step (GradScaler's skip, torchao's rounding); use bf16, fp32 or auto"
            )
        if tr.step_mode != "eager" and self.task.padding == "dynamic":
            multiple = self.task.pad_to_multiple_of
            buckets = math.ceil(self.task.max_length / multiple) if multiple else self.task.max_length
            if buckets > RECOMPILE_LIMIT:
                raise ConfigError(
                    f"step_mode={tr.step_mode!r} with padding='dynamic' compiles one graph per padded length: "
                    f"pad_to_multiple_of={multiple} gives up to {buckets} at max_length={self.task.max_length}, "
                    f"above torch.compile's {RECOMPILE_LIMIT} (then it runs eager): give pad_to_multiple_of >= "
                    f"{math.ceil(self.task.max_length / RECOMPILE_LIMIT)}, or padding='static'"
                )
        tr.check_device(tr.device)
        num_cores = self.neuron.num_cores
        if num_cores not in (1, self.train.num_devices):
            raise ConfigError(
                f"num_cores={num_cores} is invalid with num_devices={self.train.num_devices}: "
                f"one process drives one NeuronCore, so a single process would hold "
                f"{num_cores} cores and use one; set num_devices={num_cores} (one torchrun "
                "rank per core)"
            )

    def flat(self) -> dict[str, Any]:
        """Return every argument by name (the notebooks' parameter names), JSON-serialisable."""
        return {f.name: getattr(getattr(self, g), f.name) for g, cls in GROUPS.items() for f in fields(cls)}

    def with_values(self, **values: Any) -> RunArgs:
        """Return a copy with `values` given (by parameter name), checked like the rest."""
        return build_args({**{k: self.flat()[k] for k in self.given}, **values})


def admitted(annotation: Any) -> set[type]:
    """Return the Python types a field's annotation admits (Optional, Annotated and Literal unwrapped)."""
    origin = get_origin(annotation)
    if origin is Literal:
        return {type(v) for v in get_args(annotation)}
    if origin is Annotated:
        return admitted(get_args(annotation)[0])
    if origin is Union:
        return set().union(*(admitted(a) for a in get_args(annotation)))
    return {annotation}


WORDS = {int: "a number", float: "a number", str: "text", type(None): "None"}
ADMITTED = {name: admitted(GROUPS[group].__pydantic_fields__[name].annotation) for name, (group, _) in FIELDS.items()}


def inexact(name: str, value: Any) -> str | None:
    """Return why `value` is not of parameter `name`'s type though pydantic would convert it (True to 1), or None."""
    kinds = ADMITTED[name]
    if isinstance(value, bool) and bool not in kinds:
        words = sorted({WORDS.get(k, k.__name__) for k in kinds})
        return f"{name}={value!r} is invalid: a bool is not {' or '.join(words)}"
    if isinstance(value, float) and str in kinds and not kinds & {int, float}:
        return (
            f"{name}={value!r} is invalid: a number where text is expected, and a number's text is not what was "
            f"typed (papermill's -p reads 1e-4 as 0.0001): give it as text (papermill -r {name} VALUE)"
        )
    return None


def build_args(values: Mapping[str, Any], given: Iterable[str] | None = None) -> RunArgs:
    """Return checked arguments from parameter names; the preset fills what `given` (default: every name) leaves."""
    unknown = [name for name in values if name not in FIELDS]
    if unknown:
        raise ConfigError(unknown_message(unknown[0]))
    given = set(values) if given is None else set(given)
    preset = PRESETS.get(values.get("preset", "none"), {})  # an unknown one is refused by TrainArgs
    merged = {**values, **{k: v for k, v in preset.items() if k not in given}}
    for name, value in merged.items():
        if why := inexact(name, value):
            raise ConfigError(f"{why}. {name}: {FIELDS[name][1].metadata['help']}")
    try:
        groups = {
            group: cls(**{k: v for k, v in merged.items() if FIELDS[k][0] == group}) for group, cls in GROUPS.items()
        }
    except pydantic.ValidationError as err:
        raise config_error(err) from None
    return RunArgs(**groups, given=frozenset(given & set(FIELDS)))


def config_error(err: pydantic.ValidationError) -> ConfigError:
    """Return pydantic's first error as a ConfigError: a check's own, else naming the parameter, value and help."""
    first = err.errors(include_url=False)[0]
    if isinstance(first.get("ctx", {}).get("error"), ConfigError):
        return first["ctx"]["error"]
    name = first["loc"][0]
    return ConfigError(
        f"{name}={first['input']!r} is invalid: {first['msg']}. {name}: {FIELDS[name][1].metadata['help']}"
    )


def unknown_message(name: str) -> str:
    """Return the error for an unknown parameter name, with the closest known name."""
    if name in ALIASES:
        return (
            f"unknown parameter {name!r}: that is the scripts' (Hugging Face) name for "
            f"{ALIASES[name]!r}; in a notebook or a suite write {ALIASES[name]!r}"
        )
    close = difflib.get_close_matches(name, list(FIELDS) + list(ALIASES), n=1, cutoff=0.6)
    hint = f" did you mean {ALIASES.get(close[0], close[0])!r}?" if close else ""
    return f"unknown parameter {name!r}:{hint} (every parameter: python Nvidia/train.py --help)"


def results_dir(args: RunArgs) -> Path:
    """Return the records folder: results_path, relative to the repository root unless absolute."""
    return repo_path(args.measure.results_path)
