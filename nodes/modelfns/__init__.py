"""The core ModelFns: text encoding, one denoising step, VAE encode/decode (registered on import),
and `pack_node`, which runs a custom node pack's node whole on an executor."""
from comfy_bridge.packs import pack_node  # noqa: F401
from nodes.modelfns import denoise, discriminator, text_encoder, vae  # noqa: F401
