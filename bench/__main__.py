"""python -m bench: the loop's overhead against a bare loop, and time to 90% against Trainer, into BENCHMARKS.md.

python -m bench --threads 2 --data-dir ../shared/data/emotion                    # the overhead, eager, on the CPU
python -m bench --device cuda --step-mode cudagraphs --data-on-device --steps 200  # against the bare graphed loop
python -m bench --sections tta --tta-rounds 3 --tta-seeds 0 1 2                  # make baseline's recipe, Trainer
python -m bench --render Experiment/results/_bench/bench.jsonl                    # the blocks again, from raw rows
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime
import json
import os
import sys
import tempfile
from pathlib import Path

import torch
import transformers

from bench import overhead, render, rounds, trainer_tta
from helpers import arguments, data, devices, models, precision, record


class Parser(argparse.ArgumentParser):
    """argparse whose refusals are one line, as every refusal of the bench."""

    def error(self, message: str):
        sys.exit(f"python -m bench: error: {message}")


def positive(text: str) -> int:
    """Return `text` as a whole number >= 1, else refuse it."""
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number >= 1")
    return int(text)


def parser() -> Parser:
    """Return the bench's command line."""
    p = Parser(prog="python -m bench", description=__doc__.splitlines()[0])
    p.add_argument("--sections", nargs="+", choices=render.SECTIONS, default=["overhead"], help="tta: about an hour")
    p.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    p.add_argument("--model", default="bert-base-random", help="overhead: the model (a local folder for a smoke run)")
    p.add_argument("--batch", type=positive, default=32, help="overhead: rows a step")
    p.add_argument("--max-length", type=positive, default=32, help="overhead: tokens a row (static padding)")
    p.add_argument("--step-mode", default="eager", choices=("eager", "compile", "cudagraphs"), help="overhead: both")
    p.add_argument("--data-on-device", action="store_true", help="overhead: the loop's batches sliced on the device")
    p.add_argument("--threads", type=positive, default=None, help="torch threads; default: torch's (all cores)")
    p.add_argument("--data-dir", default=None, help="the emotion folder; default: $EMOTION_DATA_DIR")
    p.add_argument("--windows", type=positive, default=5, help="overhead: rounds, one run of each side a round")
    p.add_argument("--steps", type=positive, default=10, help="overhead: steady optimizer steps a run")
    p.add_argument("--warmup", type=positive, default=3, help="overhead: warm-up steps a run, before its clock")
    sizes = trainer_tta.Sizes()
    p.add_argument("--tta-model", default=sizes.model, help="tta: the model (pretrained: accuracy is the point)")
    p.add_argument("--tta-train-rows", type=positive, default=sizes.train_rows, help="tta: shuffled training rows")
    p.add_argument("--tta-eval-rows", type=positive, default=None, help="tta: validation and test rows; default all")
    p.add_argument("--tta-eval-every", type=positive, default=sizes.eval_every, help="tta: steps between evaluations")
    p.add_argument("--tta-max-steps", type=positive, default=None, help="tta: cap on each run's steps")
    p.add_argument("--tta-target", type=float, default=sizes.target, help="tta: validation accuracy to reach")
    p.add_argument("--tta-rounds", type=positive, default=sizes.rounds, help="tta: runs of each configuration")
    p.add_argument("--tta-budget-s", type=float, default=None, help="tta: Trainer's training s before it gives up")
    p.add_argument("--tta-seeds", type=int, nargs="+", default=list(sizes.seeds), help="tta: round r trains seed r")
    p.add_argument("--tta-to-the-end", action="store_true", help="tta: whole recipes, then the test split")
    p.add_argument("--tta-configs", nargs="+", default=list(sizes.configs), choices=list(sizes.configs))
    p.add_argument(
        "--max-other-cores", type=float, default=0.5, help="CPU: before each run, wait while others use more"
    )
    p.add_argument("--quiet-timeout", type=float, default=300, help="... but at most this many seconds")
    p.add_argument("--out", default="BENCHMARKS.md", help="the Markdown whose bench:NAME blocks are rewritten")
    p.add_argument("--results", default=record.RESULTS_DIR, help="raw rows go to <results>/_bench/bench.jsonl")
    p.add_argument("--render", metavar="RAW", default=None, help="run nothing: the blocks from a raw .jsonl file")
    p.add_argument("--block-prefix", default="", help="with --render: blocks <prefix><section> (another machine's)")
    return p


def machine(dev: devices.Device) -> str:
    """Return the machine in words: the CPU's model name, family/model and bf16 units (and the GPU's name)."""
    cpu = f"{devices.cpuinfo().get('model name', 'a CPU')} ({dev.cpu_family}, {dev.cpu_capability}), {os.cpu_count()} cores"
    return f"{dev.name}, host {cpu}" if dev.type == "cuda" else cpu


@contextlib.contextmanager
def scratch(results: str):
    """Yield a temporary results folder for the bench's own records, the kept CPU roofs (<results>/_peaks) linked in."""
    with tempfile.TemporaryDirectory(prefix="accelbench-bench-") as tmp:
        kept = record.repo_path(results) / record.PEAKS
        if kept.is_dir():  # measured once per machine, as by any run: never again here
            (Path(tmp) / record.PEAKS).symlink_to(kept.resolve())
        yield tmp


def run(args: argparse.Namespace, argv: list[str]) -> dict:
    """Run the sections asked (or render a raw file); rewrite their blocks in --out; return the raw results."""
    if args.render:
        raw = record.repo_path(args.render)
        if not raw.is_file():
            raise arguments.ConfigError(f"--render {args.render}: no such file (raw rows: <results>/_bench/*.jsonl)")
        new = render.blocks(render.read_raw(raw), args.block_prefix)
        render.write_blocks(record.repo_path(args.out), new)
        print("\n".join(new.values()) or f"{raw}: no row of a section with a block ({', '.join(render.SECTIONS)})")
        return new
    if args.threads:
        torch.set_num_threads(args.threads)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")  # as `make`: the tokenizer's threads fight torch's
    cuda = args.device != "cpu" and torch.cuda.is_available()
    if args.device == "cuda" and not cuda:
        raise arguments.ConfigError("--device cuda, but torch sees no CUDA GPU")
    dev = devices.cuda_device() if cuda else devices.cpu_device()
    values = {
        "model_name": args.model,
        "batch": args.batch,
        "max_length": args.max_length,
        "device": dev.type,
        "step_mode": args.step_mode,
        "data_on_device": args.data_on_device,
        "data_dir": args.data_dir,
    }
    if "overhead" in args.sections:  # what the device cannot run is refused before anything runs
        probe = overhead.loop_args(values, args.warmup, args.steps, cuda)
        used = precision.choose(probe.precision, dev).used
        probe.check_device(dev.type, used, models.config(args.model).max_position_embeddings)
    quiet = dev.type == "cpu" and args.max_other_cores > 0
    gate = (lambda: rounds.wait_quiet(args.max_other_cores, args.quiet_timeout)) if quiet else None
    meta = {
        "command": "python -m bench " + " ".join(argv),
        "date": datetime.datetime.now().strftime("%Y-%m-%d %H:%M"),
        "machine": machine(dev),
        "device_key": dev.key,
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "threads": torch.get_num_threads(),
        "load_start": os.getloadavg()[0],
        "max_other_cores": args.max_other_cores if quiet else None,
    }
    sizes = {f.name: getattr(args, f"tta_{f.name}") for f in dataclasses.fields(trainer_tta.Sizes)}
    sizes = trainer_tta.Sizes(**sizes | {"seeds": tuple(args.tta_seeds), "configs": tuple(args.tta_configs)})
    raw, rows = record.repo_path(args.results) / "_bench" / "bench.jsonl", []
    with scratch(args.results) as tmp:
        for name in args.sections:
            print(f"bench: {name} ...", file=sys.stderr, flush=True)
            if name == "overhead":
                result = overhead.section(values | {"results_path": tmp}, args.warmup, args.steps, args.windows, gate)
            else:
                common = {"device": dev.type, "data_dir": args.data_dir, "results_path": tmp, "log_every": 50}
                result = trainer_tta.section(common, sizes, gate)
            rows.append({"meta": meta | {"load_end": os.getloadavg()[0]}, "section": name, "result": result})
            raw.parent.mkdir(parents=True, exist_ok=True)
            with open(raw, "a") as f:  # kept as each section ends: a later section's failure loses nothing
                f.write(json.dumps(rows[-1], default=str) + "\n")
    new = render.blocks(rows)
    render.write_blocks(record.repo_path(args.out), new)
    print("\n".join(new.values()))
    return {row["section"]: row["result"] for row in rows}


def main(argv: list[str] | None = None) -> dict:
    """Run `python -m bench` with `argv`; a refusal (arguments, data, model) ends in one line, not a traceback."""
    argv = sys.argv[1:] if argv is None else argv
    try:
        return run(parser().parse_args(argv), argv)
    except (arguments.ConfigError, data.DataError, models.ModelError) as err:
        sys.exit(f"python -m bench: error: {err}")


if __name__ == "__main__":
    main()
