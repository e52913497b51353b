"""helpers/run/args.py: the argument dataclasses convert and check every value (pydantic), presets fill in
only what was not given, and build_args refuses a bad or unknown name with a message naming it."""

import typing

import pydantic
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers.run.args import (
    FIELDS,
    LORA_ROLES,
    PRESETS,
    ConfigError,
    MeasureArgs,
    NeuronArgs,
    RunArgs,
    TaskArgs,
    TrainArgs,
    build_args,
    lora_roles,
)


def test_defaults_build_and_are_frozen():
    args = build_args({})
    assert args.train.batch == 8 and args.train.precision == "auto" and args.given == frozenset()
    assert args == RunArgs()
    with pytest.raises(AttributeError):
        args.train.batch = 16  # frozen: checked once, never changed behind the checker's back


@pytest.mark.parametrize(
    "name,value,needle",
    [
        ("batch", 0, "greater than 0"),
        ("batch", -4, "greater than 0"),
        ("max_length", 2, "greater than 2"),
        ("padding", "ragged", "'static' or 'dynamic'"),
        ("precision", "int8", "'auto', 'bf16'"),
        ("device", "tpu", "'auto', 'cuda'"),
        ("lr", 0, "greater than 0"),
        ("lr", -1e-5, "greater than 0"),
        ("llrd_decay", 0, "greater than 0"),
        ("llrd_decay", 1.5, "less than or equal to 1"),
        ("epochs", 0, "greater than 0"),
        ("weight_decay", -0.1, "greater than or equal to 0"),
        ("warmup_ratio", 1.0, "less than 1"),
        ("seed", 2**32, "less than or equal to 4294967295"),
        ("seed", -1, "greater than or equal to 0"),
        ("diverge_factor", 1.0, "greater than 1"),
        ("timing_warmup_steps", -1, "greater than or equal to 0"),
        ("results_path", " ", "pattern"),
        ("optlevel", 4, "1, 2 or 3"),
        ("bf16_mode", "fp8", "'autocast'"),
        ("lora_r", -1, "greater than or equal to 0"),
        ("lora_dropout", 1.0, "less than 1"),
        ("run_name", "../../../escape/pwn", "letters, digits"),
        ("run_name", "/abs/path", "letters, digits"),
        ("suite", ".hidden", "file name"),
        ("batch", "big", "valid integer"),
        ("batch", "None", "valid integer"),
        ("lr", None, "valid number"),
    ],
)
def test_a_bad_value_is_refused_naming_the_parameter_what_is_allowed_and_what_it_means(name, value, needle):
    with pytest.raises(ConfigError) as err:
        build_args({name: value})
    said = str(err.value)
    assert said.startswith(f"{name}={value!r} is invalid: ") and needle in said, said
    assert FIELDS[name][1].metadata["help"] in said  # the meaning of the parameter, from its help text


@pytest.mark.parametrize(
    "values, needle",
    [
        ({"group_by_length": True}, "padding='dynamic' only"),  # with the default static padding
        ({"pad_to_multiple_of": 8}, "padding='dynamic' only"),
        ({"stop_at_accuracy": 0.9}, "without eval_every"),
        ({"num_cores": 2}, "num_cores=2 is invalid with num_devices=1"),
        ({"lora_targets": "query,ffn"}, "lora_targets='query,ffn' is invalid"),
        ({"extra_cc_flags": '"--unbalanced'}, "No closing quotation"),
    ],
)
def test_the_checks_across_fields_say_their_own_message(values, needle):
    with pytest.raises(ConfigError, match=needle.replace("(", r"\(")):
        build_args(values)


@pytest.mark.parametrize(
    "build, field",
    [
        (lambda: TaskArgs(max_length=2), "max_length"),
        (lambda: TaskArgs(padding="ragged"), "padding"),
        (lambda: TaskArgs(train_subset=0), "train_subset"),
        (lambda: TaskArgs(group_by_length=True), "group_by_length"),
        (lambda: TrainArgs(batch=0), "batch"),
        (lambda: TrainArgs(lr=None), "lr"),
        (lambda: TrainArgs(precision="int8"), "precision"),
        (lambda: TrainArgs(llrd_decay=1.5), "llrd_decay"),
        (lambda: MeasureArgs(run_name="../escape"), "run_name"),
        (lambda: MeasureArgs(diverge_factor=1.0), "diverge"),
        (lambda: NeuronArgs(optlevel=4), "optlevel"),
        (lambda: NeuronArgs(num_cores=0), "num_cores"),
    ],
)
def test_each_dataclass_refuses_a_bad_value_when_built_directly(build, field):
    with pytest.raises(pydantic.ValidationError, match=field):
        build()


def test_directly_built_groups_with_good_values_pass():
    assert TrainArgs(lr=1, batch=4).lr == 1 and NeuronArgs(optlevel=3).optlevel == 3
    assert TaskArgs(padding="dynamic", group_by_length=True, pad_to_multiple_of=8).group_by_length


def test_text_and_toml_values_are_read_in_their_fields_types():
    # a suite's TOML has no null ("None") and may write 64.0; papermill's API passes such values on as is
    args = build_args(
        {
            "batch": "64",
            "lr": "5e-5",
            "llrd_decay": "None",
            "gradient_checkpointing": "True",
            "train_subset": "none",
            "max_steps": 10.0,
            "stop_at_accuracy": "null",
            "run_name": 42,
            "data_dir": " ",
        }
    )
    tr = args.train
    assert (tr.batch, tr.lr, tr.llrd_decay, args.task.train_subset) == (64, 5e-5, None, None)
    assert tr.gradient_checkpointing is True and tr.max_steps == 10 and type(tr.max_steps) is int
    assert args.measure.stop_at_accuracy is None and args.measure.run_name == "42"
    assert args.task.data_dir is None  # no text: None, as papermill's `-p data_dir ""` meant before


def test_the_text_none_is_none_only_where_none_is_allowed():
    # "none" is a choice of model_type, distribution_strategy and preset: it must stay the text there
    args = build_args({"model_type": "none", "distribution_strategy": "none", "preset": "none"})
    neuron = args.neuron
    assert (neuron.model_type, neuron.distribution_strategy, args.train.preset) == ("none", "none", "none")
    with pytest.raises(ConfigError, match="model_name=None is invalid"):
        build_args({"model_name": None})


@pytest.mark.parametrize(
    "name",
    [
        "lr",
        "weight_decay",
        "warmup_ratio",
        "llrd_decay",
        "max_grad_norm",
        "diverge_factor",
        "stop_at_accuracy",
        "lora_dropout",
    ],
)
@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
def test_non_finite_numbers_are_refused(name, bad):
    with pytest.raises(ConfigError, match=f"^{name}=.*finite"):
        build_args({name: bad, "eval_every": 1})


@pytest.mark.parametrize("name,suggestion", [("learnin_rate", "lr"), ("bach", "batch"), ("max_lenght", "max_length")])
def test_unknown_names_are_refused_with_the_closest_known_one(name, suggestion):
    with pytest.raises(ConfigError, match=f"unknown parameter {name!r}: did you mean {suggestion!r}"):
        build_args({name: 1})


def test_a_hugging_face_name_in_a_notebook_says_what_to_write():
    with pytest.raises(ConfigError, match="scripts' .* name for 'lr'; in a notebook or a suite write 'lr'"):
        build_args({"learning_rate": 0.5})


def test_the_preset_choices_are_the_presets():
    assert typing.get_args(typing.get_type_hints(TrainArgs)["preset"]) == tuple(PRESETS)


def test_preset_fills_only_what_was_not_given():
    args = build_args({"preset": "optimized"})
    assert (args.train.batch, args.task.max_length, args.train.lr) == (64, 32, 1.5e-4)
    assert args.train.llrd_decay == 0.95
    base = build_args({"preset": "baseline"})
    assert (base.train.batch, base.task.max_length, base.train.lr) == (8, 128, 2e-5)
    assert base.train.precision == "fp32"


def test_an_explicit_value_wins_even_when_it_equals_the_default():
    # the hostile-run case: `-p preset optimized -p batch 8` ran batch 64 when "given" meant "not default"
    args = build_args({"preset": "optimized", "batch": 8, "max_length": 128, "lr": 2e-5})
    assert (args.train.batch, args.task.max_length, args.train.lr) == (8, 128, 2e-5)
    assert args.train.llrd_decay == 0.95 and args.given == {"preset", "batch", "max_length", "lr"}


def test_values_not_given_lose_to_the_preset():
    # a notebook's parameters cell holds every default; only the names papermill injected are given
    args = build_args({"preset": "optimized", "batch": 8, "lr": 2e-5}, given={"preset", "lr"})
    assert args.train.batch == 64 and args.train.lr == 2e-5


def test_building_does_not_change_its_input():
    values = {"batch": "16", "preset": "optimized"}
    build_args(values)
    assert values == {"batch": "16", "preset": "optimized"}


def test_with_values_keeps_what_was_given_and_checks_the_new_values():
    args = build_args({"preset": "optimized", "batch": 8})
    again = args.with_values(max_steps=5)
    assert (again.train.batch, again.train.max_steps, again.given) == (8, 5, {"preset", "batch", "max_steps"})
    with pytest.raises(ConfigError, match="^max_steps=0 is invalid"):
        args.with_values(max_steps=0)


def test_run_args_flat_names_every_field_once():
    flat = RunArgs().flat()
    assert flat["batch"] == 8 and flat["optlevel"] == 2 and list(flat) == list(FIELDS)


def test_stop_at_accuracy_needs_a_periodic_evaluation():
    assert build_args({}).measure.stop_at_accuracy is None  # default: never stop early
    assert build_args({"stop_at_accuracy": "0.9", "eval_every": "100"}).measure.stop_at_accuracy == 0.9
    for values in ({"stop_at_accuracy": 1.5, "eval_every": 5}, {"stop_at_accuracy": 0.0, "eval_every": 5}):
        with pytest.raises(ConfigError, match="^stop_at_accuracy=.* is invalid"):
            build_args(values)


def test_lora_targets_name_roles_in_their_order():
    assert lora_roles("all-linear") == LORA_ROLES
    assert lora_roles(" value, query,") == ("query", "value")
    for bad in ("query,ffn", " , ", ""):
        with pytest.raises(ConfigError, match="lora_targets=.* is invalid"):
            lora_roles(bad)


@pytest.mark.parametrize("seed, ok", [(0, True), (2**32 - 1, True), (2**32, False), (-1, False)])
def test_seed_is_in_numpys_range(seed, ok):
    if ok:
        assert build_args({"seed": seed}).train.seed == seed
    else:
        with pytest.raises(ConfigError, match=r"^seed="):
            build_args({"seed": seed})


def test_the_sequences_may_not_pad_past_the_models_positions():
    build_args({"max_length": 512}).task.check_positions(512)
    build_args({"padding": "dynamic", "max_length": 510, "pad_to_multiple_of": 16}).task.check_positions(512)
    with pytest.raises(ConfigError, match="max_length=513 is above .* position limit \\(512\\)"):
        build_args({"max_length": 513}).task.check_positions(512)
    with pytest.raises(ConfigError, match="pad_to_multiple_of=24 rounds max_length=512 up to 528"):
        dynamic = build_args({"padding": "dynamic", "max_length": 512, "pad_to_multiple_of": 24})
        dynamic.task.check_positions(512)


ANY = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-10, 600),
    st.floats(allow_nan=True),
    st.text(max_size=8),
    st.sampled_from(
        ["None", "True", "64", "5e-5", "static", "dynamic", "bf16", "auto", "cpu", "xla", "optimized", "../x"]
    ),
)
NAMES = st.one_of(
    st.sampled_from(sorted(FIELDS)),
    st.sampled_from(["learning_rate", "bach", "lrr"]),
    st.from_regex(r"[a-z][a-z_]{0,12}", fullmatch=True),
)


@settings(max_examples=500, deadline=None)
@given(st.dictionaries(NAMES, ANY, max_size=6))
def test_any_mapping_is_valid_arguments_or_a_config_error_naming_a_parameter(params):
    try:
        args = build_args(params)
    except ConfigError as err:
        assert any(name in str(err) for name in list(FIELDS) + list(params)), str(err)
        return
    t, tr = args.task, args.train
    assert tr.batch > 0 and tr.lr > 0 and t.max_length > 2
    assert tr.llrd_decay is None or 0 < tr.llrd_decay <= 1
    assert tr.weight_decay >= 0 and 0 <= tr.warmup_ratio < 1 and 0 <= tr.seed <= 2**32 - 1
