"""LoRA adapters through `peft` (task.lora_r > 0): which linears they wrap, what trains, what it costs.

The head trains in full (peft `modules_to_save`); the embeddings, the pooler and every frozen weight
keep their pretrained values. Nothing here is device-specific: the wrapped model runs on the CPU, CUDA
and XLA as the plain one does. `save_dir` gets the adapters merged into plain weights (`merged`), so
`Trainium/eval.py` and any transformers client read it without peft.
"""

from __future__ import annotations

import copy
from dataclasses import asdict, dataclass

import torch

from helpers.run.args import ConfigError, lora_roles

# The six linears of an encoder layer (args.LORA_ROLES), as regular expressions over each architecture's
# module names (peft full-matches a string target against every module name).
_LAYER_NAMES = {
    "bert": {
        "query": r"attention\.self\.query",
        "key": r"attention\.self\.key",
        "value": r"attention\.self\.value",
        "attention_output": r"attention\.output\.dense",
        "ffn_up": r"intermediate\.dense",
        "ffn_down": r"output\.dense",
    },
    "distilbert": {
        "query": r"attention\.q_lin",
        "key": r"attention\.k_lin",
        "value": r"attention\.v_lin",
        "attention_output": r"attention\.out_lin",
        "ffn_up": r"ffn\.lin1",
        "ffn_down": r"ffn\.lin2",
    },
}
_LAYER_NAMES["roberta"] = _LAYER_NAMES["bert"]
# the task head, trained in full: DistilBERT's head is two linears (pre_classifier, classifier);
# RoBERTa's `classifier` module holds both of its head linears (dense, out_proj)
HEADS = {"bert": ["classifier"], "roberta": ["classifier"], "distilbert": ["pre_classifier", "classifier"]}


@dataclass(frozen=True)
class LoraSpec:
    """LoRA's settings: rank, scaling numerator, dropout on the adapter input and the target roles."""

    r: int
    alpha: int = 16
    dropout: float = 0.0
    targets: str = "query,value"


def spec_of(task) -> LoraSpec | None:
    """Return the LoRA settings of a TaskArgs (None: full fine-tuning, lora_r == 0); TaskArgs checked them."""
    return LoraSpec(task.lora_r, task.lora_alpha, task.lora_dropout, task.lora_targets) if task.lora_r else None


def check_model(spec: LoraSpec | None, config, model_name: str) -> None:
    """Refuse LoRA settings the model's config cannot take: an unmapped encoder, a rank above its hidden size."""
    if spec is None:
        return
    target_regex(config.model_type, spec.targets)
    # every targeted linear is at least hidden_size wide on one side: a rank above it adds no rank, only weights
    if spec.r > config.hidden_size:
        raise ConfigError(
            f"lora_r={spec.r} is above {model_name}'s hidden size ({config.hidden_size}): an adapter's "
            f"rank is at most the narrower side of the linear it wraps; allowed 1..{config.hidden_size}"
        )


def target_regex(model_type: str, targets: str) -> str:
    """Return the peft target: a regex matching the targeted linears of every encoder layer."""
    if model_type not in _LAYER_NAMES:
        raise ConfigError(
            f"lora_r > 0 needs a known encoder: model_type {model_type!r} is not mapped "
            f"(known: {', '.join(_LAYER_NAMES)})"
        )
    names = _LAYER_NAMES[model_type]
    return r".*\.layer\.\d+\.(" + "|".join(names[r] for r in lora_roles(targets)) + ")"


def apply(model: torch.nn.Module, spec: LoraSpec | None) -> torch.nn.Module:
    """Return the model wrapped with LoRA adapters (the model itself when `spec` is None)."""
    if spec is None:
        return model
    from peft import LoraConfig, TaskType, get_peft_model

    model_type = model.config.model_type
    config = LoraConfig(
        task_type=TaskType.SEQ_CLS,
        r=spec.r,
        lora_alpha=spec.alpha,
        lora_dropout=spec.dropout,
        target_modules=target_regex(model_type, spec.targets),
        modules_to_save=HEADS.get(model_type, ["classifier"]),
    )
    return get_peft_model(model, config)


def describe(model: torch.nn.Module, spec: LoraSpec | None) -> dict:
    """Return the record's model fields: trainable parameters, AdamW state bytes and the LoRA settings."""
    trainable = [p for p in model.parameters() if p.requires_grad]
    # AdamW keeps two moments (exp_avg, exp_avg_sq) per trainable element, in the parameter's dtype
    state_bytes = sum(2 * p.numel() * p.element_size() for p in trainable)
    return {
        "trainable_parameters": sum(p.numel() for p in trainable),
        "optimizer_state_bytes": state_bytes,
        "lora": None if spec is None else {**asdict(spec), "roles": list(lora_roles(spec.targets))},
    }


def merged(model: torch.nn.Module) -> torch.nn.Module:
    """Return a plain transformers model with the adapters merged into a host copy (the model itself if not LoRA)."""
    if not hasattr(model, "merge_and_unload"):  # not a peft model
        return model
    host = copy.deepcopy(model).to("cpu")
    return host.merge_and_unload()
