"""`comfy_api.latest.ui`: the UI payloads V3 nodes return (saved/preview images, text, ...)."""

from __future__ import annotations

import json
import os
import random
import uuid
from typing import Any

import numpy as np

from comfy_bridge.compat.comfy_api.latest._io import FolderType, _UIOutput


class SavedResult(dict):
    """One file the frontend can show: {"filename", "subfolder", "type"}."""

    def __init__(self, filename: str, subfolder: str, type: FolderType):
        super().__init__(
            filename=filename, subfolder=subfolder, type=type.value if isinstance(type, FolderType) else type
        )

    @property
    def filename(self) -> str:
        return self["filename"]

    @property
    def subfolder(self) -> str:
        return self["subfolder"]

    @property
    def type(self) -> FolderType:
        return FolderType(self["type"])


class SavedImages(_UIOutput):
    def __init__(self, results: list[SavedResult], is_animated: bool = False):
        self.results, self.is_animated = results, is_animated

    def as_dict(self) -> dict:
        return {"images": self.results, "animated": (self.is_animated,)}


def _folder(folder_type: FolderType) -> str:
    import folder_paths

    return folder_paths.get_directory_by_type(FolderType(folder_type).value)


def _hidden_metadata(cls: Any) -> tuple[Any, dict | None]:
    """(prompt, extra_pnginfo) a node's files carry: from its hidden values, none when metadata is off."""
    from nodes import image_io

    hidden = getattr(cls, "hidden", None)
    if hidden is None or not image_io.metadata_enabled():
        return None, None
    return hidden.prompt, hidden.extra_pnginfo


def _target(images: Any, filename_prefix: str, folder_type: FolderType) -> tuple[str, str, int, str]:
    import folder_paths

    full_folder, filename, counter, subfolder, _ = folder_paths.get_save_image_path(
        filename_prefix, _folder(folder_type), images[0].shape[1], images[0].shape[0]
    )
    return full_folder, filename, counter, subfolder


class ImageSaveHelper:
    @staticmethod
    def save_images(
        images: Any, filename_prefix: str, folder_type: FolderType, cls: Any = None, compress_level: int = 4
    ) -> list[SavedResult]:
        """Each image of a [B,H,W,C] batch as a PNG, with the prompt and workflow chunks of the node's
        hidden values (values truncated like ComfyUI: clip(255*x) to uint8)."""
        from nodes.image_io import save_png

        full_folder, filename, counter, subfolder = _target(images, filename_prefix, folder_type)
        prompt, extra = _hidden_metadata(cls)
        results = []
        for batch_number, image in enumerate(images):
            name = f"{filename.replace('%batch_num%', str(batch_number))}_{counter:05}_.png"
            save_png(image, os.path.join(full_folder, name), prompt, extra, compress_level)
            results.append(SavedResult(name, subfolder, folder_type))
            counter += 1
        return results

    @staticmethod
    def get_save_images_ui(images: Any, filename_prefix: str, cls: Any = None, compress_level: int = 4) -> SavedImages:
        return SavedImages(ImageSaveHelper.save_images(images, filename_prefix, FolderType.output, cls, compress_level))

    @staticmethod
    def save_animated_png(
        images: Any, filename_prefix: str, folder_type: FolderType, cls: Any, fps: float, compress_level: int
    ) -> SavedResult:
        """The batch as one APNG; prompt and workflow go into 'comf' chunks after the image data."""
        from PIL.PngImagePlugin import PngInfo

        from nodes.image_io import to_pil

        full_folder, filename, counter, subfolder = _target(images, filename_prefix, folder_type)
        prompt, extra = _hidden_metadata(cls)
        info = None
        if prompt is not None or extra is not None:
            info = PngInfo()
            entries = ([("prompt", prompt)] if prompt is not None else []) + list((extra or {}).items())
            for key, value in entries:
                info.add(
                    b"comf",
                    key.encode("latin-1", "strict") + b"\0" + json.dumps(value).encode("latin-1", "strict"),
                    after_idat=True,
                )
        frames = [to_pil(image) for image in images]
        name = f"{filename}_{counter:05}_.png"
        frames[0].save(
            os.path.join(full_folder, name),
            pnginfo=info,
            compress_level=compress_level,
            save_all=True,
            duration=int(1000.0 / fps),
            append_images=frames[1:],
        )
        return SavedResult(name, subfolder, folder_type)

    @staticmethod
    def get_save_animated_png_ui(
        images: Any, filename_prefix: str, cls: Any, fps: float, compress_level: int
    ) -> SavedImages:
        result = ImageSaveHelper.save_animated_png(images, filename_prefix, FolderType.output, cls, fps, compress_level)
        return SavedImages([result], is_animated=len(images) > 1)

    @staticmethod
    def save_animated_webp(
        images: Any,
        filename_prefix: str,
        folder_type: FolderType,
        cls: Any,
        fps: float,
        lossless: bool,
        quality: int,
        method: int,
    ) -> SavedResult:
        """The batch as one animated WebP; the prompt in EXIF tag 0x0110, the workflow keys from 0x010f down."""
        from nodes.image_io import to_pil

        full_folder, filename, counter, subfolder = _target(images, filename_prefix, folder_type)
        frames = [to_pil(image) for image in images]
        exif = frames[0].getexif()
        prompt, extra = _hidden_metadata(cls)
        if prompt is not None:
            exif[0x0110] = f"prompt:{json.dumps(prompt)}"
        for tag, (key, value) in zip(range(0x010F, 0, -1), (extra or {}).items()):
            exif[tag] = f"{key}:{json.dumps(value)}"
        name = f"{filename}_{counter:05}_.webp"
        frames[0].save(
            os.path.join(full_folder, name),
            save_all=True,
            duration=int(1000.0 / fps),
            append_images=frames[1:],
            exif=exif,
            lossless=lossless,
            quality=quality,
            method=method,
        )
        return SavedResult(name, subfolder, folder_type)

    @staticmethod
    def get_save_animated_webp_ui(
        images: Any, filename_prefix: str, cls: Any, fps: float, lossless: bool, quality: int, method: int
    ) -> SavedImages:
        result = ImageSaveHelper.save_animated_webp(
            images, filename_prefix, FolderType.output, cls, fps, lossless, quality, method
        )
        return SavedImages([result], is_animated=len(images) > 1)


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
            import folder_paths
            from PIL import Image

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
    def save_audio(
        audio: dict,
        filename_prefix: str,
        folder_type: FolderType,
        cls: Any = None,
        format: str = "flac",
        quality: str = "128k",
    ) -> list[SavedResult]:
        """Each batch item of an AUDIO value as a `format` file (flac, mp3, opus) in the output or temp folder."""
        from nodes.library.audio import save_audio

        folder = folder_type.value if isinstance(folder_type, FolderType) else folder_type
        hidden = getattr(cls, "hidden", None)
        entries = save_audio(
            audio,
            filename_prefix,
            folder,
            format,
            quality,
            getattr(hidden, "prompt", None),
            getattr(hidden, "extra_pnginfo", None),
        )
        return [SavedResult(e["filename"], e["subfolder"], FolderType(e["type"])) for e in entries]

    @staticmethod
    def get_save_audio_ui(
        audio: dict, filename_prefix: str, cls: Any = None, format: str = "flac", quality: str = "128k"
    ) -> SavedAudios:
        return SavedAudios(AudioSaveHelper.save_audio(audio, filename_prefix, FolderType.output, cls, format, quality))


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
