"""The web UI's Wan 2.2 S2V template (workflows_json/wan_s2v_template.json, written by
scripts/wan_s2v_template_workflow.py: the tiny S2V model, its wav2vec 2.0 encoder and LoRA, umT5 and the Wan 2.1
VAE, example.png as the reference and example.wav as the sound, 64x64, clips of 9 frames, 2 steps, fixed seeds)
from a fresh, empty workspace: the first clip and the template's two "Video S2V Extend" subgraphs, the doubled
first latent frame cut after decoding, CreateVideo with the sound and today's SaveVideo. Its frames (a SaveImage
beside CreateVideo) and the MP4 (pictures and sound track) are the same with the default executors and with
`--executors 0`; with the sound at 16 kHz (ComfyUI 0.3.64's audio encoder resamples with torchaudio, which does not
run here) the frames are within 1/255 of ComfyUI 0.3.64's (scripts/record_comfyui_wan_s2v.py)."""

from __future__ import annotations

import io
import json
import time
import urllib.parse
import urllib.request
import uuid

import av
import numpy as np
from PIL import Image

from comfy_bridge.cli.demo_models import write_example_audio
from scripts.wan_s2v_template_workflow import tiny_template
from tests.e2e.served import REPO, serving
from tests.recorded_tensors import at_recorded, load_json, pixels

WORKFLOW = REPO / "workflows_json" / "wan_s2v_template.json"
RECORDED = load_json(REPO / "tests" / "models" / "fixtures" / "comfyui_wan_s2v.json.xz")["workflow"]
FRAMES = "900"


def _get(url: str) -> bytes:
    return urllib.request.urlopen(url, timeout=30).read()


def _with_png_frames(prompt: dict) -> dict:
    """The prompt with a SaveImage of the frames CreateVideo takes."""
    (images,) = [v["inputs"]["images"] for v in prompt.values() if v["class_type"] == "CreateVideo"]
    return {**prompt, FRAMES: {"class_type": "SaveImage", "inputs": {"images": images, "filename_prefix": "s2v"}}}


def _render(base: str, prompt: dict) -> tuple[np.ndarray, list[np.ndarray], np.ndarray]:
    """(the PNG frames, the MP4's decoded pictures, its decoded sound [channels, samples])."""
    body = json.dumps({"prompt": prompt, "client_id": str(uuid.uuid4())}).encode()
    pid = json.loads(urllib.request.urlopen(urllib.request.Request(base + "/prompt", data=body)).read())["prompt_id"]
    deadline = time.time() + 600
    while True:
        entry = json.loads(_get(f"{base}/history/{pid}")).get(pid)
        if entry is not None:
            assert entry["status"]["status_str"] != "error", entry["status"]["messages"]
            if entry["status"]["completed"]:
                break
        assert time.time() < deadline, "not finished within 600 s"
        time.sleep(0.5)
    outputs = entry["outputs"]
    view = f"{base}/view?"
    pngs = np.stack(
        [
            np.asarray(Image.open(io.BytesIO(_get(view + urllib.parse.urlencode(im)))))
            for im in outputs[FRAMES]["images"]
        ]
    )
    ((video,),) = [o["images"] for key, o in outputs.items() if key != FRAMES]
    with av.open(io.BytesIO(_get(view + urllib.parse.urlencode(video)))) as container:
        pictures = [f.to_ndarray(format="rgb24") for f in container.decode(video=0)]
    with av.open(io.BytesIO(_get(view + urllib.parse.urlencode(video)))) as container:
        sound = np.concatenate([f.to_ndarray() for f in container.decode(audio=0)], axis=1)
    return pngs, pictures, sound


def test_shipped_ui_workflow_is_the_templates_graph() -> None:
    ui = json.loads(WORKFLOW.with_suffix("").with_suffix(".ui.json").read_text())
    assert ui == tiny_template()
    types = [n["type"] for n in ui["nodes"] if n.get("mode", 0) == 0]
    assert types.count("WanSoundImageToVideoExtend") == 2 and types.count("KSampler") == 3
    assert {"AudioEncoderLoader", "AudioEncoderEncode", "WanSoundImageToVideo", "LoraLoaderModelOnly"} <= set(types)
    # the recorded run is the shipped prompt with its sound at 16 kHz
    recorded = json.loads(json.dumps(RECORDED["prompt"]))
    (sound,) = [v for v in recorded.values() if v["class_type"] == "LoadAudio"]
    assert sound["inputs"]["audio"] == "example_16k.wav"
    sound["inputs"]["audio"] = "example.wav"
    assert recorded == json.loads(WORKFLOW.read_text())


def test_template_renders_the_same_in_both_executor_modes_and_as_comfyui(tmp_path) -> None:
    shipped = _with_png_frames(json.loads(WORKFLOW.read_text()))
    at_16k = _with_png_frames(RECORDED["prompt"])
    workspace = tmp_path / "fresh"
    (workspace / "input").mkdir(parents=True)
    write_example_audio(workspace / "input" / "example_16k.wav", rate=16000)
    renders = {}
    for mode, flags in (("default", ()), ("executors0", ("--executors", "0"))):
        with serving(workspace, tmp_path / f"{mode}.log", *flags) as base:
            renders[mode] = [_render(base, prompt) for prompt in (shipped, at_16k)]
    for (pngs, pictures, sound), (other_pngs, other_pictures, other_sound) in zip(*renders.values(), strict=True):
        # three clips of 3 latent frames and the doubled first one: 1 + 4 * 9 frames decoded, the first 3 cut
        assert pngs.shape == (34, 64, 64, 3) and pngs.std() > 0 and len(pictures) == 34
        assert np.array_equal(pngs, other_pngs), "frames differ between the executor modes"
        assert all(np.array_equal(a, b) for a, b in zip(pictures, other_pictures, strict=True))
        assert sound.shape[1] > 0 and np.array_equal(sound, other_sound), "sound tracks differ between the modes"
    ours = at_recorded(renders["default"][1][0], RECORDED["frames"])  # ComfyUI's frames on a strided grid
    diff = np.abs(ours.astype(int) - pixels(RECORDED["frames"]).astype(int))
    assert diff.max() <= 1, f"{int((diff > 1).sum())} values differ from ComfyUI 0.3.64's by more than 1/255"
    # the sound reaches the pictures: the 44.1 kHz original (resampled here) and the 16 kHz copy differ a little
    assert not np.array_equal(renders["default"][0][0], renders["default"][1][0])
