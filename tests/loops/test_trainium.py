"""The XLA loop (Trainium/train.py) on torch-xla's CPU backend: static shapes compile once, evaluation apart."""

from __future__ import annotations

import json

import pytest

from helpers import arguments

pytestmark = pytest.mark.xla


def run(tmp_path, tiny_model_dir, tiny_data_dir, **values) -> dict:
    """Train the tiny model on XLA as `values` say; return its record."""
    from Trainium import train

    base = dict(
        model_name=str(tiny_model_dir),
        data_dir=str(tiny_data_dir),
        batch=16,
        max_length=32,
        lr=1e-3,
        max_steps=6,
        log_every=2,
        timing_warmup_steps=2,
        progress=False,
        results_path=str(tmp_path),
        xla_fast_compile=True,
    )
    return train.train(arguments.build({**base, **values}, arguments.TrainiumArgs))


def test_static_shapes_compile_in_the_warm_up_only_and_evaluation_counts_apart(tmp_path, tiny_model_dir, tiny_data_dir):
    rec = run(tmp_path, tiny_model_dir, tiny_data_dir, eval_every=3)
    x = rec["xla"]
    assert rec["status"] == "finished" and rec["device"]["key"].startswith("xla-cpu-")
    assert x["compilations_after_warmup"] == 0 and x["distinct_input_shapes"] == 1
    assert x["periodic_eval"]["uncached_compiles"] >= 1 and x["train"]["uncached_compiles"] >= 1
    assert "--model-type=transformer" in x["neuron_cc_flags"]
    assert rec["timing"]["step_time_source"].startswith("each window's mean")
    assert rec["shapes"]["steady"] == {"16x32": 4} and [p["step"] for p in rec["curve"]] == [3, 6]


def test_dynamic_padding_compiles_a_graph_per_new_shape(tmp_path, tiny_model_dir, tiny_data_dir, capsys):
    rec = run(tmp_path, tiny_model_dir, tiny_data_dir, padding="dynamic", batch=4, max_steps=8)
    assert rec["xla"]["distinct_input_shapes"] > 1
    assert rec["xla"]["compilations_after_warmup"] > 0  # the finding the padding suite measures
    assert "every new batch shape compiles" in capsys.readouterr().out


def test_gradient_accumulation_keeps_one_graph_per_step(tmp_path, tiny_model_dir, tiny_data_dir):
    rec = run(tmp_path, tiny_model_dir, tiny_data_dir, batch=8, gradient_accumulation_steps=2, max_steps=5)
    assert rec["timing"]["steps"] == 5 and rec["xla"]["compilations_after_warmup"] == 0


def test_the_precompile_command_is_neurons_tool_over_a_short_trial():
    from Trainium import train

    command = train.precompile_command(arguments.build({"batch": 32, "precompile": True}, arguments.TrainiumArgs))
    assert command[0] == "neuron_parallel_compile" and command[2].endswith("Trainium/train.py")
    assert "--batch=32" in command and "--max_steps=10" in command


def test_a_failure_is_recorded_then_raised(tmp_path, tiny_model_dir, tiny_data_dir):
    blocker = tmp_path / "file"
    blocker.write_text("a file where the model folder would go")
    with pytest.raises(Exception):
        run(tmp_path, tiny_model_dir, tiny_data_dir, run_name="save", save_dir=str(blocker / "m"), max_steps=3)
    rec = json.loads(next((tmp_path / "adhoc").glob("save@*.json")).read_text())
    assert rec["status"] == "failed" and rec["timing"]["steps"] == 3 and "run" in rec["xla"]
