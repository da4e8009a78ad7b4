"""GetICLoRAParameters: the parameters an LTX-2 IC-LoRA declares in its safetensors metadata, for LTXVAddGuide.

Facts from ComfyUI's newest comfy_extras/nodes_lt.py (Comfy-Org/ComfyUI, read 2026-12; not in 0.10.0):
the node takes the MODEL a LoRA loader returned, reads the metadata of the LoRA file that loader applied
(ComfyUI keeps it as the patcher's "lora_metadata" attachment, which each LoRA loader with metadata sets, so
the newest such LoRA wins), and returns {"reference_downscale_factor": n}: the first metadata key ending in
"reference_downscale_factor", as a number rounded to a whole factor of at least 1; 1 when no key or no number.
Our MODEL is a ModelRef whose patches are the LoRA files in order, so the metadata is read from the newest
patch's file header. Checked by tests/nodes/test_ltxv_iclora.py."""

from __future__ import annotations

import math
from typing import Any

from cluster.refs import ModelRef
from nodes.models.errors import ModelLoadError
from nodes.models.safetensors_io import read_header

MODULE = "comfy_extras.nodes_lt"
IC_LORA_PARAMETERS = "IC_LORA_PARAMETERS"


def lora_metadata(model: ModelRef) -> dict[str, str]:
    """The safetensors metadata of the newest LoRA on `model` that has any (ComfyUI's lora_metadata attachment)."""
    for patch in reversed(getattr(model, "patches", ())):
        try:
            metadata = read_header(patch.path).metadata
        except ModelLoadError:  # a pickled LoRA has no metadata, as ComfyUI's loader gives none for it
            continue
        if metadata:
            return metadata
    return {}


def downscale_factor(value: Any) -> int:
    """A declared factor as ComfyUI takes it: the number rounded to a whole factor, at least 1; 1 if unreadable."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return 1
    if not math.isfinite(number):
        return 1
    return max(1, round(number))


class GetICLoRAParameters:
    RELATIVE_PYTHON_MODULE = MODULE
    FUNCTION = "execute"
    CATEGORY = "model/conditioning/ltxv"
    RETURN_TYPES = (IC_LORA_PARAMETERS,)
    RETURN_NAMES = ("iclora_parameters",)
    OUTPUT_TOOLTIPS = (
        "What the IC-LoRA's metadata declares (reference_downscale_factor), for LTXV Add Guide when the LoRA "
        "expects its guides treated specially.",
    )
    DESCRIPTION = (
        "Reads an IC-LoRA's parameters (reference_downscale_factor) from the metadata of the LoRA file the "
        "connected model was loaded with, for LTXV Add Guide."
    )
    SEARCH_ALIASES = ["ic-lora", "ic lora", "iclora", "downscale factor", "reference downscale"]

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "iclora_model": (
                    "MODEL",
                    {"tooltip": "The model straight from the LoRA loader that applied the IC-LoRA."},
                ),
            }
        }

    def execute(self, iclora_model: ModelRef):
        metadata = lora_metadata(iclora_model)
        declared = next((v for k, v in metadata.items() if k.endswith("reference_downscale_factor")), None)
        factor = 1 if declared is None else downscale_factor(declared)
        return ({"reference_downscale_factor": factor},)


NODE_CLASS_MAPPINGS = {"GetICLoRAParameters": GetICLoRAParameters}
NODE_DISPLAY_NAME_MAPPINGS = {"GetICLoRAParameters": "Get IC-LoRA Parameters"}
