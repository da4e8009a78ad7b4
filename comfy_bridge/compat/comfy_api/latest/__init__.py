"""`comfy_api.latest`: io (V3 schemas), ui, ComfyExtension and the ComfyAPI execution helpers."""

from __future__ import annotations

from typing import Any

from comfy_bridge.compat.comfy_api.latest import _io as io
from comfy_bridge.compat.comfy_api.latest import _ui as ui
from comfy_bridge.compat.comfy_api.latest._io import ComfyExtension
from comfy_bridge.compat.comfy_api.latest._types import (
    MESH,
    VOXEL,
    AudioInput,
    ImageInput,
    LatentInput,
    MaskInput,
    VideoCodec,
    VideoComponents,
    VideoContainer,
    VideoFromComponents,
    VideoFromFile,
    VideoInput,
)
from comfy_bridge.execution.node_context import get_executing_context
from comfy_bridge.execution.progress_state import get_progress_state


def _set_progress(
    value: float, max_value: float, node_id: str | None, preview_image: Any, ignore_size_limit: bool
) -> None:
    """Update the node's progress (a `progress_state` message, plus a preview for clients that take them)."""
    context = get_executing_context()
    if node_id is None and context is not None:
        node_id = context.node_id
    if node_id is None:
        raise ValueError("node_id must be provided if not in executing context")
    image = preview_image
    if image is not None and not isinstance(image, tuple):
        import numpy as np
        from PIL import Image

        if not isinstance(image, Image.Image):  # a [B,H,W,C] / [H,W,C] float tensor
            tensor = image[0] if len(image.shape) == 4 else image
            image = Image.fromarray(np.clip(tensor.cpu().numpy() * 255, 0, 255).astype(np.uint8))
        image = (image.format or "JPEG", image, None if ignore_size_limit else 512)
    get_progress_state().update_progress(node_id, value, max_value, image)


def _register_replacement(node_replace: io.NodeReplace) -> None:
    from comfy_bridge.node_replace import node_replace_manager

    node_replace_manager().register(node_replace)


class ComfyAPI:
    """`api = ComfyAPI(); await api.execution.set_progress(value=..., max_value=...)`;
    `await api.node_replacement.register(io.NodeReplace(...))` (from an extension's on_load)."""

    VERSION = "latest"

    class Execution:
        async def set_progress(
            self,
            value: float,
            max_value: float,
            node_id: str | None = None,
            preview_image: Any = None,
            ignore_size_limit: bool = False,
        ) -> None:
            _set_progress(value, max_value, node_id, preview_image, ignore_size_limit)

    class NodeReplacement:
        async def register(self, node_replace: io.NodeReplace) -> None:
            _register_replacement(node_replace)

    def __init__(self) -> None:
        self.execution = ComfyAPI.Execution()
        self.node_replacement = ComfyAPI.NodeReplacement()


class ComfyAPISync:
    """The same API for sync node code."""

    VERSION = "latest"

    class Execution:
        def set_progress(
            self,
            value: float,
            max_value: float,
            node_id: str | None = None,
            preview_image: Any = None,
            ignore_size_limit: bool = False,
        ) -> None:
            _set_progress(value, max_value, node_id, preview_image, ignore_size_limit)

    class NodeReplacement:
        def register(self, node_replace: io.NodeReplace) -> None:
            _register_replacement(node_replace)

    def __init__(self) -> None:
        self.execution = ComfyAPISync.Execution()
        self.node_replacement = ComfyAPISync.NodeReplacement()


class Input:
    """The value types nodes receive: IMAGE / MASK tensors, AUDIO and LATENT dicts, VIDEO objects."""

    Image = ImageInput
    Audio = AudioInput
    Mask = MaskInput
    Latent = LatentInput
    Video = VideoInput


class InputImpl:
    """The VIDEO implementations: a file (path or BytesIO) or frames in memory."""

    VideoFromFile = VideoFromFile
    VideoFromComponents = VideoFromComponents


class Types:
    VideoCodec = VideoCodec
    VideoContainer = VideoContainer
    VideoComponents = VideoComponents
    MESH = MESH
    VOXEL = VOXEL


comfy_io = io
ComfyAPI_latest = ComfyAPI
IO = io
UI = ui

__all__ = [
    "ComfyAPI",
    "ComfyAPISync",
    "ComfyExtension",
    "io",
    "ui",
    "IO",
    "UI",
    "comfy_io",
    "Input",
    "InputImpl",
    "Types",
]
