"""Tiny nodes for the tenancy tests: a number source that counts its runs (to see cache hits),
a saver that writes a PNG through folder_paths (to see per-tenant folders) and a slow saver that
honours interrupts (to keep prompts queued or running)."""

from __future__ import annotations

import time

from comfy_bridge.compat import folder_paths
from nodes import progress

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
        return {
            "required": {
                "value": ("INT", {}),
                "prefix": ("STRING", {"default": "slow"}),
                "seconds": ("FLOAT", {"default": 0.2}),
            }
        }

    def run(self, value, prefix, seconds):
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            progress.throw_if_interrupted()
            time.sleep(0.01)
        return _save(value, prefix)


class TSaveThenWait:
    """SaveImage's own writing (counter names, claims, atomic rename) of a 4x4 image, then a wait, so
    a head killed during the wait leaves a prompt whose file is written but which is not finished.
    Each run appends its prefix to RUNS_LOG (when set), which survives the kill."""

    RUNS_LOG: str | None = None

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "value": ("INT", {}),
                "prefix": ("STRING", {"default": "img"}),
                "seconds": ("FLOAT", {"default": 0.2}),
            }
        }

    RETURN_TYPES = ()
    OUTPUT_NODE = True
    FUNCTION = "run"
    CATEGORY = "test"

    def run(self, value, prefix, seconds):
        import torch

        from nodes.image_io import SaveImage

        name = f"{prefix}_{value}"
        if self.RUNS_LOG:
            with open(self.RUNS_LOG, "a") as f:
                f.write(name + "\n")
        result = SaveImage().save_images(torch.full((1, 4, 4, 3), (value % 256) / 255), name)
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            progress.throw_if_interrupted()
            time.sleep(0.01)
        return result


class TStepSave(TSave):
    """A sampler's shape: `steps` steps, each reported as progress (what ProgressBar does), then a save."""

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
        from PIL import Image

        for step in range(steps):
            time.sleep(seconds)
            # A sampler's latent preview: (format, image, max size), as ProgressBar hands it on.
            image = ("JPEG", Image.new("RGB", (8, 8), (step * 40, 200, 10)), 64) if preview else None
            progress.report_progress(step + 1, steps, image)
        return _save(value, prefix)


class TCopyInput:
    """Loads a file of the input folder by name (as LoadImage does) and saves its bytes as an output,
    so a test sees which file a name resolved to."""

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"image": ("STRING", {}), "prefix": ("STRING", {"default": "copy"})}}

    RETURN_TYPES = ()
    OUTPUT_NODE = True
    FUNCTION = "run"
    CATEGORY = "test"

    def run(self, image, prefix):
        import shutil

        name = f"{prefix}.png"
        shutil.copyfile(folder_paths.get_annotated_filepath(image), f"{folder_paths.get_output_directory()}/{name}")
        return {"ui": {"images": [{"filename": name, "subfolder": "", "type": "output"}]}}


class TCopyModel:
    """Finds a LoRA by name as a loader does (folder_paths) and saves its bytes as an output, so a test
    sees which file, if any, the name reached for the prompt's tenant."""

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"lora_name": ("STRING", {}), "prefix": ("STRING", {"default": "model"})}}

    RETURN_TYPES = ()
    OUTPUT_NODE = True
    FUNCTION = "run"
    CATEGORY = "test"

    def run(self, lora_name, prefix):
        import shutil

        name = f"{prefix}.safetensors"
        shutil.copyfile(
            folder_paths.get_full_path_or_raise("loras", lora_name), f"{folder_paths.get_output_directory()}/{name}"
        )
        return {"ui": {"files": [{"filename": name, "subfolder": "", "type": "output"}]}}


CLASSES = {
    "TNumber": TNumber,
    "TSave": TSave,
    "TSlowSave": TSlowSave,
    "TSaveThenWait": TSaveThenWait,
    "TStepSave": TStepSave,
    "TCopyInput": TCopyInput,
    "TCopyModel": TCopyModel,
}


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
