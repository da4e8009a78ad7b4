"""WanSCAILToVideo and SCAIL2ColoredMask against the newest ComfyUI's nodes (comfy_extras/nodes_scail.py, run at
development time on ComfyUI 0.10.0 with the tiny Wan 2.1 VAE: scripts/record_comfyui_wan_scail.py, fixture
tests/models/fixtures/comfyui_wan_scail.json.xz)."""

from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from nodes.library.wan_scail import SCAIL2ColoredMask, WanSCAILToVideo, mask_channels, set_in_range
from nodes.loaders import make_ref
from nodes.models.wan_demo import FILES, tiny_wan_state_dicts
from tests.recorded_tensors import load_json, tensor

FIXTURE = load_json(Path(__file__).parents[1] / "models" / "fixtures" / "comfyui_wan_scail.json.xz")
VAE_ATOL = 1e-5  # two VAE implementations' encodes of the same frames (float32)


@pytest.fixture(scope="module")
def vae(tmp_path_factory):
    path = tmp_path_factory.mktemp("scail_vae") / FILES["vae"]
    path.parent.mkdir(parents=True)
    save_file(tiny_wan_state_dicts()["vae"], path, metadata={"format": "pt"})
    assert hashlib.sha256(path.read_bytes()).hexdigest() == FIXTURE["sha256"][FILES["vae"]], "re-record"
    return make_ref("vae", "qwen_image", [path])


def _compare(ours: dict, theirs: dict) -> None:
    assert sorted(ours) == sorted(theirs)
    for key, value in theirs.items():
        if key == "reference_latents":
            assert len(ours[key]) == len(value)
            for a, b in zip(ours[key], value, strict=True):
                torch.testing.assert_close(a, tensor(b), atol=VAE_ATOL, rtol=0)
        elif isinstance(value, dict):
            atol = VAE_ATOL if key == "pose_video_latent" else 0
            torch.testing.assert_close(ours[key].float(), tensor(value), atol=atol, rtol=0)
        else:
            assert ours[key] == value, key


@pytest.mark.parametrize("case", list(FIXTURE["nodes"]["cases"]))
def test_scail_to_video_equals_comfyui(vae, case: str) -> None:
    torch.set_num_threads(1)
    rec = FIXTURE["nodes"]["cases"][case]
    images = {k: tensor(v) for k, v in FIXTURE["nodes"]["images"].items()}
    kwargs = {k: images[k] if k in images else v for k, v in rec["case"].items()}
    if case == "animation":
        kwargs["reference_image"] = kwargs["reference_image"][:1]
    cond = [[torch.zeros(1, 4, 8), {}]]
    pos, neg, latent, offset = asyncio.run(WanSCAILToVideo().execute(cond, cond, vae, **kwargs))
    assert offset == rec["video_frame_offset"]
    for ours, theirs in ((pos, rec["positive"]), (neg, rec["negative"])):
        assert len(ours) == len(theirs)
        for (_, opts), expected in zip(ours, theirs, strict=True):
            _compare(opts, expected)
    assert sorted(latent) == sorted(rec["latent"])
    for key, value in rec["latent"].items():
        torch.testing.assert_close(latent[key], tensor(value), atol=VAE_ATOL, rtol=0)


def _pack(masks: torch.Tensor) -> torch.Tensor:
    bits = masks.bool().reshape(*masks.shape[:-1], -1, 8).to(torch.uint8) << torch.arange(8, dtype=torch.uint8)
    return bits.sum(-1).to(torch.uint8)


@pytest.mark.parametrize("case", list(FIXTURE["colored_masks"]["cases"]))
def test_colored_masks_equal_comfyui(case: str) -> None:
    rec = FIXTURE["colored_masks"]
    indices, sort_by, replacement, refs = rec["cases"][case]["args"]
    driving = {
        "packed_masks": _pack(tensor(rec["masks"])),
        "orig_size": (24, 32),
        "n_frames": 5,
        "scores": [0.9, 0.8, 0.7],
    }
    reference = {
        "packed_masks": _pack(tensor(rec["reference"])),
        "orig_size": (12, 16),
        "n_frames": 2,
        "scores": [0.5, 0.4],
    }
    if refs == "empty":
        driving = {"packed_masks": None, "orig_size": (6, 8), "n_frames": 3}
    ref_input = {"track": reference, "mask": tensor(rec["plain_mask"])}.get(refs)
    video, ref_masks = SCAIL2ColoredMask().execute(driving, indices, sort_by, replacement, ref_input)
    assert torch.equal(video, tensor(rec["cases"][case]["pose_video_mask"]))
    assert torch.equal(ref_masks, tensor(rec["cases"][case]["reference_image_mask"]))


def test_mask_channels_stack_four_frames_per_latent_frame() -> None:
    video = torch.zeros(5, 16, 16, 3)
    video[0, :8] = torch.tensor([0.0, 0.0, 1.0])  # blue on the top half of frame 0
    video[4] = 1.0  # white everywhere on frame 4
    out = mask_channels(video)
    assert out.shape == (1, 2, 28, 2, 2)
    blue = out[0, 0].reshape(4, 7, 2, 2)[:, 3]  # frame 0 counted four times
    assert blue[:, 0].eq(1).all() and blue[:, 1].eq(0).all()
    assert out[0, 1].reshape(4, 7, 2, 2)[3, 0].eq(1).all()  # frame 4's white is the second latent's last


def test_pose_window_keeps_one_cond_active() -> None:
    cond = [[torch.zeros(1), {"start_percent": 0.0, "end_percent": 0.5}]]
    parts = set_in_range(cond, {"v": 1}, 0.2, 0.9)
    assert [(o["start_percent"], o["end_percent"], "v" in o) for _, o in parts] == [
        (0.0, 0.2 - 1e-5, False),
        (0.2, 0.5, True),
    ]
    assert set_in_range(cond, {"v": 1}, 0.6, 0.9) == cond  # no overlap: unchanged


def test_image_from_batch_counts_a_negative_index_from_the_end() -> None:
    """Today's ImageFromBatch (the SCAIL-2 templates' last frame, -1), clamped to the batch as ComfyUI's."""
    from nodes.library.images import ImageFromBatch

    frames = torch.arange(9.0).view(9, 1, 1, 1)
    take = ImageFromBatch().frombatch
    assert take(frames, -1, 1)[0].flatten().tolist() == [8.0]
    assert take(frames, -20, 2)[0].flatten().tolist() == [0.0, 1.0]
    assert take(frames, 76, 81)[0].flatten().tolist() == [8.0]
