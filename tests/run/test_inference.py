"""helpers/run/inference.py: how evaluation runs (bf16 weights, attention, threads), and what the record says."""

import pytest
import torch
from conftest import tiny_bert_config
from transformers import BertForSequenceClassification

from helpers import steps
from helpers.run import inference, train
from helpers.run.args import build_args
from helpers.run.device import resolve_device
from helpers.run.precision import autocast, mechanism

CPU = resolve_device("cpu")
BF16 = inference.EvalSettings(weights="bf16")


def _rows(n: int, seed: int) -> dict:
    """Return `n` rows of 12 tokens, most drawn from their label's own 30 (a rule a tiny model learns in a few
    steps), a quarter from the whole vocabulary (so some rows are hard and their margins small)."""
    g = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, 6, (n,), generator=g)
    ids = 1 + 30 * labels[:, None] + torch.randint(0, 30, (n, 12), generator=g)
    noise = torch.rand(n, 12, generator=g) < 0.25
    ids = torch.where(noise, torch.randint(1, 200, (n, 12), generator=g), ids)
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": labels}


@pytest.fixture(scope="module")
def trained():
    """A tiny BERT trained 60 steps on the rule, so its predictions are confident where it learned."""
    torch.manual_seed(0)
    model = BertForSequenceClassification(tiny_bert_config(vocab_size=200))
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    model.train()
    for step in range(60):
        model(**_rows(64, step)).loss.backward()
        opt.step()
        opt.zero_grad()
    return model.eval()


def _predictions(model, settings, precision: str, rows: dict) -> torch.Tensor:
    with inference.applied(model, settings, precision) as (eval_model, eval_precision), torch.inference_mode():
        with autocast(eval_precision, "cpu"):
            return eval_model(**{k: v for k, v in rows.items() if k != "labels"}).logits.float().argmax(-1)


def test_bf16_weights_predict_what_fp32_predicts(trained):
    rows = _rows(512, seed=10_000)
    fp32 = _predictions(trained, inference.EvalSettings(), "fp32", rows)
    bf16 = _predictions(trained, BF16, "bf16", rows)
    agree = (fp32 == bf16).float().mean().item()
    assert agree >= 0.98, agree
    assert (fp32 == rows["labels"]).float().mean() > 0.5  # a model that learned: its predictions mean something
    # the whole evaluation: accuracy within a point of fp32's
    batches = [{k: v[i : i + 128] for k, v in rows.items()} for i in range(0, 512, 128)]
    a = train.evaluate(trained, batches, CPU, "fp32")["accuracy"]
    b = train.evaluate(trained, batches, CPU, "bf16", settings=BF16)["accuracy"]
    assert abs(a - b) <= 0.01


def test_bf16_weights_evaluate_a_bf16_copy_and_leave_the_training_weights_as_they_were(trained):
    before = {k: v.clone() for k, v in trained.state_dict().items()}
    with inference.applied(trained, BF16, "bf16") as (eval_model, eval_precision):
        assert eval_model is not trained and eval_precision == inference.BF16_WEIGHTS
        assert {p.dtype for p in eval_model.parameters()} == {torch.bfloat16}
    assert {p.dtype for p in trained.parameters()} == {torch.float32}
    for k, v in trained.state_dict().items():
        assert torch.equal(v, before[k]), k


def test_bf16_weights_are_refused_for_a_run_not_under_bf16_autocast(trained):
    with pytest.raises(ValueError, match="bf16 autocast"):
        with inference.applied(trained, BF16, "fp32"):
            pass


def test_attention_and_threads_hold_for_the_evaluation_and_are_put_back(trained):
    threads = torch.get_num_threads()
    settings = inference.EvalSettings(attention="eager", threads=threads + 1)
    with inference.applied(trained, settings, "fp32") as (eval_model, _):
        assert eval_model.config._attn_implementation == "eager" and torch.get_num_threads() == threads + 1
    assert trained.config._attn_implementation == "sdpa" and torch.get_num_threads() == threads


@pytest.mark.parametrize(
    "precision, device_type, capability, attention",
    [
        ("bf16", "cpu", "AVX512+avx512_bf16", "eager"),  # 1.125x SDPA on a Zen 5 EPYC
        ("fp32", "cpu", "AVX512+avx512_bf16", "eager"),
        ("bf16", "cpu", "AVX512+amx_bf16+avx512_bf16", None),  # not measured on the Xeon: as trained
        ("fp32", "cpu", "AVX2", None),
        ("bf16", "cuda", "AVX512+avx512_bf16", None),  # a GPU's host CPU does not run its evaluation
    ],
)
def test_evaluation_takes_a_lever_only_on_a_cpu_kind_where_it_was_measured_to_pay(
    precision, device_type, capability, attention
):
    settings = inference.choose(precision, device_type, capability)
    assert settings.attention == attention and settings.weights == "as trained"  # bf16 weights: 1.03x, no default
    assert settings.reason.startswith("eager attention: 1.125x" if attention else "as trained")


@pytest.mark.parametrize("precision", ["bf16", "fp32"])
def test_the_record_says_how_the_run_evaluated(tiny_model_dir, tiny_data_dir, tmp_path, precision):
    args = dict(model_name=str(tiny_model_dir), data_dir=str(tiny_data_dir), batch=32, max_length=16, epochs=1)
    args |= dict(precision=precision, eval_every=2, results_path=str(tmp_path), progress=False, log_every=2)
    rec = steps.run_all(build_args(args))
    assert rec["status"] == "finished" and rec["metrics"]["test_accuracy"] is not None
    section = rec["evaluation"]
    eager = resolve_device("cpu").cpu_capability in inference.EAGER_ATTENTION_CPUS  # this CPU's kind
    assert section["precision"] == mechanism(precision, "cpu")
    assert section["attention"] == ("eager" if eager else "sdpa")
    assert section["threads"] == torch.get_num_threads()
    assert section["rows_per_batch"] == 4_096 // 16  # a CPU's evaluation batch: 64 rows at L=64
    assert section["reason"].startswith("eager attention" if eager else "as trained")
