"""The web UI's Wan 2.2 14B image-to-video template (workflows_json/wan22_i2v.json: its subgraph flattened by
scripts/wan_template_workflow.py, the tiny demo files in place of the downloads) from a fresh, empty workspace:
`serve` builds wan-tiny on its first start; the video is the same with the default executors and with
`--executors 0`, and its frames equal ComfyUI 0.10.0's frames of the same workflow on the same files
(recorded by scripts/record_comfyui_wan.py) to within 1/255, with the template's LoRA switch off (as shipped)
and on (the 4-step LoRAs merged into both experts); likewise the Wan 2.2 5B template (workflows_json/wan22_5b.json:
its start image bypassed as shipped, so text-to-video on the 48-channel latent and the Wan 2.2 VAE; and with
the start image on: Wan22ImageToVideoLatent's noise mask keeps the first latent frame, sampled with per-frame
timesteps); and the 14B workflow with WanFirstLastFrameToVideo in place of WanImageToVideo, and on Wan 2.1's
image-to-video model given the image's CLIP vision output, and as text-to-video (EmptyHunyuanLatentVideo, the
Wan 2.1 text-to-video model for both experts).

The MP4 is lossy, so the frames are compared as PNGs: a SaveImage beside SaveVideo takes VAEDecode's frames."""

from __future__ import annotations

import base64
import io
import json
import subprocess
import sys
import time
import urllib.parse
import urllib.request
import uuid
from pathlib import Path

import numpy as np
from PIL import Image

from tests.conftest import free_port

REPO = Path(__file__).resolve().parents[2]
WORKFLOW = REPO / "workflows_json" / "wan22_i2v.json"
FIXTURE = json.loads((REPO / "tests" / "models" / "fixtures" / "comfyui_wan.json").read_text())
RECORDED = {
    "off": FIXTURE["workflow"],
    "lora": FIXTURE["workflow_lora"],
    "5b": FIXTURE["workflow_5b"],
    "5b_start_image": FIXTURE["workflow_5b_start_image"],
    "first_last": FIXTURE["workflow_first_last"],
    "clip_vision": FIXTURE["workflow_clip_vision"],
    "text": FIXTURE["workflow_text"],
}


def comfyui_frames(recorded: dict) -> np.ndarray:
    frames = recorded["frames"]
    return np.frombuffer(base64.b64decode(frames["u8"]), dtype=np.uint8).reshape(frames["shape"])


def with_png_frames(prompt: dict) -> dict:
    """The prompt with a SaveImage of VAEDecode's frames beside the template's SaveVideo."""
    (decode,) = [k for k, v in prompt.items() if v["class_type"] == "VAEDecode"]
    return {
        **prompt,
        "900": {"class_type": "SaveImage", "inputs": {"images": [decode, 0], "filename_prefix": "wan_frames"}},
    }


def _get(url: str) -> bytes:
    return urllib.request.urlopen(url, timeout=30).read()


def run_prompt(base: str, prompt: dict, timeout_s: float = 600) -> tuple[np.ndarray, list[np.ndarray]]:
    """(PNG frames [T,H,W,3], the MP4's decoded frames) of one prompt."""
    import av

    body = json.dumps({"prompt": prompt, "client_id": str(uuid.uuid4())}).encode()
    pid = json.loads(urllib.request.urlopen(urllib.request.Request(base + "/prompt", data=body)).read())["prompt_id"]
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        entry = json.loads(_get(f"{base}/history/{pid}")).get(pid)
        if entry is not None:
            assert entry["status"]["status_str"] != "error", entry["status"]["messages"]
            if entry["status"]["completed"]:
                break
        time.sleep(0.3)
    else:
        raise AssertionError(f"not finished within {timeout_s} s")
    outputs = entry["outputs"]
    pngs = np.stack(
        [
            np.asarray(Image.open(io.BytesIO(_get(f"{base}/view?" + urllib.parse.urlencode(im)))))
            for im in outputs["900"]["images"]
        ]
    )
    (saved,) = [o for key, o in outputs.items() if key != "900"]  # the template's SaveVideo
    (video,) = saved["images"]
    assert video["filename"].endswith(".mp4") and video["subfolder"] == "video"
    with av.open(io.BytesIO(_get(f"{base}/view?" + urllib.parse.urlencode(video)))) as container:
        decoded = [f.to_ndarray(format="rgb24") for f in container.decode(video=0)]
    return pngs, decoded


def render_with_serve(workspace: Path, log_path: Path, prompts: dict[str, dict], *flags: str) -> dict:
    port = free_port()
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "comfy_bridge.cli",
                "serve",
                "--workspace",
                str(workspace),
                "--port",
                str(port),
                *flags,
            ],
            cwd=REPO,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
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
            return {case: run_prompt(base, prompt) for case, prompt in prompts.items()}
        finally:
            proc.terminate()
            proc.wait(30)


def test_recorded_workflow_is_the_shipped_one() -> None:
    shipped = json.loads(WORKFLOW.read_text())
    assert RECORDED["off"]["prompt"] == shipped
    lora = json.loads(WORKFLOW.read_text())
    lora["131"]["inputs"]["value"] = True  # the template's enable_turbo_mode switch
    assert RECORDED["lora"]["prompt"] == lora
    first_last = json.loads(WORKFLOW.read_text())  # WanFirstLastFrameToVideo: the image first, its inverse last
    first_last["98"]["class_type"] = "WanFirstLastFrameToVideo"
    first_last["170"] = {"class_type": "ImageInvert", "inputs": {"image": ["97", 0]}}
    first_last["98"]["inputs"]["end_image"] = ["170", 0]
    assert RECORDED["first_last"]["prompt"] == first_last
    vision = json.loads(WORKFLOW.read_text())  # Wan 2.1 i2v with the start image's CLIP vision output
    for node in ("95", "96"):
        vision[node]["inputs"]["unet_name"] = "wan2.1_i2v_480p_14B_tiny.safetensors"
    vision["180"] = {"class_type": "CLIPVisionLoader", "inputs": {"clip_name": "clip-vision-tiny.safetensors"}}
    vision["181"] = {
        "class_type": "CLIPVisionEncode",
        "inputs": {"clip_vision": ["180", 0], "crop": "none", "image": ["97", 0]},
    }
    vision["98"]["inputs"]["clip_vision_output"] = ["181", 0]
    assert RECORDED["clip_vision"]["prompt"] == vision
    text = json.loads(WORKFLOW.read_text())  # text-to-video: EmptyHunyuanLatentVideo, Wan 2.1 t2v for both experts
    i2v, _ = text.pop("98"), text.pop("97")
    text["98"] = {
        "class_type": "EmptyHunyuanLatentVideo",
        "inputs": {k: i2v["inputs"][k] for k in ("width", "height", "length", "batch_size")},
    }
    for node in ("95", "96"):
        text[node]["inputs"]["unet_name"] = "wan2.1_t2v_1.3B_tiny.safetensors"
    for node in ("85", "86"):  # the prompts straight to both experts; the high-noise one starts from the latent
        text[node]["inputs"].update(positive=["93", 0], negative=["89", 0])
    text["86"]["inputs"]["latent_image"] = ["98", 0]
    assert RECORDED["text"]["prompt"] == text
    five = json.loads((REPO / "workflows_json" / "wan22_5b.json").read_text())
    assert RECORDED["5b"]["prompt"] == five
    five["56"] = {"class_type": "LoadImage", "inputs": {"image": "example.png"}}  # its bypassed LoadImage on
    five["55"]["inputs"]["start_image"] = ["56", 0]
    assert RECORDED["5b_start_image"]["prompt"] == five


def test_wan22_templates_from_a_fresh_workspace_in_both_executor_modes(tmp_path) -> None:
    prompts = {case: with_png_frames(rec["prompt"]) for case, rec in RECORDED.items()}
    workspace = tmp_path / "fresh"
    default = render_with_serve(workspace, tmp_path / "default.log", prompts)
    assert (workspace / "models" / "diffusion_models" / "wan2.2_i2v_high_noise_14B_tiny.safetensors").is_file()
    in_process = render_with_serve(workspace, tmp_path / "executors0.log", prompts, "--executors", "0")
    for case, (pngs, mp4) in default.items():
        assert pngs.shape == (5, 64, 64, 3) and pngs.std() > 0 and len(mp4) == 5
        other_pngs, other_mp4 = in_process[case]
        assert np.array_equal(pngs, other_pngs), f"{case}: frames differ between the executor modes"
        assert all(np.array_equal(a, b) for a, b in zip(mp4, other_mp4, strict=True)), (
            f"{case}: the MP4's frames differ between the executor modes"
        )
        diff = np.abs(pngs.astype(int) - comfyui_frames(RECORDED[case]).astype(int))
        assert diff.max() <= 1, (
            f"{case}: {int((diff > 1).sum())} values differ from ComfyUI's frames by more than 1/255"
        )
    assert not np.array_equal(default["off"][0], default["lora"][0]), "the LoRAs changed nothing"
