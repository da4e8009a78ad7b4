"""LatentUpscaleModelLoader (ComfyUI's comfy_extras.nodes_hunyuan) for LTX-2's latent upsampler files, and
LTXVLatentUpsampler (comfy_extras.nodes_lt_upsampler): a video latent upsampled by the model in the VAE's raw
latent space. The loader only names the file (its kind read from the header); the upsampling runs as the
ModelFn ltx2_latent_upsample, with the VAE's latent statistics from vae_latent_statistics. HunyuanVideo 1.5's
1080p upsampler, which the same loader reads in ComfyUI, loads as hunyuan_video15_upsampler (its node:
nodes.library.hunyuan_video15); its 720p SR model is refused by name."""

from __future__ import annotations

from typing import Any

import torch

from cluster.refs import ModelRef
from nodes.inputs import require_ref
from nodes.ksampler import call_model_fn
from nodes.loaders import make_ref, model_file, model_files

COMPONENT = "latent_upscale_model"
FOLDER = "latent_upscale_models"


class LatentUpscaleModelLoader:
    RELATIVE_PYTHON_MODULE = "comfy_extras.nodes_hunyuan"
    FUNCTION = "execute"
    CATEGORY = "loaders"
    RETURN_TYPES = ("LATENT_UPSCALE_MODEL",)
    OUTPUT_TOOLTIPS = (None,)
    DESCRIPTION = "Loads a latent upscale model (LTX-2's spatial upsampler) from models/latent_upscale_models."

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"model_name": ("COMBO", {"multiselect": False, "options": model_files(FOLDER)})}}

    def execute(self, model_name: str) -> tuple[ModelRef]:
        from nodes.models.errors import ModelLoadError
        from nodes.models.hunyuan_video15_upsampler import MARKER_1080P
        from nodes.models.ltx2_upsampler import is_latent_upsampler
        from nodes.models.safetensors_io import shapes_of

        path = model_file(FOLDER, model_name, "model_name")
        try:
            keys = shapes_of(path)[0]
        except ModelLoadError as e:
            raise ValueError(f"model_name: {e}") from e
        if MARKER_1080P in keys:  # ComfyUI 0.10.0's test for HunyuanVideo 1.5's 1080p upsampler
            return (make_ref(COMPONENT, "hunyuan_video15_upsampler", [path]),)
        if not is_latent_upsampler(keys):
            raise ValueError(
                f"model_name: {model_name!r} is not a latent upscale model Comfy Cluster can run (supported: "
                "LTX-2's spatial upsamplers and HunyuanVideo 1.5's 1080p one; its 720p SR model is not implemented)"
            )
        return (make_ref(COMPONENT, "ltx2_upsampler", [path]),)


class LTXVLatentUpsampler:
    RELATIVE_PYTHON_MODULE = "comfy_extras.nodes_lt_upsampler"
    FUNCTION = "upsample_latent"
    CATEGORY = "latent/video"
    EXPERIMENTAL = True
    RETURN_TYPES = ("LATENT",)
    DESCRIPTION = "Upsamples an LTX-2 video latent with a latent upscale model (x2 in height and width)."

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "samples": ("LATENT",),
                "upscale_model": ("LATENT_UPSCALE_MODEL",),
                "vae": ("VAE",),
            }
        }

    async def upsample_latent(self, samples: dict, upscale_model: Any, vae: Any) -> tuple[dict]:
        model = require_ref(upscale_model, COMPONENT, "upscale_model", "LATENT_UPSCALE_MODEL")
        vae_ref = require_ref(vae, "vae", "vae", "VAE")
        if vae_ref.arch != "ltx2":
            raise ValueError(
                f"vae: the latent upsampler needs an LTX-2 video VAE (its latent statistics), got {vae_ref.arch}"
            )
        if not isinstance(samples, dict) or not isinstance(samples.get("samples"), torch.Tensor):
            raise TypeError("samples: expected a LATENT (a dict with a 'samples' tensor)")
        latent = samples["samples"]
        if getattr(latent, "is_nested", False):
            raise ValueError("samples: an audio-video latent; separate it first (LTXV Separate AV Latent)")
        stats = await call_model_fn("vae_latent_statistics", vae_ref, "vae", {}, {})
        out = await call_model_fn(
            "ltx2_latent_upsample", model, "upscale_model", {"latent": latent.contiguous(), **stats}, {}
        )
        result = {k: v for k, v in samples.items() if k != "noise_mask"}
        result["samples"] = out["latent"]
        return (result,)


NODE_CLASS_MAPPINGS = {"LatentUpscaleModelLoader": LatentUpscaleModelLoader, "LTXVLatentUpsampler": LTXVLatentUpsampler}
NODE_DISPLAY_NAME_MAPPINGS = {"LatentUpscaleModelLoader": "Load Latent Upscale Model"}
