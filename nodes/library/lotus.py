"""ComfyUI's comfy_extras.nodes_lotus: LotusConditioning, the conditioning Lotus-D depth runs on. Lotus keeps its
text encoder frozen and always feeds it the empty prompt, so the conditioning is a constant: the encoder's two
1024-wide token states, which ComfyUI ships as numbers instead of a text encoder. Ours is the same tensor, recorded
from ComfyUI 0.3.64's node by scripts/record_comfyui_lotus.py into nodes/models/data/lotus_conditioning.safetensors
(model output, not code). The model side (its task embedding, x0 prediction) is nodes/models/unet.py's arch lotus."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import torch

DATA = Path(__file__).resolve().parents[1] / "models" / "data" / "lotus_conditioning.safetensors"


@lru_cache(maxsize=1)
def _embedding() -> torch.Tensor:
    from safetensors.torch import load_file

    return load_file(str(DATA))["conditioning"]


class LotusConditioning:
    RELATIVE_PYTHON_MODULE = "comfy_extras.nodes_lotus"
    FUNCTION = "execute"
    CATEGORY = "conditioning/lotus"
    RETURN_TYPES = ("CONDITIONING",)
    RETURN_NAMES = ("conditioning",)
    OUTPUT_TOOLTIPS = (None,)
    DESCRIPTION = "The fixed empty-prompt conditioning Lotus depth models (lotus-depth-d) are sampled with."

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {}}

    def execute(self):
        return ([[_embedding().clone(), {}]],)


NODE_CLASS_MAPPINGS = {"LotusConditioning": LotusConditioning}
NODE_DISPLAY_NAME_MAPPINGS: dict[str, str] = {}
