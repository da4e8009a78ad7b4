"""Video and audio through `comfy-cluster serve`, with one executor process (the default) and in-process
(`--executors 0`): the demo model's frames made into a video by CreateVideo and saved by SaveVideo decode
to the same frames in both modes and to the saved PNGs within H.264's loss; history lists the video as
ComfyUI does (`images` with `animated: [true]`) and /view serves it as video/mp4; an uploaded video taken
apart by GetVideoComponents and an uploaded FLAC saved again by SaveAudio keep their frames and samples."""

from __future__ import annotations

import io
import json
import math
import time
import urllib.parse
import urllib.request
import uuid
from pathlib import Path

import av
import numpy as np
import pytest
from PIL import Image

REPO = Path(__file__).resolve().parents[2]
VIDEO = json.loads((REPO / "workflows_json" / "video.json").read_text())
MODES = ("default", "in-process")


@pytest.fixture(scope="module")
def servers(serve):
    # both compute with one torch thread: results differ between thread counts, and the test process's own
    # count (pinned by earlier tests) says nothing about the in-process server's default
    return {
        "default": serve("--executor-threads", "1"),
        "in-process": serve("--executors", "0", "--executor-threads", "1"),
    }


def _get(url: str) -> tuple[bytes, str]:
    with urllib.request.urlopen(url, timeout=30) as r:
        return r.read(), r.headers["Content-Type"]


def _run(base: str, prompt: dict) -> dict:
    body = json.dumps({"prompt": prompt, "client_id": str(uuid.uuid4())}).encode()
    pid = json.loads(urllib.request.urlopen(urllib.request.Request(base + "/prompt", data=body)).read())["prompt_id"]
    deadline = time.time() + 300
    while time.time() < deadline:
        entry = json.loads(_get(f"{base}/history/{pid}")[0]).get(pid)
        if entry and entry["status"]["status_str"] == "error":
            raise AssertionError(entry["status"])
        if entry and entry["status"]["completed"]:
            return entry["outputs"]
        time.sleep(0.3)
    raise TimeoutError(pid)


def _view(base: str, entry: dict) -> tuple[bytes, str]:
    return _get(f"{base}/view?" + urllib.parse.urlencode(entry))


def _frames(data: bytes) -> np.ndarray:
    with av.open(io.BytesIO(data)) as container:
        return np.stack([f.to_ndarray(format="rgb24") for f in container.decode(video=0)])


def _upload(base: str, name: str, data: bytes, mime: str) -> str:
    boundary = uuid.uuid4().hex
    body = (
        (
            f'--{boundary}\r\nContent-Disposition: form-data; name="image"; filename="{name}"\r\n'
            f"Content-Type: {mime}\r\n\r\n"
        ).encode()
        + data
        + f'\r\n--{boundary}\r\nContent-Disposition: form-data; name="overwrite"\r\n\r\ntrue\r\n--{boundary}--\r\n'.encode()
    )
    request = urllib.request.Request(
        base + "/upload/image", data=body, headers={"Content-Type": f"multipart/form-data; boundary={boundary}"}
    )
    return json.loads(urllib.request.urlopen(request).read())["name"]


@pytest.fixture(scope="module")
def rendered(servers):
    """The video workflow, plus a SaveImage of the same frames, run on both servers."""
    prompt = {**VIDEO, "12": {"class_type": "SaveImage", "inputs": {"images": ["8", 0], "filename_prefix": "frames"}}}
    return {mode: _run(base, prompt) for mode, base in servers.items()}


@pytest.mark.parametrize("mode", MODES)
def test_history_lists_the_video_as_comfyui_does(rendered, mode):
    saved = rendered[mode]["11"]
    assert saved["animated"] == [True]
    [entry] = saved["images"]
    assert entry["subfolder"] == "video" and entry["type"] == "output"
    assert entry["filename"].startswith("ComfyUI_") and entry["filename"].endswith("_.mp4")


def test_both_modes_give_the_same_frames_and_view_serves_mp4(servers, rendered):
    videos, images = {}, {}
    for mode, base in servers.items():
        data, content_type = _view(base, rendered[mode]["11"]["images"][0])
        assert content_type == "video/mp4"
        videos[mode] = _frames(data)
        pngs = np.stack([np.asarray(Image.open(io.BytesIO(_view(base, e)[0]))) for e in rendered[mode]["12"]["images"]])
        assert videos[mode].shape == pngs.shape == (8, 128, 128, 3)
        # the video's frames are the decoded images, within H.264's loss (noise-like demo images: a loose bound)
        assert np.abs(videos[mode].astype(int) - pngs).mean() < 12
        images[mode] = pngs
    assert np.array_equal(images["default"], images["in-process"])
    assert np.array_equal(videos["default"], videos["in-process"])


@pytest.mark.parametrize("mode", MODES)
def test_an_uploaded_video_taken_apart_and_saved_again(servers, rendered, mode):
    base = servers[mode]
    data, _ = _view(base, rendered[mode]["11"]["images"][0])
    name = _upload(base, f"clip_{mode}.mp4", data, "video/mp4")
    assert (
        name
        in json.loads(_get(base + "/object_info/LoadVideo")[0])["LoadVideo"]["input"]["required"]["file"][1]["options"]
    )
    prompt = {
        "1": {"class_type": "LoadVideo", "inputs": {"file": name}},
        "2": {"class_type": "GetVideoComponents", "inputs": {"video": ["1", 0]}},
        "3": {"class_type": "CreateVideo", "inputs": {"images": ["2", 0], "fps": ["2", 2]}},
        "4": {
            "class_type": "SaveVideo",
            "inputs": {"video": ["3", 0], "filename_prefix": "again/clip", "format": "mp4", "codec": "h264"},
        },
        "5": {
            "class_type": "SaveVideo",
            "inputs": {"video": ["1", 0], "filename_prefix": "copy/clip", "format": "auto", "codec": "auto"},
        },
    }
    outputs = _run(base, prompt)
    original = _frames(data)
    copied = _frames(_view(base, outputs["5"]["images"][0])[0])
    assert np.array_equal(copied, original)  # saved again without encoding: the same frames
    encoded = _frames(_view(base, outputs["4"]["images"][0])[0])
    assert encoded.shape == original.shape  # through IMAGE and back: encoded a second time
    assert np.abs(encoded.astype(int) - original).mean() < 12
    with av.open(io.BytesIO(_view(base, outputs["4"]["images"][0])[0])) as container:
        assert container.streams.video[0].average_rate == 8


@pytest.mark.parametrize("mode", MODES)
def test_an_uploaded_flac_is_loaded_and_saved_sample_for_sample(servers, mode):
    base, rate = servers[mode], 22050
    t = np.arange(rate) / rate
    wave = np.round(
        np.stack([0.5 * np.sin(2 * math.pi * 440 * t), 0.3 * np.sin(2 * math.pi * 880 * t)]) * 32767
    ).astype(np.int16)
    buffer = io.BytesIO()
    with av.open(buffer, mode="w", format="flac") as out:
        stream = out.add_stream("flac", rate=rate, layout="stereo")
        frame = av.AudioFrame.from_ndarray(np.ascontiguousarray(wave.T.reshape(1, -1)), format="s16", layout="stereo")
        frame.sample_rate = rate
        out.mux(stream.encode(frame))
        out.mux(stream.encode(None))
    name = _upload(base, f"sine_{mode}.flac", buffer.getvalue(), "audio/flac")
    outputs = _run(
        base,
        {
            "1": {"class_type": "LoadAudio", "inputs": {"audio": name}},
            "2": {"class_type": "SaveAudio", "inputs": {"audio": ["1", 0], "filename_prefix": "audio/sine"}},
        },
    )
    [entry] = outputs["2"]["audio"]
    assert entry["subfolder"] == "audio" and entry["type"] == "output"
    data, content_type = _view(base, entry)
    assert content_type == "audio/flac"
    with av.open(io.BytesIO(data)) as container:
        assert container.streams.audio[0].codec_context.sample_rate == rate
        samples = np.concatenate([f.to_ndarray().reshape(-1, 2).T for f in container.decode(audio=0)], axis=1)
    assert np.array_equal(samples, wave)
