"""What a sweep point compiles on XLA / Neuron: its graph keys, the padded lengths behind them, its steps.

On XLA a steady training step runs one graph and an evaluation batch one graph (tests/run/test_xla.py counts
them); a graph's HLO, and so its compile-cache entry, is decided by the shapes and settings traced into it.
"""

from __future__ import annotations

import functools
import math
import os
from dataclasses import dataclass

import numpy as np

from helpers.run.args import RunArgs
from helpers.run.encoders import RANDOM
from helpers.run.neuron import neuron_cc_flags

TRAIN_ROWS, EVAL_ROWS = 16_000, 2_000  # dair-ai/emotion: training split, validation and test splits each
EVAL_MIN_BATCH = 32  # training.eval_loader: evaluation batches of max(batch, 32) rows
ALIAS_OF = {hub: alias for alias, (hub, _, _) in RANDOM.items()}  # hub name -> its offline architecture


@dataclass(frozen=True)
class GraphKey:
    """What decides one compiled graph's HLO, and so its entry in the compile cache."""

    kind: str  # "train" (one optimizer step) | "eval" (one evaluation batch)
    model: str  # the architecture
    batch: int  # rows per micro-batch, or per evaluation batch
    length: int  # padded tokens per row
    precision: str  # as compiled
    settings: tuple[str, ...]  # the rest that changes the HLO, as name=value


def architecture(model_name: str) -> str:
    """Return the name of a model's architecture: the offline -random alias of a hub name, else the name."""
    return ALIAS_OF.get(model_name, model_name)


def compiled_precision(args: RunArgs, bf16_fast: bool = True) -> str:
    """Return the precision a point's graphs are traced in (`auto` as the device resolves it)."""
    p = args.train.precision
    if args.neuron.bf16_mode != "autocast":
        return "fp32"  # torch stays fp32; XLA_USE_BF16 or not is in the settings
    if p == "auto":
        return "bf16" if bf16_fast else "fp32"
    return "bf16-pure" if p == "bf16-pure-sr" else p  # one graph: XlaAdamW either way, the Neuron runtime rounds


def cc_flags(args: RunArgs) -> str:
    """Return the neuronx-cc flags of a point without --cache_dir (where the cache is, not what it holds)."""
    return " ".join(f for f in neuron_cc_flags(args).split() if not f.startswith("--cache_dir"))


def settings(args: RunArgs, kind: str) -> tuple[str, ...]:
    """Return the settings other than shapes and precision that change a `kind` graph's HLO."""
    # learning rate, weight decay, LLRD's factor, seeds and step counts are data, not constants: graphs are shared;
    # not counted: the small all-reduce graphs of evaluation's totals when num_devices > 1
    t, tr, n = args.task, args.train, args.neuron
    lora = f"r{t.lora_r},a{t.lora_alpha},d{t.lora_dropout},{t.lora_targets}" if t.lora_r else "none"
    out = [f"bf16_mode={n.bf16_mode}", f"lora={lora}", f"compile={tr.compile}", f"cc_flags={cc_flags(args)}"]
    if kind == "train":
        out += [
            f"grad_accum={tr.gradient_accumulation_steps}",
            f"llrd={tr.llrd_decay is not None}",
            f"max_grad_norm={tr.max_grad_norm}",
            f"checkpointing={tr.gradient_checkpointing}",
            f"num_devices={tr.num_devices}",
        ]
    return tuple(out)


def eval_batch(args: RunArgs) -> int:
    """Return the rows of an evaluation batch."""
    return max(args.train.batch, EVAL_MIN_BATCH)


def graph_keys(args: RunArgs, train_lengths, eval_lengths, bf16_fast: bool = True) -> list[GraphKey]:
    """Return the distinct graphs a point compiles, given the padded lengths of its batches."""
    model, precision = architecture(args.task.model_name), compiled_precision(args, bf16_fast)
    train = [
        GraphKey("train", model, args.train.batch, int(n), precision, settings(args, "train"))
        for n in sorted(set(int(x) for x in train_lengths))
    ]
    evaluate = [
        GraphKey("eval", model, eval_batch(args), int(n), precision, settings(args, "eval"))
        for n in sorted(set(int(x) for x in eval_lengths))
    ]
    return train + evaluate


def train_rows(args: RunArgs) -> int:
    """Return the training rows a point reads (its subset, else the whole split)."""
    return min(args.task.train_subset or TRAIN_ROWS, TRAIN_ROWS)


def optimizer_steps(args: RunArgs, rows: int | None = None) -> int:
    """Return the optimizer steps a point takes per rank (XLA drops the last partial batch)."""
    tr = args.train
    batches = (rows or train_rows(args)) // tr.num_devices // tr.batch
    full = batches // tr.gradient_accumulation_steps * tr.epochs
    return min(tr.max_steps or full, full)


def eval_passes(args: RunArgs) -> list[tuple[str, int]]:
    """Return (split, rows) of each evaluation pass: the periodic ones, then validation and test."""
    m, rows = args.measure, min(args.task.eval_subset or EVAL_ROWS, EVAL_ROWS)
    periodic = optimizer_steps(args) // m.eval_every if m.eval_every else 0
    curve = [("validation", min(m.curve_rows or rows, rows))] * periodic
    return curve + [("validation", rows), ("test", rows)]


def round_up(lengths: np.ndarray, multiple: int | None) -> np.ndarray:
    """Return `lengths` rounded up to a multiple (the collator's pad_to_multiple_of), if any."""
    return lengths if not multiple else -(-lengths // multiple) * multiple


def chunk_maxima(lengths: np.ndarray, batch: int, drop_last: bool) -> np.ndarray:
    """Return the longest row of each consecutive batch of `batch` rows: its length padded to the longest."""
    usable = len(lengths) // batch * batch if drop_last else len(lengths)
    return np.array([lengths[i : i + batch].max() for i in range(0, usable, batch)], dtype=np.int64)


def train_padded_lengths(lengths: np.ndarray, args: RunArgs) -> np.ndarray:
    """Return the padded length of every training micro-batch of a dynamic-padding point, in the loader's order."""
    import torch
    from transformers.trainer_pt_utils import get_length_grouped_indices

    t, tr = args.task, args.train
    n = min(train_rows(args), len(lengths))
    # datasets' Dataset.shuffle(seed) is numpy's default_rng(seed).permutation
    rows = np.random.default_rng(tr.seed).permutation(len(lengths))[:n] if t.shuffle_subset else np.arange(n)
    rows_len = np.minimum(lengths[rows], t.max_length)  # tokenization truncates at max_length
    needed = optimizer_steps(args, rows=n) * tr.gradient_accumulation_steps
    generator, out = torch.Generator().manual_seed(tr.seed), []
    while len(out) < needed:  # one pass per epoch, the generator running on as the loader's does
        if t.group_by_length:  # LengthGroupedSampler, its own generator
            order = get_length_grouped_indices(rows_len.tolist(), tr.batch, generator=generator)
        else:  # a DataLoader iterator draws its base seed from the generator, then RandomSampler's randperm
            torch.empty((), dtype=torch.int64).random_(generator=generator)
            order = torch.randperm(n, generator=generator).tolist()
        out.extend(chunk_maxima(rows_len[order], tr.batch, drop_last=True))
    return round_up(np.array(out[:needed], dtype=np.int64), t.pad_to_multiple_of)


def eval_padded_lengths(lengths: dict[str, np.ndarray], args: RunArgs) -> np.ndarray:
    """Return the padded length of every evaluation batch of a dynamic-padding point (rows in order)."""
    t, out = args.task, []
    for split, rows in eval_passes(args):
        rows_len = np.minimum(lengths[split][:rows], t.max_length)
        out.extend(chunk_maxima(rows_len, eval_batch(args), drop_last=False))
    return round_up(np.array(out, dtype=np.int64), t.pad_to_multiple_of)


def padded_lengths(args: RunArgs, lengths: dict[str, np.ndarray] | None) -> tuple[np.ndarray, np.ndarray] | None:
    """Return the padded lengths of a point's training and evaluation batches (None: dynamic, no data here)."""
    t = args.task
    if t.padding == "static":
        return (
            np.full(optimizer_steps(args) * args.train.gradient_accumulation_steps, t.max_length),
            np.full(sum(math.ceil(r / eval_batch(args)) for _, r in eval_passes(args)), t.max_length),
        )
    if lengths is None:
        return None
    return train_padded_lengths(lengths["train"], args), eval_padded_lengths(lengths, args)


@functools.cache
def data_token_lengths(model_name: str, data_dir: str | None = None) -> dict[str, np.ndarray] | str:
    """Return every split's untruncated token lengths under `model_name`'s tokenizer, or why not here."""
    from helpers.run import data, models, tokens

    folder = data_dir or os.environ.get(data.ENV_VAR)
    if not folder:
        return f"no local data (set {data.ENV_VAR} or data_dir) to count the padded lengths"
    try:
        splits, _ = data.load_local(folder)
        tokenizer = models.load_tokenizer(architecture(model_name))
    except (OSError, ValueError) as err:
        return f"the token lengths could not be counted ({type(err).__name__}: {err})"
    return {split: tokens.token_lengths(splits[split]["text"], tokenizer) for split in splits}
