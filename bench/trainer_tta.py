"""Time to 90% validation accuracy: the project's run path against Hugging Face `Trainer`, in rotated rounds.

Data, tokens and model are built by the run path's own steps for every configuration: only the loop and recipe differ.
"""

from __future__ import annotations

import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

from bench.harness import trainer_args
from helpers import steps
from helpers.calc.accuracy_time import crossings
from helpers.run import paths, record_destination, tokens
from helpers.run.args import build_args
from helpers.run.device import synchronize
from helpers.run.schema import CurvePoint

TRAINER_DEFAULTS, TRAINER_RECIPE = "Trainer, run_glue defaults", "Trainer, project recipe"
PROJECT = "project run path"
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
CONFIGS = {TRAINER_DEFAULTS: RUN_GLUE, TRAINER_RECIPE: RECIPE, PROJECT: RECIPE}
# Trainer's time / the run path's: > 1, the run path is faster
RATIOS = ((TRAINER_DEFAULTS, PROJECT), (TRAINER_RECIPE, PROJECT))


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
    budget_s: float | None = None  # Trainer's training seconds after which it ends unreached; None: no budget
    seeds: tuple[int, ...] = (42,)  # round r trains seed seeds[r % len(seeds)] in every configuration (paired)
    to_the_end: bool = False  # train the whole recipe (no stop at the target) and evaluate the test split at its end
    configs: tuple[str, ...] = tuple(CONFIGS)  # the configurations run (CONFIGS' names), in this order


def _values(name: str, sizes: Sizes, data_dir: str | None, device: str, results: str, seed: int = 42) -> dict:
    """Return configuration `name`'s run parameters: its recipe, the data slice, the evaluation cadence, the seed."""
    return {
        "model_name": sizes.model,
        "data_dir": data_dir,
        "device": device,
        "train_subset": sizes.train_rows,
        "eval_subset": sizes.eval_rows,
        "shuffle_subset": True,
        "max_steps": sizes.max_steps,
        "eval_every": sizes.eval_every,
        "progress": False,
        "log_every": 50,
        "results_path": results,
        "run_name": name.replace(",", "").replace(" ", "_"),
        "replace_record": True,
        "seed": seed,
        **CONFIGS[name],
    }


def project_run(sizes: Sizes, data_dir: str | None, device: str, results: str, seed: int = 42) -> tuple[dict, int]:
    """Return (the outcome, the epochs run) of the recipe through the project's run path (`steps.run_all`)."""
    stop = {} if sizes.to_the_end else {"stop_at_accuracy": sizes.target}
    rec = steps.run_all(build_args(_values(PROJECT, sizes, data_dir, device, results, seed) | stop))
    t = rec.get("timing") or {}
    return outcome(
        rec.get("curve") or [],
        sizes.target,
        status=rec.get("status"),
        precision=rec["precision"]["used"],
        train_time_s=t.get("train_time_s"),
        steps=t.get("steps"),
        samples=t.get("samples_processed"),
        seed=seed,
        test_accuracy=(rec.get("metrics") or {}).get("test_accuracy") if sizes.to_the_end else None,
    ), rec["params"]["epochs"]


class EvalClock:
    """A TrainerCallback's clock of training seconds (evaluations left out) that stops at `target` or `budget_s`."""

    def __init__(
        self,
        sync: Callable[[], None],
        target: float | None,
        budget_s: float | None = None,
        origin_s: float | None = None,
    ):
        self.sync, self.target, self.budget_s = sync, target, budget_s
        self.origin_s = time.perf_counter() if origin_s is None else origin_s
        self.points: list[dict] = []
        self.t0 = self.paused = None
        self.eval_s = self.train_s = 0.0

    def on_train_begin(self, args, state, control, **kwargs):
        self.sync()
        self.t0 = time.perf_counter()

    def on_step_end(self, args, state, control, **kwargs):
        # set by Trainer's flow callback, which runs first
        if control.should_evaluate or control.should_training_stop:
            self.sync()
            self.paused = time.perf_counter()
            self.train_s = self.paused - self.t0 - self.eval_s

    def on_evaluate(self, args, state, control, metrics=None, **kwargs):
        self.eval_s += time.perf_counter() - self.paused
        accuracy = metrics["eval_accuracy"]
        self.points.append(
            {
                "step": state.global_step,
                "train_time_s": self.train_s,
                "val_accuracy": accuracy,
                # a partial last batch counts whole
                "samples": state.global_step * args.train_batch_size,
                "wall_s": time.perf_counter() - self.origin_s,
            }
        )
        reached = self.target is not None and accuracy >= self.target
        spent = self.budget_s is not None and self.train_s >= self.budget_s
        if reached or spent:
            control.should_training_stop = True


def _accuracy(prediction) -> dict:
    return {"accuracy": float((prediction.predictions.argmax(-1) == prediction.label_ids).mean())}


def trainer_run(
    name: str, sizes: Sizes, data_dir: str | None, device: str, results: str, seed: int = 42
) -> tuple[dict, int]:
    """Return (the outcome, the epochs run) of configuration `name` through `transformers.Trainer`."""
    from transformers import Trainer, TrainerCallback

    origin_s = time.perf_counter()  # as the run path's wall_s: from its start step
    run = steps.start(build_args(_values(name, sizes, data_dir, device, results, seed)))
    record_destination.release(run.claim)  # Trainer trains it: the run path writes no record of this name
    splits = steps.tokenize(run, steps.load_data(run))
    model = steps.build_model(run)
    a = run.args

    class Clock(EvalClock, TrainerCallback):
        """EvalClock as one of Trainer's callbacks."""

    target = None if sizes.to_the_end else sizes.target
    clock = Clock(lambda: synchronize(run.dev), target, sizes.budget_s, origin_s)
    with tempfile.TemporaryDirectory() as out:
        targs = trainer_args(
            run,
            out,
            per_device_eval_batch_size=max(a.train.batch, 32),
            # the run path's plan: epochs x batches capped by max_steps (Trainer's max_steps replaces epochs)
            max_steps=run.record.data.optimizer_steps_planned,
            warmup_steps=a.train.warmup_ratio,
            train_sampling_strategy="group_by_length" if a.task.group_by_length else "random",
            eval_strategy="steps",
            eval_steps=sizes.eval_every,
        )
        collate = tokens.collator(run.tokenizer, a.task.padding, a.task.pad_to_multiple_of)
        trainer = Trainer(
            model=model,
            args=targs,
            train_dataset=splits["train"],
            eval_dataset=splits["validation"],
            processing_class=run.tokenizer,
            compute_metrics=_accuracy,
            callbacks=[clock],
            data_collator=collate,
        )
        trainer.train()
        # predict, not evaluate: the clock's on_evaluate would take the test split for a validation point
        test = trainer.predict(splits["test"]).metrics["test_accuracy"] if sizes.to_the_end else None
    rows = len(splits["validation"])
    curve = [{**p, "rows": rows} for p in clock.points]
    steps_done = trainer.state.global_step
    return outcome(
        curve,
        sizes.target,
        status="finished",
        precision=run.precision,
        train_time_s=clock.train_s,
        steps=steps_done,
        samples=steps_done * a.train.batch,
        seed=seed,
        test_accuracy=test,
    ), a.train.epochs


def outcome(curve: list[dict], target: float, **measured) -> dict:
    """Return one configuration's round: what it `measured`, its curve and when it first reached `target`."""
    hit = crossings([CurvePoint(**p) for p in curve], (target,))[f"{target:.2f}"]
    reached = hit.train_time_s is not None
    return measured | {
        "time_to_target_s": hit.train_time_s,
        "wall_to_target_s": hit.wall_s,
        "target_step": hit.step,
        "reason": hit.reason,
        "beyond_s": None if reached or not curve else curve[-1]["train_time_s"],  # not reached: more than this
        "curve": curve,
        "best_val_accuracy": max((p["val_accuracy"] for p in curve), default=None),
    }


def tta_section(args, sizes: Sizes | None = None) -> dict:
    """Return each configuration's rounds as `rates` windows and their paired time-to-target ratios."""
    sizes = sizes or Sizes()
    names = list(sizes.configs)
    rounds: dict[str, list[dict]] = {name: [] for name in names}
    epochs: dict[str, int] = {}
    # the project's own records stay out of the study; its kept roofs and precision probes come in, as
    # `make baseline` reads them, so neither configuration measures them again
    with tempfile.TemporaryDirectory() as results:
        kept = paths.repo_path(paths.RESULTS_DIR) / "_peaks"
        if kept.is_dir():
            shutil.copytree(kept, f"{results}/_peaks")
        for r in range(sizes.rounds):
            seed = sizes.seeds[r % len(sizes.seeds)]
            for name in names[r % len(names) :] + names[: r % len(names)]:
                other = args.gate() if getattr(args, "gate", None) else None
                if name == PROJECT:
                    result, epochs[name] = project_run(sizes, args.data_dir, args.device, results, seed)
                else:
                    result, epochs[name] = trainer_run(name, sizes, args.data_dir, args.device, results, seed)
                rounds[name].append({**result, "other_cores": other})
    rates = {
        name: [
            {
                **w,
                "samples": (w["samples"] or 0) / w["train_time_s"] if w["train_time_s"] else None,
                "seconds": w["train_time_s"],
            }
            for w in windows
        ]
        for name, windows in rounds.items()
    }
    configs = {name: {**CONFIGS[name], "epochs": epochs[name]} for name in names}  # as run
    pairs = [(a, b) for a, b in RATIOS if a in names and b in names]
    return {
        "sizes": asdict(sizes),
        "configs": configs,
        "rates": rates,
        "ratios": {f"{a} / {b}": ratios(rates, a, b) for a, b in pairs},
        "wall_ratios": {f"{a} / {b}": ratios(rates, a, b, "wall_to_target_s") for a, b in pairs},
    }


def ratios(rates: dict[str, list[dict]], num: str, den: str, key: str = "time_to_target_s") -> dict:
    """Return `num`'s time to target / `den`'s per round, their median, and lower bounds where `num` fell short."""
    per_round = [a.get(key) / b.get(key) if a.get(key) and b.get(key) else None for a, b in zip(rates[num], rates[den])]
    at_least = [
        x
        if x is not None
        else a["beyond_s"] / b[key]
        if key == "time_to_target_s" and a.get("beyond_s") and b[key]
        else None
        for x, a, b in zip(per_round, rates[num], rates[den])
    ]
    known = [x for x in per_round if x is not None]
    return {"median": statistics.median(known) if known else None, "per_round": per_round, "at_least": at_least}
