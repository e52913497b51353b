import pytest

from helpers.run import models


def test_minilm_alias_loads_pretrained_offline():
    model = models.load_model("minilm")
    assert model.config.hidden_size == 384 and model.config.num_hidden_layers == 6
    assert model.config.num_labels == 6 and model.config.vocab_size == 30522
    tok = models.load_tokenizer("minilm")
    assert tok("Hello World")["input_ids"][:2] == [101, 7592]  # uncased: [CLS] hello


def test_bert_base_random_is_the_bert_base_architecture():
    cfg = models.load_config("bert-base-random")
    assert (
        cfg.hidden_size,
        cfg.num_hidden_layers,
        cfg.num_attention_heads,
        cfg.intermediate_size,
        cfg.vocab_size,
        cfg.max_position_embeddings,
    ) == (768, 12, 12, 3072, 30522, 512)


def test_local_folder_loads(tiny_model_dir):
    assert models.load_model(str(tiny_model_dir)).config.hidden_size == 64


def test_seeded_head_is_reproducible(tiny_model_dir):
    a = models.load_model(str(tiny_model_dir), seed=3)
    b = models.load_model(str(tiny_model_dir), seed=3)
    assert (a.classifier.weight == b.classifier.weight).all()


@pytest.mark.parametrize("name", ["/nonexistent/model-folder", "no-such-org/no-such-model"])
def test_unknown_model_error_lists_offline_aliases(name, monkeypatch):
    import huggingface_hub.constants

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)  # read at import: the env is too late
    with pytest.raises(models.ModelError) as err:
        models.load_config(name)
    assert name in str(err.value) and "minilm" in str(err.value) and "bert-base-random" in str(err.value)


@pytest.mark.parametrize("attn", ["sdpa", "eager"])
def test_static_attention_mask_gives_the_same_outputs_as_the_2d_mask(attn):
    """The 4D mask XLA runs hand the model (no host read of the padding mask) changes nothing."""
    import torch
    from conftest import tiny_bert_config
    from transformers import BertForSequenceClassification

    torch.manual_seed(0)
    model = BertForSequenceClassification(tiny_bert_config(vocab_size=200, attn_implementation=attn)).eval()
    ids = torch.randint(1, 200, (4, 12))
    mask = torch.ones(4, 12, dtype=torch.long)
    mask[1, 5:] = 0
    mask[3, 2:] = 0
    with torch.no_grad():
        ref = model(input_ids=ids, attention_mask=mask).logits
        out = model(input_ids=ids, attention_mask=models.static_attention_mask(model, mask)).logits
    torch.testing.assert_close(out, ref, rtol=0, atol=1e-6)


@pytest.mark.parametrize("device_type, static", [("cuda", True), ("xla", True), ("cpu", False)])
def test_cuda_and_xla_steps_hand_the_model_a_4d_mask_so_the_forward_never_reads_it_back(
    device_type, static, monkeypatch
):
    """transformers checks `padding_mask.all()` on the host every forward unless the mask is already 4D: on
    CUDA a sync per forward, on XLA an extra graph. The batch the step runs has the 4D mask there (checked
    on CPU tensors: only the device type decides), and the model never evaluates `.all()` on it."""
    import torch
    from conftest import tiny_bert_config
    from transformers import BertForSequenceClassification

    from helpers.run import train
    from helpers.run.device import DeviceInfo

    model = BertForSequenceClassification(tiny_bert_config(vocab_size=200))
    dev = DeviceInfo(type=device_type, torch_device="cpu", name="test", cpu_capability="", bf16_fast=False)
    batch = train._to_device(
        {"input_ids": torch.randint(1, 200, (2, 8)), "attention_mask": torch.ones(2, 8, dtype=torch.long)}, model, dev
    )
    assert (batch["attention_mask"].dim() == 4) is static
    reads = []
    original = torch.Tensor.all
    monkeypatch.setattr(torch.Tensor, "all", lambda self, *a, **k: reads.append(self.shape) or original(self, *a, **k))
    model(**batch)
    assert (not reads) is static, reads
