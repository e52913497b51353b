import pytest

from helpers.run import data, models, tokens


@pytest.fixture(scope="module")
def tok():
    return models.load_tokenizer("minilm")


def test_length_stats_on_hand_made_list():
    lengths = [5, 1, 3, 2, 4, 10, 6, 7, 8, 9]  # sorted 1..10
    s = tokens.length_stats(lengths, coverages=(0.9, 0.95, 0.99), choose_coverage=0.95)
    assert (s["min"], s["max"], s["mean"], s["median"]) == (1, 10, 5.5, 5.5)
    assert (s["p90"], s["p95"], s["p99"]) == (9, 10, 10)  # 9 of 10 rows are <= 9
    assert s["chosen_pow2"] == 16
    assert tokens.length_stats([3, 3, 4, 30], choose_coverage=0.75)["chosen_pow2"] == 4


def test_token_lengths_count_cls_and_sep_without_truncation(tok):
    n = tokens.token_lengths(["hello", "word " * 300], tok)
    assert n[0] == 3 and n[1] == 302


def test_static_padding_pads_every_row_to_max_length(tiny_data_dir, tok):
    ds, _ = data.load_emotion(str(tiny_data_dir))
    out = tokens.tokenize(ds, tok, max_length=16, padding="static")
    batch = next(iter(tokens.loader(out["train"], 8, tokens.collator(tok, "static"), True, 0)))
    assert batch["input_ids"].shape == (8, 16) and batch["labels"].shape == (8,)


def test_dynamic_padding_pads_to_longest_in_batch_and_multiple(tiny_data_dir, tok):
    ds, _ = data.load_emotion(str(tiny_data_dir))
    out = tokens.tokenize(ds, tok, max_length=64, padding="dynamic")
    lengths = [len(x) for x in out["train"]["input_ids"][:8]]
    batch = next(iter(tokens.loader(out["train"], 8, tokens.collator(tok, "dynamic"), False, 0)))
    assert batch["input_ids"].shape == (8, max(lengths))
    batch = next(iter(tokens.loader(out["train"], 8, tokens.collator(tok, "dynamic", 8), False, 0)))
    assert batch["input_ids"].shape[1] % 8 == 0


def test_real_train_split_length_stats(real_data_dir, tok):
    ds, _ = data.load_emotion(str(real_data_dir))
    s = tokens.length_stats(tokens.token_lengths(ds["train"]["text"], tok))
    assert s["rows"] == 16000 and s["min"] >= 3 and s["p99"] <= s["max"] <= 128
    assert s["chosen_pow2"] in (32, 64)  # most tweets fit well under 64 tokens


def test_length_grouping_visits_every_row_once_with_less_padding(real_data_dir, tok):
    ds, _ = data.load_emotion(str(real_data_dir), train_subset=1024)
    out = tokens.tokenize(ds, tok, max_length=64, padding="dynamic")
    collate = tokens.collator(tok, "dynamic")

    def padded_tokens(sampler) -> tuple[int, list]:
        batches = list(tokens.loader(out["train"], 32, collate, True, 0, sampler=sampler))
        labels = sorted(int(y) for b in batches for y in b["labels"])
        return sum(b["input_ids"].numel() for b in batches), labels

    plain, plain_labels = padded_tokens(None)
    grouped, grouped_labels = padded_tokens(tokens.length_grouped_sampler(out["train"], 32, seed=0))
    assert grouped_labels == plain_labels and len(plain_labels) == 1024  # the same rows, each once
    real = sum(len(x) for x in out["train"]["input_ids"])
    assert grouped < 0.8 * plain and grouped >= real  # far less padding, never less than the rows
