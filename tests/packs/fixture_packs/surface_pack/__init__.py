"""A pack that uses the module surface popular packs use: folder_paths, comfy.utils, comfy.samplers
(adds a scheduler), comfy.model_management, comfy.sd, comfy.model_patcher, node_helpers, latent_preview,
comfy_extras, nodes, and the MODEL / CLIP / VAE methods."""

import comfy.model_management
import comfy.model_patcher
import comfy.samplers
import comfy.sd
import comfy.utils
import folder_paths
import latent_preview
import node_helpers
import torch
from comfy_extras.nodes_latent import LatentUpscale  # noqa: F401  (packs import extras by name)

import nodes


def reversed_karras(n, sigma_min, sigma_max):
    """A pack's scheduler: evenly spaced sigmas from max to min, then 0."""
    return torch.cat([torch.linspace(sigma_max, sigma_min, n), torch.zeros(1)])


comfy.samplers.SCHEDULER_HANDLERS["surface_linear"] = comfy.samplers.SchedulerHandler(reversed_karras, use_ms=False)
comfy.samplers.SCHEDULER_NAMES.append("surface_linear")


def half_cfg(args):
    """sampler_cfg_function: guidance at half the node's cfg (ComfyUI's argument names)."""
    cond, uncond = args["cond"], args["uncond"]
    return uncond + (cond - uncond) * (args["cond_scale"] * 0.5)


class PatchCFG:
    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"model": ("MODEL",)}}

    RETURN_TYPES = ("MODEL",)
    FUNCTION = "patch"
    CATEGORY = "surface_pack"

    def patch(self, model):
        assert isinstance(model, comfy.model_patcher.ModelPatcher)
        m = model.clone()
        m.set_model_sampler_cfg_function(half_cfg)
        return (m,)


class UnsupportedPatch:
    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"model": ("MODEL",)}}

    RETURN_TYPES = ("MODEL",)
    FUNCTION = "patch"
    CATEGORY = "surface_pack"

    def patch(self, model):
        m = model.clone()
        m.set_model_attn1_patch(lambda q, k, v, extra: (q, k, v))
        return (m,)


class EncodeAndDecode:
    """CLIP.tokenize / encode_from_tokens_scheduled and VAE.encode / decode through the proxies."""

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "clip": ("CLIP",),
                "vae": ("VAE",),
                "text": ("STRING", {"default": "a cat"}),
                "image": ("IMAGE",),
            }
        }

    RETURN_TYPES = ("CONDITIONING", "IMAGE", "LATENT")
    FUNCTION = "run"
    CATEGORY = "surface_pack"

    def run(self, clip, vae, text, image):
        assert isinstance(clip, comfy.sd.CLIP) and isinstance(vae, comfy.sd.VAE)
        cond = clip.encode_from_tokens_scheduled(clip.tokenize(text))
        latent = vae.encode(image)
        return (cond, vae.decode(latent), {"samples": latent})


class SurfaceFacts:
    """Reports what the compat modules answer, as a pack would read them."""

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"image": ("IMAGE",)}}

    RETURN_TYPES = ("STRING",)
    FUNCTION = "facts"
    CATEGORY = "surface_pack"

    def facts(self, image):
        out = comfy.utils.common_upscale(image.movedim(-1, 1), 16, 16, "bilinear", "disabled").movedim(1, -1)
        facts = {
            "checkpoints": folder_paths.get_filename_list("checkpoints"),
            "output": folder_paths.get_output_directory(),
            "device": str(comfy.model_management.get_torch_device()),
            "upscaled": list(out.shape),
            "cond": node_helpers.conditioning_set_values([[torch.zeros(1), {}]], {"strength": 2})[0][1],
            "callback": callable(latent_preview.prepare_callback(None, 2)),
            "schedulers": "surface_linear" in comfy.samplers.KSampler.SCHEDULERS,
            "max_resolution": nodes.MAX_RESOLUTION,
        }
        return (repr(facts),)


NODE_CLASS_MAPPINGS = {
    "PatchCFG": PatchCFG,
    "UnsupportedPatch": UnsupportedPatch,
    "EncodeAndDecode": EncodeAndDecode,
    "SurfaceFacts": SurfaceFacts,
}
