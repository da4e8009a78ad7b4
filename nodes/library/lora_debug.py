"""ComfyUI's comfy_extras.nodes_lora_debug (newer than 0.10.0, read from the newest Comfy-Org/ComfyUI source): LoRA
loaders in "bypass" mode, which ComfyUI runs as base(x) + lora(x) in the forward pass instead of changing the
weights (for training and offloaded weights). Here weights are never changed in place anyway: a LoRA is a patch
on the MODEL / CLIP ref that the executors apply to their own copy, so bypass and merged give the same images up
to float rounding, and these loaders add the same patches as Load LoRA."""

from __future__ import annotations

from nodes.loaders import LoraLoader, LoraLoaderModelOnly

MODULE = "comfy_extras.nodes_lora_debug"


class LoraLoaderBypass(LoraLoader):
    RELATIVE_PYTHON_MODULE = MODULE
    EXPERIMENTAL = True
    OUTPUT_TOOLTIPS = ("The modified diffusion model.", "The modified CLIP model.")
    DESCRIPTION = (
        "Applies a LoRA in bypass mode (ComfyUI adds the LoRA's output in the forward pass instead of "
        "patching the weights; the result is the same up to rounding)."
    )


class LoraLoaderBypassModelOnly(LoraLoaderModelOnly):
    RELATIVE_PYTHON_MODULE = MODULE
    EXPERIMENTAL = True
    DESCRIPTION = "Applies a LoRA to the diffusion model alone in bypass mode (see Load LoRA (Bypass))."


NODE_CLASS_MAPPINGS = {"LoraLoaderBypass": LoraLoaderBypass, "LoraLoaderBypassModelOnly": LoraLoaderBypassModelOnly}
NODE_DISPLAY_NAME_MAPPINGS = {
    "LoraLoaderBypass": "Load LoRA (Bypass) (For debugging)",
    "LoraLoaderBypassModelOnly": "Load LoRA (Bypass, Model Only) (for debugging)",
}
