import pytest

from helpers.config import ConfigError, RunConfig


def test_defaults_validate():
    cfg = RunConfig().validate()
    assert cfg.batch == 8 and cfg.precision == "auto"


@pytest.mark.parametrize("name,value,needle", [
    ("batch", 0, "batch=0"), ("batch", -4, "batch=-4"),
    ("max_length", 2, "max_length=2"),
    ("padding", "ragged", "allowed static, dynamic"),
    ("precision", "int8", "allowed auto, bf16"),
    ("device", "tpu", "allowed auto, cuda"),
    ("lr", 0, "lr=0"), ("lr", -1e-5, "lr=-1e-05"),
    ("llrd_decay", 0, "(0, 1]"), ("llrd_decay", 1.5, "(0, 1]"),
    ("epochs", 0, "epochs=0"),
    ("optlevel", 4, "allowed 1, 2, 3"),
    ("bf16_mode", "fp8", "allowed autocast"),
    ("group_by_length", True, "padding='dynamic' only"),  # with the default static padding
])
def test_bad_values_name_parameter_and_allowed(name, value, needle):
    with pytest.raises(ConfigError) as err:
        RunConfig(**{name: value}).validate()
    assert name in str(err.value) and needle in str(err.value)


def test_papermill_strings_are_coerced():
    cfg = RunConfig(batch="64", lr="5e-5", llrd_decay="None", gradient_checkpointing="True",
                    train_subset="100").validate()
    assert cfg.batch == 64 and cfg.lr == 5e-5 and cfg.llrd_decay is None
    assert cfg.gradient_checkpointing is True and cfg.train_subset == 100


def test_non_numeric_string_rejected_clearly():
    with pytest.raises(ConfigError, match="batch='big' is not an integer"):
        RunConfig(batch="big").validate()


def test_preset_fills_defaults_but_explicit_values_win():
    cfg = RunConfig(preset="optimized").validate()
    assert (cfg.batch, cfg.max_length, cfg.lr, cfg.llrd_decay) == (64, 32, 1.5e-4, 0.95)
    cfg = RunConfig(preset="optimized", batch=16).validate()
    assert cfg.batch == 16 and cfg.max_length == 32
    base = RunConfig(preset="baseline").validate()
    assert (base.batch, base.max_length, base.lr, base.precision) == (8, 128, 2e-5, "fp32")


def test_from_mapping_ignores_unknown_names():
    cfg = RunConfig.from_mapping({"batch": 4, "In": [], "steps": object()})
    assert cfg.batch == 4
