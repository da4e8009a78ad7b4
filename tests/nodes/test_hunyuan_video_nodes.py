"""HunyuanImageToVideo (nodes/library/hunyuan_video.py) against ComfyUI 0.3.64's comfy_extras.nodes_hunyuan on the tiny
HunyuanVideo VAE (scripts/record_comfyui_hunyuan_video.py): for each guidance type the latent, its noise mask and the
conditioning's values (concat_latent_image and concat_mask, guiding_frame_index, ref_latent) within 1e-5."""

from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path

import pytest
import torch

from tests.recorded_tensors import load_json, tensor

FIXTURE = load_json(Path(__file__).resolve().parents[1] / "models" / "fixtures" / "comfyui_hunyuan_video.json.xz")
VAE = "vae/hunyuan_video_vae_tiny.safetensors"
# (guidance_type, width, height, length, batch_size, start frames or None), as the recorder's NODE_CASES
CASES = {
    "no_image": ("v1 (concat)", 64, 48, 9, 2, None),
    "v1_concat": ("v1 (concat)", 64, 48, 9, 1, (1, 40, 56)),
    "v2_replace": ("v2 (replace)", 64, 48, 9, 1, (1, 48, 64)),
    "custom": ("custom", 32, 32, 5, 1, (1, 32, 48)),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_image_to_video_equals_comfyuis(demo_workspace, case: str) -> None:
    from nodes.library.hunyuan_video import HunyuanImageToVideo
    from nodes.loaders import make_ref

    torch.set_num_threads(1)
    path = demo_workspace.models_dir / VAE
    assert hashlib.sha256(path.read_bytes()).hexdigest() == FIXTURE["files"][VAE]
    kind, width, height, length, batch, start = CASES[case]
    image = None if start is None else torch.rand(*start, 3, generator=torch.Generator().manual_seed(7))
    vae = make_ref("vae", "hunyuan_video", [path])
    cond = [[torch.ones(1, 3, 4), {"pooled_output": torch.zeros(1, 4)}]]
    positive, latent = asyncio.run(
        HunyuanImageToVideo().encode(cond, vae, width, height, length, batch, kind, start_image=image)
    )
    want = FIXTURE["image_to_video"][case]
    torch.testing.assert_close(latent["samples"], tensor(want["latent"]), atol=1e-5, rtol=0)
    if want["noise_mask"] is None:
        assert "noise_mask" not in latent
    else:
        torch.testing.assert_close(latent["noise_mask"], tensor(want["noise_mask"]), atol=0, rtol=0)
    opts = positive[0][1]
    assert opts.get("guiding_frame_index") == want["guiding_frame_index"]
    assert sorted(k for k in ("concat_latent_image", "concat_mask", "ref_latent") if k in opts) == sorted(want["cond"])
    for key, recorded in want["cond"].items():
        torch.testing.assert_close(opts[key], tensor(recorded), atol=1e-5, rtol=0)
    if start is None:
        assert positive is cond


def test_unknown_guidance_type_is_refused_by_name(demo_workspace) -> None:
    from nodes.library.hunyuan_video import HunyuanImageToVideo

    cond = [[torch.ones(1, 3, 4), {"pooled_output": torch.zeros(1, 4)}]]
    with pytest.raises(ValueError, match="guidance_type"):
        asyncio.run(HunyuanImageToVideo().encode(cond, None, 64, 48, 9, 1, "v3"))
