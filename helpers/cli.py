"""The scripts' entry points: `Nvidia/train.py`, `Trainium/train.py` (training) and `Trainium/eval.py`.

The flags are the run's arguments (helpers/run/args.py) under the notebooks' names and the Hugging Face
examples' names (`run_glue.py`, `run_classification.py`), parsed by transformers' HfArgumentParser:

    python Trainium/train.py --model_name_or_path minilm --per_device_train_batch_size 32 \
        --max_seq_length 64 --learning_rate 1e-4 --num_train_epochs 1 --output_dir ckpt/
    python Nvidia/train.py --model_name minilm --batch 32 --max_length 64 --lr 1e-4 --epochs 1
    torchrun --nproc_per_node=2 Trainium/train.py --num_devices 2 ...   # data parallel

Training is steps.run_all: the same steps as the notebooks, a torchrun rank included.
"""

from __future__ import annotations

import json
import sys

from helpers import steps
from helpers.run import ddp, record_destination
from helpers.run.args import RunArgs, build_args
from helpers.run.argv import cli_parser, named_flags, parse_cli


class RankFailed(RuntimeError):
    """A torchrun rank's run failed without an exception: raised so its error file tells the launcher why."""


def main(argv: list[str] | None = None, defaults: dict | None = None) -> dict:
    """Train once from a command line (a torchrun rank, a hand-over to torchrun, or one process)."""
    args = parse_cli(argv, defaults, description=__doc__.splitlines()[0])
    record = steps.run_all(args)
    if ddp.torchrun_env() is not None and exit_code(record):
        raise RankFailed(f"the run ended {record.get('status')}: {record.get('error')}")
    return record


def exit_code(record: dict | None) -> int:
    """Return the process exit status for a record: 0 for a finished or diverged run (or none: --help), else 1."""
    return 0 if record is None or record.get("status") in ("finished", "diverged") else 1


def eval_args(argv: list[str] | None = None, defaults: dict | None = None) -> tuple[RunArgs, str | None]:
    """Return what Trainium/eval.py evaluates (a checkpoint on the test split) and its metrics' file (None: none)."""
    parser = cli_parser("Evaluate a fine-tuned checkpoint on dair-ai/emotion's test split")
    parser.add_argument("--checkpoint", dest="model_name", help="folder written by train.py --output_dir")
    parser.add_argument(
        "--per_device_eval_batch_size", dest="batch", help="evaluation batch (at least 32, as the training runs')"
    )
    parser.add_argument("--output_file", help="also write the metrics here as JSON")
    defaults = {"batch": 32, **(defaults or {})}
    parser.set_defaults(**defaults)  # what --help shows
    values = {**defaults, **named_flags(parser, argv)}
    output_file = values.pop("output_file")
    if "model_name" not in values:
        parser.error("--model_name_or_path (the checkpoint folder) is required")
    # train_subset=1: tokenize maps every split, and only the test split is needed
    return build_args({**values, "train_subset": 1, "progress": False}), output_file


def evaluate_main(argv: list[str] | None = None, defaults: dict | None = None) -> dict:
    """Evaluate a saved checkpoint folder on the test split; print and return accuracy and macro-F1."""
    from helpers.run import train

    args, output_file = eval_args(argv, defaults)
    run = steps.start(args)
    try:  # an evaluation writes no record: the name start claimed is given back however it ends
        splits = steps.tokenize(run, steps.load_data(run), training=False)
        model = steps.build_model(run)
        loader = steps.eval_loader(run, splits["test"])
        metrics = train.evaluate(model, loader, run.dev, run.precision, rows_per_batch=loader.batch_size)
    finally:
        record_destination.release(run.claim)
    out = {
        "checkpoint": args.task.model_name,
        "split": "test",
        "device": run.dev.name,
        "precision": run.precision,
        **metrics,
    }
    text = json.dumps(out, indent=2)
    print(text)
    if output_file:
        with open(output_file, "w") as f:
            f.write(text + "\n")
    return out


if __name__ == "__main__":
    sys.exit(exit_code(main()))
