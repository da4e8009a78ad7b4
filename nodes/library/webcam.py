"""ComfyUI's comfy_extras.nodes_webcam: WebcamCapture. The browser's webcam widget uploads a frame to the
input folder and puts its name in `image`; on the server the node is LoadImage of that file (width, height
and capture_on_queue only steer the widget), with LoadImage's validation and change detection."""

from __future__ import annotations

import torch

from nodes import MAX_RESOLUTION
from nodes.image_io import LoadImage

MODULE = "comfy_extras.nodes_webcam"


class WebcamCapture(LoadImage):
    @classmethod
    def INPUT_TYPES(cls):
        size = {"default": 0, "min": 0, "max": MAX_RESOLUTION, "step": 1}
        return {
            "required": {
                "image": (
                    "WEBCAM",
                    {"tooltip": "The captured frame: a file the webcam widget uploaded to the input folder."},
                ),
                "width": ("INT", {**size, "tooltip": "Capture width in the browser (0: the camera's own)."}),
                "height": ("INT", {**size, "tooltip": "Capture height in the browser (0: the camera's own)."}),
                "capture_on_queue": (
                    "BOOLEAN",
                    {"default": True, "tooltip": "Take a new frame each time the prompt is queued."},
                ),
            }
        }

    RETURN_TYPES = ("IMAGE",)
    FUNCTION = "load_capture"
    CATEGORY = "image"
    DESCRIPTION = "Loads a frame captured by the browser's webcam widget."
    RELATIVE_PYTHON_MODULE = MODULE

    def load_capture(self, image: str, **kwargs) -> tuple[torch.Tensor]:
        return (self.load_image(image)[0],)

    @classmethod
    def IS_CHANGED(cls, image: str, width: int = 0, height: int = 0, capture_on_queue: bool = True) -> str:
        return super().IS_CHANGED(image)


NODE_CLASS_MAPPINGS = {"WebcamCapture": WebcamCapture}
NODE_DISPLAY_NAME_MAPPINGS = {"WebcamCapture": "Webcam Capture"}
