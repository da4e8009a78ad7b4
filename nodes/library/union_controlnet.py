"""ComfyUI's comfy_extras.nodes_controlnet: SetUnionControlNetType. It picks which control type a union ControlNet
(xinsir's controlnet-union-sdxl-1.0 / ProMax, nodes.models.controlnet_union) is told the hint is; "auto" tells it
none. The choice travels on the CONTROL_NET as an option; ControlNets without a union part ignore it, as ComfyUI's
do (their forward takes no control type)."""

from __future__ import annotations

from nodes.inputs import require_component
from nodes.models.controlnet_union import UNION_TYPES

AUTO = "auto"


class SetUnionControlNetType:
    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"control_net": ("CONTROL_NET",), "type": ([AUTO, *UNION_TYPES],)}}

    RETURN_TYPES = ("CONTROL_NET",)
    FUNCTION = "set_controlnet_type"
    CATEGORY = "conditioning/controlnet"
    RELATIVE_PYTHON_MODULE = "comfy_extras.nodes_controlnet"

    def set_controlnet_type(self, control_net, type: str):
        control_net = require_component(control_net, "controlnet", "control_net")
        if type != AUTO and type not in UNION_TYPES:
            raise ValueError(f"type: {type!r} is not a union ControlNet type ({', '.join([AUTO, *UNION_TYPES])})")
        return (control_net.with_option("control_type", UNION_TYPES.get(type)),)


NODE_CLASS_MAPPINGS = {"SetUnionControlNetType": SetUnionControlNetType}
NODE_DISPLAY_NAME_MAPPINGS: dict[str, str] = {}
