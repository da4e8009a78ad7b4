"""MiniMax H3 given an image latent (image_minimax_h3_t2i: EmptyLatentImage into SamplerCustomAdvanced) as today's
ComfyUI treats it (comfy/sample.py fix_empty_latent_channels, comfy/latent_formats.py MiniMaxH3AV): the empty latent
gets the model's channels and 16x sides, becomes one frame [B,C,1,H,W], and is paired with the silent audio latent of
that frame's duration (40 latents a second of the frames its latent frames stand for, 1, 4, 4, 4, 4, ...); the pair
is sampled, and the video VAE decodes one latent frame as one image (its single-frame path, the last of the frames
the decoder gives)."""

from __future__ import annotations

import torch

from cluster.refs import ModelRef
from nodes.ksampler import empty_av_latent
from nodes.models.minimax_h3_shapes import av_latent_shapes, silent_audio_shape

MINIMAX = ModelRef("diffusion_model", "minimax_h3", ("h3.safetensors",), ("0",))


def test_an_empty_image_latent_becomes_one_frame_and_its_silent_audio():
    latent = {"samples": torch.zeros(1, 4, 36, 64), "downscale_ratio_spacial": 8}  # EmptyLatentImage, 512x288
    pair = empty_av_latent(MINIMAX, latent)["samples"]
    video, audio = pair.unbind()
    assert tuple(video.shape) == (1, 24, 1, 18, 32) and tuple(audio.shape) == (1, 32, 2, 2)
    assert torch.count_nonzero(video) == 0 and torch.count_nonzero(audio) == 0
    assert "downscale_ratio_spacial" not in empty_av_latent(MINIMAX, latent)


def test_the_silent_audio_lasts_as_long_as_the_video():
    """A 22-frame video's 7 latent frames: the audio EmptyMiniMaxH3LatentAV gives 22 frames."""
    for length in (5, 22, 124):
        video_shape, audio_shape = av_latent_shapes(64, 32, length)
        assert silent_audio_shape(video_shape) == audio_shape
    latent = {"samples": torch.zeros(av_latent_shapes(64, 32, 22)[0])}
    video, audio = empty_av_latent(MINIMAX, latent)["samples"].unbind()
    assert tuple(audio.shape) == av_latent_shapes(64, 32, 22)[1]


def test_other_latents_are_left_alone():
    filled = {"samples": torch.ones(1, 24, 1, 2, 2)}
    assert empty_av_latent(MINIMAX, filled) is filled
    sd = ModelRef("diffusion_model", "sd1", ("sd.safetensors",), ("0",))
    empty = {"samples": torch.zeros(1, 4, 8, 8)}
    assert empty_av_latent(sd, empty) is empty


def test_one_latent_frame_decodes_to_one_image():
    from diffusers import AutoencoderKLMiniMaxH3

    from nodes.models.minimax_h3_vae import IMAGENET_MEAN, IMAGENET_STD, decode

    torch.manual_seed(0)
    vae = AutoencoderKLMiniMaxH3(
        block_out_channels=(32,) * 6,
        layers_per_block=1,
        decoder_num_layers=1,
        decoder_num_attention_heads=2,
        decoder_attention_head_dim=64,
        decoder_ffn_mult=1,
    ).eval()
    z = torch.randn(1, 24, 1, 2, 3, generator=torch.Generator().manual_seed(1))
    image = decode(vae, z)
    assert image.shape == (1, 32, 48, 3)
    cfg = vae.config
    lm, ls = torch.tensor(cfg.latents_mean).view(1, -1, 1, 1, 1), torch.tensor(cfg.latents_std).view(1, -1, 1, 1, 1)
    with torch.no_grad():
        frames = vae.decoder(vae.post_quant_conv(z * ls + lm))  # the decoder's 4 frames of the one latent frame
    assert frames.shape[2] == 4
    mean, std = torch.tensor(IMAGENET_MEAN).view(1, 3, 1, 1, 1), torch.tensor(IMAGENET_STD).view(1, 3, 1, 1, 1)
    last = (frames[:, :, -1:] * std + mean).clamp(0, 1)[0].movedim(0, -1)
    torch.testing.assert_close(image, last, rtol=0, atol=1e-6)
    assert not torch.allclose(image, (frames[:, :, :1] * std + mean).clamp(0, 1)[0].movedim(0, -1), atol=1e-3)
