"""`comfy-cluster serve --executor-device cuda` on a CUDA machine: its executor runs ModelFns on the GPU (weights bound there by
the layer cache, inputs copied there from its arena, outputs copied back) and renders the default workflow
like the CPU does: pixels within 1/255 of the CPU image's on average (#25), the largest difference and the
share of pixels within 1/255 printed beside it. Twice: with the arena in host shared memory
(`--data-plane shm`), and in the host's NVSHMEM team (`auto` with nvshmem4py: the executor joins a team of
one, and the server reads its outputs over the executor's data socket).

A silent fallback to the CPU cannot pass: the executor must report a CUDA allocator peak above 0, and the
tensors must have crossed the plane the run reports (shared memory; or, in the team, the data socket the
server reads the symmetric heap's outputs through). TF32 is off for the whole server
(NVIDIA_TF32_OVERRIDE=0, which cuBLAS and cuDNN read: torch leaves TF32 on for cuDNN's convolutions by
default), so the tolerance compares fp32 kernels with fp32 kernels, not TF32's 10-bit mantissa with fp32.
"""

from __future__ import annotations

import asyncio
import io
import json
import time
import urllib.parse
import urllib.request
import uuid
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

REPO = Path(__file__).resolve().parents[2]

if not torch.cuda.is_available():
    pytest.skip("GPU executors need a CUDA device", allow_module_level=True)


def run_on_server(base: str, prompt: dict, deadline_s: float = 90) -> list[np.ndarray]:
    """Post `prompt`, wait for its history, return its images' pixels."""
    body = json.dumps({"prompt": prompt, "client_id": str(uuid.uuid4())}).encode()
    pid = json.loads(urllib.request.urlopen(urllib.request.Request(base + "/prompt", data=body)).read())["prompt_id"]
    deadline = time.time() + deadline_s
    while time.time() < deadline:
        history = json.loads(urllib.request.urlopen(f"{base}/history/{pid}", timeout=30).read())
        assert not (pid in history and history[pid]["status"]["status_str"] == "error"), history[pid]["status"]
        if pid in history and history[pid]["status"]["completed"]:
            return [
                np.asarray(
                    Image.open(
                        io.BytesIO(
                            urllib.request.urlopen(f"{base}/view?" + urllib.parse.urlencode(im), timeout=30).read()
                        )
                    )
                )
                for out in history[pid]["outputs"].values()
                for im in out.get("images", [])
            ]
        time.sleep(0.2)
    raise TimeoutError(f"prompt {pid} did not finish within {deadline_s} s")


@pytest.mark.parametrize("plane", ["shm", "nvshmem"])
def test_default_workflow_runs_on_a_gpu_executor(plane, serve, demo_workspace, fixed_threads, tmp_path, monkeypatch):
    from comfy_bridge.cli.run import run_prompt
    from comfy_bridge.registry import build_registry

    if plane == "nvshmem":
        pytest.importorskip("nvshmem.core", reason="the NVSHMEM team needs nvshmem4py (the gpu extra)")
    monkeypatch.setenv("NVIDIA_TF32_OVERRIDE", "0")  # inherited by the server and its executors
    (tmp_path / "index.html").write_text("<html></html>")  # the web UI package need not be there
    base = serve(
        "--executor-device",
        "cuda",
        "--cuda-device",
        "0",
        "--executors",
        "1",
        "--front-end-root",
        str(tmp_path),
        "--data-plane",
        "shm" if plane == "shm" else "auto",
    )
    prompt = json.loads((REPO / "workflows_json" / "text_to_image.json").read_text())
    [gpu] = run_on_server(base, prompt)
    stats = json.loads(urllib.request.urlopen(base + "/cluster/stats", timeout=30).read())
    [ex] = stats["executors"]
    caller = stats["data_plane"]["caller"]
    print(
        f"torch {torch.__version__} (CUDA {torch.version.cuda}); executor {ex['device']}: CUDA peak "
        f"{ex['device_peak'] / 2**20:.1f} MiB, NVSHMEM team {ex['nvshmem_team']}, its pulls {ex['pulls']}; "
        f"the server's pulls {caller}"
    )
    assert ex["device"] == "cuda:0"
    assert ex["device_peak"] > 0, "the executor allocated no CUDA memory: it did not run on the GPU"
    assert (ex["nvshmem_team"] > 0) == (plane == "nvshmem"), ex
    if plane == "shm":
        assert caller["shm"] > 0 and caller["tcp"] == 0, caller
    else:  # the outputs were on the symmetric heap: the server, no PE, read them over the data socket
        assert caller["tcp"] > 0, caller
    [cpu] = [
        np.asarray(Image.open(f))
        for f in asyncio.run(run_prompt(prompt, None, build_registry(demo_workspace), show_progress=False))
    ]
    assert gpu.shape == cpu.shape
    diff = np.abs(gpu.astype(np.int16) - cpu.astype(np.int16))
    print(
        f"GPU vs CPU: mean |difference| {diff.mean():.3f}, max {diff.max()} of 255, "
        f"{(diff <= 1).mean() * 100:.2f} % of values within 1/255"
    )
    assert diff.mean() <= 1.0
