"""The FLUX.2 nodes of the newest ComfyUI's comfy_extras.nodes_flux (not in ComfyUI 0.3.64):
EmptyFlux2LatentImage and Flux2Scheduler, with ComfyUI's names, inputs, defaults and numbers."""

from __future__ import annotations

import math

import torch

from nodes.latent import MAX_RESOLUTION, EmptySD3LatentImage

MODULE = "comfy_extras.nodes_flux"
FLUX2_DOWNSCALE = 16  # FLUX.2 latents: 128 channels at 1/16 of the image size
# BFL's empirical fit of the schedule shift mu to the image token count (FLUX.2's sampling code, as ComfyUI has it):
# a line in the token count for 10 and for 200 steps, interpolated in the step count; long sequences use the
# 200-step line alone.
MU_10_STEPS = (8.73809524e-05, 1.89833333)
MU_200_STEPS = (0.00016927, 0.45666666)
MU_LONG_SEQUENCE = 4300


class EmptyFlux2LatentImage:
    RELATIVE_PYTHON_MODULE = MODULE

    @classmethod
    def INPUT_TYPES(cls):
        return EmptySD3LatentImage.INPUT_TYPES()  # ComfyUI declares the same width, height and batch size

    RETURN_TYPES = ("LATENT",)
    FUNCTION = "execute"
    CATEGORY = "latent"
    DESCRIPTION = "Makes a batch of blank FLUX.2 latents: 128 channels at 1/16 of the image size."

    def execute(self, width: int, height: int, batch_size: int = 1):
        latent = torch.zeros([batch_size, 128, height // FLUX2_DOWNSCALE, width // FLUX2_DOWNSCALE])
        return ({"samples": latent, "downscale_ratio_spacial": FLUX2_DOWNSCALE},)


def empirical_mu(image_seq_len: int, num_steps: int) -> float:
    a2, b2 = MU_200_STEPS
    if image_seq_len > MU_LONG_SEQUENCE:
        return float(a2 * image_seq_len + b2)
    a1, b1 = MU_10_STEPS
    m_200, m_10 = a2 * image_seq_len + b2, a1 * image_seq_len + b1
    a = (m_200 - m_10) / 190.0
    b = m_200 - 200.0 * a  # in this order: ComfyUI's and BFL's rounding
    return float(a * num_steps + b)


def flux2_sigmas(steps: int, width: int, height: int) -> torch.Tensor:
    """steps+1 sigmas from 1 to 0: linearly spaced times through the shift exp(mu) / (exp(mu) + 1/t - 1),
    mu fitted to the image's token count (one token per 16x16 pixels)."""
    mu = empirical_mu(round(width * height / (16 * 16)), steps)
    t = torch.linspace(1, 0, steps + 1)
    return math.exp(mu) / (math.exp(mu) + (1 / t - 1))


class Flux2Scheduler:
    RELATIVE_PYTHON_MODULE = MODULE

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "steps": ("INT", {"default": 20, "min": 1, "max": 4096}),
                "width": ("INT", {"default": 1024, "min": 16, "max": MAX_RESOLUTION, "step": 1}),
                "height": ("INT", {"default": 1024, "min": 16, "max": MAX_RESOLUTION, "step": 1}),
            }
        }

    RETURN_TYPES = ("SIGMAS",)
    FUNCTION = "execute"
    CATEGORY = "sampling/custom_sampling/schedulers"
    DESCRIPTION = (
        "FLUX.2's schedule: its time shift fitted to the image size and the number of steps (the "
        "sigmas do not depend on the model)."
    )

    def execute(self, steps: int, width: int, height: int):
        return (flux2_sigmas(steps, width, height),)


NODE_CLASS_MAPPINGS = {"EmptyFlux2LatentImage": EmptyFlux2LatentImage, "Flux2Scheduler": Flux2Scheduler}
NODE_DISPLAY_NAME_MAPPINGS = {"EmptyFlux2LatentImage": "Empty Flux 2 Latent"}
