"""The web UI's Wan Animate 2 template (workflows_json/wan_animate2_template.json, written by
scripts/wan_animate2_template_workflow.py: the tiny Animate 2 file and its companions, example.png as the
reference, example.mp4 as the pose video, 64x64, 2 steps, a fixed seed) from a fresh, empty workspace: the pose
clip through GetVideoComponents into the Start/End Loop, WanAnimate2Cache at int8, SamplerCustom with LCM,
TrimVideoLatent, the tail trim, CreateVideo and today's SaveVideo, whose VIDEO output feeds the side-by-side
preview (GetVideoComponents, ImageStitch, a second CreateVideo and SaveVideo). The final frames (a SaveImage
beside CreateVideo) and both MP4s are the same with the default executors and with `--executors 0`. The Animate 2
network and WanAnimate2ToVideo are checked against the newest ComfyUI's code in tests/models/test_wan_animate2.py
and tests/e2e/test_wan_animate2_workflow.py."""

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

from scripts.wan_animate2_template_workflow import tiny_template
from tests.e2e.served import REPO, serving

WORKFLOW = REPO / "workflows_json" / "wan_animate2_template.json"
FRAMES = "900"


def _get(url: str) -> bytes:
    return urllib.request.urlopen(url, timeout=30).read()


def _with_png_frames(prompt: dict) -> dict:
    """The prompt with a SaveImage of the frames the final CreateVideo takes (after the loop's tail-trim switch;
    the other CreateVideo makes the side-by-side preview)."""
    (images,) = [
        v["inputs"]["images"]
        for v in prompt.values()
        if v["class_type"] == "CreateVideo" and prompt[v["inputs"]["images"][0]]["class_type"] == "ComfySwitchNode"
    ]
    return {**prompt, FRAMES: {"class_type": "SaveImage", "inputs": {"images": images, "filename_prefix": "anim"}}}


def _render(base: str, prompt: dict) -> tuple[np.ndarray, dict[str, list[np.ndarray]]]:
    """(the PNG frames, each SaveVideo's decoded MP4 frames by node id)."""
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
    view = f"{base}/view?"
    pngs = np.stack(
        [
            np.asarray(Image.open(io.BytesIO(_get(view + urllib.parse.urlencode(im)))))
            for im in outputs[FRAMES]["images"]
        ]
    )
    videos = {}
    for key, out in outputs.items():
        if key == FRAMES:
            continue
        ((video,),) = [out["images"]]
        with av.open(io.BytesIO(_get(view + urllib.parse.urlencode(video)))) as container:
            videos[key] = [f.to_ndarray(format="rgb24") for f in container.decode(video=0)]
    return pngs, videos


def test_shipped_ui_workflow_is_the_templates_graph() -> None:
    ui = json.loads(WORKFLOW.with_suffix("").with_suffix(".ui.json").read_text())
    assert ui == tiny_template()
    types = [n["type"] for n in ui["nodes"]]
    assert {"WanAnimate2ToVideo", "WanAnimate2Cache", "StartLoop", "EndLoop", "TrimVideoLatent"} <= set(types)
    assert types.count("SaveVideo") == 2 and types.count("GetVideoComponents") == 4
    (cache,) = [n for n in ui["nodes"] if n["type"] == "WanAnimate2Cache"]
    assert cache["widgets_values"][1] == "int8"
    api = json.loads(WORKFLOW.read_text())
    saves = [v["inputs"] for v in api.values() if v["class_type"] == "SaveVideo"]
    assert all((s["format"], s["format.codec"], s["codec"]) == ("auto", "auto", "auto") for s in saves)


def test_template_renders_the_same_in_both_executor_modes(tmp_path) -> None:
    prompt = _with_png_frames(json.loads(WORKFLOW.read_text()))
    workspace = tmp_path / "fresh"
    with serving(workspace, tmp_path / "default.log") as base:
        pngs, videos = _render(base, prompt)
    with serving(workspace, tmp_path / "x0.log", "--executors", "0") as base:
        other_pngs, other_videos = _render(base, prompt)
    # the 9-frame pose clip: one fragment of 4 * ceil(8 / 4) + 1 = 9 frames, no tail to trim
    assert pngs.shape == (9, 64, 64, 3) and pngs.std() > 0
    assert np.array_equal(pngs, other_pngs), "frames differ between the executor modes"
    assert sorted(videos) == sorted(other_videos) and len(videos) == 2
    for key, frames in videos.items():
        assert len(frames) == 9 and all(np.array_equal(a, b) for a, b in zip(frames, other_videos[key], strict=True))
