"""`comfy-cluster serve --executor-device cuda` on a CUDA machine: its executor runs ModelFns on the GPU (weights bound there by
the layer cache, inputs copied there from its arena, outputs copied back) and renders the default workflow
like the CPU does: pixels within 1/255 of the CPU image's on average (#25), the largest difference and the
share of pixels within 1/255 printed beside it. Twice: with the arena in host shared memory
(`--data-plane shm`), and in the host's NVSHMEM team (`auto` with nvshmem4py: the executor joins a team of
one, and the server reads its outputs over the executor's data socket)."""
from __future__ import annotations

import asyncio
import json
import urllib.request

import numpy as np
import pytest
import torch
from PIL import Image

from tests.e2e.test_cluster_serve_matches_in_process import REPO, _run_on_server

if not torch.cuda.is_available():
    pytest.skip("GPU executors need a CUDA device", allow_module_level=True)


@pytest.mark.parametrize("plane", ["shm", "nvshmem"])
def test_default_workflow_runs_on_a_gpu_executor(plane, serve, demo_workspace, fixed_threads, tmp_path):
    from comfy_bridge.registry import build_registry
    from comfy_bridge.cli.run import run_prompt
    if plane == "nvshmem":
        pytest.importorskip("nvshmem.core", reason="the NVSHMEM team needs nvshmem4py (the gpu extra)")
    (tmp_path / "index.html").write_text("<html></html>")   # the web UI package need not be there
    base = serve("--executor-device", "cuda", "--cuda-device", "0", "--executors", "1",
                 "--front-end-root", str(tmp_path), "--data-plane", "shm" if plane == "shm" else "auto")
    prompt = json.loads((REPO / "workflows_json" / "text_to_image.json").read_text())
    [gpu] = _run_on_server(base, prompt)
    stats = json.loads(urllib.request.urlopen(base + "/cluster/stats", timeout=30).read())
    assert [e["device"] for e in stats["executors"]] == ["cuda:0"]
    assert [e["nvshmem_team"] > 0 for e in stats["executors"]] == [plane == "nvshmem"], stats["executors"]
    [cpu] = [np.asarray(Image.open(f)) for f in
             asyncio.run(run_prompt(prompt, None, build_registry(demo_workspace), show_progress=False))]
    assert gpu.shape == cpu.shape
    diff = np.abs(gpu.astype(np.int16) - cpu.astype(np.int16))
    print(f"GPU vs CPU: mean |difference| {diff.mean():.3f}, max {diff.max()} of 255, "
          f"{(diff <= 1).mean() * 100:.2f} % of values within 1/255")
    assert diff.mean() <= 1.0
