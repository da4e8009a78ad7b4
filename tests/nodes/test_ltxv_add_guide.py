"""LTXVAddGuide on ltx2-tiny equals upstream ComfyUI 0.10.0 (tests/nodes/fixtures/comfyui_ltxv_add_guide.json,
recorded by scripts/record_comfyui_ltxv_add_guide.py): a last-frame guide (frame_idx -1, strength 1) and a
first-frame guide (frame_idx 0, strength 0.7) stacked on it give ComfyUI's latent (the guides' VAE latents
appended), noise mask and keyframe_idxs (the guide tokens' pixel positions, the first-frame one causally fixed);
KSampler over the guided audio-video pair, whose transformer reads keyframe_idxs as the guide tokens' positions,
gives ComfyUI's comfy.sample.sample result; LTXVCropGuides then removes the two guide frames."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
import torch

from nodes.library.ltxv_av import AVLatent
from nodes.models.ltx2_demo import FILES, build_demo_ltx2
from tests.float_tolerance import ulps_of_largest
from tests.node_calls import active_workspace, call_node
from tests.recorded_tensors import tensor

FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "comfyui_ltxv_add_guide.json").read_text())


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    yield from active_workspace(tmp_path_factory.mktemp("ltx2guide"), build_demo_ltx2)


@pytest.fixture(scope="module")
def guided(workspace):
    """Our chain up to KSampler: each guide's outputs, the sampled pair and the cropped latent."""
    torch.set_num_threads(1)

    async def run():
        ckpt = Path(FILES["checkpoint"]).name
        model, _, vae = await call_node("CheckpointLoaderSimple", ckpt_name=ckpt)
        (clip,) = await call_node(
            "LTXAVTextEncoderLoader", text_encoder=Path(FILES["text_encoder"]).name, ckpt_name=ckpt, device="default"
        )
        (pos,) = await call_node("CLIPTextEncode", clip=clip, text=FIXTURE["prompt"])
        (neg,) = await call_node("CLIPTextEncode", clip=clip, text="")
        pos, neg = await call_node("LTXVConditioning", positive=pos, negative=neg, frame_rate=FIXTURE["frame_rate"])
        latent = {"samples": torch.zeros(FIXTURE["latent"])}
        steps = []
        for guide in FIXTURE["guides"]:
            pos, neg, latent = await call_node(
                "LTXVAddGuide",
                positive=pos,
                negative=neg,
                vae=vae,
                latent=latent,
                image=tensor(guide["image"]),
                frame_idx=guide["frame_idx"],
                strength=guide["strength"],
            )
            steps.append((pos, neg, latent))
        (av,) = await call_node(
            "LTXVConcatAVLatent", video_latent=latent, audio_latent={"samples": tensor(FIXTURE["audio"])}
        )
        (out,) = await call_node(
            "KSampler",
            model=model,
            seed=FIXTURE["seed"],
            steps=FIXTURE["steps"],
            cfg=FIXTURE["cfg"],
            sampler_name=FIXTURE["sampler"],
            scheduler=FIXTURE["scheduler"],
            positive=pos,
            negative=neg,
            latent_image=av,
            denoise=1.0,
        )
        video, _ = await call_node("LTXVSeparateAVLatent", av_latent=out)
        cropped = await call_node("LTXVCropGuides", positive=pos, negative=neg, latent=video)
        return steps, out, cropped

    return asyncio.run(run())


def test_guides_append_latents_masks_and_positions_as_comfyui(guided) -> None:
    steps, _, _ = guided
    for (pos, neg, latent), want in zip(steps, FIXTURE["guides"], strict=True):
        # the VAE encodes equal ComfyUI's within float rounding (tests/models/test_ltx2.py): 1e-5, or 64 float32 ulps
        # of the largest value where that is more (a VAE encode recorded on another CPU; on an AVX-512 one a value of
        # 4.3 came out 1.5e-5, 32 ulps, apart)
        expected = tensor(want["samples"])
        bound = max(1e-5, ulps_of_largest(expected, 64))
        torch.testing.assert_close(latent["samples"], expected, atol=bound, rtol=0)
        assert torch.equal(latent["noise_mask"], tensor(want["noise_mask"]))
        for conditioning in (pos, neg):
            assert conditioning[0][1]["keyframe_idxs"].tolist() == want["keyframe_idxs"]


def test_ksampler_over_the_guided_pair_samples_as_comfyui(guided) -> None:
    _, out, _ = guided
    assert isinstance(out["samples"], AVLatent)
    video, audio = out["samples"].unbind()
    want_video, want_audio = tensor(FIXTURE["video_out"]), tensor(FIXTURE["audio_out"])
    assert want_video.abs().mean() > 0.1 and want_audio.abs().mean() > 0.1
    torch.testing.assert_close(video, want_video, atol=2e-5, rtol=0)
    torch.testing.assert_close(audio, want_audio, atol=2e-5, rtol=0)


def test_crop_guides_removes_the_guide_frames(guided) -> None:
    _, out, (pos, neg, latent) = guided
    video = out["samples"].unbind()[0]
    assert latent["samples"].shape[2] == FIXTURE["latent"][2]
    assert torch.equal(latent["samples"], video[:, :, : FIXTURE["latent"][2]])
    assert pos[0][1]["keyframe_idxs"] is None and neg[0][1]["keyframe_idxs"] is None


def test_a_guide_past_the_latents_end_is_refused_by_name(workspace) -> None:
    async def run():
        _, _, vae = await call_node("CheckpointLoaderSimple", ckpt_name=Path(FILES["checkpoint"]).name)
        cond = [[torch.zeros(1, 1, 32), {}]]
        return await call_node(
            "LTXVAddGuide",
            positive=cond,
            negative=cond,
            vae=vae,
            latent={"samples": torch.zeros(1, 128, 2, 2, 2)},
            image=torch.rand(1, 64, 64, 3),
            frame_idx=40,
            strength=1.0,
        )

    with pytest.raises(ValueError, match="frame_idx: the guide's 1 latent frames from latent frame 5 exceed"):
        asyncio.run(run())
