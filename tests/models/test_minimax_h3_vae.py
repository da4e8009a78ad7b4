"""MiniMax H3 video VAE: the published layout (as ComfyUI's comfy/ldm/minimax/vae.py names and reads it) loaded
onto diffusers' AutoencoderKLMiniMaxH3. The two reordered tensors are checked against ComfyUI's reading of
them (the fused qkv viewed per head as [q k v], the SwiGLU's first half as the gate); encode/decode against
diffusers' model on the same weights with ComfyUI's pixel and latent normalisation. No ComfyUI that runs here
has MiniMax H3."""

from __future__ import annotations

import pytest
import torch
from diffusers import AutoencoderKLMiniMaxH3

from nodes.models.errors import ModelLoadError
from nodes.models.minimax_h3_vae import (
    IMAGENET_MEAN,
    IMAGENET_STD,
    decode,
    encode,
    encode_image,
    from_diffusers,
    infer_config,
    is_minimax_h3_vae,
    load_vae,
)

HEADS = 2


@pytest.fixture(scope="module")
def reference() -> AutoencoderKLMiniMaxH3:
    torch.manual_seed(0)
    vae = AutoencoderKLMiniMaxH3(
        block_out_channels=(32,) * 6,
        layers_per_block=1,
        decoder_num_layers=1,
        decoder_num_attention_heads=HEADS,
        decoder_attention_head_dim=64,
        decoder_ffn_mult=1,
        latents_mean=tuple(torch.randn(24).tolist()),
        latents_std=tuple((torch.rand(24) + 0.5).tolist()),
    ).eval()
    with torch.no_grad():
        for p in vae.parameters():
            p.add_(torch.randn_like(p) * 0.02)
    return vae


@pytest.fixture(scope="module")
def published(reference) -> dict[str, torch.Tensor]:
    cfg = reference.config
    return from_diffusers(reference.state_dict(), HEADS, torch.tensor(cfg.latents_mean), torch.tensor(cfg.latents_std))


def test_detected_and_loaded(reference, published):
    assert is_minimax_h3_vae(published) and is_minimax_h3_vae(f"first_stage_model.{k}" for k in published)
    assert not is_minimax_h3_vae(["decoder.middle.0.residual.0.gamma"])  # a Wan VAE
    assert "decoder.transformer_blocks.0.attn.to_qkv.weight" in published
    assert "encoder.down.3.downsample.conv.weight" in published and "decoder.x_embedder.weight" in published
    vae = load_vae(published)
    ours, theirs = vae.state_dict(), reference.state_dict()
    assert ours.keys() == theirs.keys() and all(torch.equal(ours[k], theirs[k]) for k in theirs)
    assert infer_config(published)["latents_std"] == tuple(reference.config.latents_std)


def test_reordered_rows_read_as_comfyui_reads_them(reference, published):
    x = torch.randn(3, 128)
    w, b = (
        published["decoder.transformer_blocks.0.attn.to_qkv.weight"],
        published["decoder.transformer_blocks.0.attn.to_qkv.bias"],
    )
    q, k, v = torch.nn.functional.linear(x, w, b).view(3, HEADS, 3 * 64).chunk(3, dim=-1)  # ComfyUI's reading
    attn = reference.decoder.transformer_blocks[0].attn
    with torch.no_grad():
        for ours, proj in ((q, attn.to_q), (k, attn.to_k), (v, attn.to_v)):
            torch.testing.assert_close(ours.reshape(3, -1), proj(x), rtol=0, atol=1e-6)
        gate, value = torch.nn.functional.linear(
            x,
            published["decoder.transformer_blocks.0.ff.w1.weight"],
            published["decoder.transformer_blocks.0.ff.w1.bias"],
        ).chunk(2, -1)
        ff = reference.decoder.transformer_blocks[0].ff
        torch.testing.assert_close(ff.net[0](x), torch.nn.functional.silu(gate) * value, rtol=0, atol=1e-6)


def test_encode_decode_equal_diffusers(reference, published):
    torch.set_num_threads(1)
    vae = load_vae(published)
    frames = torch.rand(22, 32, 48, 3, generator=torch.Generator().manual_seed(3))
    z = encode(vae, frames)
    assert z.shape == (1, 24, 7, 2, 3)
    mean, std = torch.tensor(IMAGENET_MEAN).view(1, 3, 1, 1, 1), torch.tensor(IMAGENET_STD).view(1, 3, 1, 1, 1)
    lm = torch.tensor(reference.config.latents_mean).view(1, -1, 1, 1, 1)
    ls = torch.tensor(reference.config.latents_std).view(1, -1, 1, 1, 1)
    with torch.no_grad():
        raw = reference.encode((frames.movedim(-1, 0)[None] - mean) / std).latent_dist.mean
        torch.testing.assert_close(z, (raw - lm) / ls, rtol=0, atol=1e-5)
        pixels = decode(vae, z)
        expected = (reference.decode(raw).sample * std + mean).clamp(0, 1)[0].movedim(0, -1)
    assert pixels.shape == (22, 32, 48, 3)
    torch.testing.assert_close(pixels, expected, rtol=0, atol=1e-5)


def test_five_frames_as_comfyui_plans_them(published):
    """5 frames (the shortest video): ComfyUI encodes one 17-frame clip padded with the last frame, keeping its
    first 2 latents, and decodes one chunk padded with the last latent, keeping the first 5 frames."""
    torch.set_num_threads(1)
    vae = load_vae(published)
    frames = torch.rand(5, 32, 32, 3, generator=torch.Generator().manual_seed(6))
    z = encode(vae, frames)
    assert z.shape == (1, 24, 2, 2, 2)
    # the first clip of 22 frames whose last 17 repeat the 5th is that padded clip: its first 2 latents
    longer = encode(vae, torch.cat([frames, frames[-1:].expand(17, -1, -1, -1)]))
    torch.testing.assert_close(z, longer[:, :, :2], rtol=0, atol=1e-5)
    out = decode(vae, z)
    assert out.shape == (5, 32, 32, 3)
    padded = torch.cat([z, z[:, :, -1:].expand(-1, -1, 5, -1, -1)], dim=2)
    torch.testing.assert_close(out, decode(vae, padded)[:5], rtol=0, atol=0)


def test_one_image_is_the_first_latent_of_its_video(published):
    """ComfyUI encodes a keyframe image alone through the causal encoder; the first latent of a video covers
    only its first frame, so the two paths agree."""
    torch.set_num_threads(1)
    vae = load_vae(published)
    frames = torch.rand(5, 32, 32, 3, generator=torch.Generator().manual_seed(8))
    z = encode_image(vae, frames[:1])
    assert z.shape == (1, 24, 1, 2, 2)
    torch.testing.assert_close(z, encode(vae, frames)[:, :, :1], rtol=0, atol=1e-5)
    assert not torch.allclose(z, encode(vae, frames)[:, :, 1:2], atol=1e-3)
    with pytest.raises(ValueError, match="one \\[1, H, W, 3\\] image"):
        encode_image(vae, frames)


def test_bad_input_refused(published):
    vae = load_vae(published)
    with pytest.raises(ValueError, match="17k\\+5"):
        encode(vae, torch.rand(4, 32, 32, 3))
    with pytest.raises(ValueError, match="5k\\+2"):
        decode(vae, torch.zeros(1, 24, 3, 2, 2))
    with pytest.raises(ModelLoadError, match="latents_std"):
        load_vae({k: v for k, v in published.items() if k != "latents_std"})
    with pytest.raises(ModelLoadError, match="not a MiniMax H3 video VAE"):
        load_vae({"decoder.x_embedder.weight": torch.zeros(2, 2)})
