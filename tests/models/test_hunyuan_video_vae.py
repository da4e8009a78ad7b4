"""The HunyuanVideo 1.0 VAE (nodes/models/hunyuan_video_vae.py, Kandinsky 5's video templates' VAE) against ComfyUI
0.10.0 on hunyuan-video-vae-tiny (scripts/record_comfyui_hunyuan_video_vae.py): encoding frames chunk by chunk (the
first frame, chunks of 8 and a shorter last one; fewer than 5 frames: the first alone; an odd size, centre-cropped)
and decoding latents chunk by chunk (2 latent frames at a time; a batch of two), within 1e-5."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import torch

from tests.recorded_tensors import at_recorded, load_json, tensor

FIXTURE = load_json(Path(__file__).parent / "fixtures" / "comfyui_hunyuan_video_vae.json.xz")
# the recorder's cases and seeded draws (scripts/record_comfyui_hunyuan_video_vae.py)
ENCODE = {"chunks": (1, 13, 48, 64), "first_frame_only": (2, 3, 32, 40), "odd_size": (3, 5, 44, 61)}
DECODE = {"chunks": (4, (1, 16, 5, 4, 5)), "batch": (5, (2, 16, 2, 4, 5))}


def pixels(seed: int, frames: int, height: int, width: int) -> torch.Tensor:
    return torch.rand(frames, height, width, 3, generator=torch.Generator().manual_seed(seed))


def latent(seed: int, shape) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


@pytest.fixture(scope="module")
def vae_file(demo_workspace) -> Path:
    path = demo_workspace.models_dir / FIXTURE["file"]
    assert hashlib.sha256(path.read_bytes()).hexdigest() == FIXTURE["file_sha256"], "not the recorded tiny file"
    return path


@pytest.fixture(scope="module")
def vae(vae_file):
    from nodes.loaders import make_ref
    from nodes.models.loader import load_vae

    torch.set_num_threads(1)
    return load_vae(make_ref("vae", "hunyuan_video", [vae_file]))


def test_detected_and_sized_as_comfyui(demo_workspace, vae):
    from nodes.models.detect import probe

    info = probe(demo_workspace.models_dir / FIXTURE["file"])
    assert (info.arch, info.kind) == ("hunyuan_video", "vae")
    assert vae.latent_channels == FIXTURE["latent_channels"] == 16 and vae.downscale == 8
    config = vae.module.encoder.down
    assert [lvl.block[0].conv1.conv.out_channels // 32 for lvl in config] == FIXTURE["sizes"]["ch_mult"]
    assert FIXTURE["vae_dtype"] == "torch.float32"  # ComfyUI computes it in float32 on a CPU, as here


@pytest.mark.parametrize("case", sorted(ENCODE))
def test_encode_equals_comfyuis(vae, case):
    seed, *shape = ENCODE[case]
    ours = vae.encode(pixels(seed, *shape))
    entry = FIXTURE["encode"][case]
    assert torch.allclose(at_recorded(ours, entry), tensor(entry), atol=1e-5, rtol=0)


@pytest.mark.parametrize("case", sorted(DECODE))
def test_decode_equals_comfyuis(vae, case):
    seed, shape = DECODE[case]
    ours = vae.decode(latent(seed, shape))
    entry = FIXTURE["decode"][case]
    # ComfyUI's VAE.decode gives [B, frames, H, W, 3]; ours VAEDecode's [B * frames, H, W, 3]
    ours = ours.reshape(shape[0], -1, *ours.shape[1:])
    assert torch.allclose(at_recorded(ours, entry), tensor(entry), atol=1e-5, rtol=0)


def test_chunks_matter(vae):
    """Decoding the chunks' frames together (one group norm over the whole video) is not ComfyUI's result."""
    seed, shape = DECODE["chunks"]
    z = latent(seed, shape)
    whole = vae.decode(z)
    from nodes.models import hunyuan_video_vae

    saved = hunyuan_video_vae.DECODE_CHUNK
    hunyuan_video_vae.DECODE_CHUNK = 99
    try:
        assert (vae.decode(z) - whole).abs().max() > 1e-3
    finally:
        hunyuan_video_vae.DECODE_CHUNK = saved


def test_bad_latent_refused(vae):
    with pytest.raises(ValueError, match=r"takes \[B,16,T,H,W\] video latents"):
        vae.decode(torch.zeros(1, 16, 4, 5))


TILED = {"tiles": (6, (1, 16, 5, 10, 12)), "one_tile": (7, (1, 16, 2, 4, 5))}  # the recorder's (seed, latent shape)


@pytest.mark.parametrize("case", sorted(TILED))
def test_tiled_decode_equals_comfyuis(vae, vae_file, case):
    """VAE Decode (Tiled): tiles in time, height and width blended as ComfyUI 0.10.0's VAEDecodeTiled blends them
    (nodes.modelfns.vae.tiled_video), or one tile decoded whole."""
    import asyncio

    from nodes.loaders import make_ref
    from nodes.model_nodes import VAEDecodeTiled

    seed, shape = TILED[case]
    entry = FIXTURE["tiled"][case]
    ref = make_ref("vae", "hunyuan_video", [vae_file])
    (image,) = asyncio.run(VAEDecodeTiled().decode(ref, {"samples": latent(seed, shape)}, *entry["settings"]))
    assert torch.allclose(at_recorded(image, entry["image"]), tensor(entry["image"]), atol=1e-5, rtol=0)
    if case == "tiles":  # tiles are not the whole decode
        assert (image - vae.decode(latent(seed, shape))).abs().max() > 1e-3
