# accelbench-bert: `make baseline` is the first run; `make test` runs every test; `make report` re-runs the quick
# suites and rebuilds Experiment/ and Pictures/. Each creates what it needs.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
XLA_VENV := .venv-xla
PY := $(VENV)/bin/python
XPY := $(XLA_VENV)/bin/python
# trn1 only: `make neuron-venv` (requirements-neuron.txt: requirements-xla.txt plus the Neuron wheels)
NEURON_VENV := .venv-neuron
NEURON_PY := $(NEURON_VENV)/bin/python
# The offline copy of dair-ai/emotion beside the checkout (CI has it); else the hub is used.
SHARED_DATA := $(abspath ../shared/data/emotion)
export EMOTION_DATA_DIR ?= $(if $(wildcard $(SHARED_DATA)/train.jsonl),$(SHARED_DATA),)
export HF_HUB_DISABLE_TELEMETRY := 1
export TOKENIZERS_PARALLELISM := false

# An environment is built only where the disk holds it: pip would fail minutes in with "No space left on
# device" otherwise. GiB each takes once installed, with some room for pip's downloads: .venv 2 (this CPU
# wheel of torch) or about 8 (a CUDA build, on a GPU machine); .venv-xla 8 (torch 2.9 from PyPI is a CUDA
# build); .venv-cloud 1. `make xla-venv XLA_VENV_GIB=0` skips the check.
VENV_GIB ?= $(if $(wildcard /dev/nvidia0),10,3)
XLA_VENV_GIB ?= 10
CLOUD_VENV_GIB ?= 1
# $(call disk_for,GIB): stop before pip, saying what is needed and what is free, where the disk (of the
# environment's folder, or the nearest folder above it that exists) holds less
disk_for = @where=$(@D); while [ ! -d "$$where" ]; do where=$$(dirname "$$where"); done; \
	free=$$(df -Pk "$$where" | awk 'NR == 2 {print int($$4 / 1048576)}'); \
	test "$$free" -ge $(1) || { echo "$(@D): $(1) GiB of free disk needed, $$free GiB free on $$where:" \
	"free some space (old environments, clones), then run it again"; exit 1; }

.PHONY: venv xla-venv neuron-venv test test-main test-xla check lab browser report baseline bench clean

# One named Jupyter kernel per environment; the notebooks' kernelspecs name them (Nvidia: accelbench,
# Trainium: accelbench-xla), and papermill and the sweep take that name (`-k NAME` overrides it). Each
# kernel is registered into its own environment (papermill run from there finds it) and into .venv
# (JupyterLab runs from there and lists it). A kernel runs its own environment's python, by absolute path.
KERNELS = share/jupyter/kernels
XLA_KERNELS := $(VENV)/$(KERNELS)/accelbench-xla/kernel.json $(XLA_VENV)/$(KERNELS)/accelbench-xla/kernel.json
NEURON_KERNELS := $(VENV)/$(KERNELS)/accelbench-neuron/kernel.json $(NEURON_VENV)/$(KERNELS)/accelbench-neuron/kernel.json

venv: $(VENV)/.installed $(VENV)/$(KERNELS)/accelbench/kernel.json
$(VENV)/.installed: requirements.txt pyproject.toml
	$(call disk_for,$(VENV_GIB))
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q -r requirements.txt -e .
	touch $@

$(VENV)/$(KERNELS)/accelbench/kernel.json: $(VENV)/.installed
	$(PY) -m ipykernel install --prefix $(VENV) --name accelbench --display-name "accelbench (CPU / CUDA)"

xla-venv: $(XLA_VENV)/.installed $(XLA_KERNELS)
$(XLA_VENV)/.installed: requirements-xla.txt pyproject.toml
	$(call disk_for,$(XLA_VENV_GIB))
	$(PYTHON) -m venv $(XLA_VENV)
	$(XLA_VENV)/bin/pip install -q -r requirements-xla.txt -e .
	touch $@

# Installing into another environment's prefix makes ipykernel warn "The kernelspec may not be found"
# (it is: JupyterLab runs from there); the warning is dropped and the file checked instead.
NOT_FOUND_WARNING = 2>&1 | { grep -v 'The kernelspec may not be found' || true; }; test -f $@

# .venv-xla is torch-xla on the CPU by construction, so its kernel says PJRT_DEVICE=CPU itself
%/$(KERNELS)/accelbench-xla/kernel.json: $(XLA_VENV)/.installed
	$(XPY) -m ipykernel install --prefix $* --name accelbench-xla --display-name "accelbench-xla (torch-xla)" \
	  --env PJRT_DEVICE CPU $(NOT_FOUND_WARNING)

%/$(KERNELS)/accelbench-neuron/kernel.json: $(NEURON_VENV)/.installed
	$(NEURON_PY) -m ipykernel install --prefix $* --name accelbench-neuron \
	  --display-name "accelbench-neuron (Neuron SDK)" $(NOT_FOUND_WARNING)

## neuron-venv: .venv-neuron on a trn1 / trn1n with the Neuron DLAMI (driver, runtime and tools
## preinstalled): requirements-neuron.txt, then the kernel accelbench-neuron (JupyterLab, papermill, the
## sweep's trainium target). Anywhere else it stops before installing anything: no Neuron wheels off a trn1.
NEURON_HOME ?= /opt/aws/neuron
NEURON_DEVICES ?= /dev/neuron0
neuron-venv: $(NEURON_VENV)/.installed $(NEURON_VENV)/$(KERNELS)/accelbench-neuron/kernel.json
# the Neuron SDK the venv pins: requirements-neuron.txt (2.31), or NEURON_REQUIREMENTS=requirements-neuron-2.29.txt
# (the last release that supports XLA training; `make cloud NEURON=2.29` passes it with the matching image)
NEURON_REQUIREMENTS ?= requirements-neuron.txt
$(NEURON_VENV)/.installed: $(NEURON_REQUIREMENTS) requirements-xla.txt pyproject.toml
	@test -d $(NEURON_HOME) || { echo "neuron-venv: $(NEURON_HOME) not found: this is not a Neuron DLAMI." \
	  "Build $(NEURON_VENV) on a trn1 (docs/HARDWARE.md, \"Trainium\"); elsewhere \`make xla-venv\` runs the" \
	  "same code on torch-xla's CPU backend"; exit 1; }
	@test -e $(NEURON_DEVICES) || { echo "neuron-venv: no Neuron device ($(NEURON_DEVICES)): the Neuron driver" \
	  "sees no Trainium here. Build $(NEURON_VENV) on a trn1 (docs/HARDWARE.md, \"Trainium\")"; exit 1; }
	$(PYTHON) -m venv $(NEURON_VENV)
	$(NEURON_VENV)/bin/pip install -q -U pip
	$(NEURON_VENV)/bin/pip install -q -r $(NEURON_REQUIREMENTS) -e .
	touch $@

## lab: JupyterLab (in .venv) with the kernels accelbench, accelbench-xla and, where .venv-neuron exists
## (trn1: `make neuron-venv`), accelbench-neuron. `make lab LAB_XLA=0` skips building .venv-xla (on a GPU
## AMI or trn1).
## Reach it from a laptop: ssh -L 8888:localhost:8888 HOST
LAB_PORT ?= 8888
LAB_XLA ?= 1
LAB_KERNEL_FILES := $(if $(filter 1,$(LAB_XLA)),$(XLA_KERNELS)) $(if $(wildcard $(NEURON_VENV)/.installed),$(NEURON_KERNELS))
lab: venv $(LAB_KERNEL_FILES)
	$(VENV)/bin/jupyter kernelspec list
	$(VENV)/bin/jupyter lab --no-browser --ip 127.0.0.1 --port $(LAB_PORT) $(if $(filter 0,$(shell id -u)),--allow-root)

## browser: Debian's chromium, chromedriver and DejaVu fonts for the browser tests (JupyterLab, the report's first
## screen), installed where this runs as root (CI); elsewhere, without them, those tests are skipped and say why
browser:
	@if command -v chromium >/dev/null && command -v chromedriver >/dev/null; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
	    chromium chromium-driver fonts-dejavu-core >/dev/null) \
	  || echo "browser: apt-get install chromium chromium-driver failed; the browser tests will be skipped"; \
	else echo "browser: chromium/chromedriver missing and not root; the browser tests will be skipped"; fi

## test: the formatter, the linter and the import contracts, the first-run check on this CPU and on torch-xla's
## CPU backend, then the whole suite in parallel (main environment, then the torch-xla CPU environment)
test: venv xla-venv check test-main test-xla

## check: ruff (format and lint, pyproject.toml), import-linter, then `python -m helpers.check` in .venv and in
## .venv-xla (PJRT_DEVICE=CPU); on a GPU or trn1 run `python -m helpers.check` in its environment
check: venv xla-venv
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/ruff check .
	$(VENV)/bin/lint-imports
	$(PY) -m helpers.check
	PJRT_DEVICE=CPU $(XPY) -m helpers.check

test-main: venv browser $(if $(wildcard $(XLA_VENV)/.installed),$(XLA_KERNELS))
	$(PY) -m pytest -q -n auto -m "not xla"

test-xla: xla-venv
	PJRT_DEVICE=CPU $(XPY) -m pytest -q -n auto -m xla tests

## report: the quick variant of every suite that runs here (resumes; a failed point makes the command fail, after
## the report is written), then every table and plot
report: venv xla-venv
	$(PY) -m study.sweep all --variant quick; status=$$?; $(PY) -m study.report && exit $$status

## baseline: the README's first run: the Nvidia notebook on this machine (CUDA if present, else the CPU), MiniLM on
## the real data. Every run keeps its own record (a second run of a name is <name>@<device>.run2.json) and its own
## executed notebook. BASELINE_RUN names it; EXTRA="-p NAME VALUE ..." adds notebook parameters (they win).
BASELINE_RUN ?= minilm-baseline
# the recipe search (Experiment/recipe.md, `python -m study.sweep recipe`): L=64 instead of 32 (no truncation of the
# longer rows) with lr 2e-4 reached 90% validation in 350 steps on both seeds and 91.45% test accuracy after the epoch
BASELINE_PARAMS ?= -p model_name minilm -p max_length 64 -p padding dynamic -p group_by_length True \
	-p batch 32 -p lr 2e-4 -p epochs 1 -p log_every 50 -p eval_every 50 -p progress False
export BASELINE_RUN
baseline: venv
	@mkdir -p Experiment/runs
	@out="Experiment/runs/baseline-$$(date +%Y%m%d-%H%M%S)-$$$$.ipynb"; \
	$(VENV)/bin/papermill Nvidia/baseline.ipynb "$$out" --log-output $(BASELINE_PARAMS) \
	  -r run_name "$$BASELINE_RUN" $(EXTRA) && echo "executed notebook: $$out"

## bench: the harness benchmark (bench/: the loop against a bare loop, time to 90% against Trainer; BENCHMARKS.md)
bench: venv
	$(PY) -m bench

## cloud: a trn1 or a GPU in the cloud in one command (SkyPilot, in .venv-cloud): prints the task, the sweep's
## plan and the most it can cost (every step has a time limit, and on AWS the instance halts itself at that bound
## even if this machine dies), asks (YES=1: without a terminal), launches, brings the records and the check's logs
## home (Experiment/results/<suite>/, Experiment/runs/check/) and tears the instance down (docs/HARDWARE.md).
##   make cloud TARGET=trn1|a10g|l4|a100|h100|local SUITES="cloud/smoke.toml padding" VARIANT=quick  (SUITES=all too)
## DRY_RUN=1 prints the task, the plan and the cost and contacts no cloud; NEURON=2.29|2.31 (trn1: the image and the
## pins together), IMAGE_ID=ami-... (refused unless its SDK matches), KEEP=1 (leave it up); a value that is neither
## yes nor no is refused. `local` runs the task's setup and run here. cloud-down: the records home, then down.
CLOUD_VENV := .venv-cloud
SUITES ?= cloud/smoke.toml
VARIANT ?= quick
CLOUD_FLAGS = $(if $(DRY_RUN),--dry-run="$(DRY_RUN)") $(if $(YES),--yes="$(YES)") $(if $(KEEP),--keep="$(KEEP)") \
	$(if $(NEURON),--neuron "$(NEURON)") $(if $(IMAGE_ID),--image-id "$(IMAGE_ID)")
.PHONY: cloud-venv cloud cloud-down cloud-run
cloud-venv: $(CLOUD_VENV)/.installed
$(CLOUD_VENV)/.installed: requirements-cloud.txt
	$(call disk_for,$(CLOUD_VENV_GIB))
	$(PYTHON) -m venv $(CLOUD_VENV)
	$(CLOUD_VENV)/bin/pip install -q -r requirements-cloud.txt
	touch $@

cloud: venv cloud-venv
	$(PY) -m study.cloud $(TARGET) --suites "$(SUITES)" --variant $(VARIANT) $(CLOUD_FLAGS)

cloud-down: venv cloud-venv
	$(PY) -m study.cloud $(TARGET) --down

# tests/study/test_cloud.py checks the task files against SkyPilot's schema in .venv-cloud
test-main: cloud-venv

## cloud-run: what the cloud tasks' `run` is (cloud/*.yaml; SkyPilot sets these variables from the task's
## envs), and `make cloud TARGET=local` here: the first-run check, its records, logs and output kept in
## CHECK_RESULTS (under Experiment/runs, which comes home), then each of SUITES' VARIANT through the sweep, on
## trainium after filling the Neuron compile cache (--precompile). A failed check stops it: records of a device
## that fails the check would mislead.
SWEEP_TARGET ?= nvidia
SWEEP_PY ?= $(PY)
SWEEP_RESULTS ?= Experiment/results
CHECK_RESULTS ?= Experiment/runs/check
cloud-run:
	@mkdir -p $(CHECK_RESULTS)
	set -o pipefail; $(SWEEP_PY) -m helpers.check --results $(CHECK_RESULTS) 2>&1 | tee $(CHECK_RESULTS)/check.log
	@status=0; for suite in $(SUITES); do \
	  sweep="$(SWEEP_PY) -m study.sweep $$suite --variant $(VARIANT) --target $(SWEEP_TARGET)$(if \
	    $(filter trainium,$(SWEEP_TARGET)), --precompile)"; \
	  echo "$$sweep --results $(SWEEP_RESULTS)"; $$sweep --results $(SWEEP_RESULTS) || status=1; \
	done; exit $$status

clean:
	rm -rf $(VENV) $(XLA_VENV) $(CLOUD_VENV)
