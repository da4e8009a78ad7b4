"""Initial latent noise and the per-step noise of ancestral / SDE samplers, with ComfyUI's random streams.

Per-step noise must survive a process boundary: the cluster runs one invocation per denoising step. So every
noise sampler can save what it needs into the step `state` (tensors only) and be rebuilt from (seed, state):
- `GaussianNoise`: a torch.Generator seeded with the seed (seed + 1 on the CPU), drawing randn of x's shape in
  sequence (ComfyUI's default noise sampler); its state is the generator state, a uint8 tensor.
- `BrownianNoise`: torchsde's BrownianTree (a BrownianInterval on the dyadic "halfway" tree), ComfyUI's
  BrownianTreeNoiseSampler for the dpmpp SDE samplers. Its values depend only on (seed, t0, t1, query), not on
  earlier queries, so it is rebuilt from the seed and the schedule each step and needs no saved state.
"""

from __future__ import annotations

import warnings
from typing import Protocol

import torch
import torchsde
from torch import Tensor

RNG_STATE_KEY = "noise_rng"


def prepare_noise(latent: Tensor, seed: int, batch_index: list[int] | None = None) -> Tensor:
    """The initial noise ComfyUI's KSampler uses: CPU randn from a generator seeded with `seed`.

    With `batch_index` (latents cut out of a larger batch), draws are made for indices 0..max(batch_index) one
    latent at a time and each latent takes the draw of its index, so a sub-batch gets the same noise as the full
    batch had at those positions.
    """
    gen = torch.Generator(device="cpu").manual_seed(seed)
    if batch_index is None:
        return torch.randn(latent.size(), dtype=latent.dtype, layout=latent.layout, generator=gen, device="cpu")
    wanted = set(batch_index)
    one = [1] + list(latent.size())[1:]
    draws: dict[int, Tensor] = {}
    for k in range(max(batch_index) + 1):
        noise = torch.randn(one, dtype=latent.dtype, layout=latent.layout, generator=gen, device="cpu")
        if k in wanted:
            draws[k] = noise
    return torch.cat([draws[k] for k in batch_index], dim=0)


class NoiseSampler(Protocol):
    """noise(sigma, sigma_next) -> unit-variance noise of x's shape for the step sigma -> sigma_next."""

    def __call__(self, sigma: Tensor, sigma_next: Tensor) -> Tensor: ...

    def save_state(self, state: dict[str, Tensor]) -> None: ...


class NoNoise:
    """For deterministic samplers: drawing is an error, there is nothing to save."""

    def __call__(self, sigma: Tensor, sigma_next: Tensor) -> Tensor:
        raise RuntimeError("this sampler is deterministic and draws no noise")

    def save_state(self, state: dict[str, Tensor]) -> None:
        return None


class GaussianNoise:
    """randn of x's shape from one generator seeded with the seed (ComfyUI's default_noise_sampler).

    On the CPU the generator takes seed + 1, as ComfyUI's does after 0.3.64 (its PR 11528, in 0.10.0): the
    initial noise comes from a CPU generator seeded with the seed, so the first per-step draw would repeat it.
    A GPU generator is a different stream and keeps the seed itself. The largest seed (2**64 - 1, which ComfyUI's
    generator refuses after the + 1) wraps to 0. `cpu_offset=0` keeps the seed itself (for a sampler whose
    ComfyUI function draws from torch's global generator instead).
    """

    def __init__(self, x: Tensor, seed: int, cpu_offset: int = 1) -> None:
        self.shape, self.dtype, self.layout, self.device = x.size(), x.dtype, x.layout, x.device
        self.generator = torch.Generator(device=x.device)
        self.generator.manual_seed((seed + cpu_offset) % 2**64 if x.device.type == "cpu" else seed)

    @classmethod
    def from_state(cls, seed: int, x: Tensor, state: dict[str, Tensor], cpu_offset: int = 1) -> GaussianNoise:
        noise = cls(x, seed, cpu_offset)
        if RNG_STATE_KEY in state:
            # A host byte tensor of our own: on an executor the state arrives as a view into the shared-memory
            # arena (at an offset, reused after the call), and Generator.set_state reinterprets its storage.
            noise.generator.set_state(state[RNG_STATE_KEY].detach().to("cpu", copy=True).contiguous())
        return noise

    def __call__(self, sigma: Tensor, sigma_next: Tensor) -> Tensor:
        return torch.randn(
            self.shape, dtype=self.dtype, layout=self.layout, device=self.device, generator=self.generator
        )

    def like(self, x: Tensor) -> Tensor:
        """The stream's next draw in x's shape, filled in x's memory order as torch.randn_like fills it (for a
        sampler whose latent changes size between steps)."""
        return torch.randn_like(x, generator=self.generator)

    def save_state(self, state: dict[str, Tensor]) -> None:
        state[RNG_STATE_KEY] = self.generator.get_state()


class BrownianNoise:
    """Increments of one Brownian motion over sigma, normalised to unit variance (BrownianTreeNoiseSampler).

    The tree spans [smallest non-zero sigma, largest sigma] of the schedule. `on_device=False` keeps the tree on
    the CPU (ComfyUI's dpmpp_*_sde); True builds it on x's device (the *_gpu variants).
    """

    def __init__(self, x: Tensor, sigmas: Tensor, seed: int, on_device: bool = False) -> None:
        t0, t1 = sigmas[sigmas > 0].min(), sigmas.max()
        w0 = torch.zeros_like(x)
        self.on_cpu = not on_device
        if self.on_cpu:
            t0, w0, t1 = t0.detach().cpu(), w0.detach().cpu(), t1.detach().cpu()
        self.tree = torchsde.BrownianTree(t0, w0, t1, entropy=seed)

    @classmethod
    def from_state(
        cls, seed: int, x: Tensor, sigmas: Tensor, state: dict[str, Tensor], on_device: bool = False
    ) -> BrownianNoise:
        return cls(x, sigmas, seed, on_device)

    def _increment(self, t0: Tensor, t1: Tensor) -> Tensor:
        sign = 1
        if t0 > t1:
            t0, t1, sign = t1, t0, -1
        device, dtype = t0.device, t0.dtype
        if self.on_cpu:
            t0, t1 = t0.detach().cpu().float(), t1.detach().cpu().float()
        with warnings.catch_warnings():
            # Sub-step sigmas can fall a rounding error outside [t0, t1]; torchsde clamps them and warns each time.
            warnings.simplefilter("ignore", UserWarning)
            w = self.tree(t0, t1)
        return w.to(device=device, dtype=dtype) * sign

    def __call__(self, sigma: Tensor, sigma_next: Tensor) -> Tensor:
        t0, t1 = torch.as_tensor(sigma), torch.as_tensor(sigma_next)
        return self._increment(t0, t1) / (t1 - t0).abs().sqrt()

    def save_state(self, state: dict[str, Tensor]) -> None:
        return None
