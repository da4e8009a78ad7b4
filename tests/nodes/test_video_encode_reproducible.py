"""Saving the same frames as MP4 gives the same video every time: `comfy-cluster serve --executors 2`
and the in-process run must decode bit-identical frames (tests/e2e/test_cluster_serve_matches_in_process.py).
libx264's rate-control lookahead (mb-tree) now and then encoded the same frames into other bytes, about one
save in fifty for these frames (the wan22_fun_inpaint workflow's decoded video) and most runs of that workflow
on a busy server; its frames 0 and 2 came back with up to 34 levels of difference."""

from __future__ import annotations

import hashlib
import io
from concurrent.futures import ThreadPoolExecutor
from fractions import Fraction
from pathlib import Path

import av
import numpy as np
import torch
from PIL import Image

from nodes.media.video import VideoComponents, VideoFromComponents

FRAMES = Path(__file__).parent / "fixtures" / "video_frames_wan22_fun_inpaint.png"


def _frames() -> torch.Tensor:
    strip = np.asarray(Image.open(FRAMES).convert("RGB"))  # the five 64x64 frames stacked vertically
    return torch.from_numpy(strip.reshape(-1, 64, 64, 3).copy()).float() / 255


def _encoded(images: torch.Tensor) -> str:
    buf = io.BytesIO()
    VideoFromComponents(VideoComponents(images=images, frame_rate=Fraction(16))).save_to(buf)
    with av.open(io.BytesIO(buf.getvalue())) as container:
        return hashlib.sha256(b"".join(bytes(p) for p in container.demux(video=0))).hexdigest()


def test_the_same_frames_encode_to_the_same_video_every_time():
    images = _frames()
    # several saves at once, as a server saves while other work runs: the old encoder diverged more under load
    with ThreadPoolExecutor(4) as pool:
        digests = set(pool.map(lambda _: _encoded(images), range(300)))
    assert len(digests) == 1, f"{len(digests)} different encodings of the same frames"
