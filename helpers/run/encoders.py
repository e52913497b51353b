"""Encoders available offline with random weights: the exact published architectures, for throughput, FLOP
and memory work only (never accuracy). With hub access their real names load the pretrained weights.

The configurations are the hub's config.json of each model (architecture fields only); the tokenizer is
bert-base-uncased's WordPiece (offline, from MiniLM's package), whose ids fit every vocabulary here: RoBERTa's
own BPE tokenizer is not available offline, so a RoBERTa run's token lengths are BERT's (the record says so).
"""

from __future__ import annotations

from transformers import AutoConfig, PretrainedConfig

# alias -> (the hub model it stands for, model_type, the architecture fields of its config.json)
RANDOM = {
    "bert-base-random": ("bert-base-uncased", "bert", {}),  # BertConfig's defaults are bert-base-uncased's
    "bert-large-random": (
        "bert-large-uncased",
        "bert",
        {"hidden_size": 1024, "num_hidden_layers": 24, "num_attention_heads": 16, "intermediate_size": 4096},
    ),
    # the smallest of Google's 24 small BERTs (Turc et al. 2019, "Well-Read Students Learn Better"): 4.4 M
    # parameters; `python -m helpers.check` trains it in every precision mode in seconds
    "bert-tiny-random": (
        "google/bert_uncased_L-2_H-128_A-2",
        "bert",
        {"hidden_size": 128, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 512},
    ),
    "distilbert-base-random": ("distilbert-base-uncased", "distilbert", {}),  # DistilBertConfig's defaults
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
NOTE = (
    "random weights: throughput, FLOP and memory figures only, never accuracy; tokenized with "
    "bert-base-uncased's WordPiece (offline)"
)


def random_config(alias: str, num_labels: int) -> PretrainedConfig:
    """Return the exact configuration of the encoder an alias stands for, with `num_labels` labels."""
    _, model_type, fields = RANDOM[alias]
    return AutoConfig.for_model(model_type, num_labels=num_labels, **fields)
