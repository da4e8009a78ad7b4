"""The NOISE objects of ComfyUI's comfy_extras.nodes_custom_sampler, which packs construct directly
(`Noise_RandomNoise(seed).generate_noise(latent)`) or subclass with their own `generate_noise`. They are our
NoiseChoice, so SamplerCustomAdvanced takes them; it draws the initial noise through `generate_noise`, so a
pack's override is the noise it samples from (the seed still seeds the samplers' per-step noise)."""

from __future__ import annotations

import torch

from nodes.ksampler import NoiseChoice


class Noise_EmptyNoise(NoiseChoice):
    def __init__(self) -> None:
        super().__init__(0, False)

    def generate_noise(self, input_latent: dict) -> torch.Tensor:
        samples = input_latent["samples"]
        return torch.zeros(samples.shape, dtype=samples.dtype, layout=samples.layout, device="cpu")

    def generate(self, latent: dict, samples: torch.Tensor) -> torch.Tensor:
        return self.generate_noise({**latent, "samples": samples})


class Noise_RandomNoise(NoiseChoice):
    def __init__(self, seed: int) -> None:
        super().__init__(seed, True)

    def generate_noise(self, input_latent: dict) -> torch.Tensor:
        return NoiseChoice.generate(self, input_latent, input_latent["samples"])

    def generate(self, latent: dict, samples: torch.Tensor) -> torch.Tensor:
        return self.generate_noise({**latent, "samples": samples})
