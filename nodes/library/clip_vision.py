"""ComfyUI's CLIPVisionLoader and CLIPVisionEncode (nodes.py). The loader names the weights (a ModelRef);
the encoding runs as the `clip_vision_encode` ModelFn (nodes/modelfns/clip_vision.py), and its tensors come
back as a CLIP_VISION_OUTPUT that reads like ComfyUI's (attributes and item access)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from cluster.refs import ModelRef
from nodes.inputs import require_ref
from nodes.ksampler import call_model_fn
from nodes.loaders import make_ref, model_file
from nodes.workspace import active

COMPONENT = "clip_vision"


@dataclass
class ClipVisionOutput:
    """ComfyUI's CLIP_VISION_OUTPUT: `out.image_embeds` or `out["image_embeds"]`."""

    last_hidden_state: torch.Tensor
    image_embeds: torch.Tensor
    penultimate_hidden_states: torch.Tensor
    mm_projected: torch.Tensor | None = None
    all_hidden_states: torch.Tensor | None = None  # SigLIP only: every layer's output [B, layers, tokens, width]

    def __getitem__(self, key: str) -> Any:
        return getattr(self, key)

    def __setitem__(self, key: str, value: Any) -> None:
        setattr(self, key, value)


def clip_vision_file(path, input_name: str) -> None:
    """Refuse, naming the input, a file that holds no CLIP vision model we can run."""
    from nodes.models.clip_vision import is_clip_vision
    from nodes.models.errors import ModelLoadError
    from nodes.models.safetensors_io import shapes_of
    from nodes.models.siglip_vision import is_siglip_vision

    try:
        keys = shapes_of(path)[0]
    except ModelLoadError as e:
        raise ValueError(f"{input_name}: {e}") from e
    if not (is_clip_vision(keys) or is_siglip_vision(keys)):
        raise ValueError(
            f"{input_name}: {path.name!r} is not a CLIP vision model Comfy Cluster can run "
            "(supported: CLIP ViT vision towers with a projection, SigLIP vision towers)"
        )


class CLIPVisionLoader:
    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {"clip_name": (active().list_files("clip_vision"), {"tooltip": "The CLIP vision model file."})}
        }

    RETURN_TYPES = ("CLIP_VISION",)
    FUNCTION = "load_clip"
    CATEGORY = "loaders"
    DESCRIPTION = "Loads a CLIP vision (image) encoder from models/clip_vision."

    def load_clip(self, clip_name: str) -> tuple[ModelRef]:
        path = model_file("clip_vision", clip_name, "clip_name")
        clip_vision_file(path, "clip_name")
        return (make_ref(COMPONENT, "clip_vision", [path]),)


class CLIPVisionEncode:
    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "clip_vision": ("CLIP_VISION", {"tooltip": "The CLIP vision encoder."}),
                "image": ("IMAGE", {"tooltip": "The images to encode."}),
                "crop": (
                    ["center", "none"],
                    {
                        "tooltip": "center: scale the short side to the encoder's size and "
                        "crop the middle; none: squash the whole image."
                    },
                ),
            }
        }

    RETURN_TYPES = ("CLIP_VISION_OUTPUT",)
    FUNCTION = "encode"
    CATEGORY = "conditioning"
    DESCRIPTION = "Encodes images with a CLIP vision model, for style models and unCLIP conditioning."

    async def encode(self, clip_vision: ModelRef, image: torch.Tensor, crop: str) -> tuple[ClipVisionOutput]:
        require_ref(clip_vision, COMPONENT, "clip_vision", "CLIP_VISION")
        out = await call_model_fn(
            "clip_vision_encode", clip_vision, "clip_vision", {"image": image}, {"crop": crop == "center"}
        )
        tensors = (out[k] for k in ("last_hidden_state", "image_embeds", "penultimate_hidden_states"))
        mm = out.get("mm_projected")  # llava's vision file: its projected image tokens
        return (ClipVisionOutput(*tensors, mm_projected=mm, all_hidden_states=out.get("all_hidden_states")),)


NODE_CLASS_MAPPINGS = {"CLIPVisionLoader": CLIPVisionLoader, "CLIPVisionEncode": CLIPVisionEncode}
NODE_DISPLAY_NAME_MAPPINGS = {"CLIPVisionLoader": "Load CLIP Vision", "CLIPVisionEncode": "CLIP Vision Encode"}
