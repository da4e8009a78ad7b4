"""KSampler over an LTX-2 audio-video latent (LTXV Concat AV Latent's pair) samples both parts together, as
upstream ComfyUI 0.10.0 does: the video and audio latents packed side by side, noise drawn part after part from
one generator, LTXVConditioning's frame rate timing the positions. tests/models/fixtures/comfyui_ltx2.json.xz's
"ksampler" entry is ComfyUI's comfy.sample.sample on ltx2-tiny (scripts/record_comfyui_ltx2.py): the chain
CheckpointLoaderSimple, LTXAVTextEncoderLoader, CLIPTextEncode, LTXVConditioning, KSampler here gives its
latents; and with LTXVImgToVideoInplace's start image (its noise mask nested by LTXVConcatAVLatent: the kept
frame un-noised and at timestep 0) those of image-to-video; likewise under a noise mask on the audio part
(tests/nodes/fixtures/comfyui_ltx2_audio_mask.json)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
import torch

from nodes.library.ltxv_av import AVLatent
from nodes.models.ltx2_demo import FILES, build_demo_ltx2
from tests.node_calls import active_workspace, call_node
from tests.recorded_tensors import load_json, tensor

FIXTURE = load_json(Path(__file__).resolve().parents[1] / "models" / "fixtures" / "comfyui_ltx2.json.xz")
# Measured: 9.8e-6 (video), 5.5e-6 (audio); the conditioning's float32 rounding (tests/models/test_ltx2.py)
# carried through two steps at cfg 2.
ATOL = 2e-5


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    yield from active_workspace(tmp_path_factory.mktemp("ltx2"), build_demo_ltx2)


def _sample(latent: dict | None, steps: int = FIXTURE["ksampler"]["steps"], image: torch.Tensor | None = None):
    rec = FIXTURE["ksampler"]

    async def run():
        ckpt = Path(FILES["checkpoint"]).name
        model, _, vae = await call_node("CheckpointLoaderSimple", ckpt_name=ckpt)
        nonlocal latent
        if latent is None:  # image-to-video: the start image written into the video latent, then the pair
            (video,) = await call_node(
                "LTXVImgToVideoInplace",
                vae=vae,
                image=image,
                latent={"samples": torch.zeros(1, 128, 2, 2, 2)},
                strength=rec["i2v"]["strength"],
            )
            (latent,) = await call_node(
                "LTXVConcatAVLatent", video_latent=video, audio_latent={"samples": torch.zeros(1, 8, 5, 16)}
            )
        (clip,) = await call_node(
            "LTXAVTextEncoderLoader", text_encoder=Path(FILES["text_encoder"]).name, ckpt_name=ckpt, device="default"
        )
        (pos,) = await call_node("CLIPTextEncode", clip=clip, text=rec["prompt"])
        (neg,) = await call_node("CLIPTextEncode", clip=clip, text="")
        pos, neg = await call_node("LTXVConditioning", positive=pos, negative=neg, frame_rate=rec["frame_rate"])
        (out,) = await call_node(
            "KSampler",
            model=model,
            seed=rec["seed"],
            steps=steps,
            cfg=rec["cfg"],
            sampler_name=rec["sampler"],
            scheduler=rec["scheduler"],
            positive=pos,
            negative=neg,
            latent_image=latent,
            denoise=1.0,
        )
        return out

    return asyncio.run(run())


def test_ksampler_samples_video_and_audio_as_comfyui(workspace):
    torch.set_num_threads(1)
    rec = FIXTURE["ksampler"]
    latent = {"samples": AVLatent([torch.zeros(1, 128, 2, 2, 2), torch.zeros(1, 8, 5, 16)])}
    out = _sample(latent)
    assert isinstance(out["samples"], AVLatent)
    video, audio = out["samples"].unbind()
    want_video, want_audio = tensor(rec["video"]), tensor(rec["audio"])
    assert want_video.abs().mean() > 0.1 and want_audio.abs().mean() > 0.1
    torch.testing.assert_close(video, want_video, atol=ATOL, rtol=0)
    torch.testing.assert_close(audio, want_audio, atol=ATOL, rtol=0)


def test_image_to_video_samples_as_comfyui(workspace):
    torch.set_num_threads(1)
    rec = FIXTURE["ksampler"]["i2v"]
    out = _sample(None, image=tensor(rec["image"]))
    video, audio = out["samples"].unbind()
    assert isinstance(out["noise_mask"], AVLatent)  # the input's own mask, as ComfyUI's output keeps it
    want_video, want_audio = tensor(rec["video"]), tensor(rec["audio"])
    other = tensor(FIXTURE["ksampler"]["video"])
    assert (want_video - other).abs().max() > 0.1  # the start image changed the result
    torch.testing.assert_close(video, want_video, atol=ATOL, rtol=0)
    torch.testing.assert_close(audio, want_audio, atol=ATOL, rtol=0)


AUDIO_MASK = json.loads((Path(__file__).parent / "fixtures" / "comfyui_ltx2_audio_mask.json").read_text())


def test_noise_mask_on_the_audio_part_samples_as_comfyui(workspace):
    """A noise mask on the audio part (scripts/record_comfyui_ltx2_audio_mask.py: its first rows 0, resized to the
    latent): the kept audio frames stay as given, un-noised and at timestep 0, the rest is sampled, as ComfyUI."""
    torch.set_num_threads(1)
    audio = tensor(AUDIO_MASK["audio"])
    latent = {
        "samples": AVLatent([torch.zeros(1, 128, 2, 2, 2), audio]),
        "noise_mask": AVLatent([torch.ones(1, 1, 2, 2, 2), tensor(AUDIO_MASK["audio_mask"])]),
    }
    video, audio_out = _sample(latent)["samples"].unbind()
    # measured 6.0e-6 (video), 8.5e-6 (audio)
    torch.testing.assert_close(video, tensor(AUDIO_MASK["video_out"]), atol=1e-5, rtol=0)
    torch.testing.assert_close(audio_out, tensor(AUDIO_MASK["audio_out"]), atol=1e-5, rtol=0)
    # the kept frames (mask 0 after resizing) are the given audio, up to the float rounding of the mask's blend
    torch.testing.assert_close(audio_out[:, :, :2], audio[:, :, :2], atol=1e-6, rtol=0)
    assert (audio_out[:, :, 2:] - audio[:, :, 2:]).abs().max() > 0.1  # the others were sampled


def test_img_to_video_needs_the_ltx2_vae(workspace):
    from nodes.loaders import make_ref

    other = make_ref("vae", "sd1", [workspace.models_dir / FILES["checkpoint"]])
    with pytest.raises(ValueError, match="vae: the LTX-2 video VAE"):
        asyncio.run(
            call_node(
                "LTXVImgToVideoInplace",
                vae=other,
                image=torch.rand(1, 64, 64, 3),
                latent={"samples": torch.zeros(1, 128, 2, 2, 2)},
                strength=1.0,
            )
        )
