"""Time to a validation accuracy: one recipe through the platform's loop (Nvidia/train.py) and through Hugging Face
`Trainer`, each configuration once a round with the round's seed (paired seeds), the order rotated each round.

Data, tokens and the seeded model come from the same helpers for every configuration: only the loop and the recipe
differ. Time to the target is training seconds with the evaluations left out; wall is from the configuration's start.
"""

from __future__ import annotations

import math
import tempfile
import time
from dataclasses import asdict, dataclass

import torch
from transformers import Trainer, TrainerCallback, TrainingArguments

from bench import rounds
from helpers import arguments, data, devices, evaluation, models, optim, precision, record, tokens
from Nvidia import train

TRAINER_DEFAULTS, TRAINER_RECIPE, LOOP = "Trainer, run_glue defaults", "Trainer, project recipe", "Nvidia loop"
# run_glue.py's README command; weight decay, warm-up and the optimizer are TrainingArguments' defaults
RUN_GLUE = dict(
    max_length=128,
    padding="static",
    batch=32,
    lr=2e-5,
    epochs=3,
    weight_decay=0.0,
    warmup_ratio=0.0,
    optim="adamw_torch_fused",
    precision="fp32",
)
# the Makefile's BASELINE_PARAMS (tests/bench/test_trainer_tta.py reads the Makefile against it)
RECIPE = dict(max_length=64, padding="dynamic", group_by_length=True, batch=32, lr=2e-4, epochs=1)
CONFIGS = {TRAINER_DEFAULTS: RUN_GLUE, TRAINER_RECIPE: RECIPE, LOOP: RECIPE}
RATIOS = ((TRAINER_DEFAULTS, LOOP), (TRAINER_RECIPE, LOOP))  # Trainer's time / the loop's: > 1, the loop is sooner


@dataclass(frozen=True)
class Sizes:
    """How big the case is: the defaults are `make baseline`'s run; a test gives a tiny slice."""

    model: str = "minilm"
    train_rows: int = 16000  # make baseline's: the whole training split
    eval_rows: int | None = None  # validation (and test) rows; None: the whole split (2,000)
    eval_every: int = 50  # optimizer steps between evaluations
    max_steps: int | None = None  # None: each recipe's epochs
    target: float = 0.90
    rounds: int = 1
    budget_s: float | None = None  # Trainer's training seconds after which it ends short of the target; None: none
    seeds: tuple[int, ...] = (42,)  # round r trains seed seeds[r % len(seeds)] in every configuration (paired)
    to_the_end: bool = False  # train the whole recipe (no stop at the target), then evaluate the test split
    configs: tuple[str, ...] = tuple(CONFIGS)  # the configurations run, in this order


def run_args(name: str, sizes: Sizes, values: dict, seed: int) -> arguments.NvidiaArgs:
    """Return configuration `name`'s arguments: its recipe, the data slice, the evaluation cadence, the seed."""
    stop = {} if sizes.to_the_end or name != LOOP else {"stop_at_accuracy": sizes.target}
    slice_ = dict(
        model_name=sizes.model,
        train_subset=sizes.train_rows,
        eval_subset=sizes.eval_rows,
        shuffle_subset=True,
        max_steps=sizes.max_steps,
        eval_every=sizes.eval_every,
    )
    given = {**values, **slice_, "progress": False, "seed": seed, "run_name": record.slug(name), **stop}
    return arguments.build(given | CONFIGS[name], arguments.NvidiaArgs)


def outcome(curve: list[dict], target: float, **measured) -> dict:
    """Return one configuration's round: what it `measured`, its curve and when it first reached `target`."""
    hit = evaluation.crossings([record.CurvePoint(**p) for p in curve], (target,))[f"{target:.2f}"]
    return measured | {
        "time_to_target_s": hit.train_time_s,
        "wall_to_target_s": hit.wall_s,
        "target_step": hit.step,
        "reason": hit.reason,
        "beyond_s": None if hit.train_time_s is not None or not curve else curve[-1]["train_time_s"],
        "curve": curve,
        "best_val_accuracy": max((p["val_accuracy"] for p in curve), default=None),
    }


def loop_run(args: arguments.NvidiaArgs, sizes: Sizes) -> dict:
    """Return the recipe's outcome through the platform's loop, read from the record it wrote."""
    rec = train.train(args)
    t, metrics = rec["timing"] or {}, rec["metrics"] or {}
    return outcome(
        rec["curve"],
        sizes.target,
        status=rec["status"],
        precision=rec["precision"]["used"],
        train_time_s=t.get("train_time_s"),
        steps=t.get("steps"),
        samples=t.get("samples_processed"),
        seed=args.seed,
        test_accuracy=metrics.get("test_accuracy") if sizes.to_the_end else None,
    )


class EvalClock(TrainerCallback):
    """Trainer's clock of training seconds (evaluations left out); it stops training at `target` or `budget_s`."""

    def __init__(self, sync, target: float | None, budget_s: float | None, origin_s: float):
        self.sync, self.target, self.budget_s, self.origin_s = sync, target, budget_s, origin_s
        self.points: list[dict] = []
        self.t0 = self.paused = None
        self.eval_s = self.train_s = 0.0

    def on_train_begin(self, args, state, control, **kwargs):
        self.sync()
        self.t0 = time.perf_counter()

    def on_step_end(self, args, state, control, **kwargs):
        if control.should_evaluate or control.should_training_stop:  # set by Trainer's flow callback, which runs first
            self.sync()
            self.paused = time.perf_counter()
            self.train_s = self.paused - self.t0 - self.eval_s

    def on_evaluate(self, args, state, control, metrics=None, **kwargs):
        self.eval_s += time.perf_counter() - self.paused
        accuracy, rows = metrics["eval_accuracy"], metrics["eval_rows"]
        self.points.append(
            dict(
                step=state.global_step,
                train_time_s=self.train_s,
                val_accuracy=accuracy,
                rows=rows,
                samples=state.global_step * args.train_batch_size,  # a short last batch counts whole
                wall_s=time.perf_counter() - self.origin_s,
            )
        )
        reached = self.target is not None and accuracy >= self.target
        if reached or (self.budget_s is not None and self.train_s >= self.budget_s):
            control.should_training_stop = True


def accuracy(prediction) -> dict:
    """Return Trainer's metrics of a prediction: accuracy and the rows it covers."""
    right = prediction.predictions.argmax(-1) == prediction.label_ids
    return {"accuracy": float(right.mean()), "rows": len(right)}


def trainer_run(args: arguments.NvidiaArgs, sizes: Sizes) -> dict:
    """Return the outcome of `args`' recipe through `transformers.Trainer`, on the loop's data, tokens and model."""
    origin_s = time.perf_counter()  # as the loop's wall: from its start
    dev = devices.cuda_device() if args.device == "cuda" else devices.cpu_device()
    used, rec = precision.choose(args.precision, dev).used, record.RunRecord(run_name=args.name())
    tok, splits = tokens.tokenize(rec, args, data.load(rec, args))
    model = models.build(rec, args, used)
    sync = torch.cuda.synchronize if dev.type == "cuda" else lambda: None
    clock = EvalClock(sync, None if sizes.to_the_end else sizes.target, sizes.budget_s, origin_s)
    with tempfile.TemporaryDirectory() as out:
        targs = TrainingArguments(
            output_dir=out,
            per_device_train_batch_size=args.batch,
            per_device_eval_batch_size=max(args.batch, 32),
            learning_rate=args.lr,
            weight_decay=args.weight_decay,
            max_grad_norm=args.max_grad_norm,
            optim=args.optim,
            bf16=used == "bf16",
            fp16=used == "fp16",
            # the loop's plan: whole batches of each epoch, capped by max_steps (Trainer's max_steps replaces epochs)
            max_steps=optim.total_steps(args, math.ceil(len(splits["train"]) / args.batch)),
            warmup_steps=args.warmup_ratio,  # below 1: a share of the steps, rounded up as the loop rounds it
            train_sampling_strategy="group_by_length" if args.group_by_length else "random",
            eval_strategy="steps",
            eval_steps=sizes.eval_every,
            save_strategy="no",
            logging_strategy="no",
            report_to="none",
            disable_tqdm=True,
            dataloader_num_workers=0,
            use_cpu=dev.type == "cpu",
            seed=args.seed,
        )
        trainer = Trainer(
            model=model,
            args=targs,
            train_dataset=splits["train"],
            eval_dataset=splits["validation"],
            processing_class=tok,
            compute_metrics=accuracy,
            callbacks=[clock],
            data_collator=tokens.collator(tok, args),
        )
        trainer.train()
        # predict, not evaluate: the clock's on_evaluate would take the test split for a validation point
        test = trainer.predict(splits["test"]).metrics["test_accuracy"] if sizes.to_the_end else None
    steps = trainer.state.global_step
    return outcome(
        clock.points,
        sizes.target,
        status="finished",
        precision=used,
        train_time_s=clock.train_s,
        steps=steps,
        samples=steps * args.batch,
        seed=args.seed,
        test_accuracy=test,
    )


def ratios(rates: dict[str, list[dict]], num: str, den: str, key: str = "time_to_target_s") -> dict:
    """Return `num`'s time / `den`'s per round, their median, and lower bounds where `num` fell short of the target."""
    per_round = rounds.paired_ratios(rates, num, den, key)
    at_least = [
        x
        if x is not None
        else a["beyond_s"] / b[key]
        if key == "time_to_target_s" and a["beyond_s"] and b[key]
        else None
        for x, a, b in zip(per_round, rates[num], rates[den])
    ]
    return {"median": rounds.summary(per_round)[0], "per_round": per_round, "at_least": at_least}


def section(values: dict, sizes: Sizes, gate=None) -> dict:
    """Return each configuration's rounds as `rates` and their paired time-to-target ratios (training and wall)."""

    def run(name: str):
        go = loop_run if name == LOOP else trainer_run
        return lambda r: go(run_args(name, sizes, values, sizes.seeds[r % len(sizes.seeds)]), sizes)

    out = rounds.alternate({name: run(name) for name in sizes.configs}, sizes.rounds, gate)
    rates = {
        n: [
            {
                **w,
                "samples": w["samples"] / w["train_time_s"] if w["train_time_s"] else None,
                "seconds": w["train_time_s"],
            }
            for w in ws
        ]
        for n, ws in out.items()
    }
    pairs = [(a, b) for a, b in RATIOS if a in rates and b in rates]
    return {
        "sizes": asdict(sizes),
        "configs": {name: CONFIGS[name] for name in sizes.configs},
        "rates": rates,
        "ratios": {f"{a} / {b}": ratios(rates, a, b) for a, b in pairs},
        "wall_ratios": {f"{a} / {b}": ratios(rates, a, b, "wall_to_target_s") for a, b in pairs},
    }
