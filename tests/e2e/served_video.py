"""What the video template e2e tests share: serve a workspace in one executor mode, render workflows whose
VAEDecode frames are saved as PNGs beside the template's SaveVideo, check that the default executors and
`--executors 0` give the same frames and MP4, and read ComfyUI's recorded frames."""

from __future__ import annotations

import io
import json
import time
import urllib.parse
import urllib.request
import uuid
from pathlib import Path

import numpy as np
from PIL import Image

from tests.e2e.served import serving
from tests.recorded_tensors import pixels

Frames = tuple[np.ndarray, list[np.ndarray]]  # (PNG frames [T,H,W,3], the MP4's decoded frames)


def comfyui_frames(recorded: dict) -> np.ndarray:
    """The frames [T,H,W,3] a recorder (scripts/record_comfyui_*.py) stored of ComfyUI's run."""
    return pixels(recorded["frames"])


def with_png_frames(prompt: dict) -> dict:
    """The prompt with a SaveImage of VAEDecode's frames beside the template's SaveVideo."""
    (decode,) = [k for k, v in prompt.items() if v["class_type"] == "VAEDecode"]
    return {
        **prompt,
        "900": {"class_type": "SaveImage", "inputs": {"images": [decode, 0], "filename_prefix": "wan_frames"}},
    }


def get_bytes(url: str) -> bytes:
    return urllib.request.urlopen(url, timeout=30).read()


def finished_outputs(base: str, prompt: dict, timeout_s: float = 600) -> dict:
    """Post the prompt to the server at `base` and return its history entry's outputs once it completed; an error
    status or no completion within `timeout_s` fails the test."""
    body = json.dumps({"prompt": prompt, "client_id": str(uuid.uuid4())}).encode()
    pid = json.loads(urllib.request.urlopen(urllib.request.Request(base + "/prompt", data=body)).read())["prompt_id"]
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        entry = json.loads(get_bytes(f"{base}/history/{pid}")).get(pid)
        if entry is not None:
            assert entry["status"]["status_str"] != "error", entry["status"]["messages"]
            if entry["status"]["completed"]:
                return entry["outputs"]
        time.sleep(0.3)
    raise AssertionError(f"not finished within {timeout_s} s")


def run_prompt(base: str, prompt: dict, timeout_s: float = 600) -> Frames:
    """(PNG frames [T,H,W,3], the MP4's decoded frames) of one prompt."""
    import av

    outputs = finished_outputs(base, prompt, timeout_s)
    pngs = np.stack(
        [
            np.asarray(Image.open(io.BytesIO(get_bytes(f"{base}/view?" + urllib.parse.urlencode(im)))))
            for im in outputs["900"]["images"]
        ]
    )
    # the template's SaveVideo (a PreviewAny's text, as the LTX-2.5 templates preview their prompt, is no video)
    (saved,) = [o for key, o in outputs.items() if key != "900" and "images" in o]
    (video,) = saved["images"]
    assert video["filename"].endswith(".mp4") and video["subfolder"] == "video"
    with av.open(io.BytesIO(get_bytes(f"{base}/view?" + urllib.parse.urlencode(video)))) as container:
        decoded = [f.to_ndarray(format="rgb24") for f in container.decode(video=0)]
    return pngs, decoded


def render_videos_with_serve(
    workspace: Path, log_path: Path, prompts: dict[str, dict], *flags: str
) -> dict[str, Frames]:
    """Each prompt's frames, rendered by a server started on the workspace with these flags."""
    with serving(workspace, log_path, *flags) as base:
        return {case: run_prompt(base, prompt) for case, prompt in prompts.items()}


def render_videos_in_both_modes(tmp_path: Path, prompts: dict[str, dict]) -> dict[str, Frames]:
    """Each prompt's frames from a fresh workspace (tmp_path / "fresh"), served first with the default executors
    and then with `--executors 0`; asserts that each case's PNG and MP4 frames are identical and returns them."""
    workspace = tmp_path / "fresh"
    default = render_videos_with_serve(workspace, tmp_path / "default.log", prompts)
    in_process = render_videos_with_serve(workspace, tmp_path / "executors0.log", prompts, "--executors", "0")
    for case, (pngs, mp4) in default.items():
        other_pngs, other_mp4 = in_process[case]
        assert pngs.shape == other_pngs.shape, f"{case}: frame shapes differ between the executor modes"
        assert np.array_equal(pngs, other_pngs), f"{case}: frames differ between the executor modes"
        assert len(mp4) == len(other_mp4) and all(np.array_equal(a, b) for a, b in zip(mp4, other_mp4)), (
            f"{case}: the MP4's frames differ between the executor modes"
        )
    return default
