"""LoRA through peft: only the adapters and the head train, the record says what trained and what it costs,
a bad setting is refused before a model is built, and save_dir holds plain merged weights."""

import pytest
import torch
from transformers import AutoModelForSequenceClassification

from helpers import steps
from helpers.run.args import ConfigError, build_args


def _args(tiny_model_dir, tiny_data_dir, results, **kw):
    base = dict(
        model_name=str(tiny_model_dir),
        data_dir=str(tiny_data_dir),
        batch=32,
        max_length=16,
        epochs=1,
        max_steps=3,
        lr=5e-3,
        warmup_ratio=0.0,
        results_path=str(results),
        progress=False,
        log_every=1,
        precision="fp32",
        lora_r=4,
    )
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
    assert run.record_path.is_file()  # the record passed the schema where it belongs (not the working folder's)
    info = rec["model"]
    assert 0 < info["trainable_parameters"] < info["parameters"] / 10
    assert info["optimizer_state_bytes"] == 2 * 4 * info["trainable_parameters"]  # two fp32 AdamW moments
    assert info["lora"]["r"] == 4 and info["lora"]["roles"] == ["query", "value"]


@pytest.mark.parametrize(
    "bad, match",
    [
        ({"lora_targets": "query,ffn"}, "lora_targets='query,ffn' is invalid"),
        ({"lora_r": -1}, "lora_r=-1 is invalid"),
        ({"lora_dropout": 1.0}, "lora_dropout=1.0 is invalid"),
    ],
)
def test_a_bad_lora_setting_is_refused_before_anything_is_built(tiny_model_dir, tiny_data_dir, tmp_path, bad, match):
    with pytest.raises(ConfigError, match=match):
        steps.start(_args(tiny_model_dir, tiny_data_dir, tmp_path, **bad))
    assert not list(tmp_path.rglob("*.json"))


@pytest.mark.parametrize("r, ok", [(64, True), (65, False), (1000, False)])
def test_a_rank_above_the_models_hidden_size_is_refused_at_start(tiny_model_dir, tiny_data_dir, tmp_path, r, ok):
    args = _args(tiny_model_dir, tiny_data_dir, tmp_path, lora_r=r)  # the tiny BERT is 64 wide
    if ok:
        steps.finish(steps.start(args), "failed", "not trained: only start was tested")
        return
    with pytest.raises(ConfigError, match=f"lora_r={r} is above .* hidden size .64.*allowed 1..64"):
        steps.start(args)


@pytest.mark.parametrize("setting", [{"lora_alpha": 32}, {"lora_dropout": 0.1}, {"lora_targets": "all-linear"}])
def test_lora_settings_given_without_a_rank_are_refused_not_ignored(setting):
    (name,) = setting
    with pytest.raises(ConfigError, match=f"{name} is given with lora_r=0"):
        build_args({"lora_r": 0, **setting})
    with pytest.raises(ConfigError, match=f"{name} is given with lora_r=0"):
        build_args(setting)
    assert build_args({"lora_r": 4, **setting}).task.lora_r == 4


def test_lora_on_an_encoder_without_a_layer_map_is_refused_from_its_config_alone(tmp_path):
    from transformers import AlbertConfig

    folder = tmp_path / "albert"
    AlbertConfig(
        hidden_size=64, num_hidden_layers=1, num_attention_heads=4, intermediate_size=128, embedding_size=32
    ).save_pretrained(folder)  # a config and no weights: nothing else is read
    args = build_args(
        dict(
            model_name=str(folder),
            data_dir=str(tmp_path / "no-data"),
            lora_r=4,
            max_length=16,
            results_path=str(tmp_path / "r"),
        )
    )
    with pytest.raises(ConfigError, match="model_type 'albert' is not mapped"):
        steps.start(args)
    assert not (tmp_path / "r").exists() or not list((tmp_path / "r").rglob("*"))


def test_save_dir_holds_merged_weights_any_transformers_client_reads(tiny_model_dir, tiny_data_dir, tmp_path):
    args = _args(
        tiny_model_dir,
        tiny_data_dir,
        tmp_path / "r",
        run_name="merged",
        save_dir=str(tmp_path / "saved"),
        lora_targets="all-linear",
    )
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
