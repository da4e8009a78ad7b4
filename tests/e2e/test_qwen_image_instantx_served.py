"""The web UI's Qwen-Image InstantX Inpainting ControlNet template (its own graph on the tiny files in
workflows_json/qwen_image_instantx_inpainting_controlnet.json, scripts/qwen_image_instantx_workflow.py) through
`comfy-cluster serve`, with one executor process (the default) and in-process (`--executors 0`), on an input image whose alpha holds
the area to inpaint (as the web UI's mask editor saves it; its mask is at the image's 128 pixels, the image is scaled to
64 before the ControlNet): every output the same in both modes, and the decoded image not the one of the same graph
without the ControlNet. The numbers against ComfyUI 0.3.64 are tested in tests/nodes/test_qwen_instantx_controlnet.py."""

from __future__ import annotations

import io
import json
import time
import urllib.parse
import urllib.request
import uuid
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from tests.e2e.test_context_windows_served import _get

REPO = Path(__file__).resolve().parents[2]
PROMPT = json.loads((REPO / "workflows_json" / "qwen_image_instantx_inpainting_controlnet.json").read_text())
INPUT = "qwen_instantx_inpaint_input.png"


def _outputs(base: str, prompt: dict) -> dict[str, np.ndarray]:
    """Each output node's images (SaveImage's and the mask preview's), once the prompt has run."""
    body = json.dumps({"prompt": prompt, "client_id": str(uuid.uuid4())}).encode()
    pid = json.loads(urllib.request.urlopen(urllib.request.Request(base + "/prompt", data=body)).read())["prompt_id"]
    deadline = time.time() + 600
    while time.time() < deadline:
        entry = json.loads(_get(f"{base}/history/{pid}")).get(pid)
        if entry and entry["status"]["status_str"] == "error":
            raise AssertionError(entry["status"])
        if entry and entry["status"]["completed"]:
            return {
                node: np.stack(
                    [np.asarray(Image.open(io.BytesIO(_get(f"{base}/view?" + urllib.parse.urlencode(e))))) for e in out]
                )
                for node, out in ((k, o.get("images")) for k, o in entry["outputs"].items())
                if out
            }
        time.sleep(0.5)
    raise TimeoutError(pid)


def _prompt(controlnet: bool = True) -> dict:
    prompt = json.loads(json.dumps(PROMPT))
    (load,) = [k for k, v in prompt.items() if v["class_type"] == "LoadImage"]
    prompt[load]["inputs"]["image"] = INPUT
    if not controlnet:  # the KSampler on the prompts themselves, not the ControlNet's
        (apply,) = [k for k, v in prompt.items() if v["class_type"] == "ControlNetInpaintingAliMamaApply"]
        (sampler,) = [k for k, v in prompt.items() if v["class_type"] == "KSampler"]
        for side in ("positive", "negative"):
            prompt[sampler]["inputs"][side] = prompt[apply]["inputs"][side]
    return prompt


@pytest.fixture(scope="module")
def servers(serve, demo_workspace):
    pixels = np.random.default_rng(3).integers(0, 256, (128, 128, 4), dtype=np.uint8)
    pixels[..., 3] = 255
    pixels[32:96, 40:100, 3] = 0  # the area to inpaint: LoadImage's mask is 1 where alpha is 0
    Image.fromarray(pixels, "RGBA").save(demo_workspace.input_dir / INPUT)
    # both compute with one torch thread: results differ between thread counts
    return {
        "default": serve("--executor-threads", "1"),
        "in-process": serve("--executors", "0", "--executor-threads", "1"),
    }


def test_the_template_renders_the_same_in_both_modes(servers):
    outputs = {mode: _outputs(base, _prompt()) for mode, base in servers.items()}
    assert outputs["default"].keys() == outputs["in-process"].keys() and len(outputs["default"]) == 3
    for node, images in outputs["default"].items():
        assert images.std() > 0, node
        assert np.array_equal(images, outputs["in-process"][node]), node
    decoded = next(  # the SaveImage of VAE Decode's image (the other saves it pasted onto the input)
        k
        for k, v in PROMPT.items()
        if v["class_type"] == "SaveImage" and PROMPT[v["inputs"]["images"][0]]["class_type"] == "VAEDecode"
    )
    plain = _outputs(servers["default"], _prompt(controlnet=False))
    assert not np.array_equal(plain[decoded], outputs["default"][decoded])
