"""VIDEO and AUDIO values cross to a pack node running on an executor process and back, as IMAGE tensors
do: frames made by CreateVideo (tensors), a video file of the input folder (its path, and its bytes for an
executor on another machine) and a loaded AUDIO reach the node unchanged, and what it returns is saved by
the head's SaveVideo."""

from __future__ import annotations

import os
from fractions import Fraction

import numpy as np
import pytest
import torch

from cluster.executor.local_cluster import start_local_cluster
from nodes.media.audio import encode_audio
from nodes.media.video import VideoComponents, VideoFromComponents, VideoFromFile

from .conftest import output, run_prompt


@pytest.fixture(scope="module")
def cluster():
    head, rt = start_local_cluster(1, threads_per_executor=1)
    yield head, rt
    head.stop()


def _frames() -> torch.Tensor:
    y = torch.linspace(0, 1, 32)[:, None, None].expand(32, 48, 3)
    return torch.stack([y * (i + 1) / 4 for i in range(4)])


async def test_video_and_audio_values_cross_to_an_executor_and_back(packs_registry, packs_ws, cluster):
    _, rt = cluster
    clip = packs_ws.input_dir / "pack_clip.mp4"
    VideoFromComponents(VideoComponents(images=_frames(), frame_rate=Fraction(6))).save_to(str(clip))
    wave = torch.round(torch.sin(torch.arange(8000) / 8000 * 2 * np.pi * 220)[None].repeat(2, 1) * 16384) / 32768
    encode_audio(wave, 8000, str(packs_ws.input_dir / "pack_tone.flac"))
    prompt = {
        "img": {"class_type": "LoadVideo", "inputs": {"file": "pack_clip.mp4"}},
        "parts": {"class_type": "GetVideoComponents", "inputs": {"video": ["img", 0]}},
        "make": {"class_type": "CreateVideo", "inputs": {"images": ["parts", 0], "fps": 6.0}},
        "tone": {"class_type": "LoadAudio", "inputs": {"audio": "pack_tone.flac"}},
        "mem": {"class_type": "MediaPassThrough", "inputs": {"video": ["make", 0], "audio": ["tone", 0]}},
        "file": {"class_type": "MediaPassThrough", "inputs": {"video": ["img", 0]}},
        "save": {
            "class_type": "SaveVideo",
            "inputs": {"video": ["mem", 1], "filename_prefix": "pack/mem", "format": "auto", "codec": "auto"},
        },
        "copy": {
            "class_type": "SaveVideo",
            "inputs": {"video": ["file", 1], "filename_prefix": "pack/file", "format": "auto", "codec": "auto"},
        },
    }
    executor, _ = await run_prompt(packs_registry, prompt, runtime=rt, prompt_id="media1")
    assert executor.success, executor.status_messages
    for node in ("mem", "file"):
        pid = output(executor, node, 3)
        assert pid != str(os.getpid()), f"{node} ran in the head"
    decoded = VideoFromFile(str(clip)).get_components().images
    assert torch.equal(output(executor, "mem", 0), decoded)  # VideoFromComponents: the tensors themselves
    assert torch.equal(output(executor, "file", 0), decoded)  # VideoFromFile: read on the executor
    back = output(executor, "file", 1)
    assert isinstance(back, VideoFromFile) and back.get_stream_source() == str(clip)
    quieter = output(executor, "mem", 2)
    assert quieter["sample_rate"] == 8000 and torch.equal(quieter["waveform"], wave[None] * 0.5)
    saved = {n: executor.history_result["outputs"][n]["images"][0] for n in ("save", "copy")}
    files = {n: packs_ws.output_dir / e["subfolder"] / e["filename"] for n, e in saved.items()}
    assert np.array_equal(VideoFromFile(str(files["copy"])).get_components().images.numpy(), decoded.numpy())
    assert VideoFromFile(str(files["save"])).get_frame_count() == 4
