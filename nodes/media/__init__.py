"""Video and audio as values: ComfyUI's VIDEO (`video.VideoInput` and its two kinds) and AUDIO
(`{"waveform": [B, C, T] float tensor, "sample_rate": int}`) types, read and written with PyAV.

The node classes that use them are in `nodes.library.video` and `nodes.library.audio`; the compat
layer re-exports these types under the names node packs import from `comfy_api`."""

import importlib
from typing import Any


class LazyModule:
    """A module imported on its first use. PyAV carries ffmpeg (a 36 MB wheel): importing it when a video or
    audio node first runs lets a server that runs none start without it (the GPU check's machine, whose
    wheels must fit beside the repository in 64 MiB, has none)."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attr: str) -> Any:
        return getattr(importlib.import_module(self._name), attr)


av = LazyModule("av")
