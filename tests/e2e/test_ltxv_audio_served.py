"""LTX-2's audio path through `comfy-cluster serve`, with one executor process and in-process: the tiny audio VAE
that ComfyUI 0.10.0 built (tests/models/fixtures/comfyui_ltx2_audio.safetensors) loaded by LTXVAudioVAELoader,
an empty audio latent joined to an empty video latent and separated again, decoded by LTXVAudioVAEDecode on the
executor (ModelFn ltx2_audio_decode) and saved by SaveAudio: the FLAC's samples are the same in both modes and
equal the direct decode of the same latent within FLAC's 16-bit quantisation."""

from __future__ import annotations

import io
import json
import shutil
import time
import urllib.parse
import urllib.request
import uuid
from pathlib import Path

import av
import numpy as np
import pytest
import torch

FIXTURE = Path(__file__).resolve().parents[1] / "models" / "fixtures" / "comfyui_ltx2_audio.safetensors"
NAME = "ltx-2-audio-vae-tiny.safetensors"
PROMPT = {
    "1": {"class_type": "LTXVAudioVAELoader", "inputs": {"ckpt_name": NAME}},
    "2": {"class_type": "EmptyLTXVLatentVideo", "inputs": {"width": 64, "height": 64, "length": 9, "batch_size": 1}},
    "3": {
        "class_type": "LTXVEmptyLatentAudio",
        "inputs": {"frames_number": 9, "frame_rate": 25, "batch_size": 1, "audio_vae": ["1", 0]},
    },
    "4": {"class_type": "LTXVConcatAVLatent", "inputs": {"video_latent": ["2", 0], "audio_latent": ["3", 0]}},
    "5": {"class_type": "LTXVSeparateAVLatent", "inputs": {"av_latent": ["4", 0]}},
    "6": {"class_type": "LTXVAudioVAEDecode", "inputs": {"samples": ["5", 1], "audio_vae": ["1", 0]}},
    "7": {"class_type": "SaveAudio", "inputs": {"audio": ["6", 0], "filename_prefix": "audio/ltx2"}},
}


@pytest.fixture(scope="module")
def servers(serve, demo_workspace):
    copy = demo_workspace.models_dir / "checkpoints" / NAME
    shutil.copy(FIXTURE, copy)
    try:
        yield {"default": serve("--executor-threads", "1"), "in-process": serve("--executors", "0")}
    finally:
        copy.unlink()


def _get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=30) as r:
        return r.read()


def _run(base: str, prompt: dict) -> dict:
    body = json.dumps({"prompt": prompt, "client_id": str(uuid.uuid4())}).encode()
    pid = json.loads(urllib.request.urlopen(urllib.request.Request(base + "/prompt", data=body)).read())["prompt_id"]
    deadline = time.time() + 300
    while time.time() < deadline:
        entry = json.loads(_get(f"{base}/history/{pid}")).get(pid)
        if entry and entry["status"]["status_str"] == "error":
            raise AssertionError(entry["status"])
        if entry and entry["status"]["completed"]:
            return entry["outputs"]
        time.sleep(0.3)
    raise TimeoutError(pid)


def _samples(data: bytes) -> tuple[np.ndarray, int]:
    with av.open(io.BytesIO(data)) as container:
        rate = container.streams.audio[0].codec_context.sample_rate
        frames = [f.to_ndarray() for f in container.decode(audio=0)]
    return np.concatenate([f.reshape(-1, 2).T if f.shape[0] == 1 else f for f in frames], axis=1), rate


def test_the_audio_track_is_the_same_in_both_modes_and_equals_the_direct_decode(servers):
    from nodes.models.ltx2_audio import read_audio_vae

    saved = {}
    for mode, base in servers.items():
        [entry] = _run(base, PROMPT)["7"]["audio"]
        saved[mode] = _samples(_get(f"{base}/view?" + urllib.parse.urlencode(entry)))
    (default, rate), (in_process, rate2) = saved["default"], saved["in-process"]
    assert rate == rate2 == 2000
    np.testing.assert_array_equal(default, in_process)
    vae = read_audio_vae(str(FIXTURE))
    torch.set_num_threads(1)
    expected = vae.decode(torch.zeros(1, 8, vae.latent_frames(9, 25), 16))[0].numpy()
    assert default.shape == expected.shape and np.abs(expected).max() > 1e-3
    scale = 32768.0 if np.issubdtype(default.dtype, np.integer) else 1.0
    np.testing.assert_allclose(default / scale, expected, atol=1.5 / 32768, rtol=0)
