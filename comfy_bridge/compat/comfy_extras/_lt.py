"""Names of ComfyUI's comfy_extras.nodes_lt (LTX-Video) that packs import: the noise-mask helper, and the
LTXVAddGuide node class to subclass. LTX-Video models do not run on this backend, so running the node (or
its keyframe helpers, which need LTX-Video's patchifier) raises UnsupportedFeature naming it."""

from __future__ import annotations

from typing import Any

import torch

from comfy_bridge.compat.comfy_api.latest import io
from comfy_bridge.packs.origin import UnsupportedFeature

WHY = "LTX-Video models do not run on this backend"


def get_noise_mask(latent: dict) -> torch.Tensor:
    """The latent's noise mask (a copy), or ones of shape [B, 1, T, 1, 1] for a video latent without one."""
    mask = latent.get("noise_mask")
    if mask is not None:
        return mask.clone()
    samples = latent["samples"]
    return torch.ones((samples.shape[0], 1, samples.shape[2], 1, 1), dtype=torch.float32, device=samples.device)


class LTXVAddGuide(io.ComfyNode):
    @classmethod
    def define_schema(cls) -> io.Schema:
        return io.Schema(
            node_id="LTXVAddGuide",
            category="conditioning/video_models",
            inputs=[
                io.Conditioning.Input("positive"),
                io.Conditioning.Input("negative"),
                io.Vae.Input("vae"),
                io.Latent.Input("latent"),
                io.Image.Input("image"),
                io.Int.Input("frame_idx", default=0, min=-9999, max=9999),
                io.Float.Input("strength", default=1.0, min=0.0, max=1.0, step=0.01),
            ],
            outputs=[
                io.Conditioning.Output(display_name="positive"),
                io.Conditioning.Output(display_name="negative"),
                io.Latent.Output(display_name="latent"),
            ],
        )

    @classmethod
    def execute(cls, *args: Any, **kwargs: Any) -> io.NodeOutput:
        raise UnsupportedFeature("comfy_extras.nodes_lt.LTXVAddGuide", WHY)

    @classmethod
    def encode(cls, *args: Any, **kwargs: Any) -> Any:
        raise UnsupportedFeature("comfy_extras.nodes_lt.LTXVAddGuide.encode", WHY)

    @classmethod
    def append_keyframe(cls, *args: Any, **kwargs: Any) -> Any:
        raise UnsupportedFeature("comfy_extras.nodes_lt.LTXVAddGuide.append_keyframe", WHY)
