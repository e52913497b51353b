"""The run's arguments: types, choices, presets under what was given, unknown names, the scripts' parser."""
import pytest

from helpers.run.args import ConfigError, RunArgs, build_args, results_dir
from helpers.run.argv import notebook_args, parse_cli, to_argv


def test_defaults_build_and_are_frozen():
    args = build_args({})
    assert args.train.batch == 8 and args.train.precision == "auto" and args.given == frozenset()
    with pytest.raises(AttributeError):
        args.train.batch = 16  # frozen: checked once, never changed behind the checker's back


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
    ("run_name", "../../../escape/pwn", "letters, digits"), ("run_name", "/abs/path", "letters, digits"),
    ("num_cores", 2, "num_devices=2"),
])
def test_bad_values_name_parameter_and_allowed(name, value, needle):
    with pytest.raises(ConfigError) as err:
        build_args({name: value})
    assert name in str(err.value) and needle in str(err.value)


def test_papermill_and_toml_strings_are_coerced():
    args = build_args({"batch": "64", "lr": "5e-5", "llrd_decay": "None", "gradient_checkpointing": "True",
                       "train_subset": "100", "optlevel": "3"})
    assert (args.train.batch, args.train.lr, args.train.llrd_decay) == (64, 5e-5, None)
    assert args.train.gradient_checkpointing is True and args.task.train_subset == 100
    assert args.neuron.optlevel == 3


def test_non_numeric_string_rejected_clearly():
    with pytest.raises(ConfigError, match="batch='big' is not an integer"):
        build_args({"batch": "big"})


@pytest.mark.parametrize("name,suggestion", [("learnin_rate", "lr"), ("bach", "batch"),
                                             ("max_lenght", "max_length")])
def test_unknown_names_are_refused_with_the_closest_known_one(name, suggestion):
    with pytest.raises(ConfigError, match=f"unknown parameter {name!r}: did you mean {suggestion!r}"):
        build_args({name: 1})


def test_a_hugging_face_name_in_a_notebook_says_what_to_write():
    with pytest.raises(ConfigError, match="scripts' .* name for 'lr'; in a notebook or a suite write 'lr'"):
        build_args({"learning_rate": 0.5})


def test_preset_fills_only_what_was_not_given():
    args = build_args({"preset": "optimized"})
    assert (args.train.batch, args.task.max_length, args.train.lr, args.train.llrd_decay) == (64, 32, 1.5e-4, 0.95)
    base = build_args({"preset": "baseline"})
    assert (base.train.batch, base.task.max_length, base.train.lr, base.train.precision) == (8, 128, 2e-5, "fp32")


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


def test_notebook_globals_take_papermills_injected_names_as_given():
    namespace = {"batch": 8, "lr": 2e-5, "preset": "optimized", "In": ["", "batch = 8\nlr = 2e-05\n",
                 '# Parameters\nbatch = 8\npreset = "optimized"\n'], "Out": {}, "steps": object(),
                 "_": None, "get_ipython": print}
    args = notebook_args(namespace)
    assert args.train.batch == 8 and args.train.lr == 1.5e-4  # batch injected, lr left to the preset


def test_a_misspelled_notebook_parameter_is_refused():
    namespace = {"batch": 8, "learning_rate": 0.5, "In": ['# Parameters\nlearning_rate = 0.5\n']}
    with pytest.raises(ConfigError, match="learning_rate"):
        notebook_args(namespace)


def test_a_hand_run_notebook_takes_changed_values_as_given():
    args = notebook_args({"batch": 16, "lr": 2e-5, "preset": "optimized", "In": ["batch = 16"]})
    assert args.train.batch == 16 and args.train.lr == 1.5e-4


def test_cli_takes_hugging_face_names_and_none():
    args = parse_cli(["--per_device_train_batch_size", "32", "--learning_rate", "1e-4", "--max_seq_length",
                      "64", "--model_name_or_path", "minilm", "--llrd_decay", "None", "--max_grad_norm", "None",
                      "--gradient_checkpointing", "--output_dir", "ckpt"])
    assert (args.train.batch, args.train.lr, args.task.max_length, args.task.model_name) == (32, 1e-4, 64, "minilm")
    assert args.train.llrd_decay is None and args.train.max_grad_norm is None
    assert args.train.gradient_checkpointing is True and args.measure.save_dir == "ckpt"
    assert args.given == {"batch", "lr", "max_length", "model_name", "llrd_decay", "max_grad_norm",
                          "gradient_checkpointing", "save_dir"}


def test_cli_preset_with_an_explicit_default_value():
    args = parse_cli(["--preset", "optimized", "--batch", "8"])
    assert args.train.batch == 8 and args.task.max_length == 32


def test_cli_rejects_a_bad_choice_and_an_unknown_flag(capsys):
    with pytest.raises(SystemExit):
        parse_cli(["--padding", "ragged"])
    assert "invalid choice" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        parse_cli(["--learnin_rate", "1"])


def test_argv_rebuilds_the_same_arguments():
    args = build_args({"preset": "optimized", "batch": 8, "llrd_decay": None, "model_name": "minilm"})
    again = parse_cli(to_argv(args))
    assert again == args


def test_old_runs_jsonl_results_path_means_its_folder(tmp_path):
    assert results_dir(build_args({"results_path": str(tmp_path / "x" / "runs.jsonl")})) == tmp_path / "x"
    assert results_dir(build_args({"results_path": str(tmp_path / "y")})) == tmp_path / "y"


def test_run_args_equality_and_flat_names():
    flat = RunArgs().flat()
    assert flat["batch"] == 8 and flat["optlevel"] == 2 and len(flat) == len(set(flat))


def test_stop_at_accuracy_is_optional_from_a_notebook_and_the_cli():
    assert build_args({}).measure.stop_at_accuracy is None  # default: never stop early
    nb = notebook_args({"stop_at_accuracy": None, "eval_every": 5, "In": ["stop_at_accuracy = None\neval_every = 5"]})
    assert nb.measure.stop_at_accuracy is None and nb.measure.eval_every == 5
    assert build_args({"stop_at_accuracy": "None"}).measure.stop_at_accuracy is None  # papermill's -p text
    assert build_args({"stop_at_accuracy": "0.9", "eval_every": "100"}).measure.stop_at_accuracy == 0.9
    assert parse_cli(["--stop_at_accuracy", "None"]).measure.stop_at_accuracy is None
    assert parse_cli(["--stop_at_accuracy", "0.9", "--eval_every", "50"]).measure.stop_at_accuracy == 0.9
    for values in ({"stop_at_accuracy": 0.9}, {"stop_at_accuracy": 1.5, "eval_every": 5},
                   {"stop_at_accuracy": 0.0, "eval_every": 5}):
        with pytest.raises(ConfigError, match="stop_at_accuracy=.* is invalid"):
            build_args(values)
