"""The arguments: checked once, per platform, from a notebook, a command line or code."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from helpers import arguments, devices, record
from helpers.arguments import ConfigError, NvidiaArgs, TrainiumArgs, build


def device(kind: str, bf16: bool) -> devices.Device:
    """Return a device of `kind` with or without bf16 units, as the loops resolve it."""
    return devices.Device(kind, kind, f"a {kind}", f"{kind}-test", None, "AVX512", bf16)


def test_values_are_converted_to_their_types_and_none_text_is_none():
    args = build({"batch": "64", "lr": "1e-4", "max_steps": "None", "llrd_decay": 0.9}, NvidiaArgs)
    assert (args.batch, args.lr, args.max_steps, args.llrd_decay) == (64, 1e-4, None, 0.9)


@pytest.mark.parametrize(
    "values, message",
    [
        ({"learnin_rate": 1e-4}, "did you mean 'lr'"),
        ({"per_device_train_batch_size": 8}, "Hugging Face examples' name for 'batch'"),
        ({"optlevel": 3}, "belongs to the trainium loop"),
        ({"batch": True}, "a bool is not"),
        ({"batch": 0}, "batch=0 is invalid"),
        ({"padding": "static", "group_by_length": True}, "dynamic"),
        ({"stop_at_accuracy": 0.9}, "needs eval_every"),
        ({"lora_targets": "query,nope"}, "lora_targets"),
        ({"step_mode": "compile", "padding": "dynamic", "max_length": 128}, "pad_to_multiple_of >= 16"),
        ({"run_name": "has space"}, "run_name"),
    ],
)
def test_what_is_refused_names_the_parameter(values, message):
    with pytest.raises(ConfigError, match=message):
        build(values, NvidiaArgs)


@pytest.mark.parametrize(
    "values, message",
    [
        ({"precision": "fp16"}, "not supported on XLA"),
        ({"bf16_mode": "fp32", "precision": "bf16"}, "torch stays fp32"),
        ({"extra_cc_flags": "--x='open"}, "extra_cc_flags"),
        ({"step_mode": "compile"}, "belongs to the nvidia loop"),
    ],
)
def test_the_trainium_loop_refuses_what_xla_cannot_take(values, message):
    with pytest.raises(ConfigError, match=message):
        build(values, TrainiumArgs)


def test_a_preset_fills_only_what_was_not_given():
    args = build({"preset": "optimized", "batch": 16}, NvidiaArgs)
    assert (args.batch, args.max_length, args.llrd_decay) == (16, 32, 0.95)
    assert args.given == {"preset", "batch"}


def test_the_device_check_reads_the_precision_auto_resolved_to():
    compiled = build({"step_mode": "compile"}, NvidiaArgs)
    # the study's T4: auto resolves to fp16, whose GradScaler reads the host every step
    with pytest.raises(ConfigError, match="precision='auto' chose fp16"):
        compiled.check_device("cuda", "fp16", 512)
    compiled.check_device("cuda", "bf16", 512)  # an A100 / H100 / H200: fine
    with pytest.raises(ConfigError, match="needs CUDA"):
        build({"step_mode": "cudagraphs"}, NvidiaArgs).check_device("cpu", "bf16", 512)
    with pytest.raises(ConfigError, match="limit"):
        build({"max_length": 600}, NvidiaArgs).check_device("cpu", "fp32", 512)


def test_a_notebook_gives_what_papermill_injected_and_refuses_an_unknown_injected_name():
    history = ["from helpers import arguments", "# Parameters\nbatch = 64\nlr = 0.001\n"]
    args = arguments.from_notebook({"batch": 64, "lr": 0.001, "In": history, "seed": 42}, NvidiaArgs)
    assert args.batch == 64 and args.given == {"batch", "lr"}
    with pytest.raises(ConfigError, match="did you mean 'batch'"):
        arguments.from_notebook({"batchh": 64, "In": ["# Parameters\nbatchh = 64\n"]}, NvidiaArgs)
    by_hand = arguments.from_notebook({"batch": 32, "seed": 42}, NvidiaArgs)  # edited in JupyterLab, no papermill
    assert by_hand.given == {"batch"}


def test_a_command_line_takes_the_hugging_face_names_and_round_trips():
    args = arguments.from_cli(
        ["--per_device_train_batch_size", "32", "--learning_rate=1e-4", "--preset=optimized"], NvidiaArgs
    )
    assert (args.batch, args.lr, args.max_length) == (32, 1e-4, 32)
    again = arguments.from_cli(arguments.to_cli(args), NvidiaArgs)
    assert again == args and again.given == args.given
    with pytest.raises(SystemExit):
        arguments.from_cli(["--optlevel=3"], NvidiaArgs)


def test_each_notebooks_parameters_cell_is_its_loops_arguments():
    for notebook, cls in (("Nvidia/baseline.ipynb", NvidiaArgs), ("Trainium/baseline.ipynb", TrainiumArgs)):
        cells = json.loads((record.REPO_ROOT / notebook).read_text())["cells"]
        (cell,) = [c for c in cells if "parameters" in c["metadata"].get("tags", [])]
        assert "".join(cell["source"]) == arguments.parameters_cell(cls), notebook


def test_the_parameter_reference_is_what_the_arguments_say():
    assert (record.REPO_ROOT / "docs/PARAMETERS.md").read_text() == arguments.reference()


def test_papermill_reads_every_name_of_both_parameters_cells():
    code = "from papermill.inspection import inspect_notebook; import sys; print(len(inspect_notebook(sys.argv[1])))"
    for notebook, cls in (("Nvidia/baseline.ipynb", NvidiaArgs), ("Trainium/baseline.ipynb", TrainiumArgs)):
        out = subprocess.run(
            [sys.executable, "-c", code, notebook], capture_output=True, text=True, cwd=record.REPO_ROOT
        )
        assert int(out.stdout.strip()) == len(cls.__dataclass_fields__), out.stderr[-500:]
