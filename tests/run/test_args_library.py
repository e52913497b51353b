"""#24 item 4: the arguments are parsed by the library (HfArgumentParser), checked by their dataclasses,
and every choice list exists once (the Literal types of helpers/run/args.py)."""
import typing

from helpers import cli
from helpers.run import args as run_args


def _choices(cls: type, name: str) -> tuple:
    return typing.get_args(typing.get_type_hints(cls)[name])


def test_eval_args_choices_are_the_training_literals():
    for name, owner in (("padding", run_args.TaskArgs), ("precision", run_args.TrainArgs),
                        ("device", run_args.TrainArgs)):
        assert _choices(cli.EvalArgs, name) == _choices(owner, name) != ()
