"""#24 item 4: the arguments are parsed by the library (HfArgumentParser), each dataclass checks its own
fields in __post_init__, and every choice list exists once (the Literal types of helpers/run/args.py)."""
import typing

import pytest

from helpers import cli
from helpers.run import args as run_args
from helpers.run.args import ConfigError, MeasureArgs, NeuronArgs, RunArgs, TaskArgs, TrainArgs, build_args
from helpers.run.argv import parse_cli
from helpers.run.parser import ArgParser


def _choices(cls: type, name: str) -> tuple:
    return typing.get_args(typing.get_type_hints(cls)[name])


def test_eval_args_choices_are_the_training_literals():
    for name, owner in (("padding", TaskArgs), ("precision", TrainArgs), ("device", TrainArgs)):
        assert _choices(cli.EvalArgs, name) == _choices(owner, name) != ()


def test_the_preset_choices_are_the_presets():
    assert _choices(TrainArgs, "preset") == tuple(run_args.PRESETS)


def test_given_is_every_flag_named_in_any_spelling_even_at_its_default_and_nothing_else():
    defaults = RunArgs().flat()
    nothing = parse_cli([])
    assert nothing.given == frozenset() and nothing.flat() == defaults  # no "not given" marker left behind
    # the Hugging Face name, name=value, a bare flag, an abbreviation argparse accepts: each at its default
    batch, lr, length = defaults["batch"], defaults["lr"], defaults["max_length"]
    args = parse_cli(["--per_device_train_batch_size", str(batch), f"--learning_rate={lr}", "--progress",
                      "--max_len", str(length)])
    assert args.given == {"batch", "lr", "progress", "max_length"} and args.flat() == defaults


@pytest.mark.parametrize("group, name, value", [(TrainArgs, "batch", 0), (TaskArgs, "max_length", 2),
                                                (MeasureArgs, "diverge_factor", 1.0),
                                                (NeuronArgs, "num_cores", 0)])
def test_a_field_is_checked_by_its_dataclass_alone_whichever_way_it_arrives(group, name, value):
    said = []
    for build in (lambda: group(**{name: value}), lambda: build_args({name: value}),
                  lambda: parse_cli([f"--{name}", str(value)])):
        with pytest.raises(ConfigError) as err:
            build()
        said.append(str(err.value))
    assert said[0].startswith(f"{name}={value} is invalid") and said[0] == said[1] == said[2], said


@pytest.mark.parametrize("build, needle", [
    (lambda: TaskArgs(max_length=2), "max_length=2 is invalid"),
    (lambda: TaskArgs(padding="ragged"), "padding='ragged' is unknown: allowed static, dynamic"),
    (lambda: TaskArgs(group_by_length=True), "padding='dynamic' only"),
    (lambda: TaskArgs(train_subset=0), "train_subset=0 is invalid"),
    (lambda: TrainArgs(batch=0), "batch=0 is invalid: must be a finite number > 0"),
    (lambda: TrainArgs(batch="8"), "batch='8' is not an integer"),
    (lambda: TrainArgs(batch=True), "batch=True is not an integer"),
    (lambda: TrainArgs(lr=None), "lr=None is not allowed"),
    (lambda: TrainArgs(precision="int8"), "allowed auto, bf16"),
    (lambda: TrainArgs(llrd_decay=1.5), "(0, 1]"),
    (lambda: TrainArgs(seed=-1), "seed=-1 is invalid"),
    (lambda: MeasureArgs(run_name="../escape"), "letters, digits"),
    (lambda: MeasureArgs(diverge_factor=1.0), "diverge_factor=1.0 is invalid"),
    (lambda: MeasureArgs(results_path=" "), "results_path='' is invalid"),
    (lambda: NeuronArgs(optlevel=4), "allowed 1, 2, 3"),
    (lambda: NeuronArgs(optlevel=True), "allowed 1, 2, 3"),
    (lambda: NeuronArgs(num_cores=0), "num_cores=0 is invalid"),
])
def test_each_dataclass_refuses_a_bad_value_when_built_directly(build, needle):
    with pytest.raises(ConfigError) as err:
        build()
    assert needle in str(err.value)


def test_directly_built_groups_with_good_values_pass():
    assert TrainArgs(lr=1, batch=4).lr == 1 and NeuronArgs(optlevel=3).optlevel == 3
    assert TaskArgs(padding="dynamic", group_by_length=True, pad_to_multiple_of=8).group_by_length


def test_optional_flags_read_none_through_the_library_parser():
    parser = ArgParser((TrainArgs,))
    (train,) = parser.parse_args_into_dataclasses(["--llrd_decay", "none", "--max_grad_norm", "None",
                                                   "--max_steps", "7"], look_for_args_file=False)
    assert (train.llrd_decay, train.max_grad_norm, train.max_steps) == (None, None, 7)
    (ev,) = ArgParser((cli.EvalArgs,)).parse_args_into_dataclasses(["--max_eval_samples", "null"],
                                                                   look_for_args_file=False)
    assert ev.eval_subset is None


def test_a_non_optional_flag_does_not_read_none(capsys):
    with pytest.raises(SystemExit):
        parse_cli(["--batch", "None"])
    assert "invalid int value: 'None'" in capsys.readouterr().err


def test_cli_checks_come_from_the_dataclasses():
    with pytest.raises(ConfigError, match="batch=0 is invalid"):
        parse_cli(["--batch", "0"])
    with pytest.raises(ConfigError, match="num_cores=2 is invalid with num_devices=1"):
        parse_cli(["--num_cores", "2"])


def test_cli_defaults_are_given_and_lose_to_the_flags():
    args = parse_cli(["--device", "cpu", "--batch=16"], defaults={"device": "xla", "preset": "optimized"})
    assert (args.train.device, args.train.batch, args.task.max_length) == ("cpu", 16, 32)
    assert args.given == {"device", "batch", "preset"}
    assert parse_cli([], defaults={"device": "xla"}).train.device == "xla"


def test_cli_defaults_from_text_are_typed_and_unknown_ones_refused():
    assert parse_cli([], defaults={"batch": "16", "llrd_decay": "None"}).train.batch == 16
    with pytest.raises(ConfigError, match="did you mean 'batch'"):
        parse_cli([], defaults={"bach": 16})


def test_cli_negated_and_equals_flags_count_as_given():
    args = parse_cli(["--no_progress", "--learning_rate=1e-4", "--optlevel", "3"])
    assert args.measure.progress is False and args.train.lr == 1e-4 and args.neuron.optlevel == 3
    assert args.given == {"progress", "lr", "optlevel"}


def test_cli_does_not_read_an_args_file_next_to_the_script(tmp_path, monkeypatch):
    (tmp_path / "train.args").write_text("--batch 64\n")
    monkeypatch.setattr("sys.argv", [str(tmp_path / "train.py")])
    assert parse_cli([]).train.batch == 8


def test_help_lists_the_notebook_and_hugging_face_names(capsys):
    with pytest.raises(SystemExit):
        parse_cli(["--help"])
    out = capsys.readouterr().out
    assert "--per_device_train_batch_size" in out and "--llrd_decay" in out and "--no_progress" in out


def test_the_device_module_lists_the_device_literal(monkeypatch, capsys):
    from helpers.run import device

    allowed = ", ".join(typing.get_args(run_args.Device))
    monkeypatch.setattr(device, "cpu_capability", lambda: None)
    with pytest.raises(ConfigError, match=f"allowed {allowed}$"):
        device.resolve_device("tpu")
    with pytest.raises(SystemExit):
        device.main(["tpu"])
    assert "{" + allowed.replace(", ", ",") + "}" in capsys.readouterr().err
