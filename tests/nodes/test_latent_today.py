"""Replace Video Latent Frames, Trim Video Latent and Normalize Video Latent Start against ComfyUI 0.10.0's
recorded outputs (tests/nodes/fixtures/comfyui_video_latent_nodes.json, scripts/record_comfyui_video_latent_nodes.py), and
Latent Operation Blend (newer than 0.10.0, so no recording) against the semantics of the newest ComfyUI source,
the expected numbers worked out by hand: lerp toward the reference, resized nearest, batch cycled."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import pytest
import torch

from nodes.library.latent_ops import LatentApplyOperation
from nodes.library.latent_today import (
    LatentOperationBlend,
    NormalizeVideoLatentStart,
    ReplaceVideoLatentFrames,
    TrimVideoLatent,
)

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "comfyui_video_latent_nodes.json"
RECORDED = json.loads(FIXTURE.read_text())


def _latents(source_frames: int | None) -> tuple[dict, dict | None]:
    # the recorder's inputs, drawn the same way
    gen = torch.Generator().manual_seed(34)
    dest = {"samples": torch.rand(1, 2, 5, 3, 2, generator=gen), "noise_mask": torch.ones(1, 1, 5, 3, 2)}
    if source_frames is None:
        return dest, None
    return dest, {"samples": torch.rand(1, 2, source_frames, 3, 2, generator=gen), "batch_index": [7]}


@pytest.mark.parametrize("case", RECORDED["cases"], ids=lambda c: f"src{c['source_frames']}-at{c['index']}")
def test_replace_video_latent_frames_equals_comfyui(case):
    dest, source = _latents(case["source_frames"])
    (out,) = ReplaceVideoLatentFrames().execute(dest, case["index"], source)
    assert sorted(out) == case["keys"]
    assert list(out["samples"].shape) == case["shape"]
    assert out["samples"].flatten().tolist() == case["values"]
    assert torch.equal(dest["samples"], _latents(None)[0]["samples"])  # the input is not written to


def _video(frames: int, seed: int) -> torch.Tensor:
    # the recorder's inputs, drawn the same way
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(2, 3, frames, 4, 5, generator=gen) * 1.7 + 0.4


@pytest.mark.parametrize("case", RECORDED["trim"], ids=lambda c: f"trim{c['trim_amount']}")
def test_trim_video_latent_equals_comfyui(case):
    (out,) = TrimVideoLatent().execute({"samples": _video(5, 1), "batch_index": [3, 4]}, case["trim_amount"])
    assert sorted(out) == case["keys"] and out["batch_index"] == [3, 4]
    assert list(out["samples"].shape) == case["shape"]
    assert out["samples"].flatten().tolist() == case["values"]


@pytest.mark.parametrize("case", RECORDED["normalize"], ids=lambda c: f"T{c['frames']}-s{c['start']}-r{c['reference']}")
def test_normalize_video_latent_start_equals_comfyui(case):
    torch.set_num_threads(1)  # reductions compared bit for bit
    (out,) = NormalizeVideoLatentStart().execute(
        {"samples": _video(case["frames"], 2)}, case["start"], case["reference"]
    )
    assert list(out["samples"].shape) == case["shape"]
    assert out["samples"].flatten().tolist() == case["values"]


def test_video_nodes_refuse_image_latents():
    with pytest.raises(ValueError, match="video latent"):
        TrimVideoLatent().execute({"samples": torch.zeros(1, 4, 8, 8)}, 1)
    with pytest.raises(ValueError, match="video latent"):
        NormalizeVideoLatentStart().execute({"samples": torch.zeros(1, 4, 8, 8)}, 1, 1)


def test_replace_video_latent_frames_refuses_image_latents():
    with pytest.raises(ValueError, match="video latents"):
        ReplaceVideoLatentFrames().execute(
            {"samples": torch.zeros(1, 4, 8, 8)}, 0, {"samples": torch.zeros(1, 4, 8, 8)}
        )


def test_blend_lerps_toward_the_resized_reference():
    reference = torch.tensor([[[[1.0, 2.0], [3.0, 4.0]]]])  # [1,1,2,2]
    latent = torch.zeros(3, 1, 4, 4)
    (op,) = LatentOperationBlend().execute({"samples": reference}, 0.25)
    (out,) = LatentApplyOperation().execute({"samples": latent, "batch_index": [1, 2, 3]}, op)
    # nearest 2x2 -> 4x4 repeats each value in a 2x2 block; every batch item gets the one reference
    block = torch.tensor([[1.0, 1.0, 2.0, 2.0], [1.0, 1.0, 2.0, 2.0], [3.0, 3.0, 4.0, 4.0], [3.0, 3.0, 4.0, 4.0]])
    assert torch.equal(out["samples"], (0.25 * block).expand(3, 1, 4, 4))
    assert out["batch_index"] == [1, 2, 3]
    whole = pickle.loads(pickle.dumps(LatentOperationBlend().execute({"samples": reference}, 1.0)[0]))  # to executors
    full = whole(latent=torch.ones(1, 1, 2, 2))
    assert torch.equal(full, reference)
    assert torch.equal(LatentOperationBlend().execute({"samples": reference}, 0.0)[0](latent=latent), latent)


def test_blend_refuses_a_non_latent_reference():
    with pytest.raises(TypeError, match="reference"):
        LatentOperationBlend().execute(torch.zeros(1, 4, 2, 2), 0.5)
