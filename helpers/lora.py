"""LoRA adapters through peft (lora_r > 0): which linears they wrap, what trains, what the record says.

The head trains in full (peft's `modules_to_save`); the embeddings, the pooler and every frozen weight keep their
pretrained values. `merged` folds the adapters into plain weights, so any transformers client reads a saved model.
"""

from __future__ import annotations

import copy

import torch

from helpers.arguments import ConfigError, lora_roles

# the six linears of an encoder layer (args.LORA_ROLES), as regular expressions over each architecture's names
LAYER_NAMES = {
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
LAYER_NAMES["roberta"] = LAYER_NAMES["bert"]
# the task head, trained in full: DistilBERT's is two linears; RoBERTa's `classifier` holds both of its own
HEADS = {"bert": ["classifier"], "roberta": ["classifier"], "distilbert": ["pre_classifier", "classifier"]}


def target_regex(model_type: str, targets: str) -> str:
    """Return peft's target: a regex matching the targeted linears of every encoder layer."""
    if model_type not in LAYER_NAMES:
        raise ConfigError(
            f"lora_r > 0 needs a known encoder; model_type {model_type!r} is not one of {list(LAYER_NAMES)}"
        )
    names = LAYER_NAMES[model_type]
    return r".*\.layer\.\d+\.(" + "|".join(names[r] for r in lora_roles(targets)) + ")"


def check(args, cfg) -> None:
    """Refuse LoRA settings the model cannot take (an unmapped encoder, a rank above its hidden size)."""
    if args.lora_r:
        target_regex(cfg.model_type, args.lora_targets)
        if args.lora_r > cfg.hidden_size:
            raise ConfigError(f"lora_r={args.lora_r} is above {args.model_name}'s hidden size ({cfg.hidden_size})")


def apply(model: torch.nn.Module, args) -> torch.nn.Module:
    """Return the model wrapped with LoRA adapters (the model itself when lora_r is 0)."""
    if not args.lora_r:
        return model
    from peft import LoraConfig, TaskType, get_peft_model

    check(args, model.config)
    kind = model.config.model_type
    config = LoraConfig(
        task_type=TaskType.SEQ_CLS,
        r=args.lora_r,
        lora_alpha=args.lora_alpha,
        lora_dropout=args.lora_dropout,
        target_modules=target_regex(kind, args.lora_targets),
        modules_to_save=HEADS.get(kind, ["classifier"]),
    )
    return get_peft_model(model, config)


def describe(model: torch.nn.Module, args) -> dict:
    """Return the record's model fields: trainable parameters, AdamW state bytes and the LoRA settings."""
    trainable = [p for p in model.parameters() if p.requires_grad]
    settings = dict(r=args.lora_r, alpha=args.lora_alpha, dropout=args.lora_dropout, targets=args.lora_targets)
    return {
        "trainable_parameters": sum(p.numel() for p in trainable),
        "optimizer_state_bytes": sum(2 * p.numel() * p.element_size() for p in trainable),  # AdamW's two moments
        "lora": {**settings, "roles": list(lora_roles(args.lora_targets))} if args.lora_r else None,
    }


def merged(model: torch.nn.Module) -> torch.nn.Module:
    """Return a plain transformers model with the adapters merged into a host copy (the model itself if not LoRA)."""
    if not hasattr(model, "merge_and_unload"):
        return model
    return copy.deepcopy(model).to("cpu").merge_and_unload()
