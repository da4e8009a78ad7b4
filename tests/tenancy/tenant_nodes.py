"""Tiny nodes for the tenancy tests: a number source that counts its runs (to see cache hits),
a saver that writes a PNG through folder_paths (to see per-tenant folders) and a slow saver that
honours interrupts (to keep prompts queued or running)."""
from __future__ import annotations

import time

from comfy_bridge import progress
from comfy_bridge.compat import folder_paths

RUNS: list[int] = []


class TNumber:
    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"value": ("INT", {"default": 1, "min": 0, "max": 1 << 30})}}
    RETURN_TYPES = ("INT",)
    FUNCTION = "run"
    CATEGORY = "test"

    def run(self, value):
        RUNS.append(value)
        return (value,)


def _save(value: int, prefix: str) -> dict:
    from PIL import Image
    name = f"{prefix}_{value}.png"
    Image.new("RGB", (4, 4), (value % 256, 7, 9)).save(f"{folder_paths.get_output_directory()}/{name}")
    return {"ui": {"images": [{"filename": name, "subfolder": "", "type": "output"}]}}


class TSave:
    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"value": ("INT", {}), "prefix": ("STRING", {"default": "img"})}}
    RETURN_TYPES = ()
    OUTPUT_NODE = True
    FUNCTION = "run"
    CATEGORY = "test"

    def run(self, value, prefix):
        return _save(value, prefix)


class TSlowSave(TSave):
    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"value": ("INT", {}), "prefix": ("STRING", {"default": "slow"}),
                             "seconds": ("FLOAT", {"default": 0.2})}}

    def run(self, value, prefix, seconds):
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            progress.throw_if_interrupted()
            time.sleep(0.01)
        return _save(value, prefix)


CLASSES = {"TNumber": TNumber, "TSave": TSave, "TSlowSave": TSlowSave}


def registry():
    from comfy_bridge.registry import NodeRegistry
    reg = NodeRegistry()
    reg.add_builtin(dict(CLASSES))
    return reg


def prompt(value: int, prefix: str = "img", slow: float | None = None) -> dict:
    save = {"class_type": "TSave", "inputs": {"value": ["1", 0], "prefix": prefix}}
    if slow is not None:
        save = {"class_type": "TSlowSave", "inputs": {"value": ["1", 0], "prefix": prefix, "seconds": slow}}
    return {"1": {"class_type": "TNumber", "inputs": {"value": value}}, "2": save}
