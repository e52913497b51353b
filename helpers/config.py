"""The run configuration: every parameter of a run, validated in this one place.

The notebooks' `parameters` cells, `Trainium/train.py` and the sweep runner all build a `RunConfig`
and call `validate()` before any model is built, so a bad value fails in seconds, not at minute 40.
"""
from __future__ import annotations

import dataclasses
import math
import typing
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Mapping

REPO_ROOT = Path(__file__).resolve().parent.parent


def repo_path(path: str | Path) -> Path:
    """Return `path` as is when absolute, else relative to the repository root (not the cwd)."""
    path = Path(path)
    return path if path.is_absolute() else REPO_ROOT / path


class ConfigError(ValueError):
    """A parameter has a value outside what the run accepts; the message names both."""


PADDINGS = ("static", "dynamic")
PRECISIONS = ("auto", "bf16", "fp16", "fp32", "bf16-pure", "bf16-pure-sr")
DEVICES = ("auto", "cuda", "cpu", "xla")
OPTIMIZERS = ("adamw_torch", "adamw_torch_foreach", "adamw_torch_fused")
PRESETS = ("none", "baseline", "optimized")
BF16_MODES = ("autocast", "xla_use_bf16", "fp32")
OPTLEVELS = (1, 2, 3)
MODEL_TYPES = ("transformer", "none")
DISTRIBUTION_STRATEGIES = ("llm-training", "none")

# The study's two configurations (report 5.8); `preset` fills these in over untouched defaults.
PRESET_VALUES: dict[str, dict[str, Any]] = {
    "none": {},
    "baseline": dict(batch=8, max_length=128, lr=2e-5, llrd_decay=None, padding="static",
                     precision="fp32"),
    "optimized": dict(batch=64, max_length=32, lr=1.5e-4, llrd_decay=0.95, padding="static",
                      precision="auto", optim="adamw_torch_fused", log_every=100),
}


@dataclass
class RunConfig:
    """One training run; field names are the notebooks' parameter names."""

    # what to train
    model_name: str = "bert-base-uncased"  # hub id, local folder, or alias minilm / bert-base-random
    data_dir: str | None = None  # folder of train/validation/test.jsonl; else $EMOTION_DATA_DIR, else hub
    train_subset: int | None = None  # first N training rows (all when None)
    eval_subset: int | None = None  # first N validation and test rows (all when None)
    shuffle_subset: bool = False  # take the subset after a seeded shuffle instead of the first rows
    drop_bad_rows: bool = False  # drop (and count) malformed data rows instead of stopping
    # shapes
    batch: int = 8  # per-device train batch
    max_length: int = 128
    padding: str = "static"
    pad_to_multiple_of: int | None = None  # dynamic padding only
    group_by_length: bool = False  # dynamic padding: batches of rows of similar length (less padding)
    # optimisation
    lr: float = 2e-5
    llrd_decay: float | None = None  # layer-wise LR decay; None = one flat LR
    epochs: int = 3
    max_steps: int | None = None  # stop after this many optimizer steps (benchmarks, smoke runs)
    weight_decay: float = 0.01
    warmup_ratio: float = 0.1
    max_grad_norm: float | None = 1.0
    gradient_accumulation_steps: int = 1
    gradient_checkpointing: bool = False
    optim: str = "adamw_torch"
    precision: str = "auto"
    compile: bool = False  # torch.compile the model (inductor on CPU/CUDA)
    seed: int = 42
    preset: str = "none"
    # where and how
    device: str = "auto"
    num_devices: int = 1
    log_every: int = 50  # steps between host syncs for loss logging and the NaN check
    timing_warmup_steps: int = 3  # steps kept apart from the steady state (compilation, allocator)
    profile: bool = False
    profile_steps: int = 5
    profile_dir: str = "Experiment/profiles"  # traces go to <profile_dir>/<run_name>/
    progress: bool = True
    results_path: str = "Experiment/results/runs.jsonl"
    run_name: str | None = None
    suite: str | None = None
    save_dir: str | None = None  # save the fine-tuned model here (Trainium/eval.py reads it)
    # XLA / Trainium (ignored on CUDA and CPU)
    optlevel: int = 2
    model_type: str = "transformer"
    distribution_strategy: str = "none"
    extra_cc_flags: str = ""
    stochastic_rounding: bool = False
    bf16_mode: str = "autocast"
    num_cores: int = 1
    neuron_cache_dir: str | None = None
    extra: dict = field(default_factory=dict)  # free-form labels carried into the record

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> "RunConfig":
        """Build from a mapping (a notebook's globals, a sweep point), taking only known names."""
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in values.items() if k in names})

    def to_dict(self) -> dict[str, Any]:
        """Return the parameters as a plain JSON-serialisable dict."""
        return dataclasses.asdict(self)

    def validate(self) -> "RunConfig":
        """Coerce papermill strings, apply the preset, check every value; return self or raise."""
        _coerce_types(self)
        _apply_preset(self)
        _check(self)
        return self


def _coerce_types(cfg: RunConfig) -> None:
    """Turn strings papermill may pass ("64", "None", "True") into the field's declared type."""
    hints = typing.get_type_hints(RunConfig)
    for f in fields(cfg):
        value = getattr(cfg, f.name)
        setattr(cfg, f.name, _coerce(f.name, value, hints[f.name]))


def _coerce(name: str, value: Any, hint: Any) -> Any:
    args = typing.get_args(hint)
    optional = type(None) in args
    base = next((a for a in args if a is not type(None)), hint) if args else hint
    if isinstance(value, str) and value.strip() in ("None", "none", "null", "") and optional:
        return None
    if value is None:
        if optional:
            return None
        raise ConfigError(f"{name}=None is not allowed: give a {base.__name__}")
    if base is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in ("true", "1", "yes", "on"):
            return True
        if isinstance(value, str) and value.strip().lower() in ("false", "0", "no", "off"):
            return False
        if isinstance(value, int) and value in (0, 1):
            return bool(value)
        raise ConfigError(f"{name}={value!r} is not a boolean: use True or False")
    if base is int:
        if isinstance(value, bool):
            raise ConfigError(f"{name}={value!r} is not an integer")
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, str):
            try:
                return int(value.strip())
            except ValueError:
                pass
        if isinstance(value, int):
            return value
        raise ConfigError(f"{name}={value!r} is not an integer")
    if base is float:
        if isinstance(value, bool):
            raise ConfigError(f"{name}={value!r} is not a number")
        try:
            return float(value)
        except (TypeError, ValueError):
            raise ConfigError(f"{name}={value!r} is not a number") from None
    if base is str:
        if isinstance(value, (str, int, float)) and not isinstance(value, bool):
            return str(value)
        raise ConfigError(f"{name}={value!r} is not a string")
    if base is dict and not isinstance(value, dict):
        raise ConfigError(f"{name}={value!r} is not a mapping")
    return value


def _apply_preset(cfg: RunConfig) -> None:
    """Fill the preset's values into every field still at its default (explicit values win)."""
    if cfg.preset not in PRESETS:
        raise ConfigError(f"preset={cfg.preset!r} is unknown: allowed {', '.join(PRESETS)}")
    defaults = RunConfig()
    for name, value in PRESET_VALUES[cfg.preset].items():
        if getattr(cfg, name) == getattr(defaults, name):
            setattr(cfg, name, value)


def _choice(name: str, value: Any, allowed: tuple) -> None:
    if value not in allowed:
        raise ConfigError(f"{name}={value!r} is unknown: allowed {', '.join(map(str, allowed))}")


def _positive(name: str, value: float | int | None, optional: bool = False) -> None:
    if value is None and optional:
        return
    if value is None or not math.isfinite(value) or value <= 0:
        raise ConfigError(f"{name}={value!r} is invalid: must be a finite number > 0")


def _check(cfg: RunConfig) -> None:
    _positive("batch", cfg.batch)
    if cfg.max_length <= 2:
        raise ConfigError(f"max_length={cfg.max_length} is invalid: must be > 2 ([CLS] and [SEP] "
                          "take two tokens) and at most the model's position limit")
    _choice("padding", cfg.padding, PADDINGS)
    _positive("pad_to_multiple_of", cfg.pad_to_multiple_of, optional=True)
    _positive("lr", cfg.lr)
    if cfg.llrd_decay is not None and not 0 < cfg.llrd_decay <= 1:  # False for NaN too
        raise ConfigError(f"llrd_decay={cfg.llrd_decay} is invalid: must be in (0, 1], or None "
                          "for one flat learning rate")
    _positive("epochs", cfg.epochs)
    _positive("max_steps", cfg.max_steps, optional=True)
    if not (math.isfinite(cfg.weight_decay) and cfg.weight_decay >= 0):
        raise ConfigError(f"weight_decay={cfg.weight_decay} is invalid: must be a finite number >= 0")
    if not 0 <= cfg.warmup_ratio < 1:  # False for NaN too
        raise ConfigError(f"warmup_ratio={cfg.warmup_ratio} is invalid: must be in [0, 1)")
    _positive("max_grad_norm", cfg.max_grad_norm, optional=True)
    _positive("gradient_accumulation_steps", cfg.gradient_accumulation_steps)
    _positive("train_subset", cfg.train_subset, optional=True)
    _positive("eval_subset", cfg.eval_subset, optional=True)
    _choice("optim", cfg.optim, OPTIMIZERS)
    _choice("precision", cfg.precision, PRECISIONS)
    _choice("device", cfg.device, DEVICES)
    _positive("num_devices", cfg.num_devices)
    _positive("log_every", cfg.log_every)
    if cfg.timing_warmup_steps < 0:
        raise ConfigError(f"timing_warmup_steps={cfg.timing_warmup_steps} is invalid: must be >= 0")
    _positive("profile_steps", cfg.profile_steps)
    if not cfg.results_path:
        raise ConfigError("results_path='' is invalid: give a .jsonl path for the run records")
    _choice("optlevel", cfg.optlevel, OPTLEVELS)
    _choice("model_type", cfg.model_type, MODEL_TYPES)
    _choice("distribution_strategy", cfg.distribution_strategy, DISTRIBUTION_STRATEGIES)
    _choice("bf16_mode", cfg.bf16_mode, BF16_MODES)
    _choice("num_cores", cfg.num_cores, (1, 2, 8, 16, 32))
    if cfg.padding == "static" and cfg.group_by_length:
        raise ConfigError("group_by_length=True applies to padding='dynamic' only: static batches are "
                          "all max_length long, so grouping saves nothing")
    if cfg.padding == "static" and cfg.pad_to_multiple_of is not None:
        raise ConfigError("pad_to_multiple_of applies to padding='dynamic' only; static padding "
                          "always pads to max_length")
