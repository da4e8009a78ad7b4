"""ComfyUI's own node replacements (its comfy_extras replacement extension, read in the newest published
source), written as data: one row per retired class.

A row: (retired class, successor, the retired class's widget order, input moves, output moves). An input
move is `new input <- "old input"` or `new input = value` (a fixed value, given as ("=", value)); a dotted
new input ("images.image0") names a slot of an Autogrow / DynamicCombo input, which the web UI leaves to
its own wiring and POST /prompt carries as a flat key, as API-format prompts hold it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from comfy_bridge.compat.comfy_api.latest._io import NodeReplace

if TYPE_CHECKING:
    from comfy_bridge.node_replace import NodeReplaceManager

SET = "="
NANO_BANANA_WIDGETS = (
    "prompt",
    "model",
    "seed",
    "aspect_ratio",
    "resolution",
    "response_modalities",
    "thinking_level",
    "system_prompt",
)

BUILTIN: tuple[
    tuple[str, str, tuple[str, ...] | None, tuple[tuple[str, Any], ...] | None, tuple[tuple[int, int], ...] | None], ...
] = (
    # merged into the max-dimension scaler, which also asks for a method (lanczos keeps the old look)
    (
        "ResizeImagesByLongerEdge",
        "ImageScaleToMaxDimension",
        ("longer_edge",),
        (("image", "images"), ("largest_size", "longer_edge"), ("upscale_method", (SET, "lanczos"))),
        ((0, 0),),
    ),
    # two fixed image inputs become the first two slots of a growing list
    ("ImageBatch", "BatchImagesNode", None, (("images.image0", "image1"), ("images.image1", "image2")), None),
    # scale-by-factor is one mode of the image/mask resizer
    (
        "ImageScaleBy",
        "ResizeImageMaskNode",
        ("upscale_method", "scale_by"),
        (
            ("input", "image"),
            ("resize_type", (SET, "scale by multiplier")),
            ("resize_type.multiplier", "scale_by"),
            ("scale_method", "upscale_method"),
        ),
        None,
    ),
    ("T2IAdapterLoader", "ControlNetLoader", None, (("control_net_name", "t2i_adapter_name"),), None),
    ("Load3DAnimation", "Load3D", None, None, None),  # animation folded into the plain 3D nodes
    ("Preview3DAnimation", "Preview3D", None, None, None),
    ("SDV_img2vid_Conditioning", "SVD_img2vid_Conditioning", None, None, None),  # misspelt id
    ("ConditioningAverage ", "ConditioningAverage", None, None, None),  # id with a trailing space
    # the paid Gemini image node whose images input became a growing list
    (
        "GeminiNanoBanana2",
        "GeminiNanoBanana2V2",
        NANO_BANANA_WIDGETS,
        tuple((w, w) for w in NANO_BANANA_WIDGETS[:-1])
        + (("images.image_1", "images"), ("files", "files"), ("system_prompt", "system_prompt")),
        None,
    ),
)


def _input_entry(new_id: str, source: Any) -> dict:
    if isinstance(source, tuple) and source[0] == SET:
        return {"new_id": new_id, "set_value": source[1]}
    return {"new_id": new_id, "old_id": source}


def register_builtin(manager: NodeReplaceManager) -> None:
    for old, new, widgets, inputs, outputs in BUILTIN:
        manager.register(
            NodeReplace(
                new_node_id=new,
                old_node_id=old,
                old_widget_ids=list(widgets) if widgets else None,
                input_mapping=[_input_entry(n, s) for n, s in inputs] if inputs else None,
                output_mapping=[{"new_idx": n, "old_idx": o} for o, n in outputs] if outputs else None,
            )
        )
