"""`latent_preview`: sampler step callbacks. Previews are off by default (ComfyUI's --preview-method none),
so the callback only reports step progress."""
from __future__ import annotations

from typing import Any, Callable

from comfy_bridge.compat.comfy.utils import ProgressBar

MAX_PREVIEW_RESOLUTION = 512


def get_previewer(device: Any, latent_format: Any) -> None:
    return None


def prepare_callback(model: Any, steps: int, x0_output_dict: dict | None = None) -> Callable:
    pbar = ProgressBar(steps)

    def callback(step: int, x0: Any, x: Any, total_steps: int) -> None:
        if x0_output_dict is not None:
            x0_output_dict["x0"] = x0
        pbar.update_absolute(step + 1, total_steps, None)
    return callback
