"""`comfy-cluster serve --executor-device cuda` on a CUDA machine: its executor runs ModelFns on the GPU (weights bound there by
the layer cache, inputs copied there from the shared-memory arena, outputs copied back) and renders the
default workflow like the CPU does: pixels within 1/255 of the CPU image's on average (#25), the largest
difference and the share of pixels within 1/255 printed beside it."""
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


def test_default_workflow_runs_on_a_gpu_executor(serve, demo_workspace, fixed_threads, tmp_path):
    from comfy_bridge.registry import build_registry
    from comfy_bridge.cli.run import run_prompt
    (tmp_path / "index.html").write_text("<html></html>")   # the web UI package need not be there
    base = serve("--executor-device", "cuda", "--cuda-device", "0", "--executors", "1",
                 "--front-end-root", str(tmp_path))
    prompt = json.loads((REPO / "workflows_json" / "text_to_image.json").read_text())
    [gpu] = _run_on_server(base, prompt)
    stats = json.loads(urllib.request.urlopen(base + "/cluster/stats", timeout=30).read())
    assert [e["device"] for e in stats["executors"]] == ["cuda:0"]
    [cpu] = [np.asarray(Image.open(f)) for f in
             asyncio.run(run_prompt(prompt, None, build_registry(demo_workspace), show_progress=False))]
    assert gpu.shape == cpu.shape
    diff = np.abs(gpu.astype(np.int16) - cpu.astype(np.int16))
    print(f"GPU vs CPU: mean |difference| {diff.mean():.3f}, max {diff.max()} of 255, "
          f"{(diff <= 1).mean() * 100:.2f} % of values within 1/255")
    assert diff.mean() <= 1.0
