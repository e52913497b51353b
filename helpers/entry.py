"""The training and evaluation entry points shared by `Nvidia/train.py` and `Trainium/*.py`.

The arguments are RunConfig's fields (the notebooks' parameter names) plus the names the Hugging Face
examples (`run_glue.py`, `run_classification.py`) use for the same things, so both spellings work:

    python Trainium/train.py --model_name_or_path minilm --per_device_train_batch_size 32 \
        --max_seq_length 64 --learning_rate 1e-4 --num_train_epochs 1 --output_dir ckpt/
    python Nvidia/train.py --model_name minilm --batch 32 --max_length 64 --lr 1e-4 --epochs 1
    torchrun --nproc_per_node=2 Trainium/train.py --num_devices 2 ...   # data parallel

Strings go straight into RunConfig, whose validate() converts and checks them (one place).
"""
from __future__ import annotations

import argparse
import json
import sys
import typing
from dataclasses import MISSING, fields

from helpers.config import RunConfig

# RunConfig field -> (the Hugging Face examples' names for it, help text)
HF_NAMES: dict[str, tuple[tuple[str, ...], str]] = {
    "model_name": (("--model_name_or_path",), "hub id, local folder, or alias minilm / bert-base-random"),
    "batch": (("--per_device_train_batch_size",), "training batch per device (per torchrun rank)"),
    "max_length": (("--train_max_length", "--max_seq_length"), "tokens per sequence; static padding "
                   "pads every batch to it"),
    "lr": (("--learning_rate",), "peak AdamW learning rate"),
    "epochs": (("--num_train_epochs",), "passes over the training split"),
    "max_steps": (("--max_steps",), "stop after this many optimizer steps (overrides epochs)"),
    "weight_decay": (("--weight_decay",), "AdamW weight decay (not on biases and LayerNorm)"),
    "warmup_ratio": (("--warmup_ratio",), "fraction of steps with linear LR warm-up"),
    "llrd_decay": (("--llrd_decay",), "layer-wise LR decay in (0, 1]; None: one flat LR"),
    "seed": (("--seed",), "seed of the head, the data order and everything random"),
    "save_dir": (("--output_dir",), "save the fine-tuned model and tokenizer here"),
    "train_subset": (("--max_train_samples",), "first N training rows"),
    "eval_subset": (("--max_eval_samples",), "first N validation and test rows"),
    "log_every": (("--logging_steps",), "steps between loss reads (host syncs)"),
    "max_grad_norm": (("--max_grad_norm",), "gradient clipping norm; None: no clipping"),
    "gradient_accumulation_steps": (("--gradient_accumulation_steps",), "micro-batches per step"),
    "gradient_checkpointing": (("--gradient_checkpointing",), "recompute activations (not on Neuron)"),
    "optim": (("--optim",), "adamw_torch | adamw_torch_foreach | adamw_torch_fused"),
    "precision": (("--precision",), "auto | bf16 | fp16 | fp32 | bf16-pure | bf16-pure-sr"),
    "padding": (("--padding",), "static (pad to max_length) | dynamic (pad to the longest in batch)"),
    "device": (("--device",), "auto | cuda | cpu | xla"),
    "results_path": (("--results_path",), "JSONL file the run record is appended to"),
    "run_name": (("--run_name",), "name of the run in the record"),
}


def _is_bool(name: str) -> bool:
    hint = typing.get_type_hints(RunConfig)[name]
    return hint is bool


def build_parser(defaults: dict | None = None, description: str | None = None) -> argparse.ArgumentParser:
    """Return the parser: every RunConfig field as --field, plus its Hugging Face name where there is one."""
    parser = argparse.ArgumentParser(description=description or __doc__.splitlines()[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    defaults = defaults or {}
    for f in fields(RunConfig):
        hf_names, help_text = HF_NAMES.get(f.name, ((), "see helpers/config.py"))
        flags = [*hf_names] + ([f"--{f.name}"] if f"--{f.name}" not in hf_names else [])
        default = defaults.get(f.name, f.default if f.default is not MISSING else "{}")
        kwargs = dict(dest=f.name, default=default, help=help_text)
        if _is_bool(f.name):
            kwargs.update(nargs="?", const="True")  # `--flag` alone means True; `--flag False` works too
        parser.add_argument(*flags, **kwargs)
    return parser


def config_from_argv(argv: list[str] | None = None, defaults: dict | None = None) -> RunConfig:
    """Return the validated RunConfig for a command line (None: sys.argv)."""
    args = vars(build_parser(defaults).parse_args(argv))
    if isinstance(args.get("extra"), str):
        args["extra"] = json.loads(args["extra"])
    return RunConfig.from_mapping(args).validate()


def config_to_argv(cfg: RunConfig) -> list[str]:
    """Return the command-line arguments that rebuild `cfg` (fields that differ from the defaults)."""
    defaults = RunConfig()
    argv = []
    for f in fields(RunConfig):
        value = getattr(cfg, f.name)
        if value == getattr(defaults, f.name):
            continue
        text = json.dumps(value) if isinstance(value, dict) else str(value)
        argv.append(f"--{f.name}={text}")  # `=` so a value starting with '-' is not read as a flag
    return argv


def _prepare_device(cfg: RunConfig) -> None:
    """Set the Neuron environment before torch_xla can start (XLA runs only)."""
    from helpers import device, neuron

    if cfg.device == "xla" or (cfg.device == "auto" and device.neuron_available()):
        neuron.apply_neuron_env(cfg)


def main(argv: list[str] | None = None, defaults: dict | None = None) -> dict:
    """Train once from a command line; under torchrun as one rank, with num_devices > 1 via torchrun."""
    cfg = config_from_argv(argv, defaults)
    _prepare_device(cfg)
    from helpers import distributed, run  # after the Neuron environment is set

    if distributed.torchrun_env() is not None:
        return distributed.run_worker(cfg)
    if cfg.num_devices > 1:
        return distributed.launch(cfg)
    return run.run_all(cfg)


def exit_code(record: dict) -> int:
    """Return the process exit status for a record: 0 for a finished or diverged run, else 1."""
    return 0 if record.get("status") in ("finished", "diverged") else 1


def evaluate_main(argv: list[str] | None = None, defaults: dict | None = None) -> dict:
    """Evaluate a saved checkpoint folder on the test split; print and return accuracy and macro-F1."""
    defaults = defaults or {}
    parser = argparse.ArgumentParser(description="Evaluate a fine-tuned checkpoint on dair-ai/emotion's "
                                     "test split", formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--model_name_or_path", "--checkpoint", dest="model_name", required=True,
                        help="folder written by train.py --output_dir")
    parser.add_argument("--data_dir", default=None, help="folder of jsonl splits; None: "
                        "$EMOTION_DATA_DIR, else the hub")
    parser.add_argument("--max_eval_samples", dest="eval_subset", default=None, help="first N test rows")
    parser.add_argument("--per_device_eval_batch_size", dest="batch", default=32,
                        help="evaluation batch (at least 32, as in the training runs' evaluation)")
    parser.add_argument("--max_seq_length", "--max_length", dest="max_length", default=128)
    parser.add_argument("--padding", default="static", help="static | dynamic")
    parser.add_argument("--precision", default="auto")
    parser.add_argument("--device", default=defaults.get("device", "auto"))
    parser.add_argument("--output_file", default=None, help="also write the metrics here as JSON")
    args = vars(parser.parse_args(argv))
    output_file = args.pop("output_file")
    # train_subset=1: tokenize_data maps every split, and only the test split is needed
    cfg = RunConfig.from_mapping({**args, "train_subset": 1, "progress": False}).validate()
    _prepare_device(cfg)
    from helpers import run as steps, train

    run = steps.start_run(cfg)
    splits = steps.tokenize_data(run, steps.load_data(run))
    model = steps.build_model(run)
    metrics = train.evaluate(model, steps.eval_loader(run, splits["test"]), run.dev, run.precision)
    out = {"checkpoint": cfg.model_name, "split": "test", "device": run.dev.name,
           "precision": run.precision, **metrics}
    text = json.dumps(out, indent=2)
    print(text)
    if output_file:
        with open(output_file, "w") as f:
            f.write(text + "\n")
    return out


if __name__ == "__main__":
    sys.exit(exit_code(main()))
