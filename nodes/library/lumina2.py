"""ComfyUI's comfy_extras.nodes_lumina2: RenormCFG, a sampler_cfg_function carried on the MODEL
(nodes.modelfns.model_options) and applied inside each denoise step, which works with any model; and
CLIPTextEncodeLumina2, a prompt behind one of Lumina 2's two system prompts, encoded as CLIPTextEncode does (any
CLIP; Lumina 2's Gemma 2 is the one it is meant for: nodes/models/lumina2_text.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from cluster.refs import ModelRef
from nodes.inputs import require_model
from nodes.model_nodes import CLIPTextEncode
from nodes.modelfns.model_options import with_function


@dataclass(frozen=True)
class RenormCfgFunction:
    """Lumina-Next's guidance: above sigma `cfg_trunc` the positive prediction alone; below it, CFG whose
    result's norm (over all but the batch dimension) is capped at `renorm_cfg` times the positive one's
    (0 disables the cap).

    ComfyUI splits the prediction at the model's input channel count to leave any extra output channels
    unguided; every model here predicts exactly the latent's channels (never more than it takes in), so the
    split is the whole prediction. The cap is decided per sample (ComfyUI's single comparison only runs
    with a batch of one, where the two agree)."""

    cfg_trunc: float
    renorm_cfg: float

    def __call__(self, args: dict) -> torch.Tensor:
        cond, uncond, x = args["cond_denoised"], args["uncond_denoised"], args["input"]
        if not float(args["timestep"].reshape(-1)[0]) < self.cfg_trunc:
            return x - cond
        guided = uncond + args["cond_scale"] * (cond - uncond)
        if self.renorm_cfg > 0.0:
            dims = tuple(range(1, cond.ndim))
            max_norm = torch.linalg.vector_norm(cond, dim=dims, keepdim=True) * self.renorm_cfg
            norm = torch.linalg.vector_norm(guided, dim=dims, keepdim=True)
            guided = torch.where(norm >= max_norm, guided * (max_norm / norm), guided)
        return x - guided


class RenormCFG:
    RELATIVE_PYTHON_MODULE = "comfy_extras.nodes_lumina2"
    RETURN_TYPES = ("MODEL",)
    FUNCTION = "patch"
    CATEGORY = "advanced/model"
    DESCRIPTION = (
        "Guidance that keeps the guided prediction's norm within renorm_cfg times the positive "
        "prediction's, and uses the positive prediction alone above the noise level cfg_trunc."
    )

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "model": ("MODEL", {}),
                "cfg_trunc": (
                    "FLOAT",
                    {
                        "default": 100,
                        "min": 0.0,
                        "max": 100.0,
                        "step": 0.01,
                        "tooltip": "Noise level (sigma) below which guidance applies.",
                    },
                ),
                "renorm_cfg": (
                    "FLOAT",
                    {
                        "default": 1.0,
                        "min": 0.0,
                        "max": 100.0,
                        "step": 0.01,
                        "tooltip": "Largest guided norm as a multiple of the positive one; 0: no cap.",
                    },
                ),
            }
        }

    def patch(self, model: Any, cfg_trunc: float, renorm_cfg: float) -> tuple[ModelRef]:
        return (
            with_function(
                require_model(model), "sampler_cfg_function", RenormCfgFunction(float(cfg_trunc), float(renorm_cfg))
            ),
        )


# Lumina 2's system prompts (the model was trained behind them), by the names the node offers.
SYSTEM_PROMPTS = {
    "superior": "You are an assistant designed to generate superior images with the superior degree of image-text "
    "alignment based on textual prompts or user prompts.",
    "alignment": "You are an assistant designed to generate high-quality images with the highest degree of "
    "image-text alignment based on textual prompts.",
}


class CLIPTextEncodeLumina2:
    RELATIVE_PYTHON_MODULE = "comfy_extras.nodes_lumina2"
    RETURN_TYPES = ("CONDITIONING",)
    OUTPUT_TOOLTIPS = ("Conditioning that guides the diffusion model towards the prompt.",)
    FUNCTION = "encode"
    CATEGORY = "conditioning"
    DESCRIPTION = (
        "Encodes a user prompt behind one of Lumina 2's system prompts (superior or alignment) into conditioning."
    )

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "system_prompt": (
                    "COMBO",
                    {
                        "multiselect": False,
                        "options": list(SYSTEM_PROMPTS),
                        "tooltip": "superior: "
                        + SYSTEM_PROMPTS["superior"]
                        + " alignment: "
                        + SYSTEM_PROMPTS["alignment"],
                    },
                ),
                "user_prompt": (
                    "STRING",
                    {"multiline": True, "dynamicPrompts": True, "tooltip": "The prompt to encode."},
                ),
                "clip": ("CLIP", {"tooltip": "The text encoder (Lumina 2's Gemma 2)."}),
            }
        }

    async def encode(self, clip: Any, user_prompt: str, system_prompt: str) -> tuple[list]:
        if clip is None:
            raise ValueError("clip: no text encoder (the checkpoint loaded holds none)")
        if system_prompt not in SYSTEM_PROMPTS:
            raise ValueError(f"system_prompt: {system_prompt!r} is not one of {list(SYSTEM_PROMPTS)}")
        # ComfyUI's joining: the system prompt, its <Prompt Start> tag, then the user's prompt.
        return await CLIPTextEncode().encode(clip, f"{SYSTEM_PROMPTS[system_prompt]} <Prompt Start> {user_prompt}")


NODE_CLASS_MAPPINGS = {"RenormCFG": RenormCFG, "CLIPTextEncodeLumina2": CLIPTextEncodeLumina2}
NODE_DISPLAY_NAME_MAPPINGS: dict[str, str] = {"CLIPTextEncodeLumina2": "CLIP Text Encode for Lumina2"}
