"""The web UI's Wan Move template (workflows_json/wan_move_template.json, written by
scripts/wan_move_template_workflow.py: the tiny Wan 2.1 image-to-video model for the Wan-Move file, umT5, CLIP vision
and the Wan 2.1 VAE, example.png as the start picture, three GenerateTracks joined by two WanMoveConcatTrack, 64x48,
9 frames, 2 er_sde steps, a fixed seed) from a fresh, empty workspace: its frames (a SaveImage beside CreateVideo),
the MP4 and the preview of the start picture are the same with the default executors and with `--executors 0`."""

from __future__ import annotations

import io
import json
import urllib.parse
import urllib.request

import av
import numpy as np
from PIL import Image

from scripts.wan_move_template_workflow import tiny_template
from tests.e2e.served import REPO, serving
from tests.e2e.served_video import finished_outputs, get_bytes

WORKFLOW = REPO / "workflows_json" / "wan_move_template.json"
FRAMES, VIDEO, PREVIEW = "900", "11", "14"


def _with_png_frames(prompt: dict) -> dict:
    (images,) = [v["inputs"]["images"] for v in prompt.values() if v["class_type"] == "CreateVideo"]
    return {**prompt, FRAMES: {"class_type": "SaveImage", "inputs": {"images": images, "filename_prefix": "move"}}}


def _render(base: str, prompt: dict) -> tuple[np.ndarray, list[np.ndarray], np.ndarray]:
    """(the PNG frames, the MP4's decoded pictures, the previewed start picture)."""
    outputs, view = finished_outputs(base, prompt, timeout_s=300), f"{base}/view?"

    def png(image: dict) -> np.ndarray:
        return np.asarray(Image.open(io.BytesIO(get_bytes(view + urllib.parse.urlencode(image)))))

    pngs = np.stack([png(im) for im in outputs[FRAMES]["images"]])
    (video,) = outputs[VIDEO]["images"]
    with av.open(io.BytesIO(get_bytes(view + urllib.parse.urlencode(video)))) as container:
        pictures = [f.to_ndarray(format="rgb24") for f in container.decode(video=0)]
    (preview,) = outputs[PREVIEW]["images"]
    return pngs, pictures, png(preview)


def test_shipped_ui_workflow_is_the_templates_graph() -> None:
    ui = json.loads(WORKFLOW.with_suffix("").with_suffix(".ui.json").read_text())
    assert ui == tiny_template()
    types = {n["type"] for n in ui["nodes"] if n.get("mode", 0) == 0}
    assert {"GenerateTracks", "WanMoveConcatTrack", "WanMoveTrackToVideo"} <= types
    prompt = json.loads(WORKFLOW.read_text())
    assert sum(v["class_type"] == "GenerateTracks" for v in prompt.values()) == 3


def test_template_renders_the_same_in_both_executor_modes(tmp_path) -> None:
    prompt = _with_png_frames(json.loads(WORKFLOW.read_text()))
    workspace = tmp_path / "fresh"
    renders = {}
    for mode, flags in (("default", ()), ("executors0", ("--executors", "0"))):
        with serving(workspace, tmp_path / f"{mode}.log", *flags) as base:
            renders[mode] = _render(base, prompt)
    (pngs, pictures, preview), (other_pngs, other_pictures, other_preview) = renders.values()
    assert pngs.shape == (9, 48, 64, 3) and pngs.std() > 0 and len(pictures) == 9
    assert preview.shape == (48, 64, 3)
    assert np.array_equal(pngs, other_pngs), "frames differ between the executor modes"
    assert all(np.array_equal(a, b) for a, b in zip(pictures, other_pictures, strict=True))
    assert np.array_equal(preview, other_preview)
