"""What a GPU check ran on: the GPU, driver, torch and CUDA, and the versions of the packages the GPU path
uses (first line of scripts/gpu_check.sh's env.txt; nothing here needs to work for it to print)."""

from __future__ import annotations

import importlib.metadata
import subprocess

DISTRIBUTIONS = (
    "torch",
    "cuda-core",
    "cuda-bindings",
    "cuda-pathfinder",
    "cuda-python",
    "nvidia-nvshmem-cu13",
    "nvidia-nvshmem-cu12",
    "nvshmem4py-cu13",
    "nvshmem4py-cu12",
    "diffusers",
    "transformers",
    "safetensors",
    "pytest",
    "pytest-timeout",
    "pytest-asyncio",
    "pyzmq",
    "msgspec",
    "pydantic",
    "pillow",
    "aiohttp",
    "numpy",
)


def main() -> None:
    try:
        smi = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=10,
        )
        print("nvidia-smi:", (smi.stdout or smi.stderr).strip())
    except (OSError, subprocess.TimeoutExpired) as e:
        print("nvidia-smi:", e)
    for dist in DISTRIBUTIONS:
        try:
            print(f"{dist} {importlib.metadata.version(dist)}")
        except importlib.metadata.PackageNotFoundError:
            print(f"{dist} (not installed)")
    try:
        import torch

        print(
            "torch CUDA",
            torch.version.cuda,
            "available",
            torch.cuda.is_available(),
            "devices",
            torch.cuda.device_count(),
        )
        for i in range(torch.cuda.device_count()):
            p = torch.cuda.get_device_properties(i)
            print(
                f"cuda:{i} {p.name} sm_{p.major}{p.minor} {p.total_memory / 2**30:.1f} GiB {p.multi_processor_count} SMs"
            )
    except Exception as e:  # recorded, not raised: the steps after this one report the failure
        print("torch:", type(e).__name__, e)
    # the whole list, so that scripts/gpu_machine_packages.txt can be checked against the machine itself
    installed = sorted(
        {f"{d.metadata['Name']}=={d.version}" for d in importlib.metadata.distributions()}, key=str.lower
    )
    print(f"installed ({len(installed)}):", " ".join(installed))
    try:
        import nvshmem.core

        print("nvshmem.core", nvshmem.core.get_version())
    except Exception as e:
        print("nvshmem.core:", type(e).__name__, e)


if __name__ == "__main__":
    main()
