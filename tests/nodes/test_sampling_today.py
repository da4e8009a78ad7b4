"""Sampling nodes of today's ComfyUI that need no new model family: LTX-Video's scheduler, ModelSamplingLTXV and
LTXVConditioning equal upstream ComfyUI 0.10.0's outputs (tests/nodes/fixtures/comfyui_sampling_today.json,
recorded by scripts/record_comfyui_sampling_today.py); CFG Override and ModelNoiseScale, newer than 0.10.0, behave
as the newest ComfyUI source has them (an override's cfg inside its sigma range, the nearest one winning; the noise
of a flow model scaled) on the demo SD1 model and on flow schedules."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
import torch

from cluster.refs import ModelRef
from nodes.library.ltxv_sampling import LTXVConditioning, LTXVScheduler, ModelSamplingLTXV
from nodes.modelfns.model_options import sampling_config
from nodes.sampling.model_sampling import model_sampling_from_config
from tests.node_calls import call_node

REPO = Path(__file__).resolve().parents[2]
FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "comfyui_sampling_today.json").read_text())
SD1 = ModelRef("diffusion_model", "sd1", ("/m/sd1.safetensors",), ("d" * 64,))


def _recorder():
    spec = importlib.util.spec_from_file_location(
        "record_sampling", REPO / "scripts" / "record_comfyui_sampling_today.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


RECORDER = _recorder()


def _latent(shape):
    return None if shape is None else {"samples": torch.zeros(shape)}


@pytest.mark.parametrize("index", range(len(RECORDER.SCHEDULER_CASES)))
def test_ltxv_scheduler_equals_comfyui_0_10(index):
    steps, hi, lo, stretch, terminal, shape = RECORDER.SCHEDULER_CASES[index]
    (sigmas,) = LTXVScheduler().execute(steps, hi, lo, stretch, terminal, _latent(shape))
    expected = torch.tensor(FIXTURE["scheduler"][index], dtype=sigmas.dtype)
    torch.testing.assert_close(sigmas, expected, atol=1e-6, rtol=1e-6, equal_nan=True)


@pytest.mark.parametrize("index", range(len(RECORDER.SAMPLING_CASES)))
def test_model_sampling_ltxv_equals_comfyui_0_10(index):
    hi, lo, shape = RECORDER.SAMPLING_CASES[index]
    (model,) = ModelSamplingLTXV().execute(SD1, hi, lo, _latent(shape))
    ms = model_sampling_from_config(sampling_config(model))
    want = FIXTURE["sampling"][index]
    assert ms.is_const
    assert [float(ms.percent_to_sigma(p)) for p in RECORDER.PERCENTS] == pytest.approx(
        want["percent_to_sigma"], abs=1e-6
    )
    assert float(ms.sigma_min) == pytest.approx(want["sigma_min"], rel=1e-5)
    assert float(ms.sigma_max) == pytest.approx(want["sigma_max"], rel=1e-6)


def test_ltxv_conditioning_sets_the_frame_rate_on_both_sides():
    positive, negative = [[torch.ones(1, 2, 3), {"a": 1}]], [[torch.zeros(1, 2, 3), {}]]
    pos, neg = LTXVConditioning().execute(positive, negative, 24.5)
    assert pos[0][1] == FIXTURE["conditioning"]["positive"] and neg[0][1] == FIXTURE["conditioning"]["negative"]
    assert positive[0][1] == {"a": 1}, "the input conditioning is not changed"


def test_an_audio_video_latent_counts_its_video_tokens():
    """The LTX-2 templates schedule from LTXV Concat AV Latent's pair: ComfyUI's nested latent reports its first
    (video) part's shape, so the shift follows the video's tokens."""
    from nodes.library.ltxv_av import LTXVConcatAVLatent

    video = {"samples": torch.zeros(1, 128, 4, 16, 16)}
    (pair,) = LTXVConcatAVLatent().execute(video, {"samples": torch.zeros(1, 8, 26, 16)})
    for hi, lo in ((2.05, 0.95), (1.5, 0.5)):
        (from_pair,) = LTXVScheduler().execute(8, hi, lo, True, 0.1, pair)
        (from_video,) = LTXVScheduler().execute(8, hi, lo, True, 0.1, video)
        assert torch.equal(from_pair, from_video)
    (model,) = ModelSamplingLTXV().execute(SD1, 2.05, 0.95, pair)
    assert sampling_config(model) == sampling_config(ModelSamplingLTXV().execute(SD1, 2.05, 0.95, video)[0])


def test_bad_latent_is_named():
    with pytest.raises(TypeError, match="latent"):
        LTXVScheduler().execute(4, 2.05, 0.95, True, 0.1, {"samples": "x"})


# --- CFG Override and ModelNoiseScale (newer than 0.10.0: their behaviour as the newest ComfyUI source gives it) ---

SD3 = ModelRef("diffusion_model", "sd3", ("/m/sd3.safetensors",), ("e" * 64,))


@pytest.fixture(scope="module")
def sd1_parts(demo_workspace):
    """The demo SD1 model, two prompts, a 64 px latent, a 4-step normal schedule and euler."""

    async def build():
        model, clip, _ = await call_node("CheckpointLoaderSimple", ckpt_name="sd1-tiny.safetensors")
        (pos,) = await call_node("CLIPTextEncode", clip=clip, text="a glass bottle")
        (neg,) = await call_node("CLIPTextEncode", clip=clip, text="text, watermark")
        (latent,) = await call_node("EmptyLatentImage", width=64, height=64, batch_size=1)
        (sigmas,) = await call_node("BasicScheduler", model=model, scheduler="normal", steps=4, denoise=1.0)
        (sampler,) = await call_node("KSamplerSelect", sampler_name="euler")
        return {
            "model": model,
            "positive": pos,
            "negative": neg,
            "latent_image": latent,
            "sigmas": sigmas,
            "sampler": sampler,
        }

    import asyncio

    return asyncio.run(build())


def _sample(parts: dict, cfg: float, model=None, sigmas=None, latent=None, add_noise: bool = True) -> torch.Tensor:
    import asyncio

    inputs = {**parts, "model": model or parts["model"], "cfg": cfg, "add_noise": add_noise, "noise_seed": 5}
    if sigmas is not None:
        inputs["sigmas"] = sigmas
    if latent is not None:
        inputs["latent_image"] = latent
    return asyncio.run(call_node("SamplerCustom", **inputs))[0]["samples"]


def _override(model, cfg: float, start: float = 0.0, end: float = 1.0):
    from nodes.library.sampling_today import CFGOverride

    return CFGOverride().execute(model, cfg, start, end)[0]


def test_cfg_override_over_the_whole_schedule_samples_with_its_cfg(sd1_parts, fixed_threads):
    overridden = _sample(sd1_parts, 7.0, model=_override(sd1_parts["model"], 3.0))
    assert torch.equal(overridden, _sample(sd1_parts, 3.0))
    assert not torch.equal(overridden, _sample(sd1_parts, 7.0))


def test_the_cfg_override_nearest_the_sampler_wins(sd1_parts, fixed_threads):
    both = _override(_override(sd1_parts["model"], 3.0), 5.0)
    assert torch.equal(_sample(sd1_parts, 7.0, model=both), _sample(sd1_parts, 5.0))


def test_cfg_override_on_the_first_steps_equals_two_samplers_split_there(sd1_parts, fixed_threads):
    sigmas = sd1_parts["sigmas"]
    ms = model_sampling_from_config(sampling_config(sd1_parts["model"]))
    # an end percent whose sigma lies between the second and third sigma: steps 0 and 1 take the override
    end = next(p / 1000 for p in range(1, 1000) if sigmas[2] < ms.percent_to_sigma(p / 1000) < sigmas[1])
    overridden = _sample(sd1_parts, 7.0, model=_override(sd1_parts["model"], 2.0, 0.0, end))
    first = _sample(sd1_parts, 2.0, sigmas=sigmas[:3])
    split = _sample(sd1_parts, 7.0, sigmas=sigmas[2:], latent={"samples": first}, add_noise=False)
    torch.testing.assert_close(overridden, split, atol=1e-5, rtol=1e-5)
    assert not torch.allclose(overridden, _sample(sd1_parts, 7.0), atol=1e-3)


def test_cfg_override_range_holds_its_upper_sigma_not_its_lower():
    from nodes.modelfns.denoise import cfg_at

    overrides = ((1.0, 5.0, 2.0),)
    assert [cfg_at(overrides, s, 8.0) for s in (5.0, 3.0, 1.0, 0.5, 6.0)] == [2.0, 2.0, 8.0, 8.0, 8.0]


def test_dual_cfg_guider_keeps_its_own_scales_under_an_override(sd1_parts, fixed_threads):
    import asyncio

    async def dual(model):
        (guider,) = await call_node(
            "DualCFGGuider",
            model=model,
            cond1=sd1_parts["positive"],
            cond2=sd1_parts["negative"],
            negative=sd1_parts["negative"],
            cfg_conds=6.0,
            cfg_cond2_negative=2.0,
            style="regular",
        )
        (noise,) = await call_node("RandomNoise", noise_seed=5)
        out = await call_node(
            "SamplerCustomAdvanced",
            noise=noise,
            guider=guider,
            sampler=sd1_parts["sampler"],
            sigmas=sd1_parts["sigmas"],
            latent_image=sd1_parts["latent_image"],
        )
        return out[0]["samples"]

    plain = asyncio.run(dual(sd1_parts["model"]))
    assert torch.equal(asyncio.run(dual(_override(sd1_parts["model"], 1.0))), plain)


def test_model_noise_scale_scales_the_noise_of_a_flow_model():
    from nodes.library.sampling_today import ModelNoiseScale

    (model,) = ModelNoiseScale().patch(SD3, 2.5)
    ms = model_sampling_from_config(sampling_config(model))
    gen = torch.Generator().manual_seed(1)
    noise, latent, sigma = (
        torch.randn(1, 4, 3, 3, generator=gen),
        torch.randn(1, 4, 3, 3, generator=gen),
        torch.tensor(0.7),
    )
    assert torch.equal(ms.noise_scaling(sigma, noise, latent), sigma * (2.5 * noise) + (1.0 - sigma) * latent)
    plain = model_sampling_from_config(sampling_config(SD3))
    assert torch.equal(plain.noise_scaling(sigma, noise, latent), sigma * noise + (1.0 - sigma) * latent)
    assert ms.shift == plain.shift and ms.multiplier == plain.multiplier


def test_model_noise_scale_keeps_the_shift_and_model_sampling_sd3_keeps_the_scale():
    from nodes.library.model_advanced import ModelSamplingSD3
    from nodes.library.sampling_today import ModelNoiseScale

    (scaled,) = ModelNoiseScale().patch(ModelSamplingSD3().patch(SD3, 6.0)[0], 7.5)
    assert sampling_config(scaled)["shift"] == 6.0 and sampling_config(scaled)["noise_scale"] == 7.5
    (shifted,) = ModelSamplingSD3().patch(scaled, 2.0)
    assert sampling_config(shifted)["shift"] == 2.0 and sampling_config(shifted)["noise_scale"] == 7.5


def test_model_noise_scale_refuses_a_model_without_a_flow_schedule():
    from nodes.library.sampling_today import ModelNoiseScale

    with pytest.raises(ValueError, match="ModelNoiseScale.*discrete-flow"):
        ModelNoiseScale().patch(SD1, 2.0)


def test_conditioning_multiply_scales_the_embedding_and_the_pooled_output_only():
    from nodes.library.conditioning_today import ConditioningMultiply

    gen = torch.Generator().manual_seed(2)
    emb, pooled, other = torch.randn(1, 3, 4, generator=gen), torch.randn(1, 4, generator=gen), torch.randn(2)
    conditioning = [[emb, {"pooled_output": pooled, "extra": other, "strength": 0.5}], [emb * 2, {}]]
    (out,) = ConditioningMultiply().multiply(conditioning, -1.5)
    assert torch.equal(out[0][0], emb * -1.5) and torch.equal(out[0][1]["pooled_output"], pooled * -1.5)
    assert out[0][1]["extra"] is other and out[0][1]["strength"] == 0.5
    assert torch.equal(out[1][0], emb * 2 * -1.5) and out[1][1] == {}
    assert conditioning[0][1]["pooled_output"] is pooled, "the input conditioning is not changed"


# --- ScaleROPE (ComfyUI 0.10.0's comfy_extras.nodes_rope) ---


def _scale_rope(model, sx=1.0, tx=0.0, sy=1.0, ty=0.0, st=1.0, tt=0.0):
    from nodes.library.sampling_today import ScaleROPE

    return ScaleROPE().execute(model, sx, tx, sy, ty, st, tt)[0]


@pytest.mark.parametrize("index", range(len(RECORDER.ROPE_CASES)))
def test_scale_rope_position_ids_equal_comfyui_0_10(index):
    from nodes.models.flux import rope_image_ids

    h, w, patch, axes, sx, tx, sy, ty, st, tt = RECORDER.ROPE_CASES[index]
    rope = {"scale_x": sx, "shift_x": tx, "scale_y": sy, "shift_y": ty, "scale_t": st, "shift_t": tt}
    ids = rope_image_ids((h + patch // 2) // patch, (w + patch // 2) // patch, rope, axes, torch.device("cpu"))
    assert torch.equal(ids, torch.tensor(FIXTURE["rope_ids"][index], dtype=torch.float32))


@pytest.fixture(scope="module")
def flux_parts(demo_workspace):
    async def build():
        model, clip, _ = await call_node("CheckpointLoaderSimple", ckpt_name="flux-tiny.safetensors")
        (pos,) = await call_node("CLIPTextEncode", clip=clip, text="a glass bottle")
        (latent,) = await call_node("EmptySD3LatentImage", width=64, height=48, batch_size=1)
        (sigmas,) = await call_node("BasicScheduler", model=model, scheduler="simple", steps=2, denoise=1.0)
        (sampler,) = await call_node("KSamplerSelect", sampler_name="euler")
        return {
            "model": model,
            "positive": pos,
            "negative": pos,
            "latent_image": latent,
            "sigmas": sigmas,
            "sampler": sampler,
        }

    import asyncio

    return asyncio.run(build())


def test_scale_rope_moves_the_flux_networks_positions_and_its_identity_changes_nothing(flux_parts, fixed_threads):
    plain = _sample(flux_parts, 1.0)
    assert torch.equal(_sample(flux_parts, 1.0, model=_scale_rope(flux_parts["model"])), plain)
    scaled = _sample(flux_parts, 1.0, model=_scale_rope(flux_parts["model"], sx=2.0, ty=3.0))
    assert not torch.allclose(scaled, plain, atol=1e-4)
    # the latest ScaleROPE replaces the values of an earlier one
    twice = _scale_rope(_scale_rope(flux_parts["model"], sx=2.0, ty=3.0))
    assert torch.equal(_sample(flux_parts, 1.0, model=twice), plain)


def test_scale_rope_leaves_a_model_without_position_ids_alone(sd1_parts, fixed_threads):
    assert torch.equal(_sample(sd1_parts, 7.0, model=_scale_rope(sd1_parts["model"], sx=3.0)), _sample(sd1_parts, 7.0))


@pytest.mark.parametrize("arch", ["zimage", "lumina2", "wan21"])
def test_scale_rope_refuses_families_whose_networks_do_not_read_it_yet(arch):
    model = ModelRef("diffusion_model", arch, ("/m/x.safetensors",), ("f" * 64,))
    with pytest.raises(ValueError, match=f"ScaleROPE.*{arch}"):
        _scale_rope(model, sx=2.0)


# --- Dual Model CFG Guider (newer than 0.10.0: as the newest ComfyUI source has it) ---


def _guided(parts: dict, guider) -> torch.Tensor:
    import asyncio

    async def run():
        (noise,) = await call_node("RandomNoise", noise_seed=5)
        out = await call_node(
            "SamplerCustomAdvanced",
            noise=noise,
            guider=guider,
            sampler=parts["sampler"],
            sigmas=parts["sigmas"],
            latent_image=parts["latent_image"],
        )
        return out[0]["samples"]

    return asyncio.run(run())


def _dual_model(parts: dict, cfg: float, model_negative=None):
    from nodes.library.sampling_today import DualModelGuider

    return DualModelGuider().get_guider(parts["model"], parts["positive"], cfg, model_negative, parts["negative"])[0]


@pytest.fixture(scope="module")
def sd1_lora_model(sd1_parts):
    import asyncio

    return asyncio.run(
        call_node(
            "LoraLoaderModelOnly", model=sd1_parts["model"], lora_name="sd1-tiny-lora.safetensors", strength_model=1.0
        )
    )[0]


def test_dual_model_guider_runs_the_negative_side_on_the_negative_model(sd1_parts, sd1_lora_model, fixed_threads):
    import asyncio

    # cfg 0 keeps the negative prediction alone: sampling the negative prompt on the negative model
    (negative_only,) = asyncio.run(call_node("BasicGuider", model=sd1_lora_model, conditioning=sd1_parts["negative"]))
    torch.testing.assert_close(
        _guided(sd1_parts, _dual_model(sd1_parts, 0.0, sd1_lora_model)),
        _guided(sd1_parts, negative_only),
        atol=1e-5,
        rtol=1e-5,
    )
    # cfg 1: the positive prediction alone, on the model; the negative model is never run
    (positive_only,) = asyncio.run(
        call_node("BasicGuider", model=sd1_parts["model"], conditioning=sd1_parts["positive"])
    )
    assert torch.equal(
        _guided(sd1_parts, _dual_model(sd1_parts, 1.0, sd1_lora_model)), _guided(sd1_parts, positive_only)
    )
    mixed = _guided(sd1_parts, _dual_model(sd1_parts, 4.0, sd1_lora_model))
    assert not torch.allclose(mixed, _guided(sd1_parts, _dual_model(sd1_parts, 4.0)), atol=1e-4)


def test_dual_model_guider_on_one_model_is_cfg(sd1_parts, fixed_threads):
    import asyncio

    (cfg_guider,) = asyncio.run(
        call_node(
            "CFGGuider",
            model=sd1_parts["model"],
            positive=sd1_parts["positive"],
            negative=sd1_parts["negative"],
            cfg=4.0,
        )
    )
    expected = _guided(sd1_parts, cfg_guider)
    assert torch.equal(_guided(sd1_parts, _dual_model(sd1_parts, 4.0)), expected)  # no model_negative: CFGGuider
    # the same weights as model_negative: a pass of their own, the same guidance
    torch.testing.assert_close(
        _guided(sd1_parts, _dual_model(sd1_parts, 4.0, sd1_parts["model"])), expected, atol=1e-5, rtol=1e-5
    )


def test_dual_model_guider_without_a_negative_says_so(sd1_parts):
    from nodes.library.sampling_today import DualModelGuider

    with pytest.raises(ValueError, match="DualModelGuider: negative"):
        DualModelGuider().get_guider(sd1_parts["model"], sd1_parts["positive"], 4.0, sd1_parts["model"], None)


# --- Normalized Attention Guidance (newer than 0.10.0: comfy_extras.nodes_nag as the newest source has it) ---


def _nag(model, scale=5.0, alpha=0.5, tau=1.5):
    from nodes.library.sampling_today import NAGuidance

    return NAGuidance().execute(model, scale, alpha, tau)[0]


def test_nag_patch_moves_only_the_positive_pass_and_caps_its_norm():
    from nodes.library.sampling_today import NormalizedAttentionGuidance

    z_neg, z_pos = torch.tensor([[[1.0, -2.0, 0.5]]]), torch.tensor([[[2.0, 1.0, -1.0]]])
    out = NormalizedAttentionGuidance(3.0, 0.5, 1.5)(torch.cat([z_neg, z_pos]), {"cond_or_uncond": [1, 0]})
    guided = torch.tensor([[[4.0, 7.0, -4.0]]])  # 3 * pos - 2 * neg; L1 15 against pos's 4
    capped = guided * (1.5 / (15.0 / 4.0))  # ratio 3.75 capped at tau 1.5
    torch.testing.assert_close(out[1:], capped * 0.5 + z_pos * 0.5)
    assert torch.equal(out[:1], z_neg)
    only_positive = torch.cat([z_pos, z_pos])
    assert torch.equal(
        NormalizedAttentionGuidance(3.0, 0.5, 1.5)(only_positive, {"cond_or_uncond": [0, 0]}), only_positive
    )


def test_nag_guides_the_unet_and_runs_the_negative_even_at_cfg_1(sd1_parts, fixed_threads):
    plain = _sample(sd1_parts, 7.0)
    assert torch.equal(_sample(sd1_parts, 7.0, model=_nag(sd1_parts["model"], alpha=0.0)), plain)  # no effect
    assert not torch.allclose(_sample(sd1_parts, 7.0, model=_nag(sd1_parts["model"])), plain, atol=1e-4)
    assert not torch.allclose(
        _sample(sd1_parts, 1.0, model=_nag(sd1_parts["model"])), _sample(sd1_parts, 1.0), atol=1e-4
    )


def test_nag_refuses_the_dits_by_name():
    with pytest.raises(ValueError, match="NAGuidance.*flux"):
        _nag(ModelRef("diffusion_model", "flux", ("/m/f.safetensors",), ("a" * 64,)))


# --- LoRA in bypass mode (newer than 0.10.0: comfy_extras.nodes_lora_debug) ---


def test_bypass_lora_loaders_sample_as_the_lora_loaders(sd1_parts, sd1_lora_model, fixed_threads):
    from nodes.library.lora_debug import LoraLoaderBypass, LoraLoaderBypassModelOnly

    (bypass,) = LoraLoaderBypassModelOnly().load_lora_model_only(sd1_parts["model"], "sd1-tiny-lora.safetensors", 1.0)
    lora_out = _sample(sd1_parts, 7.0, model=sd1_lora_model)
    assert torch.equal(_sample(sd1_parts, 7.0, model=bypass), lora_out)
    assert not torch.allclose(lora_out, _sample(sd1_parts, 7.0), atol=1e-4), "the LoRA changes the model"
    model, clip = object(), object()
    assert LoraLoaderBypass().load_lora(model, clip, "sd1-tiny-lora.safetensors", 0.0, 0.0) == (model, clip)


# --- Ideogram 4 Scheduler (newer than 0.10.0: comfy_extras.nodes_ideogram4) ---


def test_ideogram4_schedule_is_the_logit_normal_one_shifted_by_the_image_size():
    import math

    from nodes.library.ideogram4_scheduler import Ideogram4Scheduler

    top = 1.0 - 1.0 / (1.0 + math.exp(9.0))  # the clamp at log-SNR 18 of the first (probability 0) time
    (sigmas,) = Ideogram4Scheduler().execute(2, 512, 512, 0.0, 1.0)
    assert sigmas.dtype == torch.float32
    torch.testing.assert_close(sigmas, torch.tensor([top, 0.5, 0.0]))
    # four times the reference area shifts the mean by log 2: the median time is 1 - sigmoid(log 2) = 1/3
    (sigmas,) = Ideogram4Scheduler().execute(2, 1024, 1024, 0.0, 1.75)
    torch.testing.assert_close(sigmas, torch.tensor([top, 2.0 / 3.0, 0.0]))
    (sigmas,) = Ideogram4Scheduler().execute(20, 1024, 768, -0.5, 1.75)
    assert len(sigmas) == 21 and bool((sigmas[:-1] > sigmas[1:]).all()) and sigmas[-1] == 0
