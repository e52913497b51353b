"""LoRA through peft: only the adapters and the head train, the record says what trained and what it costs,
a bad setting is refused before a model is built, and save_dir holds plain merged weights."""
import pytest
import torch
from transformers import AutoModelForSequenceClassification

from helpers import steps
from helpers.run.args import ConfigError, build_args


def _args(tiny_model_dir, tiny_data_dir, results, **kw):
    base = dict(model_name=str(tiny_model_dir), data_dir=str(tiny_data_dir), batch=32, max_length=16, epochs=1,
                max_steps=3, lr=5e-3, warmup_ratio=0.0, results_path=str(results), progress=False, log_every=1,
                precision="fp32", lora_r=4)
    return build_args({**base, **kw})


def test_a_lora_step_trains_the_adapters_and_the_head_and_nothing_else(tiny_model_dir, tiny_data_dir, tmp_path):
    run = steps.start(_args(tiny_model_dir, tiny_data_dir, tmp_path, run_name="lora"))
    splits = steps.tokenize(run, steps.load_data(run))
    model = steps.build_model(run)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    steps.train(run, model, splits)
    changed = {n for n, p in model.named_parameters() if not torch.equal(before[n], p.detach())}
    assert changed and all("lora_" in n or "classifier" in n for n in changed), changed
    assert any("lora_B" in n for n in changed)  # B starts at zero: a step that moved it trained the adapter
    rec = steps.finish(run)
    info = rec["model"]
    assert 0 < info["trainable_parameters"] < info["parameters"] / 10
    assert info["optimizer_state_bytes"] == 2 * 4 * info["trainable_parameters"]  # two fp32 AdamW moments
    assert info["lora"]["r"] == 4 and info["lora"]["roles"] == ["query", "value"]


@pytest.mark.parametrize("bad, match", [({"lora_targets": "query,ffn"}, "lora_targets='query,ffn' is invalid"),
                                        ({"lora_r": -1}, "lora_r=-1 is invalid"),
                                        ({"lora_dropout": 1.0}, "lora_dropout=1.0 is invalid")])
def test_a_bad_lora_setting_is_refused_before_anything_is_built(tiny_model_dir, tiny_data_dir, tmp_path, bad, match):
    with pytest.raises(ConfigError, match=match):
        steps.start(_args(tiny_model_dir, tiny_data_dir, tmp_path, **bad))
    assert not list(tmp_path.rglob("*.json"))


def test_save_dir_holds_merged_weights_any_transformers_client_reads(tiny_model_dir, tiny_data_dir, tmp_path):
    args = _args(tiny_model_dir, tiny_data_dir, tmp_path / "r", run_name="merged", save_dir=str(tmp_path / "saved"),
                 lora_targets="all-linear")
    run = steps.start(args)
    splits = steps.tokenize(run, steps.load_data(run))
    model = steps.build_model(run)
    steps.train(run, model, splits)
    steps.save(run, model)
    plain = AutoModelForSequenceClassification.from_pretrained(tmp_path / "saved").eval()
    assert not any("lora" in n for n, _ in plain.named_parameters())
    batch = {k: torch.tensor(splits["test"][k][:4]) for k in ("input_ids", "attention_mask")}
    model.eval()
    with torch.no_grad():
        assert torch.allclose(plain(**batch).logits, model(**batch).logits, atol=1e-5)
