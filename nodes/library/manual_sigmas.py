"""Today's ComfyUI Manual Sigmas (`comfy_extras.nodes_custom_sampler`, added after 0.3.64): a noise schedule
typed as a list of numbers."""

from __future__ import annotations

import re

import torch

# What ComfyUI counts as one number of the text: an optional sign, digits, an optional decimal part
# (anything else, commas and spaces included, only separates numbers).
NUMBER = re.compile(r"[-+]?(?:\d*\.*\d+)")


class ManualSigmas:
    RELATIVE_PYTHON_MODULE = "comfy_extras.nodes_custom_sampler"
    FUNCTION = "execute"
    CATEGORY = "_for_testing/custom_sampling"

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"sigmas": ("STRING", {"default": "1, 0.5", "multiline": False})}}

    RETURN_TYPES = ("SIGMAS",)
    OUTPUT_TOOLTIPS = (None,)
    EXPERIMENTAL = True
    DESCRIPTION = 'The sigmas written in the text, in order (e.g. "14.6, 7.0, 3.1, 0").'

    def execute(self, sigmas: str):
        return (torch.tensor([float(n) for n in NUMBER.findall(sigmas)], dtype=torch.float32),)


NODE_CLASS_MAPPINGS = {"ManualSigmas": ManualSigmas}
NODE_DISPLAY_NAME_MAPPINGS: dict[str, str] = {}
