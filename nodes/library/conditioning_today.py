"""Conditioning nodes of today's ComfyUI newer than 0.10.0 that need no model (read from the newest Comfy-Org/ComfyUI
nodes.py): Conditioning (Multiply) scales each entry's embedding and pooled output by a factor."""

from __future__ import annotations

from nodes.conditioning import require


class ConditioningMultiply:
    RELATIVE_PYTHON_MODULE = "nodes"
    SEARCH_ALIASES = ["scale conditioning", "scale prompt", "multiply conditioning", "multiply prompt"]
    FUNCTION = "multiply"
    CATEGORY = "model/conditioning/transform"
    RETURN_TYPES = ("CONDITIONING",)
    DESCRIPTION = "Multiplies every entry's embedding and pooled output by the multiplier (other options unchanged)."

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "conditioning": ("CONDITIONING",),
                "multiplier": ("FLOAT", {"default": 1.0, "min": -100.0, "max": 100.0, "step": 0.01}),
            }
        }

    def multiply(self, conditioning: list, multiplier: float) -> tuple[list]:
        out = []
        for cond, opts in require(conditioning, "conditioning"):
            opts = dict(opts)  # a new options dict per entry: the input conditioning stays as it was
            if opts.get("pooled_output") is not None:
                opts["pooled_output"] = opts["pooled_output"] * multiplier
            out.append([cond * multiplier, opts])
        return (out,)


NODE_CLASS_MAPPINGS = {"ConditioningMultiply": ConditioningMultiply}
NODE_DISPLAY_NAME_MAPPINGS = {"ConditioningMultiply": "Conditioning (Multiply)"}
