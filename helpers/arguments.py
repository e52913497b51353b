"""A run's arguments: one checked dataclass per platform, the study's presets, and the three ways in.

    args = arguments.from_notebook(globals(), arguments.NvidiaArgs)    # a notebook's parameters cell (+ papermill)
    args = arguments.from_cli(sys.argv[1:], arguments.TrainiumArgs)    # train.py (+ torchrun), HF example names too
    args = arguments.build({"model_name": "minilm", "batch": 32}, arguments.NvidiaArgs)   # code, suites, the bench

Every value is converted to its field's type (the text "64" or a TOML 64.0 to 64, "None" to None where allowed)
and checked as the dataclass is built: no instance holds a bad value, and a name nobody knows is refused with the
closest known one. Values fine alone but not together are refused in `__post_init__`; what needs the device (a
CUDA-only step, the precision `auto` resolved to) is refused by `check_device`, before anything is built.
"""

from __future__ import annotations

import ast
import difflib
import math
import shlex
from argparse import Namespace
from collections.abc import Iterable, Mapping
from dataclasses import field, fields
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar, Union, get_args, get_origin

import pydantic
from pydantic import BeforeValidator, Field, NonNegativeFloat, NonNegativeInt, PositiveFloat, PositiveInt

from helpers.record import RESULTS_DIR


class ConfigError(ValueError):
    """A parameter has a value outside what the run accepts; the message names both."""


def none_text(value: Any) -> Any:
    """Return None for the text None / none / null or no text (TOML has no null; a command line only text)."""
    return None if isinstance(value, str) and value.strip() in ("None", "none", "null", "") else value


T = TypeVar("T")
Maybe = Annotated[T | None, BeforeValidator(none_text)]
Share = Annotated[float, Field(ge=0, lt=1)]
SafeName = Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._=,+-]{0,199}$")]  # it becomes a file name
CHECKED = pydantic.ConfigDict(allow_inf_nan=False, coerce_numbers_to_str=True)
RECOMPILE_LIMIT = 8  # torch._dynamo.config.recompile_limit: graphs of one function before it runs eager
LORA_ROLES = ("query", "key", "value", "attention_output", "ffn_up", "ffn_down")


def arg(default: Any, help: str, aliases: tuple[str, ...] = ()) -> Any:
    """Return a dataclass field with its help text and the Hugging Face examples' names for it."""
    return field(default=default, metadata={"help": help, "aliases": [f"--{a}" for a in aliases]})


def lora_roles(targets: str) -> tuple[str, ...]:
    """Return the roles `targets` names ('all-linear' or a comma list of LORA_ROLES), in LORA_ROLES order."""
    if targets.strip() == "all-linear":
        return LORA_ROLES
    names = {n.strip() for n in targets.split(",") if n.strip()}
    if names - set(LORA_ROLES) or not names:
        raise ConfigError(
            f"lora_targets={targets!r} is invalid: 'all-linear' or a comma list of {', '.join(LORA_ROLES)}"
        )
    return tuple(r for r in LORA_ROLES if r in names)


@pydantic.dataclasses.dataclass(frozen=True, config=CHECKED)
class Args:
    """What every platform's run takes: the model and data, how it trains, how it is measured and reported."""

    model_name: str = arg(
        "bert-base-uncased", "hub id, local folder, or offline alias minilm / bert-base-random", ("model_name_or_path",)
    )
    data_dir: Maybe[str] = arg(None, "folder of train/validation/test.jsonl; None: $EMOTION_DATA_DIR, else the hub")
    train_subset: Maybe[PositiveInt] = arg(None, "first N training rows; None: all 16,000", ("max_train_samples",))
    eval_subset: Maybe[PositiveInt] = arg(
        None, "first N validation and test rows; None: all 2,000", ("max_eval_samples",)
    )
    shuffle_subset: bool = arg(False, "take the subsets after a seeded shuffle instead of the first rows")
    drop_bad_rows: bool = arg(False, "drop (and count) malformed data rows instead of stopping")
    max_length: Annotated[int, Field(gt=2)] = arg(
        128, "tokens per sequence (> 2: [CLS] and [SEP]); static padding pads every batch to it", ("max_seq_length",)
    )
    padding: Literal["static", "dynamic"] = arg("static", "static: pad to max_length; dynamic: to each batch's longest")
    pad_to_multiple_of: Maybe[PositiveInt] = arg(None, "dynamic padding only: round each batch's length up")
    group_by_length: bool = arg(False, "dynamic padding only: batches of rows of similar length (less padding)")
    lora_r: NonNegativeInt = arg(0, "LoRA rank; 0: full fine-tuning")
    lora_alpha: PositiveInt = arg(16, "LoRA scaling numerator (adapter output x alpha / r)")
    lora_dropout: Share = arg(0.0, "dropout on the LoRA adapters' input")
    lora_targets: str = arg(
        "query,value", f"linears given adapters: all-linear, or a comma list of {', '.join(LORA_ROLES)}"
    )
    batch: PositiveInt = arg(8, "training batch per device (per torchrun rank)", ("per_device_train_batch_size",))
    lr: PositiveFloat = arg(2e-5, "peak AdamW learning rate", ("learning_rate",))
    llrd_decay: Maybe[Annotated[float, Field(gt=0, le=1)]] = arg(
        None, "layer-wise LR decay in (0, 1]: head at lr, layer i at lr*d^(N-i), embeddings lr*d^(N+1); None: flat"
    )
    epochs: PositiveInt = arg(3, "passes over the training split", ("num_train_epochs",))
    max_steps: Maybe[PositiveInt] = arg(None, "stop after this many optimizer steps")
    weight_decay: NonNegativeFloat = arg(0.01, "AdamW weight decay (not on biases and LayerNorm)")
    warmup_ratio: Share = arg(0.1, "share of the steps with a linear LR warm-up")
    max_grad_norm: Maybe[PositiveFloat] = arg(1.0, "gradient clipping norm; None: no clipping")
    gradient_accumulation_steps: PositiveInt = arg(1, "micro-batches per optimizer step")
    gradient_checkpointing: bool = arg(False, "recompute activations in backward")
    optim: Literal["adamw_torch", "adamw_torch_foreach", "adamw_torch_fused"] = arg(
        "adamw_torch_fused", "AdamW implementation (fused / foreach: CPU and CUDA only)"
    )
    precision: Literal["auto", "bf16", "fp16", "fp32", "bf16-pure", "bf16-pure-sr"] = arg(
        "auto",
        "auto: bf16 where the device has bf16 units (GPU, NeuronCore, AMX or AVX512-BF16 CPU), else fp16 "
        "on a GPU, fp32 on a CPU",
    )
    seed: Annotated[int, Field(ge=0, le=2**32 - 1)] = arg(42, "seed of the head, the data order and all else random")
    preset: Literal["none", "baseline", "optimized"] = arg(
        "none", "the study's configurations: fill in what is not given"
    )
    num_devices: PositiveInt = arg(1, "> 1: data parallel, one torchrun process per device (the notebook starts it)")
    log_every: PositiveInt = arg(50, "optimizer steps per timing window (one device sync each)", ("logging_steps",))
    timing_warmup_steps: NonNegativeInt = arg(3, "first steps timed apart from the steady state (compilation)")
    eval_every: Maybe[PositiveInt] = arg(None, "evaluate every N optimizer steps, outside the timed windows")
    curve_rows: Maybe[PositiveInt] = arg(None, "validation rows of each periodic evaluation; None: the whole split")
    stop_at_accuracy: Maybe[Annotated[float, Field(gt=0, le=1)]] = arg(
        None, "end training at the first periodic evaluation at or above this validation accuracy"
    )
    diverge_factor: Annotated[float, Field(gt=1)] = arg(10.0, "a window's loss above this x the first's: diverged")
    profile: bool = arg(False, "profile steady steps after the timed windows (trace + time per op class)")
    profile_steps: PositiveInt = arg(5, "optimizer steps profiled")
    profile_dir: str = arg("Experiment/profiles", "traces go to <profile_dir>/<run_name>/")
    progress: bool = arg(True, "a progress bar; False: a loss line per timing window instead (logs)")
    results_path: Annotated[str, Field(pattern=r"\S")] = arg(RESULTS_DIR, "folder of the run records")
    run_name: Maybe[SafeName] = arg(
        None, "the record file name: letters, digits and . _ , + - (no spaces); None: built from the parameters"
    )
    suite: Maybe[SafeName] = arg(None, "suite the run belongs to (set by the sweep)")
    save_dir: Maybe[str] = arg(None, "save the fine-tuned model and tokenizer here", ("output_dir",))

    def __post_init__(self) -> None:
        """Refuse values fine alone but not together."""
        lora_roles(self.lora_targets)
        if self.padding == "static" and (self.group_by_length or self.pad_to_multiple_of):
            raise ConfigError("group_by_length and pad_to_multiple_of apply to padding='dynamic' only")
        if self.stop_at_accuracy is not None and not self.eval_every:
            raise ConfigError(f"stop_at_accuracy={self.stop_at_accuracy} needs eval_every (read at its evaluations)")

    def check_device(self, device_type: str, precision: str, max_positions: int) -> None:
        """Refuse what cannot run on the device resolved, in the precision `auto` resolved to."""
        if self.max_length > max_positions:
            raise ConfigError(f"max_length={self.max_length} is above {self.model_name}'s limit ({max_positions})")

    def name(self) -> str:
        """Return run_name, or one built from the parameters that most often differ."""
        model = "".join(c if c.isalnum() or c in "._-" else "_" for c in Path(self.model_name).name) or "model"
        return self.run_name or f"{model}-b{self.batch}-L{self.max_length}-{self.padding}-{self.precision}-s{self.seed}"

    def flat(self) -> dict[str, Any]:
        """Return every argument by name, JSON-serialisable."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


@pydantic.dataclasses.dataclass(frozen=True, config=CHECKED)
class NvidiaArgs(Args):
    """The CUDA (and CPU) loop's arguments: the device and how the step is launched."""

    device: Literal["auto", "cuda", "cpu"] = arg("auto", "auto: CUDA where torch sees a GPU, else the CPU")
    step_mode: Literal["eager", "compile", "cudagraphs"] = arg(
        "eager",
        "eager: PyTorch launches each op; compile: forward/backward and the update compiled by "
        "torch.compile; cudagraphs: the same graphs replayed as CUDA graphs (CUDA only)",
    )
    data_on_device: bool = arg(False, "the tokenized training split placed on the device once, batches sliced there")

    def __post_init__(self) -> None:
        """Refuse a compiled step that would recompile past torch.compile's limit."""
        super().__post_init__()
        if self.step_mode != "eager" and self.padding == "dynamic":
            buckets = math.ceil(self.max_length / (self.pad_to_multiple_of or 1))
            if buckets > RECOMPILE_LIMIT:
                raise ConfigError(
                    f"step_mode={self.step_mode!r} with padding='dynamic' compiles a graph per padded length: up to "
                    f"{buckets}, above torch.compile's {RECOMPILE_LIMIT}; give pad_to_multiple_of >= "
                    f"{math.ceil(self.max_length / RECOMPILE_LIMIT)}, or padding='static'"
                )

    def check_device(self, device_type: str, precision: str, max_positions: int) -> None:
        """Refuse CUDA graphs off CUDA, and a compiled step in a precision that reads the host every step."""
        super().check_device(device_type, precision, max_positions)
        if self.step_mode == "cudagraphs" and device_type != "cuda":
            raise ConfigError(f"step_mode='cudagraphs' needs CUDA, not {device_type}: use step_mode='compile'")
        if self.step_mode != "eager" and precision in ("fp16", "bf16-pure-sr"):
            chosen = f" (precision='auto' chose {precision} on this device)" if self.precision == "auto" else ""
            raise ConfigError(
                f"step_mode={self.step_mode!r} cannot run in {precision}{chosen}: its update reads back to the host "
                "each step (GradScaler's skip, torchao's rounding); give precision='bf16' or 'fp32', "
                "or step_mode='eager'"
            )


@pydantic.dataclasses.dataclass(frozen=True, config=CHECKED)
class TrainiumArgs(Args):
    """The XLA loop's arguments: the Neuron compiler's flags, the runtime's rounding, the compile caches."""

    optlevel: Literal[1, 2, 3] = arg(2, "neuronx-cc --optlevel")
    model_type: Literal["transformer", "none"] = arg("transformer", "neuronx-cc --model-type")
    distribution_strategy: Literal["llm-training", "none"] = arg("none", "neuronx-cc --distribution-strategy")
    extra_cc_flags: str = arg("", "appended to NEURON_CC_FLAGS as is")
    stochastic_rounding: bool = arg(False, "NEURON_RT_STOCHASTIC_ROUNDING_EN (on for bf16-pure-sr too)")
    bf16_mode: Literal["autocast", "xla_use_bf16", "fp32"] = arg(
        "autocast", "autocast: precision decides; xla_use_bf16: the deprecated XLA_USE_BF16 set to 1 (not AdamW); fp32"
    )
    neuron_cache_dir: Maybe[str] = arg(None, "Neuron compile cache (--cache_dir); None: /var/tmp/neuron-compile-cache")
    xla_cache_dir: Maybe[str] = arg(None, "torch-xla persistent compilation cache (XLA on the CPU); None: off")
    xla_fast_compile: bool = arg(False, "XLA on the CPU: LLVM at -O0, graphs compile ~2x faster, run 4-6x slower")
    precompile: bool = arg(False, "the notebook first fills the Neuron compile cache (neuron_parallel_compile, trn1)")

    def __post_init__(self) -> None:
        """Refuse flags a shell could not split, and a precision the bf16 mode overrides."""
        super().__post_init__()
        try:
            shlex.split(self.extra_cc_flags)
        except ValueError as err:
            raise ConfigError(f"extra_cc_flags={self.extra_cc_flags!r} is invalid: {err}") from None
        if self.bf16_mode != "autocast" and self.precision not in ("auto", "fp32"):
            raise ConfigError(f"precision={self.precision!r} with bf16_mode={self.bf16_mode!r}: torch stays fp32 there")
        if self.precision == "fp16":
            raise ConfigError("precision='fp16' is not supported on XLA / Neuron: auto, bf16, fp32, bf16-pure, -sr")


PLATFORMS = {"nvidia": NvidiaArgs, "trainium": TrainiumArgs}
FIELDS = {f.name: f for cls in PLATFORMS.values() for f in fields(cls)}
ALIASES = {a.lstrip("-"): f.name for f in FIELDS.values() for a in f.metadata["aliases"]}
# The study's two configurations (report 5.8), merged under the names the caller gave.
PRESETS: dict[str, dict[str, Any]] = {
    "none": {},
    "baseline": dict(batch=8, max_length=128, lr=2e-5, padding="static", precision="fp32", optim="adamw_torch"),
    "optimized": dict(batch=64, max_length=32, lr=1.5e-4, llrd_decay=0.95, padding="static", log_every=100),
}


def admitted(annotation: Any) -> set[type]:
    """Return the Python types an annotation admits (Optional, Annotated and Literal unwrapped)."""
    origin = get_origin(annotation)
    if origin is Literal:
        return {type(v) for v in get_args(annotation)}
    if origin is Annotated:
        return admitted(get_args(annotation)[0])
    if origin is Union or str(origin) == "<class 'types.UnionType'>":
        return set().union(*(admitted(a) for a in get_args(annotation)))
    return {annotation}


ADMITTED = {
    f.name: admitted(cls.__pydantic_fields__[f.name].annotation) for cls in PLATFORMS.values() for f in fields(cls)
}


def unknown_message(name: str, cls: type[Args] = NvidiaArgs) -> str:
    """Return the error for a parameter `cls` does not take, with the closest known name."""
    if name in ALIASES:
        return f"unknown parameter {name!r}: that is the Hugging Face examples' name for {ALIASES[name]!r}"
    other = next((p for p, c in PLATFORMS.items() if name in c.__dataclass_fields__), None)
    if other:
        return f"parameter {name!r} belongs to the {other} loop, not to {cls.__name__}"
    known = [*cls.__dataclass_fields__, *(a for a, n in ALIASES.items() if n in cls.__dataclass_fields__)]
    close = [ALIASES.get(c, c) for c in difflib.get_close_matches(name, known, n=1, cutoff=0.6)]
    return (
        f"unknown parameter {name!r}:" + (f" did you mean {close[0]!r}?" if close else "") + " (see docs/PARAMETERS.md)"
    )


def build(values: Mapping[str, Any], cls: type[Args], given: Iterable[str] | None = None) -> Args:
    """Return checked arguments; the preset fills what `given` (default: every name in `values`) leaves out."""
    known = cls.__dataclass_fields__
    unknown = [name for name in values if name not in known]
    if unknown:
        raise ConfigError(unknown_message(unknown[0], cls))
    given = set(values) if given is None else set(given) & set(known)
    merged = {**values, **{k: v for k, v in PRESETS.get(values.get("preset", "none"), {}).items() if k not in given}}
    for name, value in merged.items():
        kinds = ADMITTED[name]
        if isinstance(value, bool) and bool not in kinds:  # pydantic would read True as 1
            raise ConfigError(f"{name}={value!r} is invalid: a bool is not a number or text")
    try:
        args = cls(**merged)
    except pydantic.ValidationError as err:
        first = err.errors(include_url=False)[0]
        if isinstance(first.get("ctx", {}).get("error"), ConfigError):
            raise first["ctx"]["error"] from None
        name = first["loc"][0] if first["loc"] else "arguments"
        help_text = known[name].metadata["help"] if name in known else ""
        raise ConfigError(f"{name}={first.get('input')!r} is invalid: {first['msg']}. {name}: {help_text}") from None
    object.__setattr__(args, "given", frozenset(given))
    return args


def from_notebook(namespace: Mapping[str, Any], cls: type[Args]) -> Args:
    """Return a notebook's arguments: its parameters cell's names, papermill's injected ones on top (all checked)."""
    injected = papermill_names(namespace.get("In"))
    names = set(cls.__dataclass_fields__) | (injected or set())  # an injected name nobody knows is refused
    values = {k: (str(v) if isinstance(v, Path) else v) for k, v in namespace.items() if k in names}
    defaults = cls().flat()
    given = injected if injected is not None else {k for k, v in values.items() if v != defaults.get(k)}
    return build(values, cls, given)


def papermill_names(history: Any) -> set[str] | None:
    """Return the names papermill's injected `# Parameters` cell assigned, None when there was none."""
    for source in reversed(history if isinstance(history, list) else []):
        if isinstance(source, str) and source.startswith("# Parameters"):
            body = ast.parse(source).body
            return {
                t.id for node in body if isinstance(node, ast.Assign) for t in node.targets if isinstance(t, ast.Name)
            }
    return None


def from_cli(argv: list[str] | None, cls: type[Args]) -> Args:
    """Return a command line's arguments (`--name value`, the Hugging Face examples' names too); --help lists them."""
    from transformers import HfArgumentParser

    parser = HfArgumentParser(cls)  # it adds the Hugging Face examples' names (the fields' aliases) too
    for kind in (int, float):  # argparse's int("None") would refuse what an optional field allows
        parser.register("type", kind, str)
    absent = object()  # argparse fills a default only where the namespace has none: `absent` marks "not named"
    parsed, unknown = parser.parse_known_args(argv, Namespace(**dict.fromkeys(cls.__dataclass_fields__, absent)))
    if unknown:
        flag = next((u for u in unknown if u.startswith("-")), unknown[0])
        parser.error(unknown_message(flag.lstrip("-").split("=")[0], cls))
    return build({k: v for k, v in vars(parsed).items() if v is not absent}, cls)


def to_cli(args: Args) -> list[str]:
    """Return the command-line flags that rebuild `args` (the given parameters; the preset fills the rest)."""
    flat = args.flat()
    return [f"--{name}={flat[name]}" for name in sorted(getattr(args, "given", ()))]


def parameters_cell(cls: type[Args]) -> str:
    """Return the notebook's `parameters` cell for `cls`: every field's default, its help as the comment."""
    return "\n".join(f"{f.name} = {f.default!r}  # {f.metadata['help']}" for f in fields(cls)) + "\n"


def reference() -> str:
    """Return docs/PARAMETERS.md: every parameter of each platform, its default and meaning."""
    out = [
        "<!-- Written by `python -m helpers.arguments > docs/PARAMETERS.md`; do not edit by hand. -->\n# Parameters\n"
    ]
    out.append("The notebooks' `parameters` cells (`papermill ... -p NAME VALUE`), the loops (`--NAME VALUE`, or the")
    out.append("Hugging Face examples' name in brackets) and the suites' TOML files take these names. A `preset` fills")
    out.append("in only the parameters that were not given.\n")
    shared = {f.name for f in fields(Args)}
    for title, names in (
        ("Both platforms", shared),
        *((c.__name__, set(c.__dataclass_fields__) - shared) for c in PLATFORMS.values()),
    ):
        out += [f"\n## {title}\n", "| name | default | meaning |", "|---|---|---|"]
        for f in (f for f in fields(TrainiumArgs if "Trainium" in title else NvidiaArgs) if f.name in names):
            alias = ", ".join(a.lstrip("-") for a in f.metadata["aliases"])
            out.append(f"| `{f.name}`{f' ({alias})' if alias else ''} | `{f.default!r}` | {f.metadata['help']} |")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    print(reference(), end="")
