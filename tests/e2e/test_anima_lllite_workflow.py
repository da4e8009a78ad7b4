"""The web UI's Anima LLLite inpainting template (workflows_json/anima_lllite_inpainting{.ui,}.json, written by
scripts/anima_lllite_workflow.py: the template's graph on anima-tiny, its Qwen3, turbo LoRA and the tiny inpainting
LLLite, 64x64, 2 turbo steps): LoadImage -> Painter (the workspace's example painting, a disc) -> MaskPreview's
pass-through mask and the painted image -> AnimaLLLiteApply -> the turbo LoRA switch -> KSampler -> VAEDecode ->
SaveImage. From a fresh, empty workspace (serve builds the demo files and example inputs on its first start) the
template and the same graph at LLLite strength 0, queued together, give the same images with the default executors
and with `--executors 0`, and the LLLite changes the image.

No ComfyUI that runs here has the Anima LLLite (it is newer than 0.10.0), so there is no image of ComfyUI's to
compare with: the reference is the model-level one, tests/models/test_anima_lllite.py, where the LLLite's encoder and
adapters on anima-tiny equal the newest ComfyUI's LLLite module run on 0.10.0 within 1e-5 (five cases, the
inpainting file with and without a mask among them)."""

from __future__ import annotations

import copy
import io
import json
import time
import urllib.parse
import urllib.request
import uuid

import numpy as np
from PIL import Image

from scripts.anima_lllite_workflow import OUT, builtin_registry, tiny_template
from tests.e2e.served import serving


def _get(url: str) -> bytes:
    return urllib.request.urlopen(url, timeout=30).read()


def _saved_images(base: str, prompts: dict[str, dict], timeout_s: float = 1200) -> dict[str, np.ndarray]:
    """Queue every prompt at once, then each one's SaveImage image (MaskPreview shows one too)."""
    ids = {}
    for case, prompt in prompts.items():
        body = json.dumps({"prompt": prompt, "client_id": str(uuid.uuid4())}).encode()
        request = urllib.request.Request(base + "/prompt", data=body)
        ids[case] = json.loads(urllib.request.urlopen(request).read())["prompt_id"]
    images: dict[str, np.ndarray] = {}
    deadline = time.time() + timeout_s
    while len(images) < len(ids) and time.time() < deadline:
        for case, pid in ids.items():
            entry = None if case in images else json.loads(_get(f"{base}/history/{pid}")).get(pid)
            if entry is None:
                continue
            assert entry["status"]["status_str"] != "error", f"{case}: {entry['status']['messages']}"
            if entry["status"]["completed"]:
                (save,) = [k for k, v in prompts[case].items() if v["class_type"] == "SaveImage"]
                (image,) = entry["outputs"][save]["images"]
                images[case] = np.asarray(Image.open(io.BytesIO(_get(f"{base}/view?" + urllib.parse.urlencode(image)))))
        time.sleep(0.2)
    assert set(images) == set(ids), f"not finished within {timeout_s} s: {sorted(set(ids) - set(images))}"
    return images


def test_shipped_workflows_are_the_written_ones() -> None:
    from comfy_bridge.formats import ui_to_api

    ui = json.loads(OUT.with_suffix(".ui.json").read_text())
    assert ui == tiny_template()
    assert json.loads(OUT.with_suffix(".json").read_text()) == ui_to_api(ui, builtin_registry())


def test_template_in_both_executor_modes(tmp_path) -> None:
    prompt = json.loads(OUT.with_suffix(".json").read_text())
    (lllite,) = [k for k, v in prompt.items() if v["class_type"] == "AnimaLLLiteApply"]
    off = copy.deepcopy(prompt)
    off[lllite]["inputs"]["strength"] = 0.0
    prompts = {"template": prompt, "strength 0": off}
    workspace = tmp_path / "fresh"
    with serving(workspace, tmp_path / "default.log") as base:
        default = _saved_images(base, prompts)
    with serving(workspace, tmp_path / "executors0.log", "--executors", "0") as base:
        in_process = _saved_images(base, prompts)
    for case in prompts:
        assert default[case].shape == (64, 64, 3), default[case].shape
        assert np.array_equal(default[case], in_process[case]), (
            f"{case}: {int((default[case] != in_process[case]).sum())} values differ between the executor modes"
        )
    assert default["template"].std() > 0
    assert not np.array_equal(default["template"], default["strength 0"]), "the LLLite does not change the image"
