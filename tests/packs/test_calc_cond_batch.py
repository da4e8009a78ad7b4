"""comfy.samplers.calc_cond_batch as AnimateDiff-Evolved's PAG calls it: a post-CFG function replaces the middle
block's self-attention with set_model_options_patch_replace and evaluates the positive cond again with those
model_options. ComfyUI's semantics: the result equals ComfyUI's own PerturbedAttentionGuidance node (the core node
here, which follows ComfyUI's comfy_extras.nodes_pag) at the same scale."""

from __future__ import annotations

import asyncio

import pytest
import torch

from comfy_bridge import compat

compat.install()
import comfy.model_patcher  # noqa: E402
import comfy.samplers  # noqa: E402

CKPT = "sd1-tiny.safetensors"


def perturbed_attention(q, k, v, extra_options, mask=None):
    """ComfyUI's PAG attention: each token's output is its value."""
    return v


class PagPostCfg:
    """AnimateDiff-Evolved's PAG post-CFG function (cfg_extras.py), reduced to one scale."""

    def __init__(self, scale: float) -> None:
        self.scale = scale

    def __call__(self, args: dict) -> torch.Tensor:
        model_options = comfy.model_patcher.set_model_options_patch_replace(
            args["model_options"].copy(), perturbed_attention, "attn1", "middle", 0
        )
        (pag,) = comfy.samplers.calc_cond_batch(
            args["model"], [args["cond"]], args["input"], args["sigma"], model_options
        )
        return args["denoised"] + (args["cond_denoised"] - pag) * self.scale


class NoneCond:
    """Checks calc_cond_batch's None entry (zeros, as ComfyUI) and returns the guided result unchanged."""

    def __call__(self, args: dict) -> torch.Tensor:
        cond, empty = comfy.samplers.calc_cond_batch(
            args["model"], [args["cond"], None], args["input"], args["sigma"], args["model_options"]
        )
        assert torch.equal(empty, torch.zeros_like(args["input"]))
        torch.testing.assert_close(cond, args["cond_denoised"])
        return args["denoised"]


@pytest.fixture
def sd1(demo_workspace, fixed_threads):
    from comfy_bridge.packs.proxies import wrap
    from nodes.loaders import CheckpointLoaderSimple
    from nodes.model_nodes import CLIPTextEncode

    model, clip, _ = CheckpointLoaderSimple().load_checkpoint(CKPT)

    async def encode():
        enc = CLIPTextEncode()
        return (await enc.encode(clip, "a red fox"))[0], (await enc.encode(clip, ""))[0]

    positive, negative = asyncio.run(encode())
    return wrap(model), positive, negative


def _sample(model, positive, negative):
    from nodes.ksampler import common_ksampler

    latent = {"samples": torch.zeros(1, 4, 8, 8)}
    (out,) = asyncio.run(common_ksampler(model, 5, 3, 4.0, "euler", "normal", positive, negative, latent))
    return out["samples"]


def test_a_packs_pag_through_calc_cond_batch_equals_comfyuis_pag_node(sd1):
    from nodes.library.pag import PerturbedAttentionGuidance

    model, positive, negative = sd1
    (core,) = PerturbedAttentionGuidance().patch(model, 3.0)
    want = _sample(core, positive, negative)
    pack = model.clone()
    pack.set_model_sampler_post_cfg_function(PagPostCfg(3.0))
    got = _sample(pack, positive, negative)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    assert not torch.allclose(got, _sample(model, positive, negative), atol=1e-3)  # PAG changed the result


def test_a_none_cond_gives_zeros_and_the_cond_its_prediction(sd1):
    model, positive, negative = sd1
    pack = model.clone()
    pack.set_model_sampler_post_cfg_function(NoneCond())
    torch.testing.assert_close(_sample(pack, positive, negative), _sample(model, positive, negative))


def test_outside_a_sampling_step_it_refuses_by_name():
    from comfy_bridge.packs.origin import UnsupportedFeature

    with pytest.raises(UnsupportedFeature, match="calc_cond_batch outside a sampling step"):
        comfy.samplers.calc_cond_batch(None, [None], torch.zeros(1, 4, 8, 8), torch.ones(1), {})
