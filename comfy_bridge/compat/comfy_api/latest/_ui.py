"""`comfy_api.latest.ui`: the UI payloads V3 nodes return (saved/preview images, text, ...)."""
from __future__ import annotations

import os
import random
import uuid
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
    """A 3D model file with its camera; `bg_image` (an IMAGE) is written to temp as the background."""

    def __init__(self, model_file: Any, camera_info: Any, **kwargs: Any):
        self.model_file, self.camera_info, self.bg_image_path = model_file, camera_info, None
        bg_image = kwargs.get("bg_image")
        if bg_image is not None:
            from PIL import Image
            import folder_paths
            name = f"bg_{uuid.uuid4().hex}.png"
            pixels = np.clip(bg_image[0].cpu().numpy() * 255, 0, 255).astype(np.uint8)
            Image.fromarray(pixels).save(os.path.join(folder_paths.get_temp_directory(), name), compress_level=1)
            self.bg_image_path = f"temp/{name}"

    def as_dict(self) -> dict:
        return {"result": [self.model_file, self.camera_info, self.bg_image_path]}


class SavedAudios(_UIOutput):
    def __init__(self, results: list[SavedResult]):
        self.results = results

    def as_dict(self) -> dict:
        return {"audio": self.results}


class AudioSaveHelper:
    @staticmethod
    def save_audio(audio: dict, filename_prefix: str, folder_type: FolderType, cls: Any = None,
                   format: str = "flac", quality: str = "128k") -> list[SavedResult]:
        """Each batch item of an AUDIO value as a `format` file (flac, mp3, opus) in the output or temp folder."""
        from nodes.library.audio import save_audio
        folder = folder_type.value if isinstance(folder_type, FolderType) else folder_type
        hidden = getattr(cls, "hidden", None)
        entries = save_audio(audio, filename_prefix, folder, format, quality, getattr(hidden, "prompt", None),
                             getattr(hidden, "extra_pnginfo", None))
        return [SavedResult(e["filename"], e["subfolder"], FolderType(e["type"])) for e in entries]


class PreviewAudio(_UIOutput):
    """Plays an AUDIO value in the UI (written to the temp folder as FLAC)."""

    def __init__(self, audio: dict, cls: Any = None, **kwargs: Any):
        prefix = "ComfyUI_temp_" + "".join(random.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(5))
        self.values = AudioSaveHelper.save_audio(audio, prefix, FolderType.temp, cls, format="flac")

    def as_dict(self) -> dict:
        return {"audio": self.values}


class PreviewVideo(_UIOutput):
    """Shows saved video files (their SavedResult entries) in the UI, as ComfyUI's frontend expects them."""

    def __init__(self, values: list, **kwargs: Any):
        self.values = values

    def as_dict(self) -> dict:
        return {"images": self.values, "animated": (True,)}
