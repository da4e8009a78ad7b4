"""LTXVDualCFGGuider (the LTX-2.5 templates' guider, newer than every ComfyUI that runs here; read from the newest
ComfyUI source): on an LTX-2 audio-video latent, CFG with video_cfg on the video part and audio_cfg on the audio
part, both sides always evaluated. One euler step to sigma 0 lands on the guided prediction, so its video part is
CFGGuider's at video_cfg and its audio part CFGGuider's at audio_cfg; with equal scales it is CFGGuider's."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import torch

from nodes.models.ltx2_demo import FILES
from tests.node_calls import call_node

SEED = 9


@pytest.fixture
def parts(demo_workspace):
    async def load():
        ckpt = Path(FILES["checkpoint"]).name
        model, _, _ = await call_node("CheckpointLoaderSimple", ckpt_name=ckpt)
        (clip,) = await call_node(
            "LTXAVTextEncoderLoader", text_encoder=Path(FILES["text_encoder"]).name, ckpt_name=ckpt, device="default"
        )
        (pos,) = await call_node("CLIPTextEncode", clip=clip, text="a red fox running through fresh snow")
        (neg,) = await call_node("CLIPTextEncode", clip=clip, text="")
        return model, pos, neg

    return asyncio.run(load())


def _sample(guider) -> list[torch.Tensor]:
    async def run():
        (noise,) = await call_node("RandomNoise", noise_seed=SEED)
        (sampler,) = await call_node("KSamplerSelect", sampler_name="euler")
        (sigmas,) = await call_node("ManualSigmas", sigmas="0.8, 0.0")
        (latent,) = await call_node(
            "LTXVConcatAVLatent",
            video_latent={"samples": torch.zeros(1, 128, 2, 2, 3)},
            audio_latent={"samples": torch.zeros(1, 8, 5, 16)},
        )
        out, _ = await call_node(
            "SamplerCustomAdvanced", noise=noise, guider=guider, sampler=sampler, sigmas=sigmas, latent_image=latent
        )
        return list(out["samples"].unbind())

    torch.set_num_threads(1)
    return asyncio.run(run())


def _guider(name: str, model, pos, neg, **scales):
    return asyncio.run(call_node(name, model=model, positive=pos, negative=neg, **scales))[0]


def test_each_modality_gets_its_own_scale(parts):
    model, pos, neg = parts
    video, audio = _sample(_guider("LTXVDualCFGGuider", model, pos, neg, video_cfg=3.0, audio_cfg=7.0))
    video3, audio3 = _sample(_guider("CFGGuider", model, pos, neg, cfg=3.0))
    video7, audio7 = _sample(_guider("CFGGuider", model, pos, neg, cfg=7.0))
    # CFG in noise space (the guider's) and in denoised space (CFGGuider's) round differently in float32
    torch.testing.assert_close(video, video3, atol=1e-5, rtol=0)
    torch.testing.assert_close(audio, audio7, atol=1e-5, rtol=0)
    assert (audio - audio3).abs().max() > 1e-3 and (video - video7).abs().max() > 1e-3  # the scales differ


def test_a_scale_of_one_still_runs_the_negative_side(parts):
    model, pos, neg = parts
    video, audio = _sample(_guider("LTXVDualCFGGuider", model, pos, neg, video_cfg=1.0, audio_cfg=4.0))
    video1, _ = _sample(_guider("CFGGuider", model, pos, neg, cfg=1.0))
    _, audio4 = _sample(_guider("CFGGuider", model, pos, neg, cfg=4.0))
    torch.testing.assert_close(video, video1, atol=1e-5, rtol=0)
    torch.testing.assert_close(audio, audio4, atol=1e-5, rtol=0)


def test_equal_scales_are_cfg_guider(parts):
    model, pos, neg = parts
    dual = _sample(_guider("LTXVDualCFGGuider", model, pos, neg, video_cfg=2.5, audio_cfg=2.5))
    plain = _sample(_guider("CFGGuider", model, pos, neg, cfg=2.5))
    assert all(torch.equal(a, b) for a, b in zip(dual, plain, strict=True))


def test_bad_inputs_are_named(parts):
    model, pos, _ = parts
    with pytest.raises(ValueError, match="negative"):
        _guider("LTXVDualCFGGuider", model, pos, "nope", video_cfg=3.0, audio_cfg=7.0)
