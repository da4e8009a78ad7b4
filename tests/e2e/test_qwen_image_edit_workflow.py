"""The web UI's Qwen-Image-Edit 2509 template (workflows_json/qwen_image_edit_2509.json: its node graph unpacked
from the subgraph, the tiny files substituted: FluxKontextImageScale, TextEncodeQwenImageEditPlus with the image
and VAE, the Lightning LoRA chosen by ComfySwitchNode, CFGNorm, ModelSamplingAuraFlow, KSampler from the
VAE-encoded picture, SaveImageAdvanced) from a fresh, empty workspace: the same image with the default executors
and with `--executors 0`, and ComfyUI 0.3.64's image of the same workflow on the same files (recorded by
scripts/record_comfyui_qwen_image_edit.py) to within 1/255."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from tests.e2e.test_qwen_image_workflow import comfyui_images
from tests.e2e.test_samplers_on_executors import render_on_server

REPO = Path(__file__).resolve().parents[2]
WORKFLOW = REPO / "workflows_json" / "qwen_image_edit_2509.json"
FIXTURE = json.loads((REPO / "tests" / "models" / "fixtures" / "comfyui_qwen_image_edit.json").read_text())
RECORDED = FIXTURE["workflow"]


def test_recorded_workflow_is_the_shipped_one() -> None:
    assert RECORDED["prompt"] == json.loads(WORKFLOW.read_text())


def render_with_serve(workspace: Path, log_path: Path, *flags: str) -> np.ndarray:
    import subprocess
    import sys
    import time
    import urllib.request

    from tests.conftest import free_port
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
            return render_on_server(base, {"edit": json.loads(WORKFLOW.read_text())})["edit"]
        finally:
            proc.terminate()
            proc.wait(30)


def test_qwen_image_edit_2509_template_in_both_executor_modes_equals_comfyuis(tmp_path) -> None:
    workspace = tmp_path / "fresh"
    default = render_with_serve(workspace, tmp_path / "default.log")
    in_process = render_with_serve(workspace, tmp_path / "executors0.log", "--executors", "0")
    assert default.shape == (1024, 1024, 3) and default.std() > 0
    assert np.array_equal(default, in_process), \
        f"{int((default != in_process).sum())} values differ between the executor modes"
    (theirs,) = comfyui_images(RECORDED)
    diff = np.abs(default.astype(int) - theirs.astype(int))
    assert diff.max() <= 1, f"{int((diff > 1).sum())} values differ from ComfyUI's image by more than 1/255"
