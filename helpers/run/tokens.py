"""Tokenization with static or dynamic padding, the data loaders, and token-length statistics."""

from __future__ import annotations

import math

import numpy as np
import torch
from datasets import Dataset, DatasetDict
from torch.utils.data import DataLoader
from transformers import DataCollatorWithPadding, PreTrainedTokenizerBase, default_data_collator

COLUMNS = ["input_ids", "token_type_ids", "attention_mask", "labels"]


def tokenize(ds: DatasetDict, tokenizer: PreTrainedTokenizerBase, max_length: int, padding: str) -> DatasetDict:
    """Return the splits tokenized to at most `max_length` tokens, padded to it when `padding='static'`."""
    pad = "max_length" if padding == "static" else False

    def encode(batch: dict) -> dict:
        out = tokenizer(batch["text"], truncation=True, max_length=max_length, padding=pad)
        out["labels"] = batch["label"]
        return out

    out = ds.map(
        encode,
        batched=True,
        batch_size=2000,
        remove_columns=ds["train"].column_names,
        desc="tokenize",
        load_from_cache_file=False,
    )
    return out.with_format("torch", columns=[c for c in COLUMNS if c in out["train"].column_names])


def collator(tokenizer: PreTrainedTokenizerBase, padding: str, pad_to_multiple_of: int | None = None):
    """Return the batch collator: stacking for static padding, pad-to-longest for dynamic."""
    if padding == "static":
        return default_data_collator
    return DataCollatorWithPadding(
        tokenizer, padding="longest", pad_to_multiple_of=pad_to_multiple_of, return_tensors="pt"
    )


def loader(
    split: Dataset,
    batch: int,
    collate,
    shuffle: bool,
    seed: int,
    drop_last: bool = False,
    sampler=None,
    pin_memory: bool = False,
) -> DataLoader:
    """Return a DataLoader over `split`; seeded shuffling so every run sees the same order."""
    generator = torch.Generator().manual_seed(seed)
    return DataLoader(
        split,
        batch_size=batch,
        shuffle=shuffle and sampler is None,
        sampler=sampler,
        collate_fn=collate,
        drop_last=drop_last,
        generator=generator,
        pin_memory=pin_memory,
    )


class DeviceBatches:
    """A split's training batches sliced from its token table on the device, as loader()'s with the same arguments."""

    def __init__(
        self,
        split: Dataset,
        order: DataLoader,
        device: torch.device,
        pad_id: int,
        pad_to: int | None = None,  # static padding's length; None: each batch's longest row
        pad_to_multiple_of: int | None = None,
    ) -> None:
        whole = split[:]  # every row's columns (torch format: ragged ones as a list of tensors)
        rows = whole["input_ids"]
        self.lengths = [int(mask.sum()) for mask in whole["attention_mask"]]  # static rows carry their padding
        self.order, self.device, self.pad_to, self.multiple = order, device, pad_to, pad_to_multiple_of
        width = self.width(range(len(rows)))  # the widest batch's
        table = torch.full((len(rows), width), pad_id, dtype=torch.long)
        for i, (ids, n) in enumerate(zip(rows, self.lengths)):
            table[i, :n] = ids[:n]
        self.input_ids = table.to(device)
        self.lengths_on_device = torch.tensor(self.lengths).to(device)
        self.labels = torch.as_tensor(whole["labels"]).to(device)
        self.has_token_types = "token_type_ids" in split.column_names
        self.batch_size = order.batch_size

    def __len__(self) -> int:
        return len(self.order)

    def width(self, rows) -> int:
        """Return the padded length of a batch of `rows` (as DataCollatorWithPadding pads it)."""
        if self.pad_to:
            return self.pad_to
        longest = max(self.lengths[i] for i in rows)
        return math.ceil(longest / self.multiple) * self.multiple if self.multiple else longest

    def __iter__(self):
        batches = list(self.order)  # this epoch's row indices, batch by batch (the sampler draws them here)
        if not batches:
            return
        index = torch.tensor([i for rows in batches for i in rows]).to(self.device, non_blocking=True)
        lengths = self.lengths_on_device
        start = 0
        for rows in batches:
            at = index[start : start + len(rows)]
            start += len(rows)
            width = self.width(rows)
            ids = self.input_ids.index_select(0, at)[:, :width]
            mask = (torch.arange(width, device=self.device) < lengths.index_select(0, at)[:, None]).long()
            batch = {"input_ids": ids}
            if self.has_token_types:  # one sentence a row: every token of segment 0
                batch["token_type_ids"] = torch.zeros_like(ids)
            yield {**batch, "attention_mask": mask, "labels": self.labels.index_select(0, at)}


def row_order(split: Dataset, batch: int, seed: int, drop_last: bool = False, sampler=None) -> DataLoader:
    """Return a DataLoader of row indices in the order loader() with the same arguments draws the rows."""
    return loader(range(len(split)), batch, list, shuffle=True, seed=seed, drop_last=drop_last, sampler=sampler)


def length_grouped_sampler(split: Dataset, batch: int, seed: int):
    """Return transformers' sampler that puts rows of similar token length in the same batch (shuffled)."""
    from transformers.trainer_pt_utils import LengthGroupedSampler

    lengths = [len(ids) for ids in split["input_ids"]]
    return LengthGroupedSampler(batch, lengths=lengths, generator=torch.Generator().manual_seed(seed))


def token_lengths(texts, tokenizer: PreTrainedTokenizerBase) -> np.ndarray:
    """Return each text's length in tokens including [CLS] and [SEP], without truncation."""
    enc = tokenizer(list(texts), truncation=False, padding=False, add_special_tokens=True)
    return np.array([len(ids) for ids in enc["input_ids"]], dtype=np.int64)


def length_stats(lengths, coverages: tuple[float, ...] = (0.9, 0.95, 0.99), choose_coverage: float = 0.95) -> dict:
    """Return min, max, mean, median, the length covering each fraction of rows, and the power of two chosen."""
    arr = np.sort(np.asarray(lengths, dtype=np.int64))
    if arr.size == 0:
        raise ValueError("length_stats needs at least one length")
    stats = {
        "rows": int(arr.size),
        "min": int(arr[0]),
        "max": int(arr[-1]),
        "mean": float(arr.mean()),
        "median": float(np.median(arr)),
    }
    # inverted_cdf: the smallest length L such that at least a fraction c of the rows have length <= L
    for c in coverages:
        stats[f"p{round(c * 100)}"] = int(np.quantile(arr, c, method="inverted_cdf"))
    need = np.quantile(arr, choose_coverage, method="inverted_cdf")
    stats["chosen_coverage"] = choose_coverage
    stats["chosen_pow2"] = 1 << max(0, math.ceil(math.log2(need)))
    return stats
