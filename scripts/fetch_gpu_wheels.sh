#!/usr/bin/env bash
# Download, on this machine, the wheels the GPU checks need that the device machine's image lacks
# (scripts/gpu_wheels.txt; Python 3.12 there, nothing can be fetched there). They land in .whl/, which git
# ignores locally; scripts/gpu_check.sh installs exactly these (`bash scripts/gpu_check.sh --dry-run` checks).
set -euo pipefail
cd "$(dirname "$0")/.."
exclude="$(git rev-parse --git-common-dir)/info/exclude"
mkdir -p "$(dirname "$exclude")"
grep -qx '/.whl/' "$exclude" 2>/dev/null || echo '/.whl/' >> "$exclude"
platforms=()
for p in manylinux_2_34_x86_64 manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_26_x86_64 \
         manylinux_2_17_x86_64 manylinux2014_x86_64; do
  platforms+=(--platform "$p")
done
mapfile -t wheels < <(grep -v '^\s*#' scripts/gpu_wheels.txt | grep -v '^\s*$')
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  "${platforms[@]}" -d .whl "${wheels[@]}"
du -sh .whl
