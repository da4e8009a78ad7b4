#!/usr/bin/env bash
# Download, on this machine, the wheels the GPU checks need that the device machine's image lacks
# (it has Python 3.12, torch with CUDA, transformers, safetensors, aiohttp, psutil, pytest, ...; nothing
# can be fetched there). They land in .whl/, which git ignores locally; scripts/gpu_check.sh installs them.
# Versions are the ones CI tests with.
set -euo pipefail
cd "$(dirname "$0")/.."
grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >> .git/info/exclude
platforms=()
for p in manylinux_2_34_x86_64 manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_26_x86_64 \
         manylinux_2_17_x86_64 manylinux2014_x86_64; do
  platforms+=(--platform "$p")
done
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  "${platforms[@]}" -d .whl \
  diffusers==0.42.1 torchsde==0.2.6 trampoline==0.1.2 pyzmq==27.3.0 msgspec==0.23.0 platformdirs==4.14.9 \
  pytest-asyncio==1.5.0 nvshmem4py-cu13==0.4.1
du -sh .whl
