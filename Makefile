# accelbench-bert: `make test` runs every test; `make report` re-runs the quick suites and rebuilds
# Experiment/ and Pictures/. Both create the environments they need.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
XLA_VENV := .venv-xla
PY := $(VENV)/bin/python
XPY := $(XLA_VENV)/bin/python
# The offline copy of dair-ai/emotion beside the checkout (CI has it); else the hub is used.
SHARED_DATA := $(abspath ../shared/data/emotion)
export EMOTION_DATA_DIR ?= $(if $(wildcard $(SHARED_DATA)/train.jsonl),$(SHARED_DATA),)
export HF_HUB_DISABLE_TELEMETRY := 1
export TOKENIZERS_PARALLELISM := false

.PHONY: venv xla-venv test test-main test-xla report baseline bench clean

venv: $(VENV)/.installed
$(VENV)/.installed: requirements.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q -r requirements.txt -e .
	$(PY) -m ipykernel install --prefix $(VENV) --name accelbench --display-name "accelbench (CPU / CUDA)" >/dev/null
	touch $@

xla-venv: $(XLA_VENV)/.installed
$(XLA_VENV)/.installed: requirements-xla.txt pyproject.toml
	$(PYTHON) -m venv $(XLA_VENV)
	$(XLA_VENV)/bin/pip install -q -r requirements-xla.txt -e .
	$(XPY) -m ipykernel install --prefix $(XLA_VENV) --name accelbench-xla --display-name "accelbench-xla (torch-xla)" >/dev/null
	touch $@

## test: the whole suite (main environment, then the torch-xla CPU environment)
test: test-main test-xla

test-main: venv
	$(PY) -m pytest -q -m "not xla"

test-xla: xla-venv
	PJRT_DEVICE=CPU $(XPY) -m pytest -q -m xla

## report: quick variant of every suite that can run here, then every table and plot
report: venv xla-venv
	$(PY) -m helpers.sweep all --variant quick
	$(PY) -m helpers.report

## baseline: the embedded default run only (CPU, MiniLM, real data subset), ~10 minutes
baseline: venv
	$(VENV)/bin/papermill Nvidia/baseline.ipynb Experiment/runs/baseline-default.ipynb \
	  -p model_name minilm -p train_subset 4000 -p epochs 1 -p max_length 64 -p batch 32 \
	  -p lr 1e-4 -p run_name minilm-default
	$(PY) -m helpers.records --run minilm-default
	@echo "record appended to Experiment/results/runs.jsonl; notebook: Experiment/runs/baseline-default.ipynb"

## bench: the harness-overhead / optimized-preset benchmark (writes BENCHMARKS.md figures)
bench: venv
	$(PY) -m helpers.bench

clean:
	rm -rf $(VENV) $(XLA_VENV)
