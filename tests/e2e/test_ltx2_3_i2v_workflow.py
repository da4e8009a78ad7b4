"""The web UI's LTX-2.3 image-to-video template (workflows_json/ltx2_3_i2v.json, written by
scripts/ltx2_3_i2v_workflow.py: the template's node graph unpacked from its subgraph, ltx2-tiny's files in place of
the downloads, example.png, fixed seeds, 128x128 and 1 s at 25 fps) from a fresh, empty workspace: the two-pass
distilled schedule with the LoRA at 0.5, the x2 latent upsampler between the passes, VAE Decode (Tiled), the audio
VAE from the checkpoint into CreateVideo and SaveVideo, the prompt enhancer switched off as shipped. The frames
(a SaveImage beside the template's SaveVideo), the MP4's frames and its audio samples are the same with the default
executors and with `--executors 0` (the audio within 1 % of its peak: see the test). Its parts are checked against ComfyUI 0.10.0 on the same tiny files in
tests/models/test_ltx2*.py and tests/nodes/test_ltx*.py; 0.10.0 cannot run the whole template (it lacks
ComfyMathExpression, ComfySwitchNode and TextGenerateLTX2Prompt)."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import time
import urllib.parse
import urllib.request
import uuid

import av
import numpy as np
from PIL import Image

from scripts.ltx2_3_i2v_workflow import tiny_template
from tests.conftest import free_port
from tests.e2e.served import REPO

WORKFLOW = REPO / "workflows_json" / "ltx2_3_i2v.json"


def _get(url: str) -> bytes:
    return urllib.request.urlopen(url, timeout=30).read()


def _with_png_frames(prompt: dict) -> dict:
    (decode,) = [k for k, v in prompt.items() if v["class_type"] == "VAEDecodeTiled"]
    frames = {"class_type": "SaveImage", "inputs": {"images": [decode, 0], "filename_prefix": "ltx_frames"}}
    return {**prompt, "900": frames}


def _run(base: str, prompt: dict) -> tuple[np.ndarray, list[np.ndarray], np.ndarray, int]:
    """(PNG frames, the MP4's frames, its audio samples [channels, n], its sample rate)."""
    body = json.dumps({"prompt": prompt, "client_id": str(uuid.uuid4())}).encode()
    pid = json.loads(urllib.request.urlopen(urllib.request.Request(base + "/prompt", data=body)).read())["prompt_id"]
    deadline = time.time() + 900
    while True:
        entry = json.loads(_get(f"{base}/history/{pid}")).get(pid)
        if entry is not None:
            assert entry["status"]["status_str"] != "error", entry["status"]["messages"]
            if entry["status"]["completed"]:
                break
        assert time.time() < deadline, "not finished within 900 s"
        time.sleep(0.5)
    outputs = entry["outputs"]
    pngs = np.stack(
        [
            np.asarray(Image.open(io.BytesIO(_get(f"{base}/view?" + urllib.parse.urlencode(im)))))
            for im in outputs["900"]["images"]
        ]
    )
    (video,) = [im for key, o in outputs.items() if key != "900" for im in o.get("images", [])]
    with av.open(io.BytesIO(_get(f"{base}/view?" + urllib.parse.urlencode(video)))) as container:
        frames = [f.to_ndarray(format="rgb24") for f in container.decode(video=0)]
    with av.open(io.BytesIO(_get(f"{base}/view?" + urllib.parse.urlencode(video)))) as container:
        rate = container.streams.audio[0].rate
        samples = np.concatenate([f.to_ndarray() for f in container.decode(audio=0)], axis=-1)
    return pngs, frames, samples, rate


def _render(workspace, log_path, prompt: dict, *flags: str):
    port = free_port()
    with open(log_path, "w") as log:
        command = [sys.executable, "-m", "comfy_bridge.cli", "serve", "--workspace", str(workspace)]
        proc = subprocess.Popen([*command, "--port", str(port), *flags], cwd=REPO, stdout=log, stderr=subprocess.STDOUT)
        try:
            base = f"http://127.0.0.1:{port}"
            deadline = time.time() + 300  # the first start builds the demo models
            while True:
                try:
                    _get(base + "/system_stats")
                    break
                except OSError:
                    if time.time() > deadline or proc.poll() is not None:
                        raise RuntimeError("server did not start:\n" + log_path.read_text()) from None
                    time.sleep(0.3)
            return _run(base, prompt)
        finally:
            proc.terminate()
            proc.wait(30)


def test_shipped_ui_workflow_is_the_templates_graph() -> None:
    ui = json.loads(WORKFLOW.with_suffix("").with_suffix(".ui.json").read_text())
    assert ui == tiny_template()
    classes = {n["type"] for n in ui["nodes"]}
    assert classes >= {
        "LatentUpscaleModelLoader",
        "LTXVLatentUpsampler",
        "TextGenerateLTX2Prompt",
        "LTXVAudioVAELoader",
        "LoraLoaderModelOnly",
        "VAEDecodeTiled",
    }


def test_template_renders_the_same_in_both_executor_modes(tmp_path) -> None:
    prompt = _with_png_frames(json.loads(WORKFLOW.read_text()))
    workspace = tmp_path / "fresh"
    pngs, mp4, audio, rate = _render(workspace, tmp_path / "default.log", prompt)
    other_pngs, other_mp4, other_audio, other_rate = _render(workspace, tmp_path / "x0.log", prompt, "--executors", "0")
    # 25 frames (1 s at 25 fps: 4 latent frames) of 128x128: the first pass at 64x64, upsampled x2
    assert pngs.shape == (25, 128, 128, 3) and pngs.std() > 0 and len(mp4) == 25
    assert np.array_equal(pngs, other_pngs), "frames differ between the executor modes"
    assert all(np.array_equal(a, b) for a, b in zip(mp4, other_mp4, strict=True))
    assert rate == other_rate == 16000 and audio.shape[0] == 2
    assert rate <= audio.shape[-1] <= rate + 2048  # 1 s of audio, AAC frames rounding the track up
    assert np.abs(audio).max() > 1e-4, "the audio track is silent"
    # The audio VAE's float32 rounding (mel decoder and vocoder) follows the torch thread count, which differs
    # between executor processes and the in-process mode (waveforms 7e-9 apart at 1 and 2 threads), and AAC
    # re-encodes the difference: the tracks agree closely, not bit for bit (the frames do).
    diff = float(np.abs(audio - other_audio).max())
    assert diff <= 0.01 * float(np.abs(audio).max()), f"audio differs between the executor modes by {diff}"
