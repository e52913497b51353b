#!/usr/bin/env bash
# The device plan: where a lent GPU's minutes go, in order of what they answer, each stage bounded by the time
# left of the plan's budget (a stage that cannot finish in it is skipped, and says so). Run it first thing when
# a GPU is at hand; rehearse it on the CPU before (the same stages, tiny, torch.compile for CUDA graphs).
#
#   scripts/device_plan.sh gpu          # on an H100 / H200: records into Experiment/results, log in _device/
#   scripts/device_plan.sh rehearsal    # on this CPU: the same stages into Experiment/runs/rehearsal/
#   PLAN_BUDGET_S: seconds for the whole plan (540 on a GPU, 2400 in the rehearsal); PY=.venv/bin/python
#
# Stages: the first-run check; the step paths (cloud/gpu_step.toml: eager, compiled, CUDA-graphed, data on the
# device, a profile of eager against the fastest); the harness against the bare graphed loop and the compiled
# Trainer (bench); the batch x length grid (cloud/gpu_grid.toml); the quick suites on the fastest path.
set -uo pipefail
cd "$(dirname "$0")/.."
mode=${1:-}
case "$mode" in
  gpu) variant=full results=Experiment/results step=cudagraphs out=Experiment/results/_device budget=540
    bench=(--steps 50 --windows 5) ;;
  rehearsal) variant=quick results=Experiment/runs/rehearsal/results step=compile out=Experiment/runs/rehearsal
    budget=2400 bench=(--model minilm --steps 4 --windows 2 --quiet-timeout 5) ;;
  *) echo "usage: scripts/device_plan.sh gpu|rehearsal (PLAN_BUDGET_S: the budget in seconds)" >&2; exit 2 ;;
esac
budget=${PLAN_BUDGET_S:-$budget}
py=${PY:-.venv/bin/python}
if [ "$mode" = gpu ] && ! "$py" -c 'import sys, torch; sys.exit(not torch.cuda.is_available())' 2>/dev/null; then
  echo "device_plan: no CUDA device for $py; on a CPU run: scripts/device_plan.sh rehearsal" >&2
  exit 2
fi
export EMOTION_DATA_DIR=${EMOTION_DATA_DIR:-$(cd .. && pwd)/shared/data/emotion}
if [ ! -f "$EMOTION_DATA_DIR/train.jsonl" ]; then
  echo "device_plan: no dataset at EMOTION_DATA_DIR=$EMOTION_DATA_DIR: set it to a folder of" \
    "{train,validation,test}.jsonl (carry one to the device machine)" >&2
  exit 2
fi
mkdir -p "$out" "$results"
log="$out/$(date -u +%Y-%m-%dT%H%M)-$mode.log"
start=$SECONDS

# stage NAME SECONDS COMMAND...: run COMMAND when the budget still holds about SECONDS, bounded by what is left
stage() {
  local name=$1 need=$2 left rc
  shift 2
  left=$((budget - (SECONDS - start)))
  if [ "$left" -lt "$need" ]; then
    echo "=== $name: skipped, $left s of the $budget s budget left (it needs about $need)"
    return
  fi
  echo "=== $(date -u +%T) [$((SECONDS - start)) s] $name (at most $left s): $*"
  timeout --signal=INT --kill-after=30 "$left" "$@"
  rc=$?
  echo "=== $name: exit $rc at $((SECONDS - start)) s"
}

sweep=("$py" -m helpers.study.sweep)
where=(--results "$results" --runs-dir "$out/runs")

{
  nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv 2>/dev/null || lscpu | grep 'Model name'
  "$py" -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__)'
  [ -z "${SKIP_CHECK:-}" ] && stage "first-run check" 60 "$py" -m helpers.check
  stage "step paths" 200 "${sweep[@]}" cloud/gpu_step.toml --variant "$variant" "${where[@]}"
  stage "harness vs bare graphed loop vs compiled Trainer" 150 "$py" -m bench --sections overhead \
    --step-mode "$step" --warmup 1 --results "$results" --out "$out/bench-$mode.md" "${bench[@]}"
  stage "batch x length grid" 90 "${sweep[@]}" cloud/gpu_grid.toml --variant "$variant" "${where[@]}"
  for suite in time_to_accuracy batch_scaling speedup small_batch; do
    extra=()
    [ "$suite" = time_to_accuracy ] && extra=(--set pad_to_multiple_of=16)  # dynamic padding: 4 length buckets
    stage "$suite (quick) on the fastest path" 60 "${sweep[@]}" "$suite" --variant quick "${where[@]}" \
      --set step_mode="$step" --set data_on_device=true "${extra[@]}"
  done
  echo "=== done in $((SECONDS - start)) s of $budget"
} 2>&1 | tee -a "$log"
echo "console log: $log"
