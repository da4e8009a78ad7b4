"""LTXVReferenceAudio (nodes/library/ltxv_reference_audio.py) on ltx2-tiny: the reference clip encoded as
LTXVAudioVAEEncode encodes it and read as the transformer's audio tokens (ComfyUI's AudioPatchifier order,
"b c t f -> b t (c f)"), set on both conditionings; identity guidance as the newest ComfyUI's post-CFG function
computes it: cfg_result + (cond - no_reference) * scale, off outside [start_percent, end_percent] and at scale 0.
The transformer's numbers with the tokens are checked against ComfyUI's code in tests/models/test_ltxv_reference_audio.py.

With one Euler step to sigma 0 at cfg 1 the sampler returns the step's guided prediction, so three runs from the
same seed give the formula's three terms."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import torch

from nodes.library.ltxv_audio import LTXVAudioVAEEncode
from nodes.library.ltxv_av import AVLatent
from nodes.models.ltx2_demo import FILES, build_demo_ltx2
from tests.node_calls import active_workspace, call_node

CKPT = Path(FILES["checkpoint"]).name
VOICE = {"waveform": 0.3 * torch.randn(1, 1, 16000, generator=torch.Generator().manual_seed(3)), "sample_rate": 22050}


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    yield from active_workspace(tmp_path_factory.mktemp("ltxv_reference_audio"), build_demo_ltx2)


async def _inputs() -> tuple:
    model, _, _ = await call_node("CheckpointLoaderSimple", ckpt_name=CKPT)
    (audio_vae,) = await call_node("LTXVAudioVAELoader", ckpt_name=CKPT)
    (clip,) = await call_node(
        "LTXAVTextEncoderLoader", text_encoder=Path(FILES["text_encoder"]).name, ckpt_name=CKPT, device="default"
    )
    (pos,) = await call_node("CLIPTextEncode", clip=clip, text="a man speaks")
    (neg,) = await call_node("CLIPTextEncode", clip=clip, text="")
    pos, neg = await call_node("LTXVConditioning", positive=pos, negative=neg, frame_rate=25.0)
    return model, audio_vae, pos, neg


async def _step(model, pos, neg) -> AVLatent:
    latent = {"samples": AVLatent([torch.zeros(1, 128, 2, 2, 2), torch.zeros(1, 8, 5, 16)])}
    (out,) = await call_node(
        "KSampler",
        model=model,
        seed=7,
        steps=1,
        cfg=1.0,
        sampler_name="euler",
        scheduler="simple",
        positive=pos,
        negative=neg,
        latent_image=latent,
        denoise=1.0,
    )
    return out["samples"]


def _cat(latent: AVLatent) -> torch.Tensor:
    return torch.cat([t.flatten() for t in latent.unbind()])


def test_tokens_are_the_encoded_clip_on_both_conditionings(workspace):
    torch.set_num_threads(1)

    async def run():
        model, audio_vae, pos, neg = await _inputs()
        out = await call_node(
            "LTXVReferenceAudio", model=model, positive=pos, negative=neg, reference_audio=VOICE, audio_vae=audio_vae
        )
        (latent,) = await LTXVAudioVAEEncode().execute(VOICE, audio_vae)
        return out, latent["samples"]

    (_, pos, neg), latent = asyncio.run(run())
    b, c, t, f = latent.shape
    want = torch.stack([latent[:, :, i].reshape(b, c * f) for i in range(t)], dim=1)  # "b c t f -> b t (c f)"
    for side in (pos, neg):
        assert all(torch.equal(opts["ref_audio"]["tokens"], want) for _, opts in side)


@pytest.mark.parametrize("scale, start", [(3.0, 0.0), (0.0, 0.0), (3.0, 0.5)], ids=["on", "scale_0", "out_of_range"])
def test_identity_guidance_is_cond_plus_scaled_difference_to_no_reference(workspace, scale, start):
    torch.set_num_threads(1)

    async def run():
        model, audio_vae, pos, neg = await _inputs()
        inputs = {"positive": pos, "negative": neg, "reference_audio": VOICE, "audio_vae": audio_vae}
        guided, ref_pos, ref_neg = await call_node(
            "LTXVReferenceAudio",
            model=model,
            identity_guidance_scale=scale,
            start_percent=start,
            end_percent=1.0,
            **inputs,
        )
        return (
            await _step(guided, ref_pos, ref_neg),
            await _step(model, ref_pos, ref_neg),  # the prediction with the reference, unguided
            await _step(model, pos, neg),  # without it
        )

    guided, with_ref, without = (_cat(t) for t in asyncio.run(run()))
    assert (with_ref - without).abs().max() > 1e-3  # the reference changes the prediction
    if scale == 0 or start > 0:  # off: sigma 1 lies above percent_to_sigma(0.5)
        torch.testing.assert_close(guided, with_ref, atol=0, rtol=0)
    else:
        torch.testing.assert_close(guided, with_ref + (with_ref - without) * scale, atol=1e-5, rtol=0)


def test_interface_is_todays_comfyuis():
    """Inputs, their order, defaults and ranges, and outputs as ComfyUI's newest nodes_lt.py declares them
    (LTXVReferenceAudio's schema at b2f605a6; no ComfyUI that runs here has the node)."""
    from nodes.library.ltxv_reference_audio import LTXVReferenceAudio

    required = LTXVReferenceAudio.INPUT_TYPES()["required"]
    assert list(required) == [
        "model",
        "positive",
        "negative",
        "reference_audio",
        "audio_vae",
        "identity_guidance_scale",
        "start_percent",
        "end_percent",
    ]
    assert [required[k][0] for k in required] == ["MODEL", "CONDITIONING", "CONDITIONING", "AUDIO", "VAE"] + [
        "FLOAT"
    ] * 3
    ranges = {k: {f: required[k][1][f] for f in ("default", "min", "max", "step")} for k in list(required)[5:]}
    assert ranges == {
        "identity_guidance_scale": {"default": 3.0, "min": 0.0, "max": 100.0, "step": 0.01},
        "start_percent": {"default": 0.0, "min": 0.0, "max": 1.0, "step": 0.001},
        "end_percent": {"default": 1.0, "min": 0.0, "max": 1.0, "step": 0.001},
    }
    assert LTXVReferenceAudio.RETURN_TYPES == ("MODEL", "CONDITIONING", "CONDITIONING")
    assert LTXVReferenceAudio.CATEGORY == "model/conditioning/ltxv"
