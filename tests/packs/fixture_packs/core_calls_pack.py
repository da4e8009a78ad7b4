"""Calls core node functions from its own node code and uses their tuples, as UltimateSDUpscale does
(`VAEEncode().encode(...)`, `nodes.common_ksampler(...)`, `VAEDecode().decode(...)`, `SamplerCustom().sample`)."""

import comfy_extras.nodes_custom_sampler

import nodes
from nodes import VAEDecode, VAEEncode


def _inputs():
    return {
        "required": {
            "model": ("MODEL",),
            "vae": ("VAE",),
            "positive": ("CONDITIONING",),
            "negative": ("CONDITIONING",),
            "image": ("IMAGE",),
        }
    }


class RedrawSync:
    @classmethod
    def INPUT_TYPES(cls):
        return _inputs()

    RETURN_TYPES = ("IMAGE",)
    FUNCTION = "run"
    CATEGORY = "core_calls_pack"

    def run(self, model, vae, positive, negative, image):
        (latent,) = VAEEncode().encode(vae, image)
        samples = nodes.common_ksampler(model, 7, 4, 7.0, "euler", "normal", positive, negative, latent, denoise=0.5)[0]
        return (VAEDecode().decode(vae, samples)[0],)


class RedrawCustomSync:
    @classmethod
    def INPUT_TYPES(cls):
        return _inputs()

    RETURN_TYPES = ("LATENT",)
    FUNCTION = "run"
    CATEGORY = "core_calls_pack"

    def run(self, model, vae, positive, negative, image):
        latent = VAEEncode().encode(vae, image)[0]
        extras = comfy_extras.nodes_custom_sampler
        sampler = extras.KSamplerSelect().get_sampler("euler")[0]
        sigmas = extras.BasicScheduler().get_sigmas(model, "normal", 4, 0.5)[0]
        out, _ = extras.SamplerCustom().sample(model, True, 7, 7.0, positive, negative, sampler, sigmas, latent)
        return (out,)


class RedrawAsync:
    @classmethod
    def INPUT_TYPES(cls):
        return _inputs()

    RETURN_TYPES = ("IMAGE",)
    FUNCTION = "run"
    CATEGORY = "core_calls_pack"

    async def run(self, model, vae, positive, negative, image):
        (latent,) = await VAEEncode().encode(vae, image)
        (samples,) = await nodes.common_ksampler(
            model, 7, 4, 7.0, "euler", "normal", positive, negative, latent, denoise=0.5
        )
        return ((await VAEDecode().decode(vae, samples))[0],)


NODE_CLASS_MAPPINGS = {"RedrawSync": RedrawSync, "RedrawCustomSync": RedrawCustomSync, "RedrawAsync": RedrawAsync}
