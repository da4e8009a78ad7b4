"""The test nodes of tests/tenancy/tenant_nodes.py (TNumber, TSlowSave, TStepSave, TCopyInput), written
against real ComfyUI's custom-node API, so the API v2 client tests can run against the reference:
comfy-api-proxy in front of real ComfyUI (scripts/api_v2_reference.py loads this file as a custom node).
Same inputs, same files, same progress and previews as ours."""

import os
import shutil
import time

import comfy.model_management
import comfy.utils
import folder_paths
from PIL import Image


def _save(value, prefix):
    name = f"{prefix}_{value}.png"
    Image.new("RGB", (4, 4), (value % 256, 7, 9)).save(os.path.join(folder_paths.get_output_directory(), name))
    return {"ui": {"images": [{"filename": name, "subfolder": "", "type": "output"}]}}


class TNumber:
    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"value": ("INT", {"default": 1, "min": 0, "max": 1 << 30})}}

    RETURN_TYPES = ("INT",)
    FUNCTION = "run"
    CATEGORY = "test"

    def run(self, value):
        return (value,)


class TSlowSave:
    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "value": ("INT", {}),
                "prefix": ("STRING", {"default": "slow"}),
                "seconds": ("FLOAT", {"default": 0.2}),
            }
        }

    RETURN_TYPES = ()
    OUTPUT_NODE = True
    FUNCTION = "run"
    CATEGORY = "test"

    def run(self, value, prefix, seconds):
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            comfy.model_management.throw_exception_if_processing_interrupted()
            time.sleep(0.01)
        return _save(value, prefix)


class TStepSave(TSlowSave):
    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "value": ("INT", {}),
                "prefix": ("STRING", {"default": "steps"}),
                "steps": ("INT", {"default": 4}),
                "seconds": ("FLOAT", {"default": 0.02}),
            },
            "optional": {"preview": ("BOOLEAN", {"default": False})},
        }

    def run(self, value, prefix, steps, seconds, preview=False):
        bar = comfy.utils.ProgressBar(steps)
        for step in range(steps):
            time.sleep(seconds)
            image = ("JPEG", Image.new("RGB", (8, 8), (step * 40, 200, 10)), 64) if preview else None
            bar.update_absolute(step + 1, steps, image)
        return _save(value, prefix)


class TCopyInput:
    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"image": ("STRING", {}), "prefix": ("STRING", {"default": "copy"})}}

    RETURN_TYPES = ()
    OUTPUT_NODE = True
    FUNCTION = "run"
    CATEGORY = "test"

    def run(self, image, prefix):
        name = f"{prefix}.png"
        shutil.copyfile(
            folder_paths.get_annotated_filepath(image), os.path.join(folder_paths.get_output_directory(), name)
        )
        return {"ui": {"images": [{"filename": name, "subfolder": "", "type": "output"}]}}


NODE_CLASS_MAPPINGS = {"TNumber": TNumber, "TSlowSave": TSlowSave, "TStepSave": TStepSave, "TCopyInput": TCopyInput}
