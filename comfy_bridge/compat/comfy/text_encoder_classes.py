"""ComfyUI's text encoder and tokenizer classes as names packs check a CLIP against
(isinstance(clip.cond_stage_model, SDXLClipModel)) or list; building one refuses: text encoders are built
and run on the executors, and a CLIP here is a reference to its weights (encode with
CLIP.encode_from_tokens / nodes.CLIPTextEncode)."""

from __future__ import annotations

from typing import Any

import torch

from comfy_bridge.packs.origin import UnsupportedFeature


def refusing_class(module: str, name: str, base: type = torch.nn.Module) -> type:
    """A class named `name` in `module` (ComfyUI's dotted module name) that refuses to be built."""

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        raise UnsupportedFeature(
            f"{module}.{name}(...)",
            "text encoders are built and run on the executors; "
            "a CLIP is a reference to its weights (use CLIP.encode_from_tokens)",
        )

    compat_module = "comfy_bridge.compat." + module
    return type(
        name,
        (base,),
        {
            "__init__": __init__,
            "__module__": compat_module,
            "__doc__": f"ComfyUI's {name} (a name to check against; building one refuses).",
        },
    )
