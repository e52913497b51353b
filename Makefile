# accelbench-bert: `make test` runs every test; `make report` re-runs the quick suites and rebuilds
# Experiment/ and Pictures/; `make baseline` is the first run. Each creates what it needs.
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

.PHONY: venv xla-venv test test-main test-xla report baseline baseline-smoke bench clean

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

## report: the quick variant of every suite that runs here (resumes), then every table and plot
report: venv xla-venv
	$(PY) -m helpers.study.sweep all --variant quick
	$(PY) -m helpers.study.report

## baseline: the embedded default, the README's first run (CPU or GPU, MiniLM, the real data)
BASELINE_RUN ?= minilm-baseline
BASELINE_RESULTS ?= Experiment/results
BASELINE_PARAMS ?= -p model_name minilm -p max_length 32 -p padding dynamic -p group_by_length True \
	-p batch 32 -p lr 1e-4 -p epochs 1 -p log_every 50 -p eval_every 100 -p progress False
baseline: venv
	@mkdir -p Experiment/runs
	$(VENV)/bin/papermill Nvidia/baseline.ipynb Experiment/runs/$(BASELINE_RUN).ipynb --log-output \
	  $(BASELINE_PARAMS) -p run_name $(BASELINE_RUN) -p results_path $(BASELINE_RESULTS) $(EXTRA)
	$(PY) -m helpers.run.records $(BASELINE_RESULTS)/adhoc --run $(BASELINE_RUN)
	@echo "executed notebook: Experiment/runs/$(BASELINE_RUN).ipynb"

## baseline-smoke: `make baseline` on a tiny setting (CI runs it: the first command must never break)
baseline-smoke:
	$(MAKE) baseline BASELINE_RUN=baseline-smoke BASELINE_RESULTS=$(abspath .ci/smoke-results) \
	  EXTRA="-p train_subset 256 -p eval_subset 64 -p max_steps 4 -p eval_every 2"

## bench: the harness-overhead / optimized-preset benchmark (writes BENCHMARKS.md figures)
bench: venv
	$(PY) -m helpers.study.bench

clean:
	rm -rf $(VENV) $(XLA_VENV)
