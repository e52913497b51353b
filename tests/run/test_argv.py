"""helpers/run/argv.py: the arguments from a command line (HfArgumentParser's flags, pydantic's types) and
from a notebook's globals (papermill's injected names are the given ones)."""

import pytest

from helpers import cli
from helpers.run.args import ConfigError, RunArgs, build_args
from helpers.run.argv import notebook_args, parse_cli, to_argv


def test_cli_takes_hugging_face_names_and_none():
    args = parse_cli(
        [
            "--per_device_train_batch_size",
            "32",
            "--learning_rate",
            "1e-4",
            "--max_seq_length",
            "64",
            "--model_name_or_path",
            "minilm",
            "--llrd_decay",
            "None",
            "--max_grad_norm",
            "none",
            "--max_steps",
            "7",
            "--gradient_checkpointing",
            "--output_dir",
            "ckpt",
        ]
    )
    assert (args.train.batch, args.train.lr, args.task.max_length) == (32, 1e-4, 64)
    assert args.task.model_name == "minilm"
    assert args.train.llrd_decay is None and args.train.max_grad_norm is None and args.train.max_steps == 7
    assert args.train.gradient_checkpointing is True and args.measure.save_dir == "ckpt"
    assert args.given == {
        "batch",
        "lr",
        "max_length",
        "model_name",
        "llrd_decay",
        "max_grad_norm",
        "max_steps",
        "gradient_checkpointing",
        "save_dir",
    }


def test_given_is_every_flag_named_in_any_spelling_even_at_its_default_and_nothing_else():
    defaults = RunArgs().flat()
    nothing = parse_cli([])
    assert nothing.given == frozenset() and nothing.flat() == defaults  # no "not given" marker left behind
    # the Hugging Face name, name=value, a bare flag, an abbreviation argparse accepts: each at its default
    batch, lr, length = defaults["batch"], defaults["lr"], defaults["max_length"]
    args = parse_cli(
        ["--per_device_train_batch_size", str(batch), f"--learning_rate={lr}", "--progress", "--max_len", str(length)]
    )
    assert args.given == {"batch", "lr", "progress", "max_length"} and args.flat() == defaults


def test_cli_negated_and_equals_flags_count_as_given():
    args = parse_cli(["--no_progress", "--learning_rate=1e-4", "--optlevel", "3"])
    assert args.measure.progress is False and args.train.lr == 1e-4 and args.neuron.optlevel == 3
    assert args.given == {"progress", "lr", "optlevel"}


def test_cli_preset_with_an_explicit_default_value():
    args = parse_cli(["--preset", "optimized", "--batch", "8"])
    assert args.train.batch == 8 and args.task.max_length == 32


@pytest.mark.parametrize(
    "name, value",
    [
        ("batch", "0"),
        ("max_length", "2"),
        ("diverge_factor", "1.0"),
        ("num_cores", "0"),
        ("batch", "None"),
        ("lr", "fast"),
    ],
)
def test_a_bad_value_is_refused_by_the_dataclasses_as_from_a_notebook(name, value):
    with pytest.raises(ConfigError) as from_cli:
        parse_cli([f"--{name}", value])
    with pytest.raises(ConfigError) as from_notebook:
        build_args({name: value})
    assert str(from_cli.value) == str(from_notebook.value)
    assert str(from_cli.value).startswith(f"{name}={value!r} is invalid")


def test_cli_refuses_a_bad_choice_and_names_the_closest_flag_to_an_unknown_one(capsys):
    with pytest.raises(SystemExit):
        parse_cli(["--padding", "ragged"])
    assert "invalid choice" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        parse_cli(["--learnin_rate", "1e-4"])
    assert "did you mean 'lr'?" in capsys.readouterr().err


def test_cli_defaults_are_given_and_lose_to_the_flags():
    args = parse_cli(["--device", "cpu", "--batch=16"], defaults={"device": "xla", "preset": "optimized"})
    assert (args.train.device, args.train.batch, args.task.max_length) == ("cpu", 16, 32)
    assert args.given == {"device", "batch", "preset"}
    assert parse_cli([], defaults={"device": "xla"}).train.device == "xla"


def test_cli_defaults_from_text_are_typed_and_unknown_ones_refused():
    assert parse_cli([], defaults={"batch": "16", "llrd_decay": "None"}).train.batch == 16
    with pytest.raises(ConfigError, match="did you mean 'batch'"):
        parse_cli([], defaults={"bach": 16})


def test_argv_rebuilds_the_same_arguments():
    for values in (
        {"preset": "optimized", "batch": 8, "llrd_decay": None, "model_name": "minilm"},
        {"extra_cc_flags": "--auto-cast=none", "optlevel": 1, "progress": False, "run_name": "a=b,c"},
    ):
        args = build_args(values)
        assert parse_cli(to_argv(args)) == args


def test_cli_does_not_read_an_args_file_next_to_the_script(tmp_path, monkeypatch):
    (tmp_path / "train.args").write_text("--batch 64\n")
    monkeypatch.setattr("sys.argv", [str(tmp_path / "train.py")])
    assert parse_cli([]).train.batch == 8


def test_help_lists_the_notebook_and_hugging_face_names(capsys):
    with pytest.raises(SystemExit):
        parse_cli(["--help"])
    out = capsys.readouterr().out
    assert "--per_device_train_batch_size" in out and "--llrd_decay" in out and "--no_progress" in out


def test_help_shows_each_flags_default_as_the_run_takes_it(capsys):
    with pytest.raises(SystemExit):
        parse_cli(["--help"], defaults={"device": "xla"})
    out = " ".join(capsys.readouterr().out.split())
    assert "peak AdamW learning rate (default: 2e-05)" in out and "else the CPU (default: xla)" in out
    assert "object at" not in out  # no marker of "not named" shown as a default


def test_the_eval_script_reads_the_training_parameters_under_its_own_names_and_defaults():
    args, output_file = cli.eval_args(
        ["--checkpoint", "ckpt", "--max_eval_samples", "null", "--per_device_eval_batch_size", "64"]
    )
    assert (args.task.model_name, args.task.eval_subset, args.train.batch, output_file) == ("ckpt", None, 64, None)
    assert args.task.train_subset == 1 and args.measure.progress is False  # only the test split, no bars
    args, output_file = cli.eval_args(["--model_name_or_path", "ckpt", "--output_file", "m.json"], {"device": "xla"})
    assert (args.train.batch, args.train.device, output_file) == (32, "xla", "m.json")


def test_the_eval_script_takes_every_training_parameter_and_checks_it_as_training_does(capsys):
    dynamic = ["--checkpoint", "ckpt", "--padding", "dynamic", "--pad_to_multiple_of", "8", "--optlevel", "3"]
    args, _ = cli.eval_args(dynamic)
    assert (args.task.pad_to_multiple_of, args.neuron.optlevel) == (8, 3)
    with pytest.raises(ConfigError, match="pad_to_multiple_of applies to padding='dynamic' only"):
        cli.eval_args(["--checkpoint", "ckpt", "--pad_to_multiple_of", "8"])
    with pytest.raises(SystemExit):
        cli.eval_args(["--checkpoint", "ckpt", "--max_evl_samples", "16"])
    assert "did you mean 'eval_subset'?" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli.eval_args(["--output_file", "m.json"])
    assert "--model_name_or_path (the checkpoint folder) is required" in capsys.readouterr().err


def test_notebook_globals_take_papermills_injected_names_as_given():
    namespace = {
        "batch": 8,
        "lr": 2e-5,
        "preset": "optimized",
        "In": ["", "batch = 8\nlr = 2e-05\n", '# Parameters\nbatch = 8\npreset = "optimized"\n'],
        "Out": {},
        "steps": object(),
        "_": None,
        "get_ipython": print,
    }
    args = notebook_args(namespace)
    assert args.train.batch == 8 and args.train.lr == 1.5e-4  # batch injected, lr left to the preset
    assert args.given == {"batch", "preset"}


def test_a_misspelled_notebook_parameter_is_refused():
    namespace = {"batch": 8, "learning_rate": 0.5, "In": ["# Parameters\nlearning_rate = 0.5\n"]}
    with pytest.raises(ConfigError, match="learning_rate"):
        notebook_args(namespace)


def test_a_hand_run_notebook_takes_changed_values_as_given_and_paths_as_text(tmp_path):
    args = notebook_args({"batch": 16, "lr": 2e-5, "preset": "optimized", "data_dir": tmp_path, "In": ["batch = 16"]})
    assert args.train.batch == 16 and args.train.lr == 1.5e-4 and args.task.data_dir == str(tmp_path)
    assert args.given == {"batch", "preset", "data_dir"}


def test_stop_at_accuracy_none_from_a_notebook_and_the_cli():
    injected = "# Parameters\nstop_at_accuracy = None\n"
    nb = notebook_args({"stop_at_accuracy": None, "eval_every": 5, "In": [injected]})
    assert nb.measure.stop_at_accuracy is None and nb.measure.eval_every == 5
    assert parse_cli(["--stop_at_accuracy", "None"]).measure.stop_at_accuracy is None
    assert parse_cli(["--stop_at_accuracy", "0.9", "--eval_every", "50"]).measure.stop_at_accuracy == 0.9


@pytest.mark.parametrize(
    "injected, value, message",
    [
        (
            "batch = [8, 16]",
            [8, 16],
            "batch=.8, 16. is invalid: Input should be a valid integer",
        ),  # -y 'batch: [8, 16]'
        ("lr = [0.1]", [0.1], r"lr=\[0.1\] is invalid: Input should be a valid number"),
        ("llrd_decay = True", True, "llrd_decay=True is invalid: a bool is not None or a number"),  # -p llrd_decay True
        ("lora_r = True", True, "lora_r=True is invalid: a bool is not a number"),
        ("batch = True", True, "batch=True is invalid: a bool is not a number"),
        ("run_name = 0.0001", 0.0001, "run_name=0.0001 is invalid: a number where text is expected.*-r run_name"),
    ],
)
def test_papermill_values_of_the_wrong_type_are_refused_never_dropped_or_converted(injected, value, message):
    """papermill's -y keeps a YAML list and -p reads True as a bool and 1e-4 as a number: a list was dropped
    (the default trained while params_given named it), True read as 1 or 1.0, 1e-4 recorded as 0.0001."""
    name = injected.split(" = ")[0]
    with pytest.raises(ConfigError, match=message):
        notebook_args({name: value, "In": [f"# Parameters\n{injected}\n"]})


def test_a_whole_number_for_a_text_parameter_and_bools_for_bool_ones_stay_accepted():
    args = notebook_args({"run_name": 42, "progress": False, "In": ["# Parameters\nrun_name = 42\nprogress = False\n"]})
    assert args.measure.run_name == "42" and args.measure.progress is False
