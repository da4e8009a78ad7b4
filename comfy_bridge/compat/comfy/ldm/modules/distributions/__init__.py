"""`comfy.ldm.modules.distributions`: the VAE posterior (DiagonalGaussianDistribution)."""
