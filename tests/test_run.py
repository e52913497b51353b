"""run_all: every outcome of a run reaches the record."""
import pytest

from helpers import records, run as steps
from helpers.config import ConfigError, RunConfig


def _cfg(tiny_model_dir, tiny_data_dir, results_path, **kw):
    base = dict(model_name=str(tiny_model_dir), data_dir=str(tiny_data_dir), batch=32, max_length=16,
                epochs=1, lr=5e-3, results_path=str(results_path), progress=False, log_every=2)
    return RunConfig(**{**base, **kw})


def test_finished_run_is_recorded(tiny_model_dir, tiny_data_dir, results_path):
    rec = steps.run_all(_cfg(tiny_model_dir, tiny_data_dir, results_path, run_name="ok"))
    (saved,), _ = records.read_records(results_path)
    assert saved["run_id"] == rec["run_id"] and saved["status"] == "finished"
    assert saved["timing"]["steps"] == 256 // 32 and saved["metrics"]["test_rows"] == 64


def test_oom_is_recorded_and_does_not_raise(tiny_model_dir, tiny_data_dir, results_path, monkeypatch):
    def boom(run):
        raise MemoryError("host ran out of memory")
    monkeypatch.setattr(steps, "build_model", boom)
    rec = steps.run_all(_cfg(tiny_model_dir, tiny_data_dir, results_path, run_name="big"))
    (saved,), _ = records.read_records(results_path)
    assert rec["status"] == saved["status"] == "oom" and "MemoryError" in saved["error"]
    assert saved["params"]["batch"] == 32  # the configuration that ran out is kept


def test_divergence_is_recorded(tiny_model_dir, tiny_data_dir, results_path):
    rec = steps.run_all(_cfg(tiny_model_dir, tiny_data_dir, results_path, lr=1e6, run_name="nan",
                             max_grad_norm=None, warmup_ratio=0.0))
    assert rec["status"] == "diverged" and rec["metrics"]["diverged_at_step"] % 2 == 0
    assert "test_accuracy" not in rec["metrics"]  # no evaluation of a diverged model


def test_parameter_errors_raise_before_anything_is_recorded(tiny_model_dir, tiny_data_dir, results_path):
    with pytest.raises(ConfigError, match="max_length=4096 is above"):
        steps.run_all(_cfg(tiny_model_dir, tiny_data_dir, results_path, max_length=4096))
    assert not results_path.exists()
