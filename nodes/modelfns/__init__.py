"""The core ModelFns: text encoding, one denoising step, VAE encode/decode, the cascade discriminator
(registered on import; cluster.executor.providers says who imports this)."""

from cluster.refs import find_copies_with  # noqa: E402
from nodes import workspace  # noqa: E402
from nodes.modelfns import (  # noqa: F401
    audio_encoder,
    clip_vision,
    denoise,
    depth_anything3,
    discriminator,
    frame_interpolation,
    hunyuan_video15_upsample,
    latent_upscale_model,
    ltx2_audio,
    minimax_h3_audio,
    moge,
    photomaker,
    sam3,
    style_model,
    text_encoder,
    text_generate,
    upscale_model,
    vae,
)


def _copy_in_workspace(path: str, digest: str) -> str | None:
    found = workspace.active().find_copy(path, digest)
    return None if found is None else str(found)


# an executor on another machine finds the head's model files in its own workspace (cluster.refs.on_this_machine)
find_copies_with(_copy_in_workspace)
