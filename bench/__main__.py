"""The harness benchmark into BENCHMARKS.md, which gives each section's command; run from the repository root."""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import sys

import torch

from bench import cases
from bench.harness import wait_quiet
from bench.render import levers_block, render, render_raw, write_blocks
from bench.trainer_tta import Sizes, tta_section
from helpers.run.device import cpu_capability, cpu_name, resolve_device, synchronize
from helpers.run.paths import RESULTS_DIR, repo_path


def machine(dev_type: str) -> str:
    """Return the machine in words: the GPU name, or the CPU model with its bf16 capability."""
    if dev_type == "cuda":
        return f"{torch.cuda.get_device_name()} (host {cpu_name()}, {cpu_capability()})"
    return f"{cpu_name()} ({cpu_capability()}), {os.cpu_count()} cores"


def tta_sizes(args: argparse.Namespace) -> Sizes:
    """Return the tta case's sizes from its --tta-* options."""
    values = {f.name: getattr(args, f"tta_{f.name}") for f in dataclasses.fields(Sizes)}
    return Sizes(**values | {"seeds": tuple(values["seeds"]), "configs": tuple(values["configs"])})


def main(argv: list[str] | None = None) -> dict:
    """Run the chosen sections, write their Markdown into `--out`, return the raw results."""
    import transformers

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    parser.add_argument(
        "--model", default="bert-base-random", help="model of the timed sections (a tiny local folder for smoke runs)"
    )
    parser.add_argument("--threads", type=int, default=None, help="torch threads (CPU); default: all")
    parser.add_argument(
        "--step-mode",
        default="eager",
        choices=("eager", "compile", "cudagraphs"),
        help="overhead: the step of fit, the bare loop and Trainer (torch_compile) in this form",
    )
    parser.add_argument("--data-dir", default=None, help="emotion folder; else $EMOTION_DATA_DIR/hub")
    parser.add_argument(
        "--sections",
        nargs="+",
        choices=cases.SECTIONS,
        default=[s for s in cases.SECTIONS if s not in cases.ON_REQUEST],
    )
    parser.add_argument("--lever", nargs="*", default=None, help="only levers whose name contains one")
    parser.add_argument("--windows", type=int, default=5, help="timed windows per configuration")
    parser.add_argument("--warmup", type=int, default=1, help="untimed warm-up windows")
    parser.add_argument(
        "--steps", type=int, default=4, help="optimizer steps a window: one epoch over steps x batch rows"
    )
    parser.add_argument("--acc-rows", type=int, default=4000, help="training rows of the accuracy runs")
    parser.add_argument("--acc-epochs", type=int, default=1)
    tta = Sizes()
    parser.add_argument("--tta-model", default=tta.model, help="tta: the model (pretrained: accuracy is the point)")
    parser.add_argument(
        "--tta-rows", dest="tta_train_rows", type=int, default=tta.train_rows, help="tta: shuffled training rows"
    )
    parser.add_argument("--tta-eval-rows", type=int, default=tta.eval_rows, help="tta: validation rows; default all")
    parser.add_argument("--tta-eval-every", type=int, default=tta.eval_every, help="tta: steps between evaluations")
    parser.add_argument("--tta-max-steps", type=int, default=tta.max_steps, help="tta: cap on each run's steps")
    parser.add_argument("--tta-target", type=float, default=tta.target, help="tta: validation accuracy to reach")
    parser.add_argument("--tta-rounds", type=int, default=tta.rounds, help="tta: runs of each configuration")
    parser.add_argument(
        "--tta-budget-s",
        type=float,
        default=None,
        help="tta: training seconds after which a Trainer configuration short of the target "
        "ends (its time and ratio become lower bounds)",
    )
    parser.add_argument(
        "--tta-seeds", type=int, nargs="+", default=list(tta.seeds), help="tta: round r trains seed r of these"
    )
    parser.add_argument(
        "--tta-to-the-end",
        action="store_true",
        help="tta: train each whole recipe (no stop at the target) and compare the final test accuracy",
    )
    parser.add_argument(
        "--tta-configs", nargs="+", default=list(tta.configs), choices=list(tta.configs), help="tta: which to run"
    )
    parser.add_argument("--eval-model", default="minilm", help="eval: the model (make baseline's)")
    parser.add_argument("--eval-precision", default="auto", help="eval: the run's precision (auto: its probe's)")
    parser.add_argument(
        "--eval-train-steps",
        type=int,
        default=100,
        help="eval: steps MiniLM is fine-tuned before its evaluations are timed (0: the untrained head)",
    )
    parser.add_argument(
        "--max-other-cores",
        type=float,
        default=0.5,
        help="CPU: before each window, wait while other processes use this many cores",
    )
    parser.add_argument("--quiet-timeout", type=float, default=300, help="...but at most this many s")
    parser.add_argument("--out", default="BENCHMARKS.md")
    parser.add_argument(
        "--results", default=RESULTS_DIR, help="results folder: the raw windows go to <results>/_bench/bench.jsonl"
    )
    parser.add_argument(
        "--render",
        metavar="RAW",
        default=None,
        help="run nothing: rewrite --out from the raw windows in RAW (Experiment/results/_bench/bench.jsonl)",
    )
    parser.add_argument(
        "--block-prefix",
        default="",
        help="with --render: name the blocks <prefix><section>, so another machine's raw "
        "windows get blocks of their own beside this machine's",
    )
    args = parser.parse_args(argv)
    if args.render:
        blocks = {args.block_prefix + name: body for name, body in render_raw(repo_path(args.render)).items()}
        write_blocks(repo_path(args.out), blocks)
        print("\n\n".join(blocks.values()))
        return {}
    if args.threads:
        torch.set_num_threads(args.threads)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")  # as `make`: rayon threads fight torch's
    dev = resolve_device(args.device)
    args.device = dev.type
    args.gate = (
        None
        if dev.type != "cpu" or args.max_other_cores <= 0
        else (lambda: wait_quiet(args.max_other_cores, args.quiet_timeout))
    )
    sync = lambda: synchronize(dev)  # noqa: E731
    meta = {
        "command": "python -m bench " + " ".join(sys.argv[1:] if argv is None else argv),
        "date": datetime.datetime.now().strftime("%Y-%m-%d %H:%M"),
        "machine": machine(dev.type),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "threads": torch.get_num_threads(),
        "load_start": os.getloadavg()[0],
        "max_other_cores": args.max_other_cores if args.gate else None,
    }
    lever_groups = tuple(lever for asked in args.sections for lever in cases.LEVER_SECTIONS.get(asked, ()))
    run = {
        "overhead": lambda: cases.overhead_section(args, sync),
        "speedup": lambda: cases.speedup_section(args, sync),
        "accuracy": lambda: cases.accuracy_section(args),
        "data": lambda: cases.data_section(args),
        "levers": lambda: cases.levers_section(args, sync),
        "eval": lambda: cases.eval_section(args, sync),
        "tta": lambda: tta_section(args, tta_sizes(args)),
        **{group: lambda: cases.levers_section(args, sync, lever_groups) for group in cases.LEVER_SECTIONS},
    }
    results: dict = {}
    for name in args.sections:
        section = "levers" if name in cases.LEVER_SECTIONS else name  # a few levers: recorded as the levers section
        if name in cases.LEVER_SECTIONS and "levers" in results:
            continue  # every lever section asked for is in one table, measured with the first of them
        print(f"bench: {name} ...", file=sys.stderr, flush=True)
        results[section] = run[name]()
        meta["load_end"] = os.getloadavg()[0]
        raw = repo_path(args.results) / "_bench" / "bench.jsonl"  # raw windows, kept if a later section dies
        raw.parent.mkdir(parents=True, exist_ok=True)
        with open(raw, "a") as f:
            f.write(json.dumps({"meta": meta, "section": section, "result": results[section]}, default=str) + "\n")
    meta["load_end"] = os.getloadavg()[0]
    blocks = render(results, meta)
    if "levers" in blocks:  # a few levers: a block of their own, the lever table kept
        blocks[levers_block(args.sections)] = blocks.pop("levers")
    if set(args.sections) <= set(cases.ON_REQUEST):  # the main block keeps its last figures
        blocks.pop("main")
    write_blocks(repo_path(args.out), blocks)
    print("\n\n".join(blocks.values()))
    return results


if __name__ == "__main__":
    main()
