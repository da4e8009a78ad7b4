"""`comfy_api.latest.ui`: the UI payloads V3 nodes return (saved/preview images, text, ...)."""
from __future__ import annotations

import os
import random
from typing import Any

import numpy as np

from comfy_bridge.compat.comfy_api.latest._io import FolderType, _UIOutput
from nodes.output_claims import write_atomic


class SavedResult(dict):
    """One file the frontend can show: {"filename", "subfolder", "type"}."""

    def __init__(self, filename: str, subfolder: str, type: FolderType):
        super().__init__(filename=filename, subfolder=subfolder, type=type.value if isinstance(type, FolderType) else type)


class SavedImages(_UIOutput):
    def __init__(self, results: list[SavedResult], is_animated: bool = False):
        self.results, self.is_animated = results, is_animated

    def as_dict(self) -> dict:
        return {"images": self.results, "animated": (self.is_animated,)}


class ImageSaveHelper:
    @staticmethod
    def save_images(images: Any, filename_prefix: str, folder_type: FolderType, cls: Any = None,
                    compress_level: int = 4) -> list[SavedResult]:
        """Write a [B,H,W,C] float batch as PNGs (values truncated like ComfyUI: clip(255*x) to uint8)."""
        from PIL import Image
        import folder_paths
        base = folder_paths.get_output_directory() if folder_type == FolderType.output else folder_paths.get_temp_directory()
        full_folder, filename, counter, subfolder, _ = folder_paths.get_save_image_path(
            filename_prefix, base, images[0].shape[1], images[0].shape[0])
        results = []
        for batch_number, image in enumerate(images):
            arr = np.clip(255.0 * image.cpu().numpy(), 0, 255).astype(np.uint8)
            name = f"{filename.replace('%batch_num%', str(batch_number))}_{counter:05}_.png"
            pil = Image.fromarray(arr.squeeze() if arr.shape[-1] == 1 else arr)
            write_atomic(os.path.join(full_folder, name),
                         lambda tmp: pil.save(tmp, format="PNG", compress_level=compress_level))
            results.append(SavedResult(name, subfolder, folder_type))
            counter += 1
        return results


class PreviewImage(_UIOutput):
    def __init__(self, image: Any, animated: bool = False, cls: Any = None, **kwargs: Any):
        prefix = "ComfyUI_temp_" + "".join(random.choice("abcdefghijklmnopqrstupvxyz") for _ in range(5))
        self.values = ImageSaveHelper.save_images(image, prefix, FolderType.temp, cls, compress_level=1)
        self.animated = animated

    def as_dict(self) -> dict:
        return {"images": self.values, "animated": (self.animated,)}


class PreviewMask(PreviewImage):
    def __init__(self, mask: Any, animated: bool = False, cls: Any = None, **kwargs: Any):
        preview = mask.reshape((-1, 1, mask.shape[-2], mask.shape[-1])).movedim(1, -1).expand(-1, -1, -1, 3)
        super().__init__(preview, animated, cls, **kwargs)


class PreviewText(_UIOutput):
    def __init__(self, value: str, **kwargs: Any):
        self.value = value

    def as_dict(self) -> dict:
        return {"text": (self.value,)}


class PreviewUI3D(_UIOutput):
    def __init__(self, model_file: Any, camera_info: Any, **kwargs: Any):
        self.model_file, self.camera_info = model_file, camera_info

    def as_dict(self) -> dict:
        return {"result": [self.model_file, self.camera_info]}


class PreviewAudio(_UIOutput):
    def __init__(self, values: list, **kwargs: Any):
        self.values = values

    def as_dict(self) -> dict:
        return {"audio": self.values}
