#!/usr/bin/env bash
# Every check that needs a GPU, in one run on a CUDA machine (never run yet; budget a few minutes):
#   the layer cache's CUDA-stream copies, the NVSHMEM arena, batch invariance with cuBLAS/cuDNN, and
#   `serve` with a GPU executor rendering the default workflow against the CPU image.
# With the device tool: run scripts/fetch_gpu_wheels.sh here first, then run
#   `bash scripts/gpu_check.sh` there with carry [".whl"]; logs land in $OUT (default /tmp/gpu-check).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/gpu-check}
mkdir -p "$OUT"
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    || { echo "installing the carried wheels failed" >&2; exit 1; }
  export PYTHONPATH=/tmp/site
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>&1 | tee "$OUT/gpu.txt"
python3 -c "import torch; print('torch', torch.__version__, 'CUDA', torch.version.cuda, torch.cuda.get_device_name(0))" \
  2>&1 | tee -a "$OUT/gpu.txt"
python3 -m pytest -q -rs -s -p no:cacheprovider \
  tests/weights/test_layer_cache_cuda.py tests/dataplane/test_nvshmem_arena.py tests/models/test_batch_invariant.py \
  tests/e2e/test_gpu_executor.py 2>&1 | tee "$OUT/pytest.log"
exit "${PIPESTATUS[0]}"
