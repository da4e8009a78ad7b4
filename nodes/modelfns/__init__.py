"""The core ModelFns: text encoding, one denoising step, VAE encode/decode (registered on import)."""
from nodes.modelfns import denoise, discriminator, text_encoder, vae  # noqa: F401
