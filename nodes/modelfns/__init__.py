"""The core ModelFns: text encoding, one denoising step, VAE encode/decode, the cascade discriminator
(registered on import; cluster.providers says who imports this)."""
from nodes.modelfns import (clip_vision, denoise, discriminator, style_model, text_encoder,  # noqa: F401
                            upscale_model, vae)
