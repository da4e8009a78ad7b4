"""Replace Video Latent Frames against ComfyUI 0.10.0's recorded outputs
(tests/nodes/fixtures/comfyui_replace_video_frames.json, scripts/record_comfyui_replace_video_frames.py), and
Latent Operation Blend (newer than 0.10.0, so no recording) against the semantics of the newest ComfyUI source,
the expected numbers worked out by hand: lerp toward the reference, resized nearest, batch cycled."""
from __future__ import annotations

import json
import pickle
from pathlib import Path

import pytest
import torch

from nodes.library.latent_ops import LatentApplyOperation
from nodes.library.latent_today import LatentOperationBlend, ReplaceVideoLatentFrames

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "comfyui_replace_video_frames.json"


def _latents(source_frames: int | None) -> tuple[dict, dict | None]:
    # the recorder's inputs, drawn the same way
    gen = torch.Generator().manual_seed(34)
    dest = {"samples": torch.rand(1, 2, 5, 3, 2, generator=gen), "noise_mask": torch.ones(1, 1, 5, 3, 2)}
    if source_frames is None:
        return dest, None
    return dest, {"samples": torch.rand(1, 2, source_frames, 3, 2, generator=gen), "batch_index": [7]}


@pytest.mark.parametrize("case", json.loads(FIXTURE.read_text())["cases"],
                         ids=lambda c: f"src{c['source_frames']}-at{c['index']}")
def test_replace_video_latent_frames_equals_comfyui(case):
    dest, source = _latents(case["source_frames"])
    (out,) = ReplaceVideoLatentFrames().execute(dest, case["index"], source)
    assert sorted(out) == case["keys"]
    assert list(out["samples"].shape) == case["shape"]
    assert out["samples"].flatten().tolist() == case["values"]
    assert torch.equal(dest["samples"], _latents(None)[0]["samples"])   # the input is not written to


def test_replace_video_latent_frames_refuses_image_latents():
    with pytest.raises(ValueError, match="video latents"):
        ReplaceVideoLatentFrames().execute({"samples": torch.zeros(1, 4, 8, 8)}, 0, {"samples": torch.zeros(1, 4, 8, 8)})


def test_blend_lerps_toward_the_resized_reference():
    reference = torch.tensor([[[[1.0, 2.0], [3.0, 4.0]]]])                 # [1,1,2,2]
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
