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

import pydantic

from helpers import steps
from helpers.run import ddp, record_destination
from helpers.run.args import CHECKED, Device, Maybe, Padding, Precision, arg, build_args
from helpers.run.argv import cli_parser, parse_cli


class RankFailed(RuntimeError):
    """A torchrun rank's run ended failed without an exception (the loop caught it): raised so the rank's
    error file (torch elastic's `record`, in the scripts) says why, for the launcher to read."""


def main(argv: list[str] | None = None, defaults: dict | None = None) -> dict:
    """Train once from a command line (a torchrun rank, a hand-over to torchrun, or one process)."""
    args = parse_cli(argv, defaults, description=__doc__.splitlines()[0])
    record = steps.run_all(args)
    if ddp.torchrun_env() is not None and exit_code(record):
        raise RankFailed(f"the run ended {record.get('status')}: {record.get('error')}")
    return record


def exit_code(record: dict | None) -> int:
    """Return the process exit status for a record: 0 for a finished or diverged run (or no run: --help),
    else 1."""
    return 0 if record is None or record.get("status") in ("finished", "diverged") else 1


@pydantic.dataclasses.dataclass(frozen=True, config=CHECKED)
class EvalArgs:
    """What Trainium/eval.py evaluates: a saved checkpoint on the test split."""

    model_name: str = arg(None, "folder written by train.py --output_dir", ("--model_name_or_path", "--checkpoint"))
    data_dir: Maybe[str] = arg(None, "folder of the jsonl splits; None: $EMOTION_DATA_DIR, else the hub")
    eval_subset: Maybe[int] = arg(None, "first N test rows", ("--max_eval_samples",))
    batch: int = arg(
        32, "evaluation batch (at least 32, as the training runs' evaluation)", ("--per_device_eval_batch_size",)
    )
    max_length: int = arg(128, "tokens per sequence", ("--max_seq_length",))
    padding: Padding = arg("static", "static | dynamic")
    precision: Precision = arg("auto", "as in training")
    device: Device = arg("auto", "auto: CUDA, else Neuron, else the CPU")
    output_file: str | None = arg(None, "also write the metrics here as JSON")


def evaluate_main(argv: list[str] | None = None, defaults: dict | None = None) -> dict:
    """Evaluate a saved checkpoint folder on the test split; print and return accuracy and macro-F1."""
    from helpers.run import train

    parser = cli_parser((EvalArgs,), "Evaluate a fine-tuned checkpoint on dair-ai/emotion's test split")
    parser.set_defaults(**(defaults or {}))
    (ev,) = parser.parse_args_into_dataclasses(argv)
    if not ev.model_name:
        parser.error("--model_name_or_path (the checkpoint folder) is required")
    # train_subset=1: tokenize maps every split, and only the test split is needed
    args = build_args(
        {
            "model_name": ev.model_name,
            "data_dir": ev.data_dir,
            "eval_subset": ev.eval_subset,
            "batch": ev.batch,
            "max_length": ev.max_length,
            "padding": ev.padding,
            "precision": ev.precision,
            "device": ev.device,
            "train_subset": 1,
            "progress": False,
        }
    )
    run = steps.start(args)
    try:  # an evaluation writes no record: the name start claimed is given back however it ends
        splits = steps.tokenize(run, steps.load_data(run), training=False)
        model = steps.build_model(run)
        loader = steps.eval_loader(run, splits["test"])
        metrics = train.evaluate(model, loader, run.dev, run.precision, rows_per_batch=loader.batch_size)
    finally:
        record_destination.release(run.claim)
    out = {"checkpoint": ev.model_name, "split": "test", "device": run.dev.name, "precision": run.precision, **metrics}
    text = json.dumps(out, indent=2)
    print(text)
    if ev.output_file:
        with open(ev.output_file, "w") as f:
            f.write(text + "\n")
    return out


if __name__ == "__main__":
    sys.exit(exit_code(main()))
