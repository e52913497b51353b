"""Tokens: tokenization with static or dynamic padding, the training loader and its steps, token-length statistics.

tok, splits = tokens.tokenize(rec, args, ds)
loader = tokens.train_loader(splits["train"], args, tok, rank, drop_last)
for batch, micro, last in tokens.steps(loader, accumulation, total_steps, epochs): ...
"""

from __future__ import annotations

import math
import secrets
import time

import numpy as np
import torch
from datasets import DatasetDict
from torch.utils.data import DataLoader, DistributedSampler
from transformers import DataCollatorWithPadding, default_data_collator

from helpers import models, record
from helpers.arguments import ConfigError

COLUMNS = ["input_ids", "token_type_ids", "attention_mask", "labels"]


def tokenize(rec: record.RunRecord, args, ds) -> tuple:
    """Return (the tokenizer, the splits tokenized to max_length; padded to it with static padding)."""
    t0 = time.perf_counter()
    tok = models.tokenizer(args.model_name)
    pad = "max_length" if args.padding == "static" else False

    def encode(batch: dict) -> dict:
        out = tok(batch["text"], truncation=True, max_length=args.max_length, padding=pad)
        return {**out, "labels": batch["label"]}

    # a fingerprint given: datasets would otherwise hash the tokenizer to name each result (seconds a run)
    out = DatasetDict(
        {
            name: split.map(
                encode,
                batched=True,
                batch_size=2000,
                remove_columns=split.column_names,
                load_from_cache_file=False,
                new_fingerprint=secrets.token_hex(8),
                desc=f"tokenize {name}",
            )
            for name, split in ds.items()
        }
    )
    out = out.with_format("torch", columns=[c for c in COLUMNS if c in out["train"].column_names])
    rec.phases = (rec.phases or record.Phases()).model_copy(update={"tokenize": time.perf_counter() - t0})
    return tok, out


def collator(tok, args):
    """Return the batch collator: stacking for static padding, pad-to-longest (rounded up) for dynamic."""
    if args.padding == "static":
        return default_data_collator
    return DataCollatorWithPadding(tok, padding="longest", pad_to_multiple_of=args.pad_to_multiple_of)


def train_loader(split, args, tok, rank=None, drop_last: bool = False, rows_only: bool = False) -> DataLoader:
    """Return the seeded training loader (a rank's shard, length-grouped batches where asked); refuse no-step runs.
    rows_only: the same batches as row indices (what DeviceBatches slices on the device)."""
    rows = math.ceil(len(split) / (rank.world_size if rank else 1))
    if args.batch > rows:  # before the model is built: a batch never holds a row twice
        raise ConfigError(f"batch={args.batch} is above the {rows} training rows per device: give batch <= {rows}")
    if rank:
        sampler = DistributedSampler(split, num_replicas=rank.world_size, rank=rank.rank, shuffle=True, seed=args.seed)
    elif args.group_by_length:
        from transformers.trainer_pt_utils import LengthGroupedSampler

        lengths = [len(ids) for ids in split["input_ids"]]
        sampler = LengthGroupedSampler(args.batch, lengths=lengths, generator=torch.Generator().manual_seed(args.seed))
    else:
        sampler = None
    loader = DataLoader(
        range(len(split)) if rows_only else split,
        batch_size=args.batch,
        shuffle=sampler is None,
        sampler=sampler,
        collate_fn=torch.tensor if rows_only else collator(tok, args),
        drop_last=drop_last,  # static graphs (XLA, a compiled step): a short last batch would be one more
        generator=torch.Generator().manual_seed(args.seed),
        pin_memory=torch.cuda.is_available() and not rows_only,
    )
    if len(loader) < args.gradient_accumulation_steps:
        raise ConfigError(
            f"this run makes no optimizer step: {len(loader)} batches of {args.batch} per epoch, "
            f"gradient_accumulation_steps={args.gradient_accumulation_steps}: give more rows or a smaller batch"
        )
    return loader


def steps(loader, accumulation: int, total: int, epochs: int):
    """Yield (batch, micro-batch index, last of its step) for `total` optimizer steps; a step never spans epochs."""
    done = 0
    for epoch in range(epochs):
        sampler = getattr(loader, "sampler", None)
        if hasattr(sampler, "set_epoch"):
            sampler.set_epoch(epoch)  # distributed: a new disjoint shard order each epoch
        whole = len(loader) // accumulation * accumulation  # an epoch's last batches that fill no step are left out
        for index, batch in enumerate(loader):
            if index >= whole:
                break
            micro = index % accumulation
            yield batch, micro, micro == accumulation - 1
            done += micro == accumulation - 1
            if done >= total:
                return


class DeviceBatches:
    """A split's batches sliced from one copy of its token table on the device, in the host loader's order."""

    def __init__(self, split, args, tok, rank, drop_last: bool, device: str) -> None:
        whole = split[:]
        self.lengths = [int(mask.sum()) for mask in whole["attention_mask"]]
        self.args, self.device = args, device
        self.index_order = train_loader(split, args, tok, rank, drop_last, rows_only=True)  # drawn as the host's
        self.batch_size, self.sampler = args.batch, self.index_order.sampler
        table = torch.full(
            (len(self.lengths), self.width(range(len(self.lengths)))), tok.pad_token_id, dtype=torch.long
        )
        for i, (ids, n) in enumerate(zip(whole["input_ids"], self.lengths)):
            table[i, :n] = ids[:n]
        self.input_ids, self.labels = table.to(device), torch.as_tensor(whole["labels"]).to(device)
        self.token_types = "token_type_ids" in split.column_names
        self.on_device = torch.tensor(self.lengths).to(device)

    def __len__(self) -> int:
        return len(self.index_order)

    def width(self, rows) -> int:
        """Return a batch's padded length, as the collator pads it."""
        if self.args.padding == "static":
            return self.args.max_length
        multiple = self.args.pad_to_multiple_of or 1
        return math.ceil(max(self.lengths[i] for i in rows) / multiple) * multiple

    def __iter__(self):
        for rows in self.index_order:  # this epoch's row indices, drawn as the host loader draws them
            at = rows.to(self.device, non_blocking=True)
            width = self.width(rows.tolist())
            ids = self.input_ids.index_select(0, at)[:, :width]
            mask = (torch.arange(width, device=self.device) < self.on_device.index_select(0, at)[:, None]).long()
            batch = {"input_ids": ids, "attention_mask": mask, "labels": self.labels.index_select(0, at)}
            yield batch | ({"token_type_ids": torch.zeros_like(ids)} if self.token_types else {})


def token_lengths(texts, tok) -> np.ndarray:
    """Return each text's length in tokens, [CLS] and [SEP] included, without truncation."""
    enc = tok(list(texts), truncation=False, padding=False, add_special_tokens=True)
    return np.array([len(ids) for ids in enc["input_ids"]], dtype=np.int64)


def length_stats(lengths, coverages=(0.9, 0.95, 0.99), choose_coverage: float = 0.95) -> dict:
    """Return min, max, mean, median, the length covering each fraction of rows, and the power of two chosen."""
    arr = np.sort(np.asarray(lengths, dtype=np.int64))
    if arr.size == 0:
        raise ValueError("length_stats needs at least one length")
    stats = {"rows": int(arr.size), "min": int(arr[0]), "max": int(arr[-1])}
    stats |= {"mean": float(arr.mean()), "median": float(np.median(arr))}
    # inverted_cdf: the smallest length L such that at least a fraction c of the rows have length <= L
    stats |= {f"p{round(c * 100)}": int(np.quantile(arr, c, method="inverted_cdf")) for c in coverages}
    need = np.quantile(arr, choose_coverage, method="inverted_cdf")
    return stats | {"chosen_coverage": choose_coverage, "chosen_pow2": 1 << max(0, math.ceil(math.log2(need)))}
