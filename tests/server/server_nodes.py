"""Small node classes the server tests run on the real engine (comfy_bridge.execution.PromptExecutor,
comfy_bridge.validation). They do what a node pack does, through the same module surface
(comfy.utils.ProgressBar, comfy.model_management's interrupt check, hidden inputs): nothing in them
sends a websocket message or writes history, so every message a test asserts comes from the engine."""

from __future__ import annotations

import time

import torch
from PIL import Image

from comfy_bridge.compat.comfy import model_management
from comfy_bridge.compat.comfy.utils import ProgressBar
from nodes import workspace


class StubImage:
    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"width": ("INT", {"default": 8, "min": 1, "max": 64})}}

    RETURN_TYPES = ("IMAGE",)
    FUNCTION = "run"
    CATEGORY = "test"

    def run(self, width, **undeclared):  # undeclared constants reach the node as kwargs (ComfyUI's rule)
        return (torch.zeros((1, 8, width, 3)),)


def _save(images: torch.Tensor, prefix: str) -> dict:
    """Write the first image as <prefix>.png in the output folder; the UI dict SaveImage reports."""
    name = f"{prefix[:80]}.png"
    pixels = (images[0].clamp(0, 1) * 255).to(torch.uint8).numpy()
    Image.fromarray(pixels).save(workspace.active().output_dir / name)
    return {"ui": {"images": [{"filename": name, "subfolder": "", "type": "output"}]}}


class StubSave:
    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"images": ("IMAGE",), "filename_prefix": ("STRING", {"default": "stub"})}}

    RETURN_TYPES = ()
    OUTPUT_NODE = True
    FUNCTION = "run"
    CATEGORY = "test"

    def run(self, images, filename_prefix):
        return _save(images, filename_prefix)


class StubError(StubSave):
    def run(self, images, filename_prefix):
        raise RuntimeError("boom")


class StubSlow(StubSave):
    """Runs until interrupted (checking the flag as samplers do, every 10 ms), 60 s at most.
    `ticks` counts the interrupt checks, so a test can wait for the node to have looked at the flag."""

    ticks = 0

    def run(self, images, filename_prefix):
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            model_management.throw_exception_if_processing_interrupted()
            StubSlow.ticks += 1
            time.sleep(0.01)
        raise TimeoutError("StubSlow was never interrupted")


class StubPreview(StubSave):
    """Sends one PNG preview through ProgressBar (as a sampler's latent preview does), then saves."""

    def run(self, images, filename_prefix):
        ProgressBar(1).update_absolute(0, 1, ("PNG", Image.new("RGB", (16, 8), (255, 0, 0)), 8))
        return _save(images, filename_prefix)


class StubProgress:
    """Reports `steps` ProgressBar updates and passes its image on."""

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"images": ("IMAGE",), "steps": ("INT", {"default": 3, "min": 1, "max": 100})}}

    RETURN_TYPES = ("IMAGE",)
    FUNCTION = "run"
    CATEGORY = "test"

    def run(self, images, steps):
        bar = ProgressBar(steps)
        for _ in range(steps):
            bar.update(1)
        return (images,)


class StubKeyCheck:
    """An API node's view of the request: reports whether the hidden API key reached it (never the key)."""

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"images": ("IMAGE",)}, "hidden": {"api_key": "API_KEY_COMFY_ORG"}}

    RETURN_TYPES = ()
    OUTPUT_NODE = True
    FUNCTION = "run"
    CATEGORY = "test"

    def run(self, images, api_key=None):
        return {"ui": {"key_seen": [api_key == "secret"]}}


class StubBrokenInfo:
    """INPUT_TYPES raises: /object_info must skip it and list the others."""

    @classmethod
    def INPUT_TYPES(cls):
        raise RuntimeError("bad INPUT_TYPES")

    RETURN_TYPES = ()
    FUNCTION = "run"
    CATEGORY = "test"


CLASSES = {c.__name__: c for c in (StubImage, StubSave, StubError, StubSlow, StubPreview, StubProgress, StubKeyCheck)}
DISPLAY_NAMES = {"StubImage": "Stub Image"}
