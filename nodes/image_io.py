"""Image files in the workspace: SaveImage, PreviewImage, LoadImage, LoadImageMask, LoadImageOutput.

Files follow ComfyUI's conventions so the frontend and `/view` find them: outputs are
`<output>/<subfolder>/<prefix>_<counter:05>_.png` with the API prompt and the workflow in PNG text
chunks; image names may carry a folder annotation ("x.png [output]"). Reusable pieces:
`save_png`, `load_image_tensor`, `save_image_path`, `annotated_path`, `list_input_images`.
"""

from __future__ import annotations

import hashlib
import json
import mimetypes
import os
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from PIL import Image, ImageFile, ImageOps, ImageSequence, UnidentifiedImageError
from PIL.PngImagePlugin import PngInfo

from nodes import output_claims
from nodes.output_claims import write_atomic
from nodes.safe_paths import safe_join
from nodes.workspace import active

ANNOTATIONS = {"[output]": "output_dir", "[input]": "input_dir", "[temp]": "temp_dir"}
# Multi-frame formats whose extra frames are not animation (MPO: stereo/preview pairs): first frame only.
SINGLE_FRAME_FORMATS = ("MPO",)
# PreviewImage's random suffix alphabet, as ComfyUI draws it.
PREVIEW_LETTERS = "abcdefghijklmnopqrstupvxyz"

# ComfyUI's --disable-metadata: SaveImage/PreviewImage then write no text chunks. Set by the server.
_write_metadata = True


def set_metadata_enabled(enabled: bool) -> None:
    """Whether SaveImage and PreviewImage embed the prompt and workflow (False = --disable-metadata)."""
    global _write_metadata
    _write_metadata = enabled


def metadata_enabled() -> bool:
    """False under --disable-metadata: every node that writes a file then leaves the prompt out."""
    return _write_metadata


# -- paths ---------------------------------------------------------------------------------------


def split_annotation(name: str) -> tuple[str, Path | None]:
    """("x.png [output]") -> ("x.png", output dir); a name without annotation -> (name, None)."""
    for tag, attr in ANNOTATIONS.items():
        if name.endswith(tag):
            return name[: -len(tag)].rstrip(" "), getattr(active(), attr)
    return name, None


def annotated_path(name: str, default_dir: Path | None = None) -> Path:
    """The file an image name refers to: annotated folder, else `default_dir`, else the input folder.

    UnsafePath (a ValueError) for a name that climbs out of its folder ("../secret.png") or reaches
    out through a symlink: the same rule as /view, so a prompt never reads a file the routes refuse.
    """
    rel, base = split_annotation(name)
    return safe_join(Path(base or default_dir or active().input_dir), rel)


def _is_image_name(name: str) -> bool:
    ext = name.rsplit(".", 1)[-1].lower()
    if ext == "webp":  # not in every platform's mimetype table
        return True
    mime, _ = mimetypes.guess_type(name, strict=False)
    return bool(mime) and mime.split("/")[0] == "image"


def list_input_images(only_images: bool = True) -> list[str]:
    """Sorted names of the files at the top level of the input folder (image types only by default)."""
    folder = active().input_dir
    if not folder.is_dir():
        return []
    names = [p.name for p in folder.iterdir() if p.is_file()]
    return sorted(n for n in names if not only_images or _is_image_name(n))


def save_image_path(
    filename_prefix: str, output_dir: str | Path, width: int = 0, height: int = 0
) -> tuple[str, str, int, str, str]:
    """Where the next images for `filename_prefix` go: (folder, file stem, first counter, subfolder, prefix).

    The prefix may hold a subfolder ("portraits/me") and the variables %width%, %height%, %year%,
    %month%, %day%, %hour%, %minute%, %second%. The counter is one more than the highest counter
    already used by a file "<stem>_<counter>…" in the folder. A prefix that leaves the output folder
    raises ValueError.
    """
    if "%" in filename_prefix:
        filename_prefix = _expand_vars(filename_prefix, width, height)
    output_dir = os.path.abspath(output_dir)
    normalized = os.path.normpath(filename_prefix)
    subfolder, stem = os.path.dirname(normalized), os.path.basename(normalized)
    folder = os.path.abspath(os.path.join(output_dir, subfolder))
    if os.path.commonpath((output_dir, folder)) != output_dir:
        raise ValueError(
            f"Saving outside the output folder is not allowed: filename_prefix {filename_prefix!r} "
            f"resolves to {folder}, which is not inside {output_dir}"
        )
    try:
        names = os.listdir(folder)
    except FileNotFoundError:
        os.makedirs(folder, exist_ok=True)
        names = []
    used = [_counter_of(n, stem) for n in names]
    counter = max((c for c in used if c is not None), default=0) + 1
    return folder, stem, counter, subfolder, filename_prefix


def _counter_of(name: str, stem: str) -> int | None:
    """The counter in "<stem>_<counter>_…", 0 when the part after the stem is not a number, None if no match."""
    n = len(stem)
    if name[:n] != stem or name[n : n + 1] != "_":
        return None
    try:
        return int(name[n + 1 :].split("_")[0])
    except ValueError:
        return 0


def _expand_vars(prefix: str, width: int, height: int) -> str:
    now = time.localtime()
    values = {
        "width": width,
        "height": height,
        "year": now.tm_year,
        "month": f"{now.tm_mon:02}",
        "day": f"{now.tm_mday:02}",
        "hour": f"{now.tm_hour:02}",
        "minute": f"{now.tm_min:02}",
        "second": f"{now.tm_sec:02}",
    }
    for key, value in values.items():
        prefix = prefix.replace(f"%{key}%", str(value))
    return prefix


# -- PNG writing and image reading ---------------------------------------------------------------


def to_pil(image: torch.Tensor) -> Image.Image:
    """IMAGE item [H,W,C] in 0..1 -> 8-bit PIL image (values truncated, as ComfyUI does)."""
    return Image.fromarray(np.clip(255.0 * image.detach().float().cpu().numpy(), 0, 255).astype(np.uint8))


def save_png(
    image: torch.Tensor,
    path: str | Path,
    prompt: Any = None,
    extra_pnginfo: dict | None = None,
    compress_level: int = 4,
) -> None:
    """Write one IMAGE item [H,W,C] as PNG with ComfyUI's text chunks.

    Chunk "prompt" holds json.dumps(prompt); each key of extra_pnginfo (usually "workflow") gets a
    chunk holding json.dumps of its value. None skips the chunks.
    """
    info = PngInfo()
    if prompt is not None:
        info.add_text("prompt", json.dumps(prompt))
    for key, value in (extra_pnginfo or {}).items():
        info.add_text(key, json.dumps(value))
    # whole or not at all under its name: a kill mid-write must not leave a truncated PNG there
    write_atomic(path, lambda tmp: to_pil(image).save(tmp, format="PNG", pnginfo=info, compress_level=compress_level))


def pillow_tolerant(fn: Callable, arg: Any) -> Any:
    """Run a PIL call; on a truncated/odd file retry once with truncated-image loading enabled."""
    try:
        return fn(arg)
    except (OSError, UnidentifiedImageError, ValueError):
        previous = ImageFile.LOAD_TRUNCATED_IMAGES
        ImageFile.LOAD_TRUNCATED_IMAGES = True
        try:
            return fn(arg)
        finally:
            ImageFile.LOAD_TRUNCATED_IMAGES = previous


def _scale_32bit(frame: Image.Image) -> Image.Image:
    # 32-bit integer frames (16-bit PNGs open this way) are brought into the 8-bit range first.
    return frame.point(lambda v: v * (1 / 255)) if frame.mode == "I" else frame


def load_image_tensor(path: str | Path) -> tuple[torch.Tensor, torch.Tensor]:
    """Read an image file as (IMAGE [F,H,W,3], MASK [F,H,W]), upright per its EXIF orientation.

    Every frame of the first frame's size becomes a batch item. The mask is 1 - alpha (1 = masked
    out, i.e. transparent); without alpha it is a 64x64 block of zeros, as in ComfyUI.
    """
    img = pillow_tolerant(Image.open, path)
    images, masks = [], []
    for frame in ImageSequence.Iterator(img):
        frame = _scale_32bit(pillow_tolerant(ImageOps.exif_transpose, frame))
        rgb = frame.convert("RGB")
        if images and rgb.size != (images[0].shape[2], images[0].shape[1]):
            continue
        images.append(torch.from_numpy(np.asarray(rgb, dtype=np.float32) / 255.0)[None])
        if "A" in frame.getbands():
            alpha = frame.getchannel("A")
        elif frame.mode == "P" and "transparency" in frame.info:
            alpha = frame.convert("RGBA").getchannel("A")
        else:
            alpha = None
        if alpha is None:
            masks.append(torch.zeros((1, 64, 64), dtype=torch.float32))
        else:
            masks.append(1.0 - torch.from_numpy(np.asarray(alpha, dtype=np.float32) / 255.0)[None])
    if len(images) > 1 and img.format not in SINGLE_FRAME_FORMATS:
        return torch.cat(images, dim=0), torch.cat(masks, dim=0)
    return images[0], masks[0]


def load_mask_tensor(path: str | Path, channel: str) -> torch.Tensor:
    """One channel ("alpha", "red", "green", "blue") of an image file as MASK [1,H,W]; alpha is inverted."""
    img = pillow_tolerant(ImageOps.exif_transpose, pillow_tolerant(Image.open, path))
    if img.getbands() != ("R", "G", "B", "A"):
        img = _scale_32bit(img).convert("RGBA")
    band = channel[0].upper()
    mask = torch.from_numpy(np.asarray(img.getchannel(band), dtype=np.float32) / 255.0)
    return (1.0 - mask if band == "A" else mask).unsqueeze(0)


def file_sha256(path: str | Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _validate_image_name(name: str) -> bool | str:
    try:
        ok = annotated_path(name).exists()
    except ValueError:
        ok = False
    return True if ok else f"Invalid image file: {name}"


# -- nodes -----------------------------------------------------------------------------------------


class SaveImage:
    # Where and how this node writes; PreviewImage overrides these.
    folder_attr = "output_dir"
    type = "output"
    compress_level = 4

    def __init__(self) -> None:
        self.prefix_append = ""

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "images": ("IMAGE", {"tooltip": "The images to write."}),
                "filename_prefix": (
                    "STRING",
                    {
                        "default": "ComfyUI",
                        "tooltip": "Start of the file names. May contain a subfolder ('portraits/me') and "
                        "variables such as %date:yyyy-MM-dd% or %Empty Latent Image.width%.",
                    },
                ),
            },
            "hidden": {"prompt": "PROMPT", "extra_pnginfo": "EXTRA_PNGINFO"},
        }

    # Today's ComfyUI passes the images through (a Save Image can feed an Image Compare); 0.3.64's had no output.
    RETURN_TYPES = ("IMAGE",)
    RETURN_NAMES = ("images",)
    FUNCTION = "save_images"
    OUTPUT_NODE = True
    CATEGORY = "image"
    DESCRIPTION = "Writes the images as PNG files into the output folder, with the workflow embedded."

    def save_images(
        self,
        images: torch.Tensor,
        filename_prefix: str = "ComfyUI",
        prompt: Any = None,
        extra_pnginfo: dict | None = None,
    ):
        base = getattr(active(), self.folder_attr)
        folder, stem, counter, subfolder, _ = save_image_path(
            filename_prefix + self.prefix_append, base, images[0].shape[1], images[0].shape[0]
        )
        # a re-run of this prompt (its head was killed) writes over the names the dead run took
        taken = output_claims.claim(folder, stem, counter, len(images))
        if taken.folder != folder:  # the dead run's, from a prefix with time variables
            subfolder = os.path.relpath(taken.folder, os.path.abspath(base))
        folder, stem, counter = taken.folder, taken.stem, taken.counter
        metadata = (prompt, extra_pnginfo) if _write_metadata else (None, None)
        results = []
        for batch_number, image in enumerate(images):
            file = f"{stem.replace('%batch_num%', str(batch_number))}_{counter:05}_.png"
            save_png(image, os.path.join(folder, file), *metadata, compress_level=self.compress_level)
            results.append({"filename": file, "subfolder": subfolder, "type": self.type})
            counter += 1
        return {"ui": {"images": results}, "result": (images,)}


class PreviewImage(SaveImage):
    folder_attr = "temp_dir"
    type = "temp"
    compress_level = 1

    def __init__(self) -> None:
        # One random tag per node instance keeps concurrent previews from sharing counters.
        self.prefix_append = "_temp_" + "".join(random.choice(PREVIEW_LETTERS) for _ in range(5))

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"images": ("IMAGE",)}, "hidden": {"prompt": "PROMPT", "extra_pnginfo": "EXTRA_PNGINFO"}}

    DESCRIPTION = "Shows the images in the UI (written to the temp folder)."


class LoadImage:
    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"image": (list_input_images(), {"image_upload": True})}}

    RETURN_TYPES = ("IMAGE", "MASK")
    FUNCTION = "load_image"
    CATEGORY = "image"
    DESCRIPTION = "Loads an image from the input folder; the mask is where the image is transparent."

    def load_image(self, image: str):
        return load_image_tensor(annotated_path(image))

    @classmethod
    def IS_CHANGED(cls, image: str) -> str:
        return file_sha256(annotated_path(image))

    @classmethod
    def VALIDATE_INPUTS(cls, image: str) -> bool | str:
        return _validate_image_name(image)


class LoadImageMask:
    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "image": (list_input_images(only_images=False), {"image_upload": True}),
                "channel": (["alpha", "red", "green", "blue"],),
            }
        }

    RETURN_TYPES = ("MASK",)
    FUNCTION = "load_image"
    CATEGORY = "mask"
    DESCRIPTION = "Loads one channel of an image from the input folder as a mask (alpha is inverted)."

    def load_image(self, image: str, channel: str):
        return (load_mask_tensor(annotated_path(image), channel),)

    @classmethod
    def IS_CHANGED(cls, image: str, channel: str) -> str:
        return file_sha256(annotated_path(image))

    @classmethod
    def VALIDATE_INPUTS(cls, image: str) -> bool | str:
        return _validate_image_name(image)


class LoadImageOutput(LoadImage):
    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "image": (
                    "COMBO",
                    {
                        "image_upload": True,
                        "image_folder": "output",
                        "remote": {
                            "route": "/internal/files/output",
                            "refresh_button": True,
                            "control_after_refresh": "first",
                        },
                    },
                )
            }
        }

    DESCRIPTION = (
        "Loads an image from the output folder; refreshing the list selects its first image, "
        "handy for iterating on a result."
    )
    EXPERIMENTAL = True


NODE_CLASS_MAPPINGS = {
    "SaveImage": SaveImage,
    "PreviewImage": PreviewImage,
    "LoadImage": LoadImage,
    "LoadImageMask": LoadImageMask,
    "LoadImageOutput": LoadImageOutput,
}

NODE_DISPLAY_NAME_MAPPINGS = {
    "SaveImage": "Save Image",
    "PreviewImage": "Preview Image",
    "LoadImage": "Load Image",
    "LoadImageMask": "Load Image (as Mask)",
    "LoadImageOutput": "Load Image (from Outputs)",
}
