"""Qwen-Image's demo workflow (workflows_json/qwen_image.json: UNETLoader, CLIPLoader qwen_image, VAELoader,
ModelSamplingAuraFlow, EmptySD3LatentImage, KSampler, as ComfyUI's Qwen-Image template) from a fresh, empty
workspace: `serve` builds qwen-image-tiny on its first start, and the image is the same with the default
executors and with `--executors 0`, and ComfyUI 0.3.64's image of the same workflow on the same files
(recorded by scripts/record_comfyui_qwen_image.py) to within 1/255."""
from __future__ import annotations

import base64
import json
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np

from tests.conftest import free_port
from tests.e2e.test_samplers_on_executors import render_on_server

REPO = Path(__file__).resolve().parents[2]
RECORDED = json.loads((REPO / "tests" / "models" / "fixtures" / "comfyui_qwen_image.json").read_text())["workflow"]


def comfyui_image() -> np.ndarray:
    png = RECORDED["png_rgb"]
    return np.frombuffer(base64.b64decode(png["u8"]), dtype=np.uint8).reshape(png["shape"])


def render_with_serve(workspace: Path, log_path: Path, *flags: str) -> np.ndarray:
    port = free_port()
    with open(log_path, "w") as log:
        proc = subprocess.Popen([sys.executable, "-m", "comfy_bridge.cli", "serve", "--workspace", str(workspace),
                                 "--port", str(port), *flags], cwd=REPO, stdout=log, stderr=subprocess.STDOUT)
        try:
            base = f"http://127.0.0.1:{port}"
            deadline = time.time() + 300   # the first start builds the demo models
            while True:
                try:
                    urllib.request.urlopen(base + "/system_stats", timeout=2).read()
                    break
                except OSError:
                    if time.time() > deadline or proc.poll() is not None:
                        raise RuntimeError("server did not start:\n" + log_path.read_text()) from None
                    time.sleep(0.3)
            prompt = json.loads((REPO / "workflows_json" / "qwen_image.json").read_text())
            return render_on_server(base, {"qwen_image": prompt})["qwen_image"]
        finally:
            proc.terminate()
            proc.wait(30)


def test_recorded_workflow_is_the_shipped_one() -> None:
    assert RECORDED["prompt"] == json.loads((REPO / "workflows_json" / "qwen_image.json").read_text())


def test_qwen_image_workflow_from_a_fresh_workspace_in_both_executor_modes(tmp_path) -> None:
    workspace = tmp_path / "fresh"
    default = render_with_serve(workspace, tmp_path / "default.log")
    assert (workspace / "models" / "diffusion_models" / "qwen_image_tiny.safetensors").is_file()
    in_process = render_with_serve(workspace, tmp_path / "executors0.log", "--executors", "0")
    assert default.shape == (96, 128, 3) and default.std() > 0
    assert np.array_equal(default, in_process), \
        f"{int((default != in_process).sum())} values differ between the executor modes"
    diff = np.abs(default.astype(int) - comfyui_image().astype(int))
    assert diff.max() <= 1, f"{int((diff > 1).sum())} values differ from ComfyUI's image by more than 1/255"
