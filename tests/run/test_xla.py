"""The Trainium path for real on torch-xla's CPU backend (PJRT_DEVICE=CPU; `make test-xla`, .venv-xla).

The notebook end to end, graph compilations with static and dynamic padding, Trainium/train.py and
eval.py, and what torchrun can and cannot do with XLA on the CPU.
"""

from __future__ import annotations

import json
import os
import runpy
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

os.environ.setdefault("PJRT_DEVICE", "CPU")
# XLA:CPU's LLVM backend at -O0 compiles a BERT train step several times faster; the graphs, and so
# the compile counts these tests check, are the same at any level. Subprocesses inherit both.
os.environ.setdefault("XLA_FLAGS", "--xla_backend_optimization_level=0")
pytest.importorskip("torch_xla", reason="needs torch-xla: run in .venv-xla (make xla-venv; make test-xla)")

from helpers.run import records  # noqa: E402
from helpers.run.args import build_args  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.xla, pytest.mark.slow]


@pytest.fixture(scope="module")
def notebook_record(tmp_path_factory, tiny_model_dir, tiny_data_dir):
    """Trainium/baseline.ipynb through papermill: tiny model, static padding, 5 steps (3 of warm-up)."""
    tmp = tmp_path_factory.mktemp("trn-nb")
    results = tmp / "results"
    params = dict(
        model_name=tiny_model_dir,
        data_dir=tiny_data_dir,
        batch=8,
        max_length=32,
        padding="static",
        max_steps=5,
        lr=5e-3,
        precision="fp32",
        eval_subset=16,
        optlevel=1,
        extra_cc_flags="--verbose=info",
        results_path=results,
        run_name="trn-nb",
        xla_cache_dir=tmp / "xla-cache",
    )
    args = [
        sys.executable,
        "-m",
        "papermill",
        str(REPO / "Trainium/baseline.ipynb"),
        str(tmp / "out.ipynb"),
        "--cwd",
        str(tmp),
    ]
    for k, v in params.items():
        args += ["-p", k, str(v)]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (rec,), _ = records.read_records(results)
    return rec


def test_notebook_record_carries_the_xla_section(notebook_record):
    rec = notebook_record
    assert rec["status"] == "finished" and rec["device"]["type"] == "xla"
    assert rec["timing"]["steps"] == 5 and rec["metrics"]["test_rows"] == 16
    x = rec["xla"]
    assert x["neuron_cc_flags"] == "--model-type=transformer --optlevel=1 --auto-cast=none --verbose=info"
    assert x["env"]["PJRT_DEVICE"] == "CPU" and x["env"]["NEURON_RT_STOCHASTIC_ROUNDING_EN"] == "0"
    assert x["graph_compilations"] == x["train"]["uncached_compiles"] + x["eval"]["uncached_compiles"] > 0
    assert x["compile_time_s"] > 0 and x["eval"]["uncached_compiles"] > 0
    assert x["distinct_input_shapes"] == 1  # static padding, last partial batch dropped
    assert x["compilations_after_warmup"] == 0
    assert x["first_step_s"] > x["steady_step_s"]  # the first step pays its compilations
    assert x["cache"]["state"].startswith("cold") and x["run"]["persistent_cache_misses"] > 0
    assert x["env"]["XLA_FLAGS"].startswith("--xla_backend_optimization_level=0")  # the test module's (tiny model)


@pytest.fixture(scope="module")
def small_model_dir(tmp_path_factory) -> Path:
    """conftest's tiny BERT with one layer (half the graph to compile) and the MiniLM tokenizer."""
    import torch
    from conftest import tiny_bert_config
    from transformers import BertForSequenceClassification

    from helpers.run import models

    root = tmp_path_factory.mktemp("tiny-bert-1layer")
    torch.manual_seed(0)
    BertForSequenceClassification(tiny_bert_config(num_hidden_layers=1)).save_pretrained(root)
    models.load_tokenizer("minilm").save_pretrained(root)
    return root


def synthetic_loader(tokenizer, lengths: list[int], steps: int, batch: int = 4):
    """Batches of `batch` rows, batch i padded (dynamic collator) to lengths[i % len(lengths)] tokens."""
    from helpers.run import tokens

    rows = [
        {"input_ids": [101] + [1000 + j] * (lengths[i % len(lengths)] - 2) + [102], "labels": j % 6}
        for i in range(steps)
        for j in range(batch)
    ]
    return tokens.loader(rows, batch, tokens.collator(tokenizer, "dynamic"), shuffle=False, seed=0)


def sgd_fit(model, loader, dev, steps: int):
    """train.fit with plain SGD: no optimizer state, so each compiled graph stays small."""
    import torch

    from helpers.measure.timing import StepTimer
    from helpers.run import train

    optimizer = torch.optim.SGD(model.parameters(), lr=1e-2)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
    return train.fit(
        model,
        loader,
        optimizer,
        scheduler,
        dev,
        "fp32",
        1,
        max_steps=steps,
        log_every=steps,
        timer=StepTimer(warmup_steps=3, per_step="window"),
        progress=False,
    )


# ---------------------------------------------------------------- compilations against shapes
@pytest.fixture(scope="module")
def compiles_by_lengths(small_model_dir):
    """Return a function: train on batches of the given lengths (cycled) and return per-step compilations."""
    import torch
    import torch_xla.debug.metrics as met
    from conftest import tiny_bert_config
    from transformers import BertForSequenceClassification

    from helpers.measure import xla
    from helpers.run.device import resolve_device
    from helpers.run.models import load_tokenizer

    dev = resolve_device("xla")
    tokenizer = load_tokenizer(str(small_model_dir))

    def run(lengths: list[int], steps: int = 5) -> list[int]:
        torch.manual_seed(0)
        config = tiny_bert_config(num_hidden_layers=1, vocab_size=2048)  # ids here are < 2048
        model = BertForSequenceClassification(config).to(dev.torch_device)
        loader = xla.CountingLoader(synthetic_loader(tokenizer, lengths, steps))
        sgd_fit(model, loader, dev, steps)
        return loader.per_batch(final=met.counter_value("UncachedCompile"))

    return run


@pytest.fixture(scope="module")
def static_and_dynamic(compiles_by_lengths):
    # fresh lengths per run: the graph cache is process-wide. The static run goes first, so the
    # process's one-off graphs count against it, never in favour of the relation checked below.
    return {1: compiles_by_lengths([16]), 3: compiles_by_lengths([20, 24, 28])}


def test_static_padding_compiles_nothing_after_warmup(static_and_dynamic):
    per_step = static_and_dynamic[1]
    assert sum(per_step[:3]) > 0 and sum(per_step[3:]) == 0


def test_dynamic_padding_compilations_grow_with_distinct_lengths(static_and_dynamic):
    total = {k: sum(v) for k, v in static_and_dynamic.items()}
    assert total[3] - total[1] >= 3 - 1  # at least one new graph per new length
    # the lengths cycle 20, 24, 28, 20, ...: each compiles at its first step, then is cached
    per_step = static_and_dynamic[3]
    assert all(n > 0 for n in per_step[:3]) and sum(per_step[3:]) == 0


def test_dynamic_padding_on_xla_warns(tiny_model_dir, tmp_path):
    from helpers import steps

    args = build_args(
        dict(model_name=str(tiny_model_dir), device="xla", padding="dynamic", results_path=str(tmp_path / "r"))
    )
    with pytest.warns(UserWarning, match="every new .* shape compiles a new graph"):
        steps.start(args)


def test_gradient_checkpointing_trains_on_xla_cpu(small_model_dir, tmp_path):
    """On XLA (and so on Neuron, as upstream trains BERT on trn1) build_model switches to torch_xla's
    checkpoint: the run trains, a finite loss, one graph a steady step."""
    import torch

    from helpers import steps
    from helpers.run.models import load_tokenizer

    args = build_args(
        dict(
            model_name=str(small_model_dir),
            device="xla",
            precision="fp32",
            max_length=16,
            gradient_checkpointing=True,
            results_path=str(tmp_path / "r"),
        )
    )
    run = steps.start(args)
    model = steps.build_model(run)
    before = model.classifier.weight.detach().cpu().clone()
    loader = GraphCountingLoader(synthetic_loader(load_tokenizer(str(small_model_dir)), [16], 5))
    result = sgd_fit(model, loader, run.dev, 5)
    loader.note()
    executed, compiled = loader.per_batch()
    funcs = {
        getattr(m._gradient_checkpointing_func, "func", None)
        for m in model.modules()
        if getattr(m, "gradient_checkpointing", False)
    }
    assert {f.__module__ for f in funcs} == {"torch_xla.utils.checkpoint"}
    assert result.steps == 5 and torch.isfinite(torch.tensor(result.final_loss))
    assert not torch.equal(before, model.classifier.weight.detach().cpu())
    # one graph a steady step, nothing compiled after the first steps (the last step also reads the loss)
    assert executed[2:4] == [1, 1] and sum(compiled[2:]) == 0, (executed, compiled)


# ---------------------------------------------------------------- scripts and torchrun
def test_train_script_then_eval_script_single_process(tmp_path, monkeypatch, small_model_dir, tiny_data_dir):
    """Trainium/train.py (Hugging Face argument names), single process, then eval.py on its checkpoint."""
    results, ckpt, metrics = tmp_path / "results", tmp_path / "ckpt", tmp_path / "test_metrics.json"
    monkeypatch.setattr(
        sys,
        "argv",
        [
            "train.py",
            "--model_name_or_path",
            str(small_model_dir),
            "--data_dir",
            str(tiny_data_dir),
            "--per_device_train_batch_size",
            "8",
            "--max_seq_length",
            "32",
            "--learning_rate",
            "5e-3",
            "--max_steps",
            "4",
            "--max_eval_samples",
            "16",
            "--precision",
            "fp32",
            "--output_dir",
            str(ckpt),
            "--results_path",
            str(results),
            "--run_name",
            "trn-script",
            "--progress",
            "False",
        ],
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch_xla is already imported in this process: expected here
        with pytest.raises(SystemExit) as done:
            runpy.run_path(str(REPO / "Trainium/train.py"), run_name="__main__")
    assert done.value.code == 0
    (rec,), _ = records.read_records(results)
    assert rec["status"] == "finished" and rec["params"]["batch"] == 8 and rec["params"]["max_length"] == 32
    assert rec["device"]["type"] == "xla" and rec["xla"]["graph_compilations"] > 0
    assert (ckpt / "config.json").exists()

    monkeypatch.setattr(
        sys,
        "argv",
        [
            "eval.py",
            "--model_name_or_path",
            str(ckpt),
            "--data_dir",
            str(tiny_data_dir),
            "--max_seq_length",
            "32",
            "--max_eval_samples",
            "16",
            "--precision",
            "fp32",
            "--output_file",
            str(metrics),
        ],
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        runpy.run_path(str(REPO / "Trainium/eval.py"), run_name="__main__")
    out = json.loads(metrics.read_text())
    assert out["rows"] == 16 and 0 <= out["accuracy"] <= 1 and 0 <= out["macro_f1"] <= 1
    assert out["accuracy"] == rec["metrics"]["test_accuracy"]  # the saved weights are the trained ones


def test_torchrun_on_xla_cpu_cannot_join_processes(tmp_path, small_model_dir, tiny_data_dir):
    """The limitation, shown: under torchrun every PJRT_DEVICE=CPU process gets an 'xla' world of size 1,
    so gradients would not be averaged; the run stops with that message and a failed record."""
    from helpers import launch, steps

    results = tmp_path / "results"
    args = build_args(
        dict(
            model_name=str(small_model_dir),
            data_dir=str(tiny_data_dir),
            device="xla",
            batch=8,
            max_length=32,
            max_steps=2,
            precision="fp32",
            num_devices=2,
            results_path=str(results),
            run_name="trn-torchrun",
            progress=False,
        )
    )
    with pytest.raises(launch.DistributedRunError, match="'trn-torchrun' failed"):
        steps.hand_over(args)  # num_devices=2: the run is handed to torchrun
    (rec,), _ = records.read_records(results)  # one record: rank 0's, read by the launcher by name
    assert rec["status"] == "failed" and rec["distributed"]["world_size"] == 2
    assert "process group has world size 1" in rec["error"] and "cannot join processes" in rec["error"]


# ---------------------------------------------------------------- graphs per step and per eval batch
class GraphCountingLoader:
    """Notes, before handing out each batch, how many graphs the process executed and compiled so far."""

    def __init__(self, loader):
        self.loader, self.executed, self.compiled = loader, [], []

    def __len__(self) -> int:
        return len(self.loader)

    @property
    def batch_size(self):
        return self.loader.batch_size

    def __iter__(self):
        for batch in self.loader:
            self.note()
            yield batch

    def note(self) -> None:
        import torch_xla.core.xla_model as xm
        import torch_xla.debug.metrics as met

        xm.wait_device_ops()  # execution is asynchronous: ExecuteTime counts a graph when it has run
        data = met.metric_data("ExecuteTime")
        self.executed.append(data[0] if data else 0)
        self.compiled.append(met.counter_value("UncachedCompile") or 0)

    def per_batch(self) -> tuple[list[int], list[int]]:
        """Return (graphs executed, graphs compiled) during each batch; call note() once after the last."""

        def diff(xs):
            return [b - a for a, b in zip(xs, xs[1:])]

        return diff(self.executed), diff(self.compiled)


@pytest.fixture(scope="module")
def xla_run(tiny_model_dir, tiny_data_dir, tmp_path_factory):
    """A started XLA run on conftest's tiny BERT (L=32, batch 8), its tokenized splits and model."""
    from helpers import steps

    args = build_args(
        dict(
            model_name=str(tiny_model_dir),
            data_dir=str(tiny_data_dir),
            device="xla",
            batch=8,
            max_length=32,
            padding="static",
            precision="fp32",
            progress=False,
            results_path=str(tmp_path_factory.mktemp("graphs")),
        )
    )
    run = steps.start(args)
    splits = steps.tokenize(run, steps.load_data(run))
    return run, splits, steps.build_model(run)


def graphs_per_step(
    run,
    model,
    splits,
    lr: float,
    llrd: float | None,
    steps_n: int,
    warmup_ratio: float,
    warmup_steps: int,
    log_every: int,
):
    """Train `steps_n` steps with the run's loader and the XLA AdamW; return (result, graphs executed and
    graphs compiled during each step)."""
    from helpers import steps
    from helpers.measure.timing import StepTimer
    from helpers.run import optim, train

    loader = GraphCountingLoader(steps.prepare_training(run, model, splits).loader)
    optimizer = optim.build_optimizer(model, lr, llrd, 0.01, device_type="xla")
    scheduler = optim.build_scheduler(optimizer, steps_n, warmup_ratio)
    result = train.fit(
        model,
        loader,
        optimizer,
        scheduler,
        run.dev,
        "fp32",
        1,
        max_steps=steps_n,
        log_every=log_every,
        progress=False,
        timer=StepTimer(warmup_steps=warmup_steps, window_steps=log_every, per_step="window"),
    )
    loader.note()
    return (result, *loader.per_batch())


def test_steady_training_step_executes_one_graph(xla_run):
    """AdamW, clipping, a linear schedule decaying towards 0 and a loss log every 2 steps: after the
    warm-up each step runs exactly one graph and compiles none. Before: 2 graphs a step (transformers'
    per-forward padding_mask.all() read), 3 after each loss log (a fresh 0-dim zero is a constant
    graph), and a new step graph once 1 - lr * wd rounds to 1.0 in fp32 (torch AdamW, step 7 here)."""
    run, splits, model = xla_run
    steps_n, warmup = 8, 3
    # no warm-up, decay to 0 at step 8: lr(7) * 0.01 = 2.5e-8 < 2**-25, so 1 - lr * wd is 1.0 in fp32
    result, executed, compiled = graphs_per_step(run, model, splits, 2e-5, None, steps_n, 0.0, warmup, 2)
    assert result.steps == steps_n
    assert executed[warmup:] == [1] * (steps_n - warmup), executed
    assert sum(compiled[warmup:]) == 0, compiled


def test_a_lora_step_is_one_graph_and_never_recompiles(tiny_model_dir, tiny_data_dir, tmp_path):
    """LoRA (peft) on XLA: the same one graph a steady step as full fine-tuning, nothing compiled after warm-up."""
    from helpers import steps

    args = build_args(
        dict(
            model_name=str(tiny_model_dir),
            data_dir=str(tiny_data_dir),
            device="xla",
            batch=8,
            max_length=32,
            padding="static",
            precision="fp32",
            progress=False,
            lora_r=4,
            results_path=str(tmp_path),
        )
    )
    run = steps.start(args)
    splits = steps.tokenize(run, steps.load_data(run))
    model = steps.build_model(run)
    steps_n, warmup = 6, 3
    result, executed, compiled = graphs_per_step(run, model, splits, 1e-3, None, steps_n, 0.0, warmup, 2)
    assert result.steps == steps_n and sum(p.requires_grad for p in model.parameters()) < 20
    assert executed[warmup:] == [1] * (steps_n - warmup), executed
    assert sum(compiled[warmup:]) == 0, compiled


def test_importing_the_run_path_leaves_torch_xla_for_apply_env_to_start():
    """transformers.optimization and transformers' model classes import torch_xla where installed; the run
    path imports them only when it builds a schedule or a model, after neuron.apply_env."""
    code = (
        "import sys, importlib.util; from helpers import steps, cli; "
        "print(importlib.util.find_spec('torch_xla') is not None, 'torch_xla' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True)
    assert out.stdout.split() == ["True", "False"], out.stdout  # installed, and not started


@pytest.mark.parametrize("precision", ["fp32", "bf16", "bf16-pure", "bf16-pure-sr"])
def test_every_precision_mode_takes_real_steps_on_xla(tiny_model_dir, tiny_data_dir, tmp_path, precision):
    """A real AdamW step in each mode: bf16-pure failed HLO verification at the first step with torch_xla's
    syncfree AdamW (fp32 found_inf against bf16 weights)."""
    from helpers import steps

    rec = steps.run_all(
        build_args(
            dict(
                model_name=str(tiny_model_dir),
                data_dir=str(tiny_data_dir),
                device="xla",
                batch=8,
                max_length=16,
                max_steps=3,
                eval_subset=16,
                lr=1e-3,
                precision=precision,
                progress=False,
                results_path=str(tmp_path),
            )
        )
    )
    assert rec["status"] == "finished", rec.get("error")
    assert rec["metrics"]["final_loss"] is not None and rec["metrics"]["test_accuracy"] is not None
    assert (
        rec["optimizer"]["class"] == "helpers.run.optim.XlaAdamW"
        and "XlaAdamW" in rec["precision"]["mechanism"]
        or not precision.startswith("bf16-pure")
    )


def test_periodic_evaluation_compiles_are_evaluations_not_a_training_recompile(tiny_model_dir, tiny_data_dir, tmp_path):
    """eval_every=4 after 3 warm-up steps: the evaluation graph compiled in the step-4 callback was charged to
    step 4 (compilations_after_warmup 1, a recompile that did not happen); it is evaluation's."""
    from helpers import steps

    rec = steps.run_all(
        build_args(
            dict(
                model_name=str(tiny_model_dir),
                data_dir=str(tiny_data_dir),
                # L=20: a shape no other test compiles, so the evaluation graph is new
                # to this process's graph cache whatever ran before
                device="xla",
                batch=8,
                max_length=20,
                max_steps=6,
                eval_every=4,
                curve_rows=16,
                eval_subset=16,
                lr=1e-3,
                precision="fp32",
                progress=False,
                results_path=str(tmp_path),
            )
        )
    )
    x = rec["xla"]
    assert rec["status"] == "finished" and len(rec["curve"]) == 1, rec.get("error")
    assert x["compilations_after_warmup"] == 0 and not any(int(k) >= 3 for k in x["compilations_per_step"]), x
    assert x["periodic_eval"]["uncached_compiles"] >= 1
    assert x["eval"]["uncached_compiles"] >= x["periodic_eval"]["uncached_compiles"]
    assert x["train"]["uncached_compiles"] + x["eval"]["uncached_compiles"] == x["graph_compilations"]


@pytest.mark.parametrize("precision", ["bf16", "bf16-pure"])
def test_periodic_evaluation_leaves_one_training_execution_per_step(tiny_model_dir, tiny_data_dir, tmp_path, precision):
    """Evaluating every 2 steps: the pause's sync ran what the step left pending as a graph of its own, and
    an execution still running at the count was charged to training (`python -m helpers.check` saw 6-7
    executions in 5 steps); both are evaluation's, so training runs one graph per step."""
    from helpers import steps

    rec = steps.run_all(
        build_args(
            dict(
                model_name=str(tiny_model_dir),
                data_dir=str(tiny_data_dir),
                device="xla",
                batch=8,
                max_length=16,
                max_steps=5,
                eval_every=2,
                curve_rows=16,
                eval_subset=16,
                lr=1e-3,
                precision=precision,
                progress=False,
                results_path=str(tmp_path),
            )
        )
    )
    assert rec["status"] == "finished" and len(rec["curve"]) == 2, rec.get("error")
    assert rec["xla"]["train"]["execute_count"] == rec["timing"]["steps"] == 5, rec["xla"]


def test_xla_use_bf16_stays_finite(tiny_model_dir, tiny_data_dir, tmp_path):
    """XLA_USE_BF16 (deprecated) makes every fp32 tensor bf16, where beta2 = 0.999 is 1.0: the bias
    correction is computed on the host, so the update never divides by 0 (NaN by step 2 before); the
    optimizer is then no AdamW (no fp32 is left to hold one), and the record says so."""
    code = (
        "import sys; from helpers import steps; from helpers.run.args import build_args; "
        f"rec = steps.run_all(build_args(dict(model_name={str(tiny_model_dir)!r}, data_dir={str(tiny_data_dir)!r}, "
        "device='xla', batch=8, max_length=16, max_steps=3, log_every=1, eval_subset=16, lr=1e-3, "
        f"bf16_mode='xla_use_bf16', progress=False, results_path={str(tmp_path)!r}))); "
        "print('STATUS', rec['status'], rec['metrics']['loss_curve']); "
        "print('MECHANISM', rec['precision']['mechanism']); "
        # what the label claims, on the device: one step with gradient 1, then five with 0
        "import torch; from helpers.run.optim import XlaAdamW; "
        "p = torch.nn.Parameter(torch.ones(4).to('xla')); opt = XlaAdamW([{'params': [p]}], lr=1e-3); "
        "p.grad = torch.ones(4).to('xla'); opt.step(); v1 = float(opt.state[p]['exp_avg_sq'].cpu()[0]); "
        "p.grad = torch.zeros(4).to('xla'); [opt.step() for _ in range(5)]; "
        "print('SECOND_MOMENT', v1, float(opt.state[p]['exp_avg_sq'].cpu()[0]))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert "STATUS finished" in out.stdout, out.stdout[-2000:] + out.stderr[-3000:]
    # the record says the mode is not AdamW, and the device agrees: the second moment never decays (AdamW's
    # would be 0.999**5 of it)
    assert "not AdamW" in out.stdout and "second moment never decays" in out.stdout, out.stdout[-2000:]
    first, later = map(float, out.stdout.split("SECOND_MOMENT")[1].split()[:2])
    assert first > 0 and later == first


def test_batches_come_through_mpdeviceloader_and_accumulation_stays_one_graph_a_step(xla_run):
    """Batches reach the device through torch-xla's background loader, which left to itself syncs after
    every batch: with gradient accumulation over 2 micro-batches a step must still execute one graph."""
    from torch_xla.distributed.parallel_loader import MpDeviceLoader

    from helpers import steps
    from helpers.measure.timing import StepTimer
    from helpers.run import optim, train

    run, splits, model = xla_run
    prepared = steps.prepare_training(run, model, splits)
    assert isinstance(prepared.loader, MpDeviceLoader)
    loader = GraphCountingLoader(prepared.loader)
    optimizer = optim.build_optimizer(model, 2e-5, None, 0.01, device_type="xla")
    result = train.fit(
        model,
        loader,
        optimizer,
        optim.build_scheduler(optimizer, 5, 0.0),
        run.dev,
        "fp32",
        1,
        max_steps=5,
        grad_accum=2,
        log_every=5,
        progress=False,
        timer=StepTimer(warmup_steps=2, window_steps=5, per_step="window"),
    )
    loader.note()
    executed, _ = loader.per_batch()
    per_step = [a + b for a, b in zip(executed[::2], executed[1::2])]
    assert result.steps == 5 and per_step[2:] == [1, 1, 1], executed  # not a graph per micro-batch


def test_accumulation_over_an_epoch_end_compiles_no_extra_graph(xla_run):
    """7 batches an epoch, 3 per step, 2 epochs: the 7th batch is left out, so the loader's end-of-epoch sync
    never cuts a step's micro-batches into a graph of their own (two extra compilations before)."""
    from helpers.measure.timing import StepTimer
    from helpers.run import device, optim, tokens, train

    run, splits, model = xla_run
    rows = splits["train"].select(range(7 * 8))
    loader = GraphCountingLoader(
        device.device_loader(
            tokens.loader(rows, 8, tokens.collator(run.tokenizer, "static"), shuffle=True, seed=0, drop_last=True),
            run.dev,
        )
    )
    optimizer = optim.build_optimizer(model, 2e-5, None, 0.01, device_type="xla")
    result = train.fit(
        model,
        loader,
        optimizer,
        optim.build_scheduler(optimizer, 4, 0.0),
        run.dev,
        "fp32",
        2,
        grad_accum=3,
        log_every=4,
        progress=False,
        timer=StepTimer(warmup_steps=1, window_steps=4, per_step="window"),
    )
    loader.note()
    _, compiled = loader.per_batch()
    assert sum(compiled[3:]) == 0, compiled
    # epoch 1's 7 batches drawn (6 trained on), then 6 of epoch 2
    assert result.steps == 4 and len(compiled) == 13, compiled


def test_the_first_step_runs_the_steady_graph(xla_run):
    """Optimizer state made before step 0 and the warm-up's lr 0 sent as data: step 0 compiles the step
    graph the later steps reuse (compilations [n, 0, 0, ...]; [n, m, 0, ...] before)."""
    run, splits, model = xla_run
    _, _, compiled = graphs_per_step(run, model, splits, 2e-5, 0.9, 5, 0.4, 1, 5)  # lr 0 at step 0, warming up
    assert compiled[0] > 0 and compiled[1:4] == [0, 0, 0], compiled


def test_steady_eval_batch_executes_one_graph(xla_run):
    """Each evaluation batch runs one graph (forward and confusion update, cut per batch)."""
    from helpers import steps
    from helpers.run import train

    run, splits, model = xla_run
    loader = GraphCountingLoader(steps.eval_loader(run, splits["validation"]))  # 64 rows: 2 batches
    train.evaluate(model, loader, run.dev, "fp32", rows_per_batch=loader.batch_size)
    loader.note()
    executed, _ = loader.per_batch()
    assert executed == [1] * len(loader), executed  # the last entry includes the final metric reads


def test_eval_compilations_do_not_grow_with_rows(xla_run):
    """Two row counts with different batch counts and remainders (40 = 32 + 8, 100 = 3 x 32 + 4): the
    second evaluation compiles nothing, and the padded rows are left out of the metrics."""
    import torch_xla.debug.metrics as met
    from datasets import concatenate_datasets

    from helpers import steps
    from helpers.run import train

    run, splits, model = xla_run
    rows = concatenate_datasets([splits["validation"], splits["test"]])  # 128 rows
    compiled, results = [], []
    for n in (40, 100):
        before = met.counter_value("UncachedCompile") or 0
        loader = steps.eval_loader(run, rows.select(range(n)))
        results.append(train.evaluate(model, loader, run.dev, "fp32", rows_per_batch=loader.batch_size))
        compiled.append((met.counter_value("UncachedCompile") or 0) - before)
    assert [r["rows"] for r in results] == [40, 100]
    assert compiled[0] <= 1 and compiled[1] == 0, compiled  # 0 when training compiled it already


def test_persistent_cache_on_xla_cpu_is_written_but_never_loaded(tmp_path):
    """torch-xla 2.9 on the CPU backend: a second process with the same graph finds the cache entry
    but cannot load it (PJRT CPU: "Deserializing serialized executable not supported") and compiles
    again. The record's counters (measure.xla.snapshot) tell the three cases apart: cold = misses,
    warm = hits, this = load_failures. If this fails with hits > 0, torch-xla fixed it: use the cache."""
    script = (
        "import torch, torch_xla, json; from helpers.measure import xla; "
        "x = torch.arange(8.).to(torch_xla.device()); float((x * 3 + 1).sum()); "
        "print(json.dumps(xla.snapshot()))"
    )
    env = {**os.environ, "XLA_PERSISTENT_CACHE_PATH": str(tmp_path / "cache"), "PYTHONPATH": str(REPO)}
    snaps = []
    for _ in range(2):
        proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr[-2000:]
        snaps.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    cold, warm = snaps
    assert cold["persistent_cache_misses"] == 1 and cold["uncached_compiles"] == 1
    assert len(list((tmp_path / "cache").iterdir())) == 1  # the executable was written
    assert warm["persistent_cache_hits"] == 0 and warm["persistent_cache_load_failures"] == 1
    assert warm["uncached_compiles"] == 1  # compiled again


def test_an_unwritable_xla_cache_dir_is_named_at_start_and_leaves_no_claim(tiny_model_dir, tmp_path):
    from helpers import steps
    from helpers.run import record_destination

    args = build_args(
        dict(
            model_name=str(tiny_model_dir),
            device="xla",
            results_path=str(tmp_path),
            run_name="c",
            xla_cache_dir="/proc/no-such/cache",
        )
    )
    with pytest.raises(records.RecordWriteError, match="xla_cache_dir='/proc/no-such/cache' cannot hold"):
        steps.start(args)
    # this run's claims only: another test's run in this process may still hold its own
    assert not list(tmp_path.rglob("*.claim")) and not [p for p in record_destination._HELD if tmp_path in p.parents]


def test_a_compile_logs_section_is_the_records_xla_section():
    """CompileLog.section returns the record's `xla` section typed: the graphs compiled since the log began."""
    import torch
    import torch_xla

    from helpers.measure.xla import CompileLog
    from helpers.run.schema import Timing, Xla

    log = CompileLog()
    total = (torch.ones(7, 5, device=torch_xla.device()) * 3.25).sum()  # a graph no other test compiles
    assert total.item() == 7 * 5 * 3.25
    log.mark("train_end")
    section = log.section(0, Timing(first_step_s=2.0, step_time_median_s=0.5), shapes=1)
    assert isinstance(section, Xla) and section.graph_compilations >= 1 and section.train.uncached_compiles >= 1
    assert section.first_over_steady == 4.0 and section.distinct_input_shapes == 1


def test_the_cache_section_says_which_cache_where_and_why_it_is_off():
    """init_cache returns the record's `xla.cache` section: Neuron's compile cache, or torch-xla's off and why."""
    from types import SimpleNamespace

    from helpers.measure.xla import init_cache
    from helpers.run.schema import XlaCache

    neuron = init_cache(build_args({"neuron_cache_dir": "/tmp/neff"}), SimpleNamespace(neuron=True))
    assert neuron == XlaCache(kind="Neuron compile cache (neuronx-cc)", dir="/tmp/neff")
    off = init_cache(build_args({}), SimpleNamespace(neuron=False))
    assert isinstance(off, XlaCache) and off.state == "off" and off.dir is None and "cannot load" in off.reason
