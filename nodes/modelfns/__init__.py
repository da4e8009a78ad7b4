"""The core ModelFns: text encoding, one denoising step, VAE encode/decode, the cascade discriminator
(registered on import; cluster.providers says who imports this)."""
from nodes.modelfns import (clip_vision, denoise, discriminator, ltx2_audio, style_model,  # noqa: F401
                            text_encoder, text_generate, upscale_model, vae)

from cluster.refs import find_copies_with  # noqa: E402
from nodes import workspace  # noqa: E402


def _copy_in_workspace(path: str, digest: str) -> str | None:
    found = workspace.active().find_copy(path, digest)
    return None if found is None else str(found)


# an executor on another machine finds the head's model files in its own workspace (cluster.refs.on_this_machine)
find_copies_with(_copy_in_workspace)
