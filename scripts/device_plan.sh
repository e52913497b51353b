#!/usr/bin/env bash
# The device plan: where a lent GPU's minutes go, in the order of what they answer, each stage bounded by what is
# left of the plan's budget (a stage it cannot start in time is skipped, and says so). Rehearse it on the CPU.
#
#   scripts/device_plan.sh gpu [OUT_DIR]         # on an H100 / H200; PLAN_BUDGET_S (default 1800) its seconds
#   scripts/device_plan.sh rehearsal [OUT_DIR]   # on this CPU: the same stages, the suites' quick variants (2400 s)
#
# OUT_DIR (default Experiment/runs/device-MODE-<UTC time>) holds everything the plan leaves: plan.log, results/ (the
# records), logs/ (the notebooks and their logs), traces/ (profiles), check/ (the check's records and logs),
# bench.md. Copy that one folder off a lent machine. The points run in .venv (the sweep's kernel accelbench), whose
# torch must be requirements.txt's pin, and on a GPU a CUDA build; PY (default .venv/bin/python) runs the rest and
# is held to the same pin (PLAN_UNPINNED=1 runs another torch anyway, saying so in the log and the summary).
#
# Stages: 1 the step paths (cloud/gpu_step.toml: eager and CUDA-graphed bert-base b64 bf16 at L=32 and L=128 first,
# then the profiled and the compile-only cases); 2 the first-run check; 3 the harness against the bare graphed loop
# (the bench); 4 the batch x length grid (cloud/gpu_grid.toml); 5 quick suites on the graphed path. A stage fails
# when its command does (the sweep exits non-zero when any point failed); one the budget cut short is named, not
# failed (its finished points are kept). The summary fails a graphed run whose torch ran functions without CUDA
# graphs (the record's shapes.cudagraph_skips > 0). Exit status: 0 when no stage that ran failed, 1 when one did,
# 2 when the plan refused to start.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
mode=${1:-}
case "$mode" in
  gpu) variant=full step=cudagraphs budget=1800 check_s=120 bench=(--steps 50 --windows 5) ;;
  rehearsal) variant=quick step=compile budget=2400 check_s=300 bench=(--model minilm --steps 4 --windows 2) ;;
  *) echo "usage: scripts/device_plan.sh gpu|rehearsal [OUT_DIR]  (PLAN_BUDGET_S: seconds, PY: the python)" >&2
    exit 2 ;;
esac
budget=${PLAN_BUDGET_S:-$budget}
if ! [[ $budget =~ ^[0-9]+$ ]] || [ "$((10#$budget))" -eq 0 ]; then
  echo "device_plan: PLAN_BUDGET_S=$budget is not a whole number of seconds above 0 (e.g. PLAN_BUDGET_S=900)" >&2
  exit 2
fi
budget=$((10#$budget))
py=${PY:-.venv/bin/python}
pin=$(sed -n 's/^torch==\([^ #]*\).*/\1/p' requirements.txt)

# torch_problem PYTHON: say what is wrong with PYTHON's torch for this mode (nothing when it is right)
torch_problem() {
  local found version cuda gpus
  found=$("$1" -c 'import torch; print(torch.__version__.split("+")[0], torch.version.cuda, torch.cuda.device_count())' \
    2>/dev/null) || { echo "$1 has no torch: build .venv (make venv; on a GPU machine pip takes PyPI's CUDA build)"; return; }
  read -r version cuda gpus <<<"$found"
  if [ "$version" != "$pin" ] && [ -z "${PLAN_UNPINNED:-}" ]; then
    echo "$1 has torch $version, requirements.txt pins $pin: rebuild .venv (make venv), or PLAN_UNPINNED=1 to run it anyway"
  elif [ "$mode" = gpu ] && [ "$cuda" = None ]; then
    echo "$1's torch $version is a CPU build: on the GPU machine \`make venv\` installs PyPI's CUDA build (its driver" \
      "must be new enough: make cloud's dry run names it); on a CPU run: scripts/device_plan.sh rehearsal"
  elif [ "$mode" = gpu ] && [ "$gpus" -lt 1 ]; then
    echo "$1's torch $version (CUDA $cuda) sees no GPU: nvidia-smi; an empty CUDA_VISIBLE_DEVICES hides them all"
  elif [ "$version" != "$pin" ]; then
    echo "WARNING: $1 has torch $version, not the pinned $pin (PLAN_UNPINNED=1): its records name the version" >&2
  fi
}
pythons=("$py")
[ "$py" = .venv/bin/python ] || pythons+=(.venv/bin/python)  # the sweep runs its points in .venv whatever PY is
for python in "${pythons[@]}"; do
  problem=$(torch_problem "$python")
  [ -n "$problem" ] && { echo "device_plan: $problem" >&2; exit 2; }
done
export EMOTION_DATA_DIR=${EMOTION_DATA_DIR:-$(cd .. && pwd)/shared/data/emotion}
if [ ! -f "$EMOTION_DATA_DIR/train.jsonl" ]; then
  echo "device_plan: no dataset at EMOTION_DATA_DIR=$EMOTION_DATA_DIR: give a folder of {train,validation,test}.jsonl" >&2
  exit 2
fi
out=${2:-Experiment/runs/device-$mode-$(date -u +%Y%m%dT%H%M%S)}
mkdir -p "$out" || exit 2
out=$(cd "$out" && pwd)
exec > >(tee -a "$out/plan.log") 2>&1
start=$SECONDS
failed=() skipped=()

# stage NAME SECONDS COMMAND...: run COMMAND when about SECONDS of the budget are left, bounded by what is left
stage() {
  local name=$1 need=$2 left rc
  shift 2
  left=$((budget - (SECONDS - start)))
  if [ "$left" -lt "$need" ]; then
    echo "=== $name: skipped, $left s of the $budget s budget left (it needs about $need)"
    skipped+=("$name")
    return
  fi
  echo "=== $(date -u +%T) [$((SECONDS - start)) s] $name (at most $left s): $*"
  timeout --signal=INT --kill-after=30 "$left" "$@"
  rc=$?
  if [ "$rc" -eq 0 ]; then
    echo "=== $name: passed at $((SECONDS - start)) s"
  elif [ "$rc" -eq 124 ]; then  # timeout's status: the budget ran out mid-stage; its finished points are kept
    echo "=== $name: cut at the end of the budget, at $((SECONDS - start)) s"
    skipped+=("$name (cut)")
  else
    echo "=== $name: FAILED (exit $rc) at $((SECONDS - start)) s"
    failed+=("$name (exit $rc)")
  fi
}

sweep=("$py" -m study.sweep --results "$out/results" --runs-dir "$out/logs")
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv 2>/dev/null || lscpu | grep 'Model name'
"$py" -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__)'
stage "step paths" 60 "${sweep[@]}" cloud/gpu_step.toml --variant "$variant" --set profile_dir="$out/traces"
stage "first-run check" 60 "$py" -m helpers.check --device "$([ "$mode" = gpu ] && echo cuda || echo cpu)" \
  --results "$out/check" --timeout "$check_s"
if "$py" -c 'import bench.__main__' 2>/dev/null; then
  stage "harness vs the bare graphed loop" 120 "$py" -m bench --sections overhead --step-mode "$step" --warmup 1 \
    --results "$out/results" --out "$out/bench.md" "${bench[@]}"
else
  echo "=== harness vs the bare graphed loop: skipped, python -m bench does not import here"
  skipped+=("bench")
fi
stage "batch x length grid" 90 "${sweep[@]}" cloud/gpu_grid.toml --variant "$variant"
for suite in speedup small_batch batch_scaling time_to_accuracy; do
  extra=()
  [ "$suite" = time_to_accuracy ] && extra=(--set pad_to_multiple_of=16)  # dynamic padding: 4 length buckets
  stage "$suite (quick) on the $step path" 60 "${sweep[@]}" "$suite" --variant quick \
    --set step_mode="$step" --set data_on_device=true "${extra[@]}"
done

# the summary: every record the plan wrote, and whether torch ran the graphed steps as CUDA graphs
if ! "$py" - "$out/results" <<'EOF'
import sys
from helpers import record

found, skipped = record.read(sys.argv[1])
bad = []
widths = (9, 10, 4, 4, 10, 6, 5)
print(" ".join(f"{h:>{w}}" for h, w in zip(("status", "step", "L", "b", "samples/s", "MFU", "skips"), widths)), "suite/run")
for r in sorted(found, key=lambda r: r["_source"]):
    p, t, shapes = r["params"], r.get("timing") or {}, r.get("shapes") or {}
    try:
        from helpers import flops

        peak = flops.peak(r["device"], r["precision"]["compute_dtype"], f"{sys.argv[1]}/_peaks")[0]
        work = flops.step_flops(r["model"]["config"], shapes["steady"], p.get("lora_r", 0), p.get("lora_targets"))
        mfu = f"{flops.mfu(work, t['steady_time_s'], peak):.1%}"
    except Exception:  # a failed run, or a device without a peak: no MFU
        mfu = "-"
    skips = shapes.get("cudagraph_skips")
    if p.get("step_mode") == "cudagraphs" and r["status"] == "finished" and skips != 0:  # None: unrecorded
        bad.append(f"{r['run_name']}: cudagraph_skips {skips}")
    rate = f"{t['samples_per_s']:.1f}" if t.get("samples_per_s") else "-"
    cells = [r["status"], p.get("step_mode", "-"), p.get("max_length"), p.get("batch"), rate, mfu, skips]
    print(" ".join(f"{str('-' if c is None else c):>{w}}" for c, w in zip(cells, widths)), f"{r.get('suite')}/{r['run_name']}")
print(f"{len(found)} records" + (f"; {sum(skipped.values())} files not read" if skipped else ""))
if bad:
    sys.exit("graphed runs torch did not run as CUDA graphs: " + "; ".join(bad))
EOF
then
  failed+=("summary: graphed runs with cudagraph_skips > 0")
fi
echo "=== plan $mode: $((SECONDS - start)) s of $budget; out $out"
[ ${#skipped[@]} -eq 0 ] || printf '=== skipped: %s\n' "${skipped[@]}"
if [ ${#failed[@]} -gt 0 ]; then
  printf '=== FAILED: %s\n' "${failed[@]}"
  exit 1
fi
echo "=== every stage that ran passed"
