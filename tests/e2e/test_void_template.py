"""The web UI's VOID video inpainting template on the tiny CogVideoX files (workflows_json/void_template.json, written
by scripts/void_template_workflow.py: both VOID passes with VOIDSampler on the tiny void_pass1 / void_pass2
transformers, the RAFT-warped noise between them, the tiny CogVideoX VAE and T5, the source's sound on both videos;
256x256, the least RAFT takes, 5 frames, 2 steps) from a fresh workspace: both passes' decoded frames and both MP4s
are the same with the default executors and with `--executors 0`.

One change to the graph: the removal mask is the frames' red channel (ImageToMask) instead of SAM 3.1's detection,
which takes 25 s a run on a CPU (the tiny SAM 3.1 still sees 1008-pixel frames); the whole graph, SAM 3.1 included,
runs on two executors against the in-process run in test_cluster_serve_matches_in_process.py, and
scripts/templates_render.py --only utility_void_video_inpainting renders the template itself.
"""

from __future__ import annotations

import io
import json
import urllib.parse
import urllib.request
from pathlib import Path

import numpy as np
from PIL import Image

from tests.e2e.served import serving
from tests.e2e.served_video import finished_outputs, get_bytes

REPO = Path(__file__).resolve().parents[2]
WORKFLOW = REPO / "workflows_json" / "void_template.json"


def _run(base: str, prompt: dict) -> dict[str, list[np.ndarray]]:
    """Every image and video output of the prompt, decoded, by node id."""
    import av

    outputs = finished_outputs(base, prompt)
    out = {}
    for key, output in outputs.items():
        frames = []
        for item in output.get("images", []):
            data = get_bytes(f"{base}/view?" + urllib.parse.urlencode(item))
            if item["filename"].endswith(".mp4"):
                with av.open(io.BytesIO(data)) as container:
                    frames += [f.to_ndarray(format="rgb24") for f in container.decode(video=0)]
            else:
                frames.append(np.asarray(Image.open(io.BytesIO(data))))
        out[key] = frames
    return out


def test_void_template_in_both_executor_modes(tmp_path) -> None:
    prompt = json.loads(WORKFLOW.read_text())
    assert {"VOIDWarpedNoise", "VOIDInpaintConditioning", "VOIDSampler", "SAM3_Detect", "GetVideoComponents"} <= {
        v["class_type"] for v in prompt.values()
    }
    (sam,) = [k for k, v in prompt.items() if v["class_type"] == "SAM3_Detect"]
    prompt[sam] = {"class_type": "ImageToMask", "inputs": {"image": prompt[sam]["inputs"]["image"], "channel": "red"}}
    decodes = sorted(k for k, v in prompt.items() if v["class_type"] == "VAEDecode")
    for i, key in enumerate(decodes):  # each pass's frames as PNGs too
        prompt[f"90{i}"] = {"class_type": "SaveImage", "inputs": {"images": [key, 0], "filename_prefix": "void"}}
    runs = []
    for name, flags in (("default", ()), ("executors0", ("--executors", "0"))):
        with serving(tmp_path / "fresh", tmp_path / f"{name}.log", *flags) as base:
            runs.append(_run(base, prompt))
    default, in_process = runs
    assert set(default) == set(in_process) and len(default) == 4
    for key, frames in default.items():
        assert len(frames) == len(in_process[key]) and frames, key
        assert all(np.array_equal(a, b) for a, b in zip(frames, in_process[key])), f"{key} differs between the modes"
    first, second = (np.stack(default[f"90{i}"]) for i in range(2))
    assert first.shape[1:] == (256, 256, 3) and first.std() > 0 and not np.array_equal(first, second)
