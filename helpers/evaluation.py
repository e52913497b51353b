"""Evaluation: accuracy and macro-F1 on a split (batches sorted by length, collated once), the periodic evaluations
that give time to accuracy, and the final one.

    evaluator = evaluation.Evaluator(splits, tok, args, dev, precision)   # sync=torch_xla.sync on XLA
    point = evaluator.curve_point(rec, model, timer, t0)                  # every eval_every steps, outside the windows
    evaluator.final(rec, model, rank, reduce)                             # validation and test; time to accuracy
"""

from __future__ import annotations

import time

import torch

from helpers import models, record, tokens
from helpers.precision import autocast

TARGETS = (0.88, 0.90, 0.92)  # validation accuracy targets of time to accuracy; 0.90 is the headline's
# padded tokens per evaluation batch: on a CPU 64 rows at L=64 (timed paired on a Zen 5 EPYC, the whole validation
# split sorted by length: 1.30x the speed of 256 rows, 1.18x of 128); elsewhere 256 rows at L=64
EVAL_TOKENS = {"cpu": 4_096}
EVAL_TOKENS_ELSEWHERE = 16_384
# CPU kinds where eager attention evaluates faster than SDPA, timed paired by `python -m bench --sections eval`
EAGER_ATTENTION_CPUS = {"AVX512+avx512_bf16": "1.125x SDPA's rows/s (5 rounds, 1.05 .. 1.15) on a quiet Zen 5 EPYC"}


class Evaluator:
    """A run's evaluations: its batches (built once per split), how they run, and what the record keeps."""

    def __init__(self, splits, tok, args, dev, precision: str, sync=None, fixed_rows: bool = False):
        self.splits, self.tok, self.args, self.dev, self.precision = splits, tok, args, dev, precision
        self.sync = sync  # XLA: cut the graph after each batch (the same few graphs for every batch)
        self.fixed_rows = fixed_rows  # XLA: pad the last batch to full rows, so no new shape compiles
        per_batch = EVAL_TOKENS.get(dev.type, EVAL_TOKENS_ELSEWHERE) // args.max_length
        self.rows = max(args.batch, 32 if dev.type == "xla" else per_batch)
        self.attention = "eager" if dev.type == "cpu" and dev.cpu_capability in EAGER_ATTENTION_CPUS else None
        self.cache: dict = {}
        self.last_validation: tuple[int, dict] | None = None

    def batches(self, name: str, limit: int | None = None, shard: range | None = None) -> list[dict]:
        """Return split `name`'s batches (its first `limit` rows, or a rank's `shard`), longest rows first."""
        key = (name, limit, shard is not None)
        if key not in self.cache:
            split = self.splits[name]
            rows = list(shard) if shard is not None else list(range(min(limit or len(split), len(split))))
            every = [len(ids) for ids in split["input_ids"]] if self.args.padding == "dynamic" else None
            lengths = [every[i] for i in rows] if every else [0] * len(rows)
            ordered = [r for _, r in sorted(zip(lengths, rows), key=lambda p: -p[0])]
            collate = tokens.collator(self.tok, self.args)
            self.cache[key] = [
                collate(split.__getitems__(ordered[k : k + self.rows])) for k in range(0, len(ordered), self.rows)
            ]
        return self.cache[key]

    def run(self, model: torch.nn.Module, batches: list[dict], reduce=None) -> dict:
        """Return accuracy, macro-F1, loss and rows of `model` on `batches`; `reduce` sums over ranks."""
        inner = getattr(model, "module", model)
        before = inner.config._attn_implementation
        if self.attention and self.attention != before:
            inner.set_attn_implementation(self.attention)
        n = inner.config.num_labels
        confusion = torch.zeros(n * n, dtype=torch.long).to(self.dev.torch_device)
        loss_sum, count = (
            torch.zeros(1).to(self.dev.torch_device),
            torch.zeros(1, dtype=torch.long).to(self.dev.torch_device),
        )
        mode = torch.no_grad() if self.dev.type == "xla" else torch.inference_mode()
        model.eval()
        with mode:
            for batch in batches:
                if self.fixed_rows and len(batch["labels"]) < self.rows:
                    batch = pad_rows(batch, self.rows)
                batch = {k: v.to(self.dev.torch_device, non_blocking=True) for k, v in batch.items()}
                with autocast(self.precision, self.dev.type):
                    out = inner(**(batch if self.dev.type == "cpu" else models.static_mask(inner, batch)))
                valid = batch["labels"] >= 0
                # confusion[true, predicted] += 1 for the real rows, as one index_add: nothing leaves the device
                confusion.index_add_(0, batch["labels"].clamp(min=0) * n + out.logits.argmax(-1), valid.long())
                loss_sum += out.loss.detach().float() * valid.sum()
                count += valid.sum()
                if self.sync:
                    self.sync()
        model.train()
        if before != inner.config._attn_implementation:
            inner.set_attn_implementation(before)
        if reduce is not None:
            confusion, loss_sum, count = reduce(confusion), reduce(loss_sum), reduce(count)
        return {**confusion_metrics(confusion.cpu().view(n, n)), "loss": float(loss_sum) / max(int(count), 1)}

    def curve_point(self, rec: record.RunRecord, model, timer, t0: float) -> record.CurvePoint:
        """Evaluate `curve_rows` validation rows now; add the point to the record's curve and return it."""
        t = time.perf_counter()
        metrics = self.run(model, self.batches("validation", self.args.curve_rows))
        if metrics["rows"] == len(self.splits["validation"]):
            self.last_validation = (timer.steps, metrics)  # the whole split: the final evaluation's too
        test = None  # the test split at the first crossing of 90%: the checkpoint time to 90% names
        if metrics["accuracy"] >= 0.90 and not any((p.val_accuracy or 0) >= 0.90 for p in rec.curve):
            test = self.run(model, self.batches("test"))["accuracy"]
        now = time.perf_counter()
        point = record.CurvePoint(
            step=timer.steps,
            train_time_s=timer.train_seconds,
            samples=sum(w.samples for w in timer.windows),
            val_accuracy=metrics["accuracy"],
            rows=metrics["rows"],
            test_accuracy=test,
            eval_s=now - t,
            wall_s=now - t0,
        )
        rec.curve = [*rec.curve, point]
        phases = rec.phases or record.Phases()
        rec.phases = phases.model_copy(update={"periodic_eval": (phases.periodic_eval or 0.0) + point.eval_s})
        print(
            f"step {point.step}: validation accuracy {point.val_accuracy:.1%} on {point.rows} rows after "
            f"{point.train_time_s:.0f} s of training" + (f"; test accuracy {test:.1%}" if test is not None else ""),
            flush=True,
        )
        return point

    def final(self, rec: record.RunRecord, model, rank=None, reduce=None) -> dict:
        """Evaluate the validation and test splits (a rank its shard); set metrics, evaluation, time to accuracy."""
        t = time.perf_counter()
        out = {}
        for split, short in (("validation", "val"), ("test", "test")):
            steps = rec.timing.steps if rec.timing else None
            if split == "validation" and rank is None and self.last_validation and self.last_validation[0] == steps:
                metrics = self.last_validation[1]  # the same weights, evaluated at the last step already
            else:
                shard = range(rank.rank, len(self.splits[split]), rank.world_size) if rank else None
                metrics = self.run(model, self.batches(split, shard=shard), reduce)
            out |= {f"{short}_{k}": v for k, v in metrics.items()}
        rec.metrics = (rec.metrics or record.Metrics()).model_copy(update=out)
        rec.evaluation = record.Evaluation(
            precision=self.precision,
            attention=self.attention or getattr(model, "module", model).config._attn_implementation,
            threads=torch.get_num_threads(),
            rows_per_batch=self.rows,
            reason=EAGER_ATTENTION_CPUS.get(self.dev.cpu_capability) if self.attention else "as trained",
        )
        if rec.curve:
            rec.time_to_accuracy = crossings(rec.curve)
        phases = rec.phases or record.Phases()
        rec.phases = phases.model_copy(update={"evaluate": time.perf_counter() - t})
        print(
            f"evaluation: validation accuracy {out['val_accuracy']:.2%}, test accuracy {out['test_accuracy']:.2%}, "
            f"test macro-F1 {out['test_macro_f1']:.4f}",
            flush=True,
        )
        return out


def pad_rows(batch: dict, rows: int) -> dict:
    """Return `batch` padded to `rows` with copies of its first row labelled -100 (ignored by loss and metrics)."""
    extra = rows - len(batch["labels"])
    fill = {k: v[:1].expand(extra, *v.shape[1:]) for k, v in batch.items()}
    fill["labels"] = torch.full_like(fill["labels"], -100)
    return {k: torch.cat([v, fill[k]]) for k, v in batch.items()}


def confusion_metrics(confusion: torch.Tensor) -> dict:
    """Return accuracy, macro-F1 and rows from a confusion matrix indexed [true, predicted]."""
    cm = confusion.double()
    tp, total = cm.diag(), cm.sum()
    precision, recall = tp / cm.sum(0).clamp(min=1), tp / cm.sum(1).clamp(min=1)
    f1 = torch.where(precision + recall > 0, 2 * precision * recall / (precision + recall), torch.zeros_like(tp))
    return {
        "accuracy": float(tp.sum() / total) if total else float("nan"),
        "macro_f1": float(f1.mean()),
        "rows": int(total),
    }


def crossings(curve: list[record.CurvePoint], targets=TARGETS) -> dict[str, record.Crossing]:
    """Return, per target, the first evaluation that reached it, or why not (never reached, and the best seen)."""
    best = max((p.val_accuracy for p in curve if p.val_accuracy is not None), default=None)
    out = {}
    for target in targets:
        hit = next((p for p in curve if (p.val_accuracy or 0) >= target), None)
        if hit is None:
            seen = f"best {best:.2%} in {len(curve)} evaluations" if best is not None else "no evaluation"
            out[f"{target:.2f}"] = record.Crossing(reason=f"not reached ({seen})")
        else:
            fields = ("train_time_s", "wall_s", "step", "rows", "val_accuracy", "test_accuracy")
            out[f"{target:.2f}"] = record.Crossing(**{f: getattr(hit, f) for f in fields})
    return out
