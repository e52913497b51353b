"""The compiled step (step_mode) against eager, and the training batches placed on the device once
(data_on_device) against the DataLoader's."""

import pytest
import torch
from conftest import tiny_bert_config
from transformers import BertForSequenceClassification

from helpers import steps
from helpers.measure.timing import StepTimer
from helpers.run import args, models, tokens, train
from helpers.run.device import resolve_device
from helpers.run.optim import build_optimizer, build_scheduler

CPU = resolve_device("cpu")


def _model():
    torch.manual_seed(0)
    return BertForSequenceClassification(
        tiny_bert_config(vocab_size=200, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    )


def _batches(n, batch, lengths=(16,)):
    g = torch.Generator().manual_seed(0)
    return [
        {
            "input_ids": torch.randint(1, 200, (batch, lengths[i % len(lengths)]), generator=g),
            "attention_mask": torch.ones(batch, lengths[i % len(lengths)], dtype=torch.long),
            "labels": torch.randint(0, 6, (batch,), generator=g),
        }
        for i in range(n)
    ]


def _fit(step_mode, batches, precision="bf16"):
    """Train the tiny model over `batches` with warm-up, decay, LLRD and clipping; return the loss curve."""
    model = _model()
    compiled = step_mode != "eager"
    opt = build_optimizer(model, 1e-3, 0.9, 0.01, "adamw_torch_fused", "cpu", precision, lr_on_device=compiled)
    sched = build_scheduler(opt, len(batches), 0.2)
    step_model = train.compile_model(model, step_mode) if compiled else model
    timer = StepTimer(warmup_steps=0, window_steps=1)
    result = train.fit(
        step_model,
        batches,
        opt,
        sched,
        CPU,
        precision,
        1,
        timer=timer,
        log_every=1,
        progress=False,
        step_mode=step_mode,
    )
    return result, [loss for _, loss in result.loss_curve], opt


def _graphs(step_mode, batches, precision="bf16"):
    """Train from a fresh compile cache; return the fit, its losses, the optimizer and the graphs made."""
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    before = counters["stats"]["unique_graphs"]
    result, losses, opt = _fit(step_mode, batches, precision)
    return result, losses, opt, counters["stats"]["unique_graphs"] - before


def test_the_compiled_step_trains_as_eager_does_over_20_steps():
    """Forward, backward, clip and AdamW compiled: the same losses as eager within bf16's tolerance, the rate
    following the schedule (a tensor filled in place), and no graph made after the first steps (no recompile
    when the rate changes)."""
    batches = _batches(20, 4)
    eager, eager_losses, eager_opt = _fit("eager", batches)
    compiled, losses, opt, graphs = _graphs("compile", batches)
    assert compiled.status == eager.status == "finished" and compiled.steps == 20
    assert losses == pytest.approx(eager_losses, rel=2e-2, abs=2e-2)
    assert losses[-1] < losses[0]  # it learned: the compiled update ran
    assert isinstance(opt.param_groups[0]["lr"], torch.Tensor)
    assert [float(g["lr"]) for g in opt.param_groups] == pytest.approx([g["lr"] for g in eager_opt.param_groups])
    assert graphs == _graphs("compile", batches[:2])[3]


def test_length_buckets_compile_one_graph_each():
    """Two padded lengths (buckets): one more forward-backward graph than one length, the update's the same."""
    two = _graphs("compile", _batches(6, 4, lengths=(16, 32)), precision="fp32")
    one = _graphs("compile", _batches(6, 4, lengths=(16,)), precision="fp32")
    assert two[0].status == one[0].status == "finished"
    assert two[3] == one[3] + 1


@pytest.mark.parametrize(
    "values, message",
    [
        ({"step_mode": "compile", "compile": True}, "leave out compile"),
        ({"step_mode": "compile", "precision": "fp16"}, "GradScaler"),
        ({"step_mode": "cudagraphs", "device": "cpu"}, "needs CUDA"),
        ({"step_mode": "compile", "padding": "dynamic", "max_length": 128}, "pad_to_multiple_of >= 16"),
        ({"data_on_device": True, "device": "xla"}, "CUDA and the CPU"),
        ({"step_mode": "compile", "device": "xla"}, "XLA compiles the step"),
    ],
)
def test_step_settings_that_cannot_work_are_refused(values, message):
    with pytest.raises(args.ConfigError, match=message):
        args.build_args(values)


@pytest.mark.skipif(torch.cuda.is_available(), reason="device=auto resolves to CUDA here")
def test_cuda_graphs_on_a_device_auto_resolved_to_the_cpu_are_refused_at_start():
    """device=auto passes the arguments' check; the device it resolves to is checked when the run starts."""
    with pytest.raises(args.ConfigError, match="needs CUDA, not device='cpu'"):
        steps.start(args.build_args({"step_mode": "cudagraphs", "results_path": "/nonexistent/never-written"}))


def test_step_settings_that_work_are_taken():
    built = args.build_args({"step_mode": "compile", "padding": "dynamic", "max_length": 128, "pad_to_multiple_of": 16})
    assert built.train.step_mode == "compile"
    assert args.build_args({"step_mode": "compile"}).task.padding == "static"


@pytest.mark.parametrize(
    "padding, multiple, grouped",
    [("dynamic", None, False), ("dynamic", 8, True), ("static", None, False)],
)
def test_device_batches_equal_the_dataloaders(tiny_data_dir, padding, multiple, grouped):
    """Order, padding, masks and labels as the DataLoader gives them, over two epochs (the sampler's draws)."""
    from helpers.run import data

    ds, _ = data.load_emotion(str(tiny_data_dir))
    tokenizer = models.load_tokenizer("minilm")
    split = tokens.tokenize(ds, tokenizer, 32, padding)["train"]

    def sampler():
        return tokens.length_grouped_sampler(split, 16, 7) if grouped else None

    collate = tokens.collator(tokenizer, padding, multiple)
    loader = tokens.loader(split, 16, collate, shuffle=True, seed=7, sampler=sampler())
    order = tokens.row_order(split, 16, 7, sampler=sampler())
    on_device = tokens.DeviceBatches(
        split, order, torch.device("cpu"), tokenizer.pad_token_id, 32 if padding == "static" else None, multiple
    )
    assert len(on_device) == len(loader) == 16
    for _ in range(2):
        expected, got = list(loader), list(on_device)
        assert len(got) == len(expected)
        for e, g in zip(expected, got):
            assert set(g) == set(e)
            for key in e:
                assert torch.equal(g[key], e[key]), key
    widths = {b["input_ids"].shape[1] for b in got}
    assert len(widths) > 1 if padding == "dynamic" else widths == {32}


def test_a_run_with_the_compiled_step_and_its_data_on_the_device_records_both(tiny_model_dir, tiny_data_dir, tmp_path):
    """The run path end to end: the record names the step path in its parameters and counts the graphs made,
    and learns as the eager run of the same arguments does (the same batches in the same order)."""
    from helpers import steps

    def run(**kw):
        torch._dynamo.reset()
        return steps.run_all(
            args.build_args(
                dict(
                    model_name=str(tiny_model_dir),
                    data_dir=str(tiny_data_dir),
                    batch=32,
                    max_length=16,
                    epochs=1,
                    lr=5e-3,
                    results_path=str(tmp_path),
                    progress=False,
                    log_every=2,
                    precision="fp32",
                    **kw,
                )
            )
        )

    eager = run(run_name="eager")
    on_device = run(run_name="on-device", data_on_device=True)
    graphed = run(run_name="graphed", step_mode="compile", data_on_device=True)
    assert graphed["status"] == on_device["status"] == eager["status"] == "finished"
    assert graphed["params"]["step_mode"] == "compile" and graphed["params"]["data_on_device"] is True
    assert eager["shapes"]["compiled_graphs"] is None and graphed["shapes"]["compiled_graphs"] >= 2
    assert graphed["timing"]["steps"] == eager["timing"]["steps"] == 256 // 32
    losses = {
        name: [loss for _, loss in r["metrics"]["loss_curve"]] for name, r in zip("eog", (eager, on_device, graphed))
    }
    assert losses["o"] == losses["e"]  # the same batches, in the same order: the same run
    # inductor draws its own dropout masks: the compiled run is another sample of the same training
    assert losses["g"] == pytest.approx(losses["e"], rel=3e-2)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graphs need CUDA (the device plan runs this too)")
def test_the_cuda_graphed_step_trains_as_eager_does_and_its_kernels_are_measured(tmp_path):
    """On CUDA: reduce-overhead's graphs replay the same training as eager, and the kernels-only profile gives the
    device's busy share."""
    from helpers.measure.profile import StepProfiler

    def fit(step_mode):
        model = _model().cuda()
        compiled = step_mode != "eager"
        opt = build_optimizer(model, 1e-3, 0.9, 0.01, "adamw_torch_fused", "cuda", "bf16", lr_on_device=compiled)
        sched = build_scheduler(opt, 20, 0.2)
        step_model = train.compile_model(model, step_mode) if compiled else model
        profiler = StepProfiler(True, tmp_path, warmup_steps=5, profile_steps=5, device_type="cuda", kernels_only=True)
        batches = [{k: v.cuda() for k, v in b.items()} for b in _batches(20, 4)]
        timer = StepTimer(torch.cuda.synchronize, 0, 1)
        result = train.fit(
            step_model,
            batches,
            opt,
            sched,
            resolve_device("cuda"),
            "bf16",
            1,
            timer=timer,
            log_every=1,
            progress=False,
            callbacks=(lambda step: profiler.step(),),
            step_mode=step_mode,
        )
        profiler.close()
        return [loss for _, loss in result.loss_curve], profiler.summary()

    eager, eager_profile = fit("eager")
    graphed, graphed_profile = fit("cudagraphs")
    assert graphed == pytest.approx(eager, rel=3e-2, abs=3e-2)
    for summary in (eager_profile, graphed_profile):
        assert 0 < summary.device_busy_share <= 1 and "class_share" not in summary.model_fields_set
