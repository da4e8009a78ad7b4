"""`comfy.ldm.modules.distributions.distributions`: the VAE's diagonal Gaussian posterior."""

from __future__ import annotations

import math

import torch

__all__ = ["AbstractDistribution", "DiracDistribution", "DiagonalGaussianDistribution", "normal_kl"]


class AbstractDistribution:
    def sample(self):
        raise NotImplementedError()

    def mode(self):
        raise NotImplementedError()


class DiracDistribution(AbstractDistribution):
    def __init__(self, value):
        self.value = value

    def sample(self):
        return self.value

    def mode(self):
        return self.value


class DiagonalGaussianDistribution:
    """`parameters` [B, 2C, ...] = mean and log-variance along dim 1 (log-variance clamped to [-30, 20]);
    `deterministic` makes std and var zero. sample() draws with torch's global generator."""

    def __init__(self, parameters: torch.Tensor, deterministic: bool = False):
        self.parameters = parameters
        self.mean, logvar = torch.chunk(parameters, 2, dim=1)
        self.logvar = torch.clamp(logvar, -30.0, 20.0)
        self.deterministic = deterministic
        self.std = torch.exp(0.5 * self.logvar)
        self.var = torch.exp(self.logvar)
        if deterministic:
            self.var = self.std = torch.zeros_like(self.mean, device=parameters.device)

    def sample(self) -> torch.Tensor:
        return self.mean + self.std * torch.randn(self.mean.shape, device=self.parameters.device)

    def kl(self, other: DiagonalGaussianDistribution | None = None) -> torch.Tensor:
        """KL(self || other), or KL(self || N(0, I)) without other, summed over dims 1-3."""
        if self.deterministic:
            return torch.Tensor([0.0])
        if other is None:
            terms = self.mean.pow(2) + self.var - 1.0 - self.logvar
        else:
            terms = (
                (self.mean - other.mean).pow(2) / other.var + self.var / other.var - 1.0 - self.logvar + other.logvar
            )
        return 0.5 * torch.sum(terms, dim=[1, 2, 3])

    def nll(self, sample: torch.Tensor, dims: list = [1, 2, 3]) -> torch.Tensor:
        """Negative log-likelihood of `sample`, summed over `dims`."""
        if self.deterministic:
            return torch.Tensor([0.0])
        return 0.5 * torch.sum(math.log(2.0 * math.pi) + self.logvar + (sample - self.mean).pow(2) / self.var, dim=dims)

    def mode(self) -> torch.Tensor:
        return self.mean


def normal_kl(mean1, logvar1, mean2, logvar2):
    """KL divergence between two Gaussians given by mean and log-variance (tensors or floats, broadcast)."""
    tensor = next(x for x in (mean1, logvar1, mean2, logvar2) if isinstance(x, torch.Tensor))
    logvar1, logvar2 = (x if isinstance(x, torch.Tensor) else torch.tensor(x).to(tensor) for x in (logvar1, logvar2))
    return 0.5 * (
        -1.0 + logvar2 - logvar1 + torch.exp(logvar1 - logvar2) + ((mean1 - mean2) ** 2) * torch.exp(-logvar2)
    )
