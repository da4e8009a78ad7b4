"""ComfyUI's comfy_extras.nodes_ideogram4 (newer than 0.10.0, read from the newest Comfy-Org/ComfyUI source; the
same interface comfyui-embedded-docs 0.5.15 documents): the Ideogram 4 Scheduler, a logit-normal schedule over the
reference time whose mean is shifted by the image's size. It needs no model: the sigmas are rectified-flow noise
levels from 1 to 0."""

from __future__ import annotations

import math

import torch

# The reference schedule's log-SNR range: times are clamped where the log-SNR leaves it.
_LOG_SNR_LOW, _LOG_SNR_HIGH = -15.0, 18.0
_REFERENCE_PIXELS = 512 * 512


def ideogram4_sigmas(steps: int, width: int, height: int, mu: float, std: float) -> torch.Tensor:
    """steps + 1 descending sigmas: the quantiles of N(mean, std) at evenly spaced probabilities, taken through
    the logistic function to a clean-image time t (1 = image), clamped to the log-SNR range; sigma = 1 - t, the
    last one 0. mean = mu + half the log of the image's area over 512 x 512."""
    mean = mu + 0.5 * math.log(width * height / _REFERENCE_PIXELS)
    probabilities = torch.linspace(0.0, 1.0, steps + 1, dtype=torch.float64)
    time = 1.0 - torch.special.expit(mean + std * torch.special.ndtri(probabilities))
    time = time.clamp(1.0 / (1.0 + math.exp(0.5 * _LOG_SNR_HIGH)), 1.0 / (1.0 + math.exp(0.5 * _LOG_SNR_LOW)))
    sigmas = (1.0 - time).flip(0)
    sigmas[-1] = 0.0  # the clamp leaves about 6e-4: the schedule ends fully denoised
    return sigmas.to(torch.float32)


class Ideogram4Scheduler:
    RELATIVE_PYTHON_MODULE = "comfy_extras.nodes_ideogram4"
    FUNCTION = "execute"
    CATEGORY = "model/sampling/schedulers"
    RETURN_TYPES = ("SIGMAS",)
    OUTPUT_TOOLTIPS = (None,)
    DESCRIPTION = "Ideogram 4's reference schedule: logit-normal in time, shifted by the image size."

    @classmethod
    def INPUT_TYPES(cls):
        size = {"default": 1024, "min": 256, "max": 8192, "step": 16}
        return {
            "required": {
                "steps": ("INT", {"default": 20, "min": 1, "max": 200}),
                "width": ("INT", size),
                "height": ("INT", size),
                "mu": ("FLOAT", {"default": 0.0, "min": -10.0, "max": 10.0, "step": 0.05}),
                "std": ("FLOAT", {"default": 1.75, "min": 0.1, "max": 5.0, "step": 0.05}),
            }
        }

    def execute(self, steps: int, width: int, height: int, mu: float, std: float) -> tuple[torch.Tensor]:
        return (ideogram4_sigmas(int(steps), int(width), int(height), float(mu), float(std)),)


NODE_CLASS_MAPPINGS = {"Ideogram4Scheduler": Ideogram4Scheduler}
NODE_DISPLAY_NAME_MAPPINGS = {"Ideogram4Scheduler": "Ideogram 4 Scheduler"}
