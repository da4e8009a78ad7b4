"""Kandinsky5ImageToVideo and NormalizeVideoLatentStart (nodes/library/kandinsky5.py) against ComfyUI 0.10.0's
comfy_extras.nodes_kandinsky5 (scripts/record_comfyui_kandinsky5.py): the empty latent and, with start frames
encoded by the tiny Wan 2.1 VAE (the same latent shape as HunyuanVideo's VAE), time_dim_replace, concat_mask and
cond_latent within 1e-5; the normalised start frames within 1e-5."""

from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path

import pytest
import torch

from tests.recorded_tensors import load_json, tensor

FIXTURE = load_json(Path(__file__).resolve().parents[1] / "models" / "fixtures" / "comfyui_kandinsky5.json")
I2V_CASES = {
    "text_only": (64, 48, 9, 2, None),
    "one_frame": (64, 48, 9, 1, (1, 40, 56)),
    "five_frames": (32, 32, 13, 1, (6, 32, 48)),
}
NORMALIZE_CASES = {
    "default": ((1, 16, 9, 4, 6), 4, 5),
    "short": ((2, 16, 3, 4, 6), 2, 5),
    "one_frame": ((1, 16, 1, 4, 6), 4, 5),
}


def test_recorded_on_the_demo_vae(demo_workspace) -> None:
    path = demo_workspace.models_dir / FIXTURE["vae"]
    assert hashlib.sha256(path.read_bytes()).hexdigest() == FIXTURE["vae_sha256"]


@pytest.mark.parametrize("case", sorted(I2V_CASES))
def test_image_to_video_equals_comfyuis(demo_workspace, case: str) -> None:
    from nodes.library.kandinsky5 import Kandinsky5ImageToVideo
    from nodes.loaders import make_ref

    torch.set_num_threads(1)
    width, height, length, batch, start = I2V_CASES[case]
    image = None if start is None else torch.rand(*start, 3, generator=torch.Generator().manual_seed(7))
    vae = make_ref("vae", "qwen_image", [demo_workspace.models_dir / FIXTURE["vae"]])
    cond = [[torch.ones(1, 3, 4), {"pooled_output": torch.zeros(1, 4)}]]
    node = Kandinsky5ImageToVideo()
    pos, neg, latent, cond_latent = asyncio.run(
        node.execute(cond, cond, vae, width, height, length, batch, start_image=image)
    )
    want = FIXTURE["image_to_video"][case]
    assert list(latent["samples"].shape) == want["latent_shape"] and float(latent["samples"].abs().sum()) == 0.0
    if want["cond_latent"] is None:
        assert cond_latent == {} and pos is cond and neg is cond
        return
    torch.testing.assert_close(cond_latent["samples"], tensor(want["cond_latent"]), atol=1e-5, rtol=0)
    for ours, recorded in ((pos, want["positive"]), (neg, want["negative"])):
        opts = ours[0][1]
        assert sorted(k for k in opts if k in recorded) == sorted(recorded)
        torch.testing.assert_close(opts["time_dim_replace"], tensor(recorded["time_dim_replace"]), atol=1e-5, rtol=0)
        torch.testing.assert_close(opts["concat_mask"], tensor(recorded["concat_mask"]), atol=0, rtol=0)
        assert opts["pooled_output"] is cond[0][1]["pooled_output"]


@pytest.mark.parametrize("case", sorted(NORMALIZE_CASES))
def test_normalize_video_latent_start_equals_comfyuis(case: str) -> None:
    from nodes.library.latent_today import NormalizeVideoLatentStart

    shape, start, reference = NORMALIZE_CASES[case]
    samples = torch.randn(*shape, generator=torch.Generator().manual_seed(3)) * 2 + 0.5
    (out,) = NormalizeVideoLatentStart().execute({"samples": samples}, start, reference)
    torch.testing.assert_close(out["samples"], tensor(FIXTURE["normalize"][case]), atol=1e-5, rtol=0)
    if shape[2] > 1:
        assert not torch.equal(out["samples"][:, :, :start], samples[:, :, :start])
        assert torch.equal(out["samples"][:, :, start:], samples[:, :, start:])


def test_normalize_refuses_an_image_latent_by_name() -> None:
    from nodes.library.latent_today import NormalizeVideoLatentStart

    with pytest.raises(ValueError, match="video latent"):
        NormalizeVideoLatentStart().execute({"samples": torch.zeros(1, 16, 4, 4)}, 4, 5)
