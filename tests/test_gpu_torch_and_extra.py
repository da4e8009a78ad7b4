"""The GPU path runs on the torch the GPU machine has (2.11.0+cu130, not our 2.13.0 pin: a CUDA torch is too
large to bring): it uses no torch.cuda API newer than that, and the `gpu` extra names the CUDA-side packages
the NVSHMEM data plane needs, at the versions the GPU check brings."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# torch.cuda's API as torch 1.10's docs list it (docs/source/cuda.rst, and torch/cuda/memory.py's __all__ for
# mem_get_info), all still in the current docs: what the GPU path may use on torch 2.11. A name outside it
# must be checked against 2.11's docs and added here.
TORCH_CUDA_SINCE_1_10 = {
    "StreamContext",
    "can_device_access_peer",
    "current_blas_handle",
    "current_device",
    "current_stream",
    "default_stream",
    "device",
    "device_count",
    "device_of",
    "get_arch_list",
    "get_device_capability",
    "get_device_name",
    "get_device_properties",
    "init",
    "ipc_collect",
    "is_available",
    "is_initialized",
    "set_device",
    "set_stream",
    "stream",
    "synchronize",
    "get_rng_state",
    "set_rng_state",
    "manual_seed",
    "manual_seed_all",
    "seed",
    "initial_seed",
    "Stream",
    "Event",
    "CUDAGraph",
    "graph",
    "graph_pool_handle",
    "empty_cache",
    "memory_stats",
    "memory_summary",
    "memory_allocated",
    "max_memory_allocated",
    "reset_peak_memory_stats",
    "memory_reserved",
    "max_memory_reserved",
    "set_per_process_memory_fraction",
    "mem_get_info",
    "OutOfMemoryError",
}


def test_the_gpu_path_uses_no_torch_cuda_api_newer_than_the_gpu_machines_torch():
    used: dict[str, str] = {}
    for package in ("cluster", "nodes", "comfy_bridge", "scripts"):
        for path in (REPO / package).rglob("*.py"):
            for name in re.findall(r"\btorch\.cuda\.([A-Za-z_]\w*)", path.read_text()):
                used.setdefault(name, str(path.relative_to(REPO)))
    assert used, "the scan found no torch.cuda use at all"
    newer = {name: where for name, where in used.items() if name not in TORCH_CUDA_SINCE_1_10}
    assert not newer, f"torch.cuda names not known to be in torch 2.11: {newer}"


def test_the_gpu_extra_names_what_the_gpu_check_brings():
    extra = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]["gpu"]
    wheels = [
        line.strip()
        for line in (REPO / "scripts" / "gpu_wheels.txt").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    nvshmem = [req for req in extra if req.startswith("nvshmem4py-")]
    assert nvshmem and set(nvshmem) <= set(wheels)  # the version the GPU check runs
    assert any(req.startswith("cuda-core") for req in extra)
    assert not any(req.startswith("torch") for req in extra)  # never a torch that replaces the machine's
    # the message a GPU executor without it logs names this extra
    assert "the gpu extra" in (REPO / "cluster" / "dataplane" / "nvshmem_team.py").read_text()
