"""The web UI's Qwen-Image-Edit 2509 and 2511 templates. 2509 (workflows_json/qwen_image_edit_2509.json: its node graph unpacked
from the subgraph, the tiny files substituted: FluxKontextImageScale, TextEncodeQwenImageEditPlus with the image
and VAE, the Lightning LoRA chosen by ComfySwitchNode, CFGNorm, ModelSamplingAuraFlow, KSampler from the
VAE-encoded picture, SaveImageAdvanced); 2511 (workflows_json/qwen_image_edit_2511.json: two pictures, the 2511
transformer file, FluxKontextMultiReferenceLatentMethod index_timestep_zero, its switch on the Lightning path).
Each from a fresh, empty workspace: the same image with the default executors and with `--executors 0`, and
ComfyUI's image of the same workflow on the same files to within 1/255 (2509: ComfyUI 0.3.64, recorded by
scripts/record_comfyui_qwen_image_edit.py; 2511: upstream ComfyUI 0.10.0, which 0.3.64 predates, recorded by
scripts/record_comfyui_qwen_image_edit_2511.py)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests.e2e.test_qwen_image_workflow import comfyui_images
from tests.e2e.test_samplers_on_executors import render_on_server

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "models" / "fixtures"
# workflow name: the fixture that recorded ComfyUI's run of it
RECORDINGS = {
    "qwen_image_edit_2509": "comfyui_qwen_image_edit.json",
    "qwen_image_edit_2511": "comfyui_qwen_image_edit_2511.json",
}


def recorded(name: str) -> dict:
    return json.loads((FIXTURES / RECORDINGS[name]).read_text())["workflow"]


def workflow(name: str) -> dict:
    return json.loads((REPO / "workflows_json" / f"{name}.json").read_text())


@pytest.mark.parametrize("name", sorted(RECORDINGS))
def test_recorded_workflow_is_the_shipped_one(name: str) -> None:
    assert recorded(name)["prompt"] == workflow(name)


def render_with_serve(workspace: Path, log_path: Path, prompt: dict, *flags: str) -> np.ndarray:
    import subprocess
    import sys
    import time
    import urllib.request

    from tests.conftest import free_port

    port = free_port()
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "comfy_bridge.cli",
                "serve",
                "--workspace",
                str(workspace),
                "--port",
                str(port),
                *flags,
            ],
            cwd=REPO,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            base = f"http://127.0.0.1:{port}"
            deadline = time.time() + 300  # the first start builds the demo models
            while True:
                try:
                    urllib.request.urlopen(base + "/system_stats", timeout=2).read()
                    break
                except OSError:
                    if time.time() > deadline or proc.poll() is not None:
                        raise RuntimeError("server did not start:\n" + log_path.read_text()) from None
                    time.sleep(0.3)
            return render_on_server(base, {"edit": prompt}, timeout_s=1200)["edit"]
        finally:
            proc.terminate()
            proc.wait(30)


@pytest.mark.parametrize("name", sorted(RECORDINGS))
def test_template_in_both_executor_modes_equals_comfyuis(tmp_path, name: str) -> None:
    workspace = tmp_path / "fresh"
    default = render_with_serve(workspace, tmp_path / "default.log", workflow(name))
    in_process = render_with_serve(workspace, tmp_path / "executors0.log", workflow(name), "--executors", "0")
    assert default.shape == (1024, 1024, 3) and default.std() > 0
    assert np.array_equal(default, in_process), (
        f"{int((default != in_process).sum())} values differ between the executor modes"
    )
    (theirs,) = comfyui_images(recorded(name))
    diff = np.abs(default.astype(int) - theirs.astype(int))
    assert diff.max() <= 1, f"{int((diff > 1).sum())} values differ from ComfyUI's image by more than 1/255"
