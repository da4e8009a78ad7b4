"""Today's ComfyUI Seed node (`comfy_extras.nodes_seed`, added after 0.3.64): one seed the web UI can
randomise, to feed several samplers the same number."""

from __future__ import annotations

import sys


class SeedNode:
    RELATIVE_PYTHON_MODULE = "comfy_extras.nodes_seed"
    FUNCTION = "execute"
    CATEGORY = "utilities"

    @classmethod
    def INPUT_TYPES(cls):
        # the web UI's random-integer widget, left unchanged after each run unless the user picks otherwise
        return {
            "required": {
                "seed": (
                    "INT",
                    {"min": 0, "max": sys.maxsize, "control_after_generate": "fixed", "component": "SetRandomInt"},
                )
            }
        }

    RETURN_TYPES = ("INT",)
    RETURN_NAMES = ("seed",)
    OUTPUT_TOOLTIPS = (None,)
    SEARCH_ALIASES = ["seed", "random"]
    DESCRIPTION = "Passes its seed on."

    def execute(self, seed: int):
        return (seed,)


NODE_CLASS_MAPPINGS = {"SeedNode": SeedNode}
NODE_DISPLAY_NAME_MAPPINGS = {"SeedNode": "Seed"}
