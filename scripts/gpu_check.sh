#!/usr/bin/env bash
# Every check that needs a GPU, in one run of under 7 minutes on a CUDA machine (no run has happened yet).
# It runs on the torch it finds there (the GPU machine has 2.11.0+cu130, not our pin; a CUDA torch is too
# large to bring) and says which, first thing in summary.txt. Each step has its own time limit and log;
# everything is written under $OUT, at most 8 files (what the device tool brings back):
#   env.txt           the GPU, driver, torch/CUDA and package versions, before and after the install
#   install.log       the wheels of scripts/gpu_wheels.txt, from $WHEELS (.whl/), installed with no network
#   units.log         the layer cache's CUDA-stream copies and profile, batch invariance with cuBLAS/cuDNN
#   e2e.log           `serve` with a GPU executor rendering the default workflow against the CPU image
#                     (its arena in host shared memory; the executor's CUDA peak must be above 0 and the
#                     tensors must have crossed shared memory; TF32 off)
#   e2e-server.log    that server's log, its executors' output with it
#   nvshmem-one.log   the NVSHMEM arena on one PE, in a process of its own (NVSHMEM ends a process whose
#                     init fails)
#   nvshmem-pair.log  two PEs pulling each other's tensors (in processes of their own), then (last) `serve`
#                     with a GPU executor in its host's NVSHMEM team rendering the default workflow
#   summary.txt       the torch it ran on, then each step's status and seconds, written as each step starts
#                     and ends (a run cut short still says where it was)
# A missing or broken nvshmem4py fails the check, as does a step whose tests skipped. The steps share one demo
# workspace (COMFY_CLUSTER_TEST_WORKSPACE), built by the first that needs it.
#
# Usage: bash scripts/gpu_check.sh [--dry-run]
#   --dry-run (any machine): print the exact commands and check that every wheel and file they need is here.
# With the device tool: run scripts/fetch_gpu_wheels.sh here, then `bash scripts/gpu_check.sh` there with
# carry [".whl"] and timeout_s 450: the step limits and their 5 s kill grace add up to 405 s.
set -uo pipefail
cd "$(dirname "$0")/.."
DRY=0
case "${1:-}" in
  --dry-run) DRY=1 ;;
  "") ;;
  *) echo "usage: $0 [--dry-run]" >&2; exit 2 ;;
esac
OUT=${OUT:-/tmp/gpu-check}
WHEELS=${WHEELS:-.whl}
SITE=${SITE:-/tmp/gpu-check-site}
WORK=${WORK:-/tmp/gpu-check-work}
PY=${PY:-python3}
# Step limits in seconds: with 5 s of kill grace each, 405 s, a margin under the device tool's advised 450.
T_ENV=${T_ENV:-10} T_INSTALL=${T_INSTALL:-25} T_UNITS=${T_UNITS:-55} T_E2E=${T_E2E:-110} T_ONE=${T_ONE:-35}
T_PAIR=${T_PAIR:-45} T_TEAM=${T_TEAM:-75}
PYTEST=("$PY" -m pytest -q -rs -s -p no:cacheprovider)
NEEDED=(scripts/gpu_wheels.txt scripts/gpu_env.py scripts/gpu_nvshmem_pair.py
        tests/weights/test_layer_cache_cuda.py tests/models/test_batch_invariant.py tests/e2e/test_gpu_executor.py
        tests/dataplane/test_nvshmem_arena.py workflows_json/text_to_image.json)

# -- what is needed is here ---------------------------------------------------------------------------
missing=()
for f in "${NEEDED[@]}"; do
  [ -f "$f" ] || missing+=("file $f")
done
wheel_files=()
if [ -f scripts/gpu_wheels.txt ]; then
  while read -r req; do
    name=${req%%==*} version=${req#*==}
    norm=$(echo "$name" | tr 'A-Z' 'a-z' | sed -E 's/[-_.]+/_/g')
    found=("$WHEELS/$norm-$version-"*.whl)
    if [ ${#found[@]} -eq 1 ] && [ -f "${found[0]}" ]; then
      wheel_files+=("${found[0]}")
    else
      missing+=("wheel $req (as $WHEELS/$norm-$version-*.whl; run scripts/fetch_gpu_wheels.sh)")
    fi
  done < <(grep -Ev '^[[:space:]]*(#|$)' scripts/gpu_wheels.txt)
fi
for f in scripts/gpu_env.py scripts/gpu_nvshmem_pair.py; do
  [ -f "$f" ] && ! "$PY" -c "import ast, sys; ast.parse(open(sys.argv[1]).read())" "$f" 2>/dev/null \
    && missing+=("a script that parses: $f")
done
# What travels to the GPU machine (tracked and untracked-not-ignored files, and .whl/) is at most 64 MiB: the
# wheels keep to their budget, and the whole keeps a margin under the limit (tests/test_gpu_travel_size.py
# checks the repository against the budget in CI; large recorded outputs are thinned to stay small)
WHEEL_BUDGET_MIB=16
TRAVEL_LIMIT_MIB=63
wheel_bytes=0
[ ${#wheel_files[@]} -gt 0 ] && wheel_bytes=$(du -cb "${wheel_files[@]}" | tail -1 | cut -f1)
[ "$wheel_bytes" -gt $((WHEEL_BUDGET_MIB << 20)) ] && \
  missing+=("wheels of at most ${WHEEL_BUDGET_MIB} MiB in all (they are $((wheel_bytes >> 20)) MiB)")
if [ $DRY = 1 ]; then  # here, in the git checkout the device tool copies (there is no .git there)
  tree_bytes=$(git ls-files -z --cached --others --exclude-standard | xargs -0 du -cb 2>/dev/null | tail -1 | cut -f1)
  travel_bytes=$((tree_bytes + wheel_bytes))
  [ "$travel_bytes" -gt $((TRAVEL_LIMIT_MIB << 20)) ] && \
    missing+=("a working tree and wheels of at most ${TRAVEL_LIMIT_MIB} MiB (they are $((travel_bytes >> 20)) MiB)")
fi
if [ ${#missing[@]} -gt 0 ]; then
  printf 'missing: %s\n' "${missing[@]}" >&2
  exit 1
fi

# -- the steps ---------------------------------------------------------------------------------------
FAILED=0
summary() {
  if [ $DRY = 0 ]; then echo "$*" >> "$OUT/summary.txt"; fi
  echo "$*"
}

# step NAME LIMIT LOG KIND COMMAND...: run COMMAND under LIMIT seconds into LOG (appended for env).
# KIND pytest: a run that skipped tests, or ran none, failed.
step() {
  local name=$1 limit=$2 log=$3 kind=$4
  shift 4
  if [ $DRY = 1 ]; then
    printf '[%s, %ss] timeout -k 5 %s %s>> %s 2>&1\n' "$name" "$limit" "$limit" "$(printf '%q ' "$@")" "$log"
    return 0
  fi
  local t0=$SECONDS rc status
  summary "$name: running (limit ${limit}s)"
  timeout -k 5 "$limit" "$@" >> "$log" 2>&1
  rc=$?
  status=passed
  if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
    status="FAILED (over its ${limit}s)"
  elif [ $rc -ne 0 ]; then
    status="FAILED (exit $rc)"
  elif [ "$kind" = pytest ] && { grep -Eq '[0-9]+ skipped|no tests ran' "$log"; }; then
    status="FAILED (tests skipped: $(grep -Eo '[0-9]+ skipped' "$log" | tail -1))"
  fi
  case $status in passed) ;; *) FAILED=1 ;; esac
  summary "$name: $status in $((SECONDS - t0))s"
}

if [ $DRY = 1 ]; then
  echo "# every wheel and file is here; ${#wheel_files[@]} wheels, $((wheel_bytes >> 10)) KiB in all;" \
    "$((travel_bytes >> 20)) MiB travel with the working tree (at most ${TRAVEL_LIMIT_MIB}):"
  for w in "${wheel_files[@]}"; do echo "#   $(basename "$w")"; done
  echo "# the commands, in order:"
  echo "mkdir -p $OUT $WORK; rm -f $OUT/*"
else
  mkdir -p "$OUT" "$WORK"
  rm -f "$OUT"/*
fi
TORCH_SAYS=("$PY" -c 'import torch; print("torch", torch.__version__, "CUDA", torch.version.cuda, "devices", torch.cuda.device_count())')
if [ $DRY = 1 ]; then
  echo "timeout 30 $(printf '%q ' "${TORCH_SAYS[@]}")>> $OUT/summary.txt"
else
  summary "$(timeout 30 "${TORCH_SAYS[@]}" 2>&1 | tail -1)"
fi

step env $T_ENV "$OUT/env.txt" plain "$PY" scripts/gpu_env.py
step install $T_INSTALL "$OUT/install.log" plain \
  "$PY" -m pip install --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" "${wheel_files[@]}"
export PYTHONPATH="$PWD:$SITE" PYTHONUNBUFFERED=1 COMFY_CLUSTER_GPU_CHECK=1 COMFY_CLUSTER_TEST_WORKSPACE="$WORK/demo"
[ $DRY = 1 ] && echo "export PYTHONPATH=$PYTHONPATH PYTHONUNBUFFERED=1 COMFY_CLUSTER_GPU_CHECK=1 COMFY_CLUSTER_TEST_WORKSPACE=$WORK/demo"
step env-after-install $T_ENV "$OUT/env.txt" plain "$PY" scripts/gpu_env.py
step units $T_UNITS "$OUT/units.log" pytest "${PYTEST[@]}" --timeout 50 --basetemp "$WORK/units" \
  tests/weights/test_layer_cache_cuda.py \
  "tests/models/test_batch_invariant.py::test_rows_of_a_2d_input_give_the_same_bits_at_any_batch_size[cuda]" \
  "tests/models/test_batch_invariant.py::test_samples_of_a_1x1_convolution_give_the_same_bits_at_batch_16[cuda]"
step e2e $T_E2E "$OUT/e2e.log" pytest "${PYTEST[@]}" --timeout 105 --basetemp "$WORK/e2e" \
  "tests/e2e/test_gpu_executor.py::test_default_workflow_runs_on_a_gpu_executor[shm]"
if [ $DRY = 1 ]; then
  echo "find $WORK/e2e -name server.log -exec cat {} + > $OUT/e2e-server.log"
else
  find "$WORK/e2e" -name server.log -exec cat {} + > "$OUT/e2e-server.log" 2>/dev/null
fi
# NVSHMEM last, each in processes of its own
step nvshmem-one $T_ONE "$OUT/nvshmem-one.log" pytest "${PYTEST[@]}" --timeout 30 --basetemp "$WORK/one" \
  tests/dataplane/test_nvshmem_arena.py
step nvshmem-pair $T_PAIR "$OUT/nvshmem-pair.log" plain env NVSHMEM_DEBUG=WARN "$PY" scripts/gpu_nvshmem_pair.py \
  --deadline $((T_PAIR - 10))
step serve-nvshmem $T_TEAM "$OUT/nvshmem-pair.log" pytest "${PYTEST[@]}" --timeout 70 --basetemp "$WORK/team" \
  "tests/e2e/test_gpu_executor.py::test_default_workflow_runs_on_a_gpu_executor[nvshmem]"

[ $DRY = 1 ] && exit 0
summary "gpu_check: $([ $FAILED = 0 ] && echo passed || echo FAILED)"
exit $FAILED
