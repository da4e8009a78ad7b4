"""The web UI's HuMo template (workflows_json/wan_humo_template.json, written by scripts/wan_humo_template_workflow.py:
the tiny HuMo 17B model with its lightx2v LoRA, the tiny Whisper encoder, umT5 and the Wan 2.1 VAE, example.png as
the reference and example.wav (44.1 kHz stereo) as the sound, 64x64, 9 frames, 2 uni_pc steps, a fixed seed) from a
fresh, empty workspace: its frames (a SaveImage beside CreateVideo) and the MP4 are the same with the default
executors and with `--executors 0`, and the frames are within 1/255 of ComfyUI 0.3.64's
(scripts/record_comfyui_wan_humo.py)."""

from __future__ import annotations

import json

import numpy as np

from scripts.wan_humo_template_workflow import tiny_template
from tests.e2e.served import REPO, serving
from tests.e2e.test_wan_s2v_template_workflow import _render
from tests.recorded_tensors import at_recorded, load_json, pixels

WORKFLOW = REPO / "workflows_json" / "wan_humo_template.json"
RECORDED = load_json(REPO / "tests" / "models" / "fixtures" / "comfyui_wan_humo.json.xz")["workflow"]
FRAMES = "900"


def _with_png_frames(prompt: dict) -> dict:
    (images,) = [v["inputs"]["images"] for v in prompt.values() if v["class_type"] == "CreateVideo"]
    return {**prompt, FRAMES: {"class_type": "SaveImage", "inputs": {"images": images, "filename_prefix": "humo"}}}


def test_shipped_ui_workflow_is_the_templates_graph_and_the_recorded_prompt() -> None:
    ui = json.loads(WORKFLOW.with_suffix("").with_suffix(".ui.json").read_text())
    assert ui == tiny_template()
    types = {n["type"] for n in ui["nodes"] if n.get("mode", 0) == 0}
    assert {"AudioEncoderLoader", "AudioEncoderEncode", "WanHuMoImageToVideo", "LoraLoaderModelOnly"} <= types
    assert RECORDED["prompt"] == json.loads(WORKFLOW.read_text())


def test_template_renders_the_same_in_both_executor_modes_and_as_comfyui(tmp_path) -> None:
    prompt = _with_png_frames(json.loads(WORKFLOW.read_text()))
    workspace = tmp_path / "fresh"
    renders = {}
    for mode, flags in (("default", ()), ("executors0", ("--executors", "0"))):
        with serving(workspace, tmp_path / f"{mode}.log", *flags) as base:
            renders[mode] = _render(base, prompt)
    (pngs, pictures, sound), (other_pngs, other_pictures, other_sound) = renders.values()
    assert pngs.shape == (9, 64, 64, 3) and pngs.std() > 0 and len(pictures) == 9
    assert np.array_equal(pngs, other_pngs), "frames differ between the executor modes"
    assert all(np.array_equal(a, b) for a, b in zip(pictures, other_pictures, strict=True))
    assert sound.shape[1] > 0 and np.array_equal(sound, other_sound)
    diff = np.abs(at_recorded(pngs, RECORDED["frames"]).astype(int) - pixels(RECORDED["frames"]).astype(int))
    assert diff.max() <= 1, f"{int((diff > 1).sum())} values differ from ComfyUI 0.3.64's by more than 1/255"
