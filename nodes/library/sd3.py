"""ComfyUI's comfy_extras.nodes_sd3: Stable Diffusion 3's text-encoder loader and prompt encoder
(EmptySD3LatentImage lives with the other latent nodes in nodes.latent).

- TripleCLIPLoader: CLIP-L, CLIP-G and T5-XXL files as one SD3 CLIP (which file is which is read from the
  weights, as ComfyUI does, so their order does not matter).
- CLIPTextEncodeSD3: a prompt per text encoder; CLIP-L and CLIP-G get equally many 77-token chunks, and with
  empty_padding "none" an empty prompt leaves its encoder out instead of encoding the empty prompt.
- SkipLayerGuidanceSD3: SkipLayerGuidanceDiT (nodes.library.slg) with the MMDiT's joint blocks as the double
  blocks, no single blocks and no rescaling, as ComfyUI's node delegates.
- ControlNetApplySD3 ("Apply Controlnet with VAE", deprecated): Apply ControlNet with its VAE input required;
  the VAE encodes the hint for the ControlNets that take latent hints (SD3's).
"""

from __future__ import annotations

from nodes.inputs import require_component
from nodes.library.clip_sdxl import TEXT, encode_conditioning
from nodes.library.slg import LAYERS, SkipLayerGuidanceDiT
from nodes.loaders import make_ref, model_file, model_files
from nodes.model_nodes import ControlNetApplyAdvanced

MODULE = "comfy_extras.nodes_sd3"


class TripleCLIPLoader:
    @classmethod
    def INPUT_TYPES(cls):
        files = ("COMBO", {"multiselect": False, "options": model_files("text_encoders")})
        return {"required": {"clip_name1": files, "clip_name2": files, "clip_name3": files}}

    MODEL_FILE_INPUTS = {f"clip_name{i}": ("text_encoders", "text_encoder") for i in (1, 2, 3)}
    RETURN_TYPES = ("CLIP",)
    FUNCTION = "load_clip"
    CATEGORY = "advanced/loaders"
    DESCRIPTION = "Loads SD3's three text encoders (CLIP-L, CLIP-G and T5-XXL, in any order) as one CLIP."
    RELATIVE_PYTHON_MODULE = MODULE

    def load_clip(self, clip_name1: str, clip_name2: str, clip_name3: str):
        paths = [
            model_file("text_encoders", name, f"clip_name{i}")
            for i, name in enumerate((clip_name1, clip_name2, clip_name3), start=1)
        ]
        return (make_ref("text_encoder", "sd3", paths, clip_type="sd3"),)


class CLIPTextEncodeSD3:
    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "clip": ("CLIP", {}),
                "clip_l": TEXT,
                "clip_g": TEXT,
                "t5xxl": TEXT,
                "empty_padding": ("COMBO", {"multiselect": False, "options": ["none", "empty_prompt"]}),
            }
        }

    RETURN_TYPES = ("CONDITIONING",)
    FUNCTION = "encode"
    CATEGORY = "advanced/conditioning"
    DESCRIPTION = (
        "Encodes a separate prompt for each of SD3's text encoders (CLIP-L, CLIP-G, T5-XXL). "
        "empty_padding none: an empty prompt leaves its encoder out; empty_prompt: it is encoded."
    )
    RELATIVE_PYTHON_MODULE = MODULE

    async def encode(self, clip, clip_l: str, clip_g: str, t5xxl: str, empty_padding: str):
        clip = require_component(clip, "text_encoder", "clip")
        if clip.arch != "sd3":
            raise ValueError(
                f"clip: CLIPTextEncodeSD3 needs SD3's CLIP (TripleCLIPLoader or an SD3 checkpoint), "
                f"got a {clip.arch} CLIP"
            )
        params = {
            "texts": {"g": clip_g, "l": clip_l, "t5xxl": t5xxl},
            "equal_chunks": ["l", "g"],
            "drop_empty": empty_padding == "none",
        }
        return (await encode_conditioning(clip, params, {}),)


class SkipLayerGuidanceSD3:
    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "model": ("MODEL", {}),
                "layers": LAYERS,
                "scale": ("FLOAT", {"default": 3.0, "min": 0.0, "max": 10.0, "step": 0.1}),
                "start_percent": ("FLOAT", {"default": 0.01, "min": 0.0, "max": 1.0, "step": 0.001}),
                "end_percent": ("FLOAT", {"default": 0.15, "min": 0.0, "max": 1.0, "step": 0.001}),
            }
        }

    RETURN_TYPES = ("MODEL",)
    FUNCTION = "skip_guidance_sd3"
    CATEGORY = "advanced/guidance"
    EXPERIMENTAL = True
    DESCRIPTION = (
        "Skip-layer guidance for SD3: guides away from a prediction made with the given joint blocks "
        "skipped, between start_percent and end_percent of the schedule."
    )
    RELATIVE_PYTHON_MODULE = MODULE

    def skip_guidance_sd3(self, model, layers: str, scale: float, start_percent: float, end_percent: float):
        return SkipLayerGuidanceDiT().patch(
            model,
            double_layers=layers,
            single_layers="",
            scale=scale,
            start_percent=start_percent,
            end_percent=end_percent,
            rescaling_scale=0.0,
        )


class ControlNetApplySD3(ControlNetApplyAdvanced):
    @classmethod
    def INPUT_TYPES(cls):
        percent = {"min": 0.0, "max": 1.0, "step": 0.001}
        return {
            "required": {
                "positive": ("CONDITIONING", {}),
                "negative": ("CONDITIONING", {}),
                "control_net": ("CONTROL_NET", {}),
                "vae": ("VAE", {}),
                "image": ("IMAGE", {}),
                "strength": ("FLOAT", {"default": 1.0, "min": 0.0, "max": 10.0, "step": 0.01}),
                "start_percent": ("FLOAT", {"default": 0.0, **percent}),
                "end_percent": ("FLOAT", {"default": 1.0, **percent}),
            }
        }

    DEPRECATED = True
    DESCRIPTION = (
        "Applies a ControlNet that takes VAE-encoded hints (an SD3 ControlNet) to the positive and "
        "negative conditioning, between start_percent and end_percent of the schedule."
    )
    RELATIVE_PYTHON_MODULE = MODULE

    def apply_controlnet(
        self, positive, negative, control_net, vae, image, strength: float, start_percent: float, end_percent: float
    ):
        return super().apply_controlnet(
            positive, negative, control_net, image, strength, start_percent, end_percent, vae=vae
        )


NODE_CLASS_MAPPINGS = {
    "TripleCLIPLoader": TripleCLIPLoader,
    "CLIPTextEncodeSD3": CLIPTextEncodeSD3,
    "SkipLayerGuidanceSD3": SkipLayerGuidanceSD3,
    "ControlNetApplySD3": ControlNetApplySD3,
}
NODE_DISPLAY_NAME_MAPPINGS = {"ControlNetApplySD3": "Apply Controlnet with VAE"}
