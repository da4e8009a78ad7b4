"""The core ModelFns: text encoding, one denoising step, VAE encode/decode, the cascade discriminator
(registered on import; cluster.providers says who imports this)."""
from nodes.modelfns import denoise, discriminator, text_encoder, upscale_model, vae  # noqa: F401
