"""The arguments of a run: typed dataclasses grouped by concern, each checking its own fields, and presets.

    args = build_args({"model_name": "minilm", "batch": 32})   # notebooks, suites, the benchmark
    args.task.max_length, args.train.batch, args.measure.results_path, args.neuron.optlevel

(helpers/run/argv.py reads them from a command line or a notebook's globals, into build_args.)

TaskArgs is what is trained, TrainArgs how, MeasureArgs how it is measured and where it reports,
NeuronArgs what only Neuron / XLA reads. Each field has its type (Literal for choices), default and help
here; the scripts also accept the Hugging Face examples' names (`aliases`). Each dataclass checks its
fields in __post_init__ (RunArgs what only clashes across groups): no instance holds a bad value.
`build_args` refuses unknown names (suggesting the closest), turns papermill / TOML strings into the
field's type (coerce.py), merges the preset *under* the names the caller gave, and builds the frozen
dataclasses with HfArgumentParser.parse_dict.
"""
from __future__ import annotations

import dataclasses
import difflib
import functools
import math
import shlex
import typing
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Iterable, Literal, Mapping

from helpers.run.checks import check_declared, positive, safe_name
from helpers.run.coerce import ConfigError, coerce

REPO_ROOT = Path(__file__).resolve().parents[2]
RESULTS_DIR = "Experiment/results"


def repo_path(path: str | Path) -> Path:
    """Return `path` as is when absolute, else relative to the repository root (not the cwd)."""
    path = Path(path)
    return path if path.is_absolute() else REPO_ROOT / path


# Choice lists, one copy each: the fields below and helpers/cli.py's EvalArgs use these types,
# and every "allowed ..." message reads them with typing.get_args.
Padding = Literal["static", "dynamic"]
Precision = Literal["auto", "bf16", "fp16", "fp32", "bf16-pure", "bf16-pure-sr"]
Device = Literal["auto", "cuda", "cpu", "xla"]


def arg(default: Any, help: str, aliases: tuple[str, ...] = ()) -> Any:
    """Return a dataclass field with its help text and the scripts' alternative flag names."""
    meta = {"help": help, **({"aliases": list(aliases)} if aliases else {})}
    return field(default=default, metadata=meta)


@dataclass(frozen=True)
class TaskArgs:
    """What is trained: the model, the data and how it is cut into tokens."""

    model_name: str = arg("bert-base-uncased", "hub id, local folder, or offline alias minilm / "
                          "bert-base-random", ("--model_name_or_path",))
    data_dir: str | None = arg(None, "folder of train/validation/test.jsonl; None: $EMOTION_DATA_DIR, "
                               "else the hub")
    train_subset: int | None = arg(None, "first N training rows; None: all 16,000", ("--max_train_samples",))
    eval_subset: int | None = arg(None, "first N validation and test rows; None: all 2,000",
                                  ("--max_eval_samples",))
    shuffle_subset: bool = arg(False, "take the subsets after a seeded shuffle instead of the first rows")
    drop_bad_rows: bool = arg(False, "drop (and count) malformed data rows instead of stopping")
    max_length: int = arg(128, "tokens per sequence; static padding pads every batch to it",
                          ("--max_seq_length", "--train_max_length"))
    padding: Padding = arg("static", "static: pad to max_length; dynamic: pad to the longest row of each batch")
    pad_to_multiple_of: int | None = arg(None, "dynamic padding only: round each batch's length up")
    group_by_length: bool = arg(False, "dynamic padding only: batches of rows of similar length "
                                "(transformers' LengthGroupedSampler), less padding")
    # issue 28: LoRA through peft (helpers/run/lora.py)
    lora_r: int = arg(0, "LoRA rank; 0: full fine-tuning")
    lora_alpha: int = arg(16, "LoRA scaling numerator (adapter output x alpha / r)")
    lora_dropout: float = arg(0.0, "dropout on the LoRA adapters' input")
    lora_targets: str = arg("query,value", "linears given adapters: all-linear, or a comma list of query, key, "
                            "value, attention_output, ffn_up, ffn_down")

    def __post_init__(self) -> None:
        """Refuse a value outside what a run accepts (ConfigError naming the parameter)."""
        check_declared(self)
        positive(self, "train_subset", "eval_subset", "pad_to_multiple_of")
        if self.max_length <= 2:
            raise ConfigError(f"max_length={self.max_length} is invalid: must be > 2 ([CLS] and [SEP] take two "
                              "tokens) and at most the model's position limit")
        if self.padding == "static" and self.group_by_length:
            raise ConfigError("group_by_length=True applies to padding='dynamic' only: static batches are "
                              "all max_length long, so grouping saves nothing")
        if self.padding == "static" and self.pad_to_multiple_of is not None:
            raise ConfigError("pad_to_multiple_of applies to padding='dynamic' only; static padding always "
                              "pads to max_length")
        if self.lora_r < 0 or self.lora_alpha <= 0 or not 0.0 <= self.lora_dropout < 1.0:
            bad = "lora_r" if self.lora_r < 0 else "lora_alpha" if self.lora_alpha <= 0 else "lora_dropout"
            raise ConfigError(f"{bad}={getattr(self, bad)!r} is invalid: lora_r >= 0 (0: full fine-tuning), "
                              "lora_alpha > 0, 0 <= lora_dropout < 1")


@dataclass(frozen=True)
class TrainArgs:
    """How it trains: batch, optimizer, schedule, precision, device."""

    batch: int = arg(8, "training batch per device (per torchrun rank)", ("--per_device_train_batch_size",))
    lr: float = arg(2e-5, "peak AdamW learning rate", ("--learning_rate",))
    llrd_decay: float | None = arg(None, "layer-wise LR decay in (0, 1]: head at lr, layer i at "
                                   "lr*d^(N-i), embeddings at lr*d^(N+1); None: one flat LR")
    epochs: int = arg(3, "passes over the training split", ("--num_train_epochs",))
    max_steps: int | None = arg(None, "stop after this many optimizer steps")
    weight_decay: float = arg(0.01, "AdamW weight decay (not on biases and LayerNorm)")
    warmup_ratio: float = arg(0.1, "share of the steps with a linear LR warm-up")
    max_grad_norm: float | None = arg(1.0, "gradient clipping norm; None: no clipping")
    gradient_accumulation_steps: int = arg(1, "micro-batches per optimizer step; an epoch's last batches "
                                              "that do not fill a step are left out")
    gradient_checkpointing: bool = arg(False, "recompute activations in backward (on XLA and Neuron through "
                                               "torch_xla.utils.checkpoint)")
    # fused by default, as Trainer's is with torch >= 2.8 (#38): the for-loop's update to float tolerance
    # (tests/run/test_optim.py); its optimizer step alone 4.6x as fast on MiniLM, the whole step's gain not
    # resolved on a loaded machine (BENCHMARKS.md, "Where a run's wall goes")
    optim: Literal["adamw_torch", "adamw_torch_foreach", "adamw_torch_fused"] = arg(
        "adamw_torch_fused", "AdamW implementation (fused / foreach: CPU and CUDA only)")
    precision: Precision = arg("auto", "auto: bf16 on GPUs with bf16 and on Neuron, else fp16 on GPUs; on a CPU "
                               "bf16 autocast where a paired probe finds it at least 1.1x as fast as fp32, else fp32")
    compile: bool = arg(False, "torch.compile the model (inductor; openxla on XLA)")
    seed: int = arg(42, "seed of the head, the data order and everything random")
    preset: Literal["none", "baseline", "optimized"] = arg(
        "none", "the study's configurations; fill in only the parameters not given")
    device: Device = arg("auto", "auto: CUDA, else Neuron, else the CPU")
    num_devices: int = arg(1, "> 1: data parallel, one torchrun rank per device")
    # issue 29: more CPU ranks than cores only when asked, and the record says so
    allow_oversubscribe: bool = arg(False, "on a CPU, allow num_devices above the cores (ranks then share cores; "
                                    "the record is marked oversubscribed)")
    # issue 26: the study's gradient-checkpointing claim, tested rather than refused

    def __post_init__(self) -> None:
        """Refuse a value outside what a run accepts (ConfigError naming the parameter)."""
        check_declared(self)
        positive(self, "batch", "lr", "epochs", "max_steps", "max_grad_norm", "gradient_accumulation_steps",
                 "num_devices")
        if self.llrd_decay is not None and not 0 < self.llrd_decay <= 1:  # False for NaN too
            raise ConfigError(f"llrd_decay={self.llrd_decay} is invalid: must be in (0, 1], or None for one flat LR")
        if not (math.isfinite(self.weight_decay) and self.weight_decay >= 0):
            raise ConfigError(f"weight_decay={self.weight_decay} is invalid: must be a finite number >= 0")
        if not 0 <= self.warmup_ratio < 1:
            raise ConfigError(f"warmup_ratio={self.warmup_ratio} is invalid: must be in [0, 1)")
        if not 0 <= self.seed <= 2**32 - 1:
            raise ConfigError(f"seed={self.seed} is invalid: must be in 0..{2**32 - 1} (numpy's seed range)")


@dataclass(frozen=True)
class MeasureArgs:
    """How the run is measured and where it reports."""

    log_every: int = arg(50, "optimizer steps per timing window: the loss is read and the device "
                         "synced once per window", ("--logging_steps",))
    timing_warmup_steps: int = arg(3, "first steps timed apart from the steady state (compilation, "
                                   "allocator warm-up)")
    eval_every: int | None = arg(None, "evaluate on `curve_rows` validation rows every N optimizer steps "
                                 "(outside the timed windows): time to accuracy")
    curve_rows: int | None = arg(None, "validation rows of each periodic evaluation (eval_every); None: the "
                                 "whole split (2,000 rows: time to accuracy is read on it)")
    stop_at_accuracy: float | None = arg(None, "end training at the first periodic evaluation (eval_every) at or "
                                         "above this validation accuracy, in (0, 1]; None: never stop early")
    diverge_factor: float = arg(10.0, "a window's loss above this many times the first window's ends "
                                "the run as diverged")
    profile: bool = arg(False, "profile a steady-state window (trace + time per op class)")
    profile_steps: int = arg(5, "optimizer steps in the profiled window")
    profile_dir: str = arg("Experiment/profiles", "traces go to <profile_dir>/<run_name>/")
    progress: bool = arg(True, "progress bars while training; False: a loss line per timing window instead (logs)")
    results_path: str = arg(RESULTS_DIR, "folder of the run records: <results_path>/<suite or adhoc>/"
                            "<run_name>@<device>.json (an old .../runs.jsonl value means its folder)")
    run_name: str | None = arg(None, "name of the run (letters, digits, the equals sign and . _ , + - "
                               "only); None: built from the parameters")
    suite: str | None = arg(None, "suite the run belongs to (set by the sweep)")
    save_dir: str | None = arg(None, "save the fine-tuned model and tokenizer here", ("--output_dir",))
    # issue 29: one run per name at a time
    replace_record: bool = arg(False, "run even though a finished record of this run_name exists on this "
                               "device (it is replaced); False: refused before training")

    def __post_init__(self) -> None:
        """Refuse a value outside what a run accepts (ConfigError naming the parameter)."""
        check_declared(self)
        positive(self, "log_every", "profile_steps", "eval_every", "curve_rows")
        if self.stop_at_accuracy is not None and not (0 < self.stop_at_accuracy <= 1 and self.eval_every):
            raise ConfigError(f"stop_at_accuracy={self.stop_at_accuracy} is invalid: give an accuracy in (0, 1] and "
                              "eval_every (it is read at the periodic evaluations), or None: never stop early")
        safe_name(self, "run_name", "suite")
        if not (math.isfinite(self.diverge_factor) and self.diverge_factor > 1):
            raise ConfigError(f"diverge_factor={self.diverge_factor} is invalid: must be a finite number > 1")
        if self.timing_warmup_steps < 0:
            raise ConfigError(f"timing_warmup_steps={self.timing_warmup_steps} is invalid: must be >= 0")
        if not self.results_path.strip():
            raise ConfigError("results_path='' is invalid: give the folder of the run records")


@dataclass(frozen=True)
class NeuronArgs:
    """What only the Neuron / XLA path reads (ignored on CUDA and the CPU)."""

    optlevel: Literal[1, 2, 3] = arg(2, "neuronx-cc --optlevel")
    model_type: Literal["transformer", "none"] = arg("transformer", "neuronx-cc --model-type")
    distribution_strategy: Literal["llm-training", "none"] = arg("none", "neuronx-cc "
                                                                 "--distribution-strategy")
    extra_cc_flags: str = arg("", "appended to NEURON_CC_FLAGS as is")
    stochastic_rounding: bool = arg(False, "NEURON_RT_STOCHASTIC_ROUNDING_EN (on for bf16-pure-sr too)")
    bf16_mode: Literal["autocast", "xla_use_bf16", "fp32"] = arg(
        "autocast", "autocast: precision decides; xla_use_bf16: the deprecated XLA_USE_BF16 set to 1 "
                    "(all bf16: not AdamW, its second moment never decays); fp32")
    num_cores: int = arg(1, "NeuronCores: one per process; more cores: num_devices torchrun ranks")
    neuron_cache_dir: str | None = arg(None, "Neuron compile cache (--cache_dir); None: "
                                       "/var/tmp/neuron-compile-cache")
    xla_cache_dir: str | None = arg(None, "torch-xla persistent compilation cache (XLA without Neuron); None: "
                                    "off (torch-xla 2.9's CPU backend cannot load what it writes)")
    xla_fast_compile: bool = arg(False, "XLA on the CPU (no Neuron): compile at "
                                 "--xla_backend_optimization_level 0: graphs compile ~2x faster but run 4-6x "
                                 "slower, a gain for tiny models only (same graphs, same results)")

    def __post_init__(self) -> None:
        """Refuse a value outside what a run accepts (ConfigError naming the parameter)."""
        check_declared(self)
        positive(self, "num_cores")
        try:
            shlex.split(self.extra_cc_flags)  # how neuron.neuron_cc_flags reads them
        except ValueError as err:
            raise ConfigError(f"extra_cc_flags={self.extra_cc_flags!r} is invalid: {err} (the flags are split as "
                              "a shell would: close each quote, or escape it)") from None


GROUPS = {"task": TaskArgs, "train": TrainArgs, "measure": MeasureArgs, "neuron": NeuronArgs}
FIELDS: dict[str, tuple[str, dataclasses.Field]] = {
    f.name: (group, f) for group, cls in GROUPS.items() for f in fields(cls)}
HINTS = {name: hint for cls in GROUPS.values() for name, hint in typing.get_type_hints(cls).items()}
ALIASES = {a.lstrip("-"): name for name, (_, f) in FIELDS.items() for a in f.metadata.get("aliases", ())}

# The study's two configurations (report 5.8): merged under the names the caller gave.
PRESETS: dict[str, dict[str, Any]] = {
    "none": {},
    "baseline": dict(batch=8, max_length=128, lr=2e-5, llrd_decay=None, padding="static",
                     precision="fp32", optim="adamw_torch"),
    "optimized": dict(batch=64, max_length=32, lr=1.5e-4, llrd_decay=0.95, padding="static",
                      precision="auto", optim="adamw_torch_fused", log_every=100),
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
        """Refuse values of different groups that are fine alone but not together (each group checks its own)."""
        settings = sorted({"lora_alpha", "lora_dropout", "lora_targets"} & self.given)
        if self.task.lora_r == 0 and settings:
            raise ConfigError(f"{settings[0]} is given with lora_r=0 (full fine-tuning), which has no adapters: give "
                              f"lora_r > 0 for LoRA, or leave out {', '.join(settings)}")
        num_cores = self.neuron.num_cores
        if num_cores not in (1, self.train.num_devices):
            raise ConfigError(f"num_cores={num_cores} is invalid with num_devices={self.train.num_devices}: one "
                              f"process drives one NeuronCore, so a single process would hold {num_cores} cores "
                              f"and use one; set num_devices={num_cores} (one torchrun rank per core)")

    def flat(self) -> dict[str, Any]:
        """Return every argument by name (the notebooks' parameter names), JSON-serialisable."""
        return {f.name: getattr(getattr(self, g), f.name) for g, cls in GROUPS.items() for f in fields(cls)}

    def with_values(self, **values: Any) -> "RunArgs":
        """Return a copy with `values` given (by parameter name), checked like the rest."""
        return build_args({**{k: self.flat()[k] for k in self.given}, **values},
                          given=self.given | set(values))


def build_args(values: Mapping[str, Any], given: Iterable[str] | None = None) -> RunArgs:
    """Return checked arguments from a mapping of parameter names; `given` (default: every name in
    `values`) are the caller's, and the preset fills the parameters outside it. Raise ConfigError."""
    unknown = [name for name in values if name not in FIELDS]
    if unknown:
        raise ConfigError(unknown_message(unknown[0]))
    given = set(values) if given is None else set(given)
    typed = {name: coerce(value, HINTS[name]) for name, value in values.items()}
    preset = preset_values(typed.get("preset", TrainArgs.preset))
    merged = {**typed, **{k: v for k, v in preset.items() if k not in given}}
    groups = dict_parser().parse_dict(merged)  # each group's __post_init__ checks its fields
    return RunArgs(**dict(zip(GROUPS, groups)), given=frozenset(given & set(FIELDS)))


@functools.cache
def dict_parser() -> Any:
    """Return the HfArgumentParser of the four groups (parse_dict only: nothing changes it)."""
    from helpers.run.parser import ArgParser  # imports transformers: only when arguments are first built

    return ArgParser(GROUPS.values())


def preset_values(name: Any) -> dict[str, Any]:
    """Return the values of the preset `name`; ConfigError for an unknown one."""
    if name not in PRESETS:
        raise ConfigError(f"preset={name!r} is unknown: allowed {', '.join(PRESETS)}")
    return PRESETS[name]


def unknown_message(name: str) -> str:
    """Return the error for an unknown parameter name, with the closest known name."""
    if name in ALIASES:
        return (f"unknown parameter {name!r}: that is the scripts' (Hugging Face) name for "
                f"{ALIASES[name]!r}; in a notebook or a suite write {ALIASES[name]!r}")
    close = difflib.get_close_matches(name, list(FIELDS) + list(ALIASES), n=1, cutoff=0.6)
    hint = f" did you mean {ALIASES.get(close[0], close[0])!r}?" if close else ""
    return f"unknown parameter {name!r}:{hint} (every parameter: python Nvidia/train.py --help)"


def results_dir(args: RunArgs) -> Path:
    """Return the records folder: results_path, or the folder of an old `.../runs.jsonl` value."""
    path = repo_path(args.measure.results_path)
    return path.parent if path.suffix == ".jsonl" else path
