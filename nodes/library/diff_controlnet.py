"""DiffControlNetLoader (ComfyUI's nodes.py): a ControlNet loaded with the MODEL it is meant for.

ComfyUI uses the MODEL only for "difference" ControlNets (ldm-format files with a `difference` key), whose
weights are stored as offsets from the model's; every other file it loads as ControlNetLoader does, and so
does this node. Difference files are refused with that reason: adding the MODEL's (possibly patched) weights
to them is not implemented.
"""

from __future__ import annotations

from nodes.inputs import require_model
from nodes.loaders import ControlNetLoader, model_file, model_files
from nodes.models.safetensors_io import shapes_of


class DiffControlNetLoader:
    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "model": ("MODEL", {"tooltip": "The model the ControlNet is for."}),
                "control_net_name": (model_files("controlnet"),),
            }
        }

    RETURN_TYPES = ("CONTROL_NET",)
    FUNCTION = "load_controlnet"
    CATEGORY = "loaders"
    DESCRIPTION = "Loads a ControlNet for the given model."

    def load_controlnet(self, model, control_net_name: str):
        require_model(model)
        shapes, _ = shapes_of(model_file("controlnet", control_net_name, "control_net_name"))
        if "difference" in shapes:
            raise ValueError(
                f"control_net_name: {control_net_name} is a difference ControlNet (its weights are "
                "offsets from the model's); loading those is not supported"
            )
        return ControlNetLoader().load_controlnet(control_net_name)


NODE_CLASS_MAPPINGS = {"DiffControlNetLoader": DiffControlNetLoader}
NODE_DISPLAY_NAME_MAPPINGS = {"DiffControlNetLoader": "Load ControlNet Model (diff)"}
