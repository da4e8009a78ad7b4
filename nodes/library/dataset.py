"""ComfyUI's dataset nodes (`comfy_extras.nodes_dataset`, added after 0.3.64 for LoRA training, all model-free):
per-image transforms (resize by an edge, center / random crop, normalise, brightness, contrast), per-text
transforms (case, truncate, prefix, suffix, replace, strip), whole-list nodes (shuffle, deduplicate, grid, merge),
folders of images (and captions) loaded from the input folder or saved under the output folder, and the
resolution bucketing of latents with their conditioning.

A per-item node runs once per list item (list expansion); a batch of several images is transformed frame by
frame, as the newest ComfyUI does. A whole-list node (INPUT_IS_LIST) first splits batches into single images.
Resizes use Pillow's Lanczos filter on 8-bit pixels and seeds drive NumPy's legacy generator, so results equal
ComfyUI's (tests/nodes/fixtures/comfyui_dataset_nodes.json.xz, recorded from ComfyUI 0.10.0).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from PIL import Image

from nodes.safe_paths import safe_join
from nodes.workspace import active

log = logging.getLogger(__name__)
MODULE = "comfy_extras.nodes_dataset"
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".webp")
SEED = ("INT", {"default": 0, "min": 0, "max": 0xFFFFFFFFFFFFFFFF})
TEXT = ("STRING", {"multiline": False})
SIZE = {"min": 1, "max": 8192}


def _to_pil(image: torch.Tensor) -> Image.Image:
    """One image ([H, W, C] or [1, H, W, C], 0-1) as 8-bit Pillow pixels (values outside 0-1 clipped)."""
    if image.ndim == 4:
        image = image[0]
    return Image.fromarray((image.cpu().numpy() * 255).clip(0, 255).astype(np.uint8))


def _from_pil(img: Image.Image) -> torch.Tensor:
    return torch.from_numpy(np.asarray(img).astype(np.float32) / 255.0)[None]


def _rng(seed: int) -> np.random.RandomState:
    # NumPy's legacy generator seeded the way ComfyUI seeds it, so crops and shuffles pick what ComfyUI picks
    return np.random.RandomState(seed % (2**32 - 1))


def _frames(images: Any) -> list[torch.Tensor]:
    """A list of images (batches split) as single [1, H, W, C] images, for the whole-list nodes."""
    items = [images] if isinstance(images, torch.Tensor) else list(images)
    out: list[torch.Tensor] = []
    for item in items:
        if not isinstance(item, torch.Tensor) or item.ndim != 4:
            raise ValueError(f"expected images [batch, height, width, channels], got {getattr(item, 'shape', item)!r}")
        out += [item[i : i + 1] for i in range(item.shape[0])]
    return out


def _first(value: Any) -> Any:
    """A widget value of a whole-list node: its one item."""
    return value[0] if isinstance(value, list) else value


class _ImageNode:
    """One image (or batch) in, the same transform on each frame, one image out."""

    RELATIVE_PYTHON_MODULE = MODULE
    FUNCTION = "execute"
    CATEGORY = "dataset/image"
    EXPERIMENTAL = True
    RETURN_TYPES = ("IMAGE",)
    RETURN_NAMES = ("images",)
    OUTPUT_TOOLTIPS = ("The transformed images.",)
    EXTRA: dict[str, tuple] = {}
    PER_FRAME = True  # Pillow transforms work on one frame; tensor arithmetic takes the whole batch

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"images": ("IMAGE", {"tooltip": "The image to transform."}), **cls.EXTRA}}

    def transform(self, image: torch.Tensor, **params: Any) -> torch.Tensor:
        raise NotImplementedError

    def execute(self, images: torch.Tensor, **params: Any):
        if not self.PER_FRAME or images.shape[0] == 1:
            return (self.transform(images, **params),)
        frames = [self.transform(images[i : i + 1], **params) for i in range(images.shape[0])]
        return (torch.cat(frames, dim=0),)


def _edge_resize(image: torch.Tensor, edge: int, longer: bool) -> torch.Tensor:
    img = _to_pil(image)
    w, h = img.size
    # the named edge gets `edge` pixels, the other keeps the aspect ratio (rounded down)
    if (w > h) if longer else (w < h):
        size = (edge, int(h * (edge / w)))
    else:
        size = (int(w * (edge / h)), edge)
    if min(size) < 1:
        raise ValueError(f"resizing a {w}x{h} image to an edge of {edge} leaves a side of no pixels")
    return _from_pil(img.resize(size, Image.Resampling.LANCZOS))


class ResizeImagesByShorterEdge(_ImageNode):
    EXTRA = {"shorter_edge": ("INT", {"default": 512, **SIZE, "tooltip": "Pixels of the shorter side."})}
    DESCRIPTION = "Scales each image so its shorter side has the given length, keeping the aspect ratio."

    def transform(self, image, shorter_edge: int):
        return _edge_resize(image, shorter_edge, longer=False)


class ResizeImagesByLongerEdge(_ImageNode):
    EXTRA = {"longer_edge": ("INT", {"default": 1024, **SIZE, "tooltip": "Pixels of the longer side."})}
    DESCRIPTION = "Scales each image so its longer side has the given length, keeping the aspect ratio."

    def transform(self, image, longer_edge: int):
        return _edge_resize(image, longer_edge, longer=True)


def _crop(image: torch.Tensor, left: int, top: int, width: int, height: int) -> torch.Tensor:
    img = _to_pil(image)
    return _from_pil(img.crop((left, top, min(img.width, left + width), min(img.height, top + height))))


_CROP = {
    "width": ("INT", {"default": 512, **SIZE, "tooltip": "Width of the crop."}),
    "height": ("INT", {"default": 512, **SIZE, "tooltip": "Height of the crop."}),
}


class CenterCropImages(_ImageNode):
    EXTRA = _CROP
    DESCRIPTION = "The middle width x height pixels of each image (all of a side shorter than asked)."

    def transform(self, image, width: int, height: int):
        h, w = image.shape[-3:-1]
        return _crop(image, max(0, (w - width) // 2), max(0, (h - height) // 2), width, height)


class RandomCropImages(_ImageNode):
    EXTRA = {**_CROP, "seed": (SEED[0], {**SEED[1], "tooltip": "Chooses where the crop lies."})}
    DESCRIPTION = "A width x height window of each image at a place the seed picks (for augmentation)."

    def transform(self, image, width: int, height: int, seed: int):
        h, w = image.shape[-3:-1]
        rng = _rng(seed)
        spare_x, spare_y = max(0, w - width), max(0, h - height)
        # ComfyUI draws x then y, and draws nothing along a side with no room
        left = int(rng.randint(0, spare_x + 1)) if spare_x > 0 else 0
        top = int(rng.randint(0, spare_y + 1)) if spare_y > 0 else 0
        return _crop(image, left, top, width, height)


class NormalizeImages(_ImageNode):
    EXTRA = {
        "mean": ("FLOAT", {"default": 0.5, "min": 0.0, "max": 1.0, "tooltip": "Subtracted from each value."}),
        "std": ("FLOAT", {"default": 0.5, "min": 0.001, "max": 1.0, "tooltip": "What the result is divided by."}),
    }
    PER_FRAME = False
    DESCRIPTION = "(image - mean) / std, per value; the result may leave the 0-1 range."

    def transform(self, image, mean: float, std: float):
        return (image - mean) / std


_FACTOR = {"default": 1.0, "min": 0.0, "max": 2.0}


class AdjustBrightness(_ImageNode):
    EXTRA = {"factor": ("FLOAT", {**_FACTOR, "tooltip": "Each value is multiplied by it: 1 keeps the image."})}
    PER_FRAME = False
    DESCRIPTION = "Scales every value by the factor, clipped to 0-1."

    def transform(self, image, factor: float):
        return (image * factor).clamp(0.0, 1.0)


class AdjustContrast(_ImageNode):
    EXTRA = {"factor": ("FLOAT", {**_FACTOR, "tooltip": "Distances from mid grey are multiplied by it."})}
    PER_FRAME = False
    DESCRIPTION = "Stretches (above 1) or flattens (below 1) the values around mid grey, clipped to 0-1."

    def transform(self, image, factor: float):
        return ((image - 0.5) * factor + 0.5).clamp(0.0, 1.0)


class _ListNode:
    """The whole list of images in (INPUT_IS_LIST), batches split into single images."""

    RELATIVE_PYTHON_MODULE = MODULE
    FUNCTION = "execute"
    CATEGORY = "dataset/image"
    EXPERIMENTAL = True
    INPUT_IS_LIST = True
    RETURN_TYPES = ("IMAGE",)
    RETURN_NAMES = ("images",)
    OUTPUT_IS_LIST = (True,)
    OUTPUT_TOOLTIPS = ("The images.",)
    EXTRA: dict[str, tuple] = {}

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"images": ("IMAGE", {"tooltip": "The list of images."}), **cls.EXTRA}}

    def run(self, images: list[torch.Tensor], **params: Any) -> Any:
        raise NotImplementedError

    def execute(self, images: list, **params: Any):
        return (self.run(_frames(images), **{k: _first(v) for k, v in params.items()}),)


class ShuffleDataset(_ListNode):
    EXTRA = {"seed": (SEED[0], {**SEED[1], "tooltip": "Chooses the order."})}
    DESCRIPTION = "The images in an order the seed picks."

    def run(self, images, seed: int):
        return [images[i] for i in _rng(seed).permutation(len(images))]


def _average_hash(image: torch.Tensor) -> np.ndarray:
    """64 bits: which pixels of the 8x8 grey thumbnail are brighter than its mean."""
    grey = np.asarray(_to_pil(image).resize((8, 8), Image.Resampling.LANCZOS).convert("L"), dtype=np.float64)
    return (grey > grey.mean()).flatten()


class ImageDeduplication(_ListNode):
    EXTRA = {
        "similarity_threshold": (
            "FLOAT",
            {
                "default": 0.95,
                "min": 0.0,
                "max": 1.0,
                "tooltip": "Share of equal hash bits from which two images count as the same.",
            },
        )
    }
    DESCRIPTION = "The images less those that look like an earlier kept one (8x8 average hash)."

    def run(self, images, similarity_threshold: float):
        kept: list[tuple[torch.Tensor, np.ndarray]] = []
        for image in images:
            bits = _average_hash(image)
            if all(1.0 - np.count_nonzero(bits != other) / 64.0 < similarity_threshold for _, other in kept):
                kept.append((image, bits))
        log.info("Image Deduplication kept %d of %d images", len(kept), len(images))
        return [image for image, _ in kept]


class ImageGrid(_ListNode):
    EXTRA = {
        "columns": ("INT", {"default": 4, "min": 1, "max": 20, "tooltip": "Images per row."}),
        "cell_width": ("INT", {"default": 256, "min": 32, "max": 2048, "tooltip": "Width of each image."}),
        "cell_height": ("INT", {"default": 256, "min": 32, "max": 2048, "tooltip": "Height of each image."}),
        "padding": ("INT", {"default": 4, "min": 0, "max": 50, "tooltip": "Black pixels between images."}),
    }
    OUTPUT_IS_LIST = (False,)
    DESCRIPTION = "One image: the images resized to the cell size, row by row on black."

    def run(self, images, columns: int, cell_width: int, cell_height: int, padding: int):
        if not images:
            raise ValueError("Image Grid: no images to arrange")
        rows = -(-len(images) // columns)
        grid = Image.new("RGB", (columns * (cell_width + padding) - padding, rows * (cell_height + padding) - padding))
        for at, image in enumerate(images):
            cell = _to_pil(image).resize((cell_width, cell_height), Image.Resampling.LANCZOS)
            grid.paste(cell, ((at % columns) * (cell_width + padding), (at // columns) * (cell_height + padding)))
        return _from_pil(grid)


class MergeImageLists(_ListNode):
    DESCRIPTION = "All images reaching the input (every list linked to it) as one list."

    def run(self, images):
        return images


class ShuffleImageTextDataset:
    RELATIVE_PYTHON_MODULE = MODULE
    FUNCTION = "execute"
    CATEGORY = "dataset/image"
    EXPERIMENTAL = True
    INPUT_IS_LIST = True
    RETURN_TYPES = ("IMAGE", "STRING")
    RETURN_NAMES = ("images", "texts")
    OUTPUT_IS_LIST = (True, True)
    OUTPUT_TOOLTIPS = ("The images in the new order.", "Their texts in the same order.")
    DESCRIPTION = "Image-caption pairs in an order the seed picks; each text stays with its image."

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "images": ("IMAGE", {"tooltip": "The images."}),
                "texts": (TEXT[0], {**TEXT[1], "tooltip": "One text per image."}),
                "seed": (SEED[0], {**SEED[1], "tooltip": "Chooses the order."}),
            }
        }

    def execute(self, images: list, texts: list, seed: list[int]):
        if len(texts) < len(images):
            raise ValueError(f"Shuffle Image-Text Dataset: {len(images)} images but only {len(texts)} texts")
        order = _rng(_first(seed)).permutation(len(images))
        return ([images[i] for i in order], [texts[i] for i in order])


class _TextNode:
    """One text in, one text out (run once per list item)."""

    RELATIVE_PYTHON_MODULE = MODULE
    FUNCTION = "execute"
    CATEGORY = "dataset/text"
    EXPERIMENTAL = True
    RETURN_TYPES = ("STRING",)
    RETURN_NAMES = ("texts",)
    # ComfyUI declares these outputs' list flag as unset (null), not false
    OUTPUT_IS_LIST = (None,)
    OUTPUT_TOOLTIPS = ("The changed text.",)
    EXTRA: dict[str, tuple] = {}
    change: Callable[..., str]

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"texts": (TEXT[0], {**TEXT[1], "tooltip": "The text to change."}), **cls.EXTRA}}

    def execute(self, texts: str, **params: Any):
        return (type(self).change(texts, **params),)


class TextToLowercase(_TextNode):
    DESCRIPTION = "The text in lower case."
    change = staticmethod(str.lower)


class TextToUppercase(_TextNode):
    DESCRIPTION = "The text in upper case."
    change = staticmethod(str.upper)


class TruncateText(_TextNode):
    EXTRA = {"max_length": ("INT", {"default": 77, "min": 1, "max": 10000, "tooltip": "Characters kept."})}
    DESCRIPTION = "The first max_length characters of the text."
    change = staticmethod(lambda text, max_length: text[:max_length])


class AddTextPrefix(_TextNode):
    EXTRA = {"prefix": (TEXT[0], {"default": "", **TEXT[1], "tooltip": "Put before the text."})}
    DESCRIPTION = "The prefix, then the text."
    change = staticmethod(lambda text, prefix: prefix + text)


class AddTextSuffix(_TextNode):
    EXTRA = {"suffix": (TEXT[0], {"default": "", **TEXT[1], "tooltip": "Put after the text."})}
    DESCRIPTION = "The text, then the suffix."
    change = staticmethod(lambda text, suffix: text + suffix)


class ReplaceText(_TextNode):
    EXTRA = {
        "find": (TEXT[0], {"default": "", **TEXT[1], "tooltip": "The text to look for."}),
        "replace": (TEXT[0], {"default": "", **TEXT[1], "tooltip": "What each occurrence becomes."}),
    }
    DESCRIPTION = "The text with every occurrence of find replaced."
    change = staticmethod(lambda text, find, replace: text.replace(find, replace))


class StripWhitespace(_TextNode):
    DESCRIPTION = "The text without the white space at its start and end."
    change = staticmethod(str.strip)


class MergeTextLists(_TextNode):
    INPUT_IS_LIST = True
    DESCRIPTION = "All texts reaching the input as one value: the Python list of them, as ComfyUI gives it."

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"texts": (TEXT[0], {**TEXT[1], "tooltip": "The texts."})}}

    def execute(self, texts: list[str]):
        return (list(texts),)


def _input_subfolders() -> list[str]:
    root = active().input_dir
    if not root.is_dir():
        return []
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_dir())


def _folder(name: str) -> Path:
    folder = safe_join(active().input_dir, name)
    if not folder.is_dir():
        raise FileNotFoundError(f"no folder {name!r} in the input folder")
    return folder


def _load(path: Path) -> torch.Tensor:
    with Image.open(path) as img:
        if img.mode == "I":  # 16-bit grey: scaled to 8 bits as ComfyUI's loaders do
            img = img.point(lambda v: v * (1 / 255))
        return _from_pil(img.convert("RGB"))


def _images_in(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES)


class _LoadFolder:
    RELATIVE_PYTHON_MODULE = MODULE
    FUNCTION = "execute"
    CATEGORY = "dataset"
    EXPERIMENTAL = True

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "folder": (
                    "COMBO",
                    {"tooltip": "A folder of the input folder.", "multiselect": False, "options": _input_subfolders()},
                )
            }
        }


class LoadImageDataSetFromFolder(_LoadFolder):
    RETURN_TYPES = ("IMAGE",)
    RETURN_NAMES = ("images",)
    OUTPUT_IS_LIST = (True,)
    OUTPUT_TOOLTIPS = ("The folder's images, one list item each.",)
    DESCRIPTION = "Every PNG, JPEG and WebP image of a folder of the input folder, in name order, as RGB."

    def execute(self, folder: str):
        files = _images_in(_folder(folder))
        if not files:
            raise ValueError(f"no images (.png, .jpg, .jpeg, .webp) in the input folder {folder!r}")
        return ([_load(p) for p in files],)


class LoadImageTextDataSetFromFolder(_LoadFolder):
    RETURN_TYPES = ("IMAGE", "STRING")
    RETURN_NAMES = ("images", "texts")
    OUTPUT_IS_LIST = (True, True)
    OUTPUT_TOOLTIPS = ("The images.", "Each image's caption (its .txt file beside it; empty if none).")
    DESCRIPTION = (
        "The images of a folder of the input folder with their captions (name.txt beside name.png); "
        "a subfolder named like '10_cat' (kohya-ss layout) adds its images that many times."
    )

    def execute(self, folder: str):
        root = _folder(folder)
        files: list[Path] = []
        for entry in sorted(root.iterdir()):
            if entry.is_file() and entry.suffix.lower() in IMAGE_SUFFIXES:
                files.append(entry)
            elif entry.is_dir():
                head = entry.name.split("_")[0]
                files += _images_in(entry) * (int(head) if head.isdigit() else 1)
        if not files:
            raise ValueError(f"no images (.png, .jpg, .jpeg, .webp) in the input folder {folder!r}")
        captions = [
            p.with_suffix(".txt").read_text(encoding="utf-8").strip() if p.with_suffix(".txt").is_file() else ""
            for p in files
        ]
        return ([_load(p) for p in files], captions)


def _save(images: list, folder_name: str, prefix: str) -> tuple[Path, list[str]]:
    out_dir = safe_join(active().output_dir, folder_name)
    out_dir.mkdir(parents=True, exist_ok=True)
    names = []
    for at, image in enumerate(_frames(images)):
        name = f"{prefix}_{at:05d}.png"
        safe_join(out_dir, name)  # a prefix with a path in it stays inside the folder
        _to_pil(image).save(out_dir / name)
        names.append(name)
    return out_dir, names


class _SaveFolder:
    RELATIVE_PYTHON_MODULE = MODULE
    FUNCTION = "execute"
    CATEGORY = "dataset"
    EXPERIMENTAL = True
    OUTPUT_NODE = True
    INPUT_IS_LIST = True
    RETURN_TYPES = ()
    OUTPUT_TOOLTIPS = ()
    HIDDEN = {"prompt": ("PROMPT",), "extra_pnginfo": ("EXTRA_PNGINFO",)}
    NAMING = {
        "folder_name": (
            TEXT[0],
            {"default": "dataset", **TEXT[1], "tooltip": "The folder under the output folder to write into."},
        ),
        "filename_prefix": (
            TEXT[0],
            {"default": "image", **TEXT[1], "tooltip": "Files are named prefix_00000.png, prefix_00001.png, ..."},
        ),
    }


class SaveImageDataSetToFolder(_SaveFolder):
    DESCRIPTION = "Writes every image as a PNG into a folder of the output folder (files of the same name replaced)."

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {"images": ("IMAGE", {"tooltip": "The images to write."}), **cls.NAMING},
            "hidden": cls.HIDDEN,
        }

    def execute(self, images: list, folder_name: list[str], filename_prefix: list[str]):
        out_dir, names = _save(images, _first(folder_name), _first(filename_prefix))
        log.info("Saved %d images to %s", len(names), out_dir)
        return ()


class SaveImageTextDataSetToFolder(_SaveFolder):
    DESCRIPTION = (
        "Writes every image as a PNG and its caption as a .txt of the same name into a folder of the output folder."
    )

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "images": ("IMAGE", {"tooltip": "The images to write."}),
                "texts": (TEXT[0], {**TEXT[1], "tooltip": "One caption per image."}),
                **cls.NAMING,
            },
            "hidden": cls.HIDDEN,
        }

    def execute(
        self, images: list, texts: list[str], folder_name: list[str], filename_prefix: list[str], **hidden: Any
    ):
        out_dir, names = _save(images, _first(folder_name), _first(filename_prefix))
        for name, caption in zip(names, texts):
            (out_dir / name).with_suffix(".txt").write_text(caption, encoding="utf-8")
        log.info("Saved %d images and captions to %s", len(names), out_dir)
        return ()


class ResolutionBucket:
    RELATIVE_PYTHON_MODULE = MODULE
    FUNCTION = "execute"
    CATEGORY = "dataset"
    EXPERIMENTAL = True
    INPUT_IS_LIST = True
    RETURN_TYPES = ("LATENT", "CONDITIONING")
    RETURN_NAMES = ("latents", "conditioning")
    OUTPUT_IS_LIST = (True, True)
    OUTPUT_TOOLTIPS = ("One latent batch per size.", "The conditioning of each batch's samples, in order.")
    DESCRIPTION = (
        "Groups training samples by latent height and width: one batch per size, in the order the sizes "
        "first appear, each sample keeping its own conditioning."
    )

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "latents": ("LATENT", {"tooltip": "The latents (a list)."}),
                "conditioning": (
                    "CONDITIONING",
                    {"tooltip": "One conditioning per latent, each holding one entry per sample."},
                ),
            }
        }

    def execute(self, latents: list[dict], conditioning: list[list]):
        if len(latents) != len(conditioning):
            raise ValueError(f"Resolution Bucket: {len(latents)} latents but {len(conditioning)} conditionings")
        buckets: dict[tuple[int, int], tuple[list, list]] = {}
        for latent, cond in zip(latents, conditioning):
            samples = latent["samples"]
            if len(cond) < samples.shape[0]:
                raise ValueError(
                    f"Resolution Bucket: a latent batch of {samples.shape[0]} has only {len(cond)} "
                    "conditioning entries (one per sample needed)"
                )
            for i in range(samples.shape[0]):
                found = buckets.setdefault(tuple(samples.shape[-2:]), ([], []))
                found[0].append(samples[i])
                found[1].append(cond[i])
        return ([{"samples": torch.stack(s)} for s, _ in buckets.values()], [c for _, c in buckets.values()])


_CLASSES = [
    ResizeImagesByShorterEdge,
    ResizeImagesByLongerEdge,
    CenterCropImages,
    RandomCropImages,
    NormalizeImages,
    AdjustBrightness,
    AdjustContrast,
    ShuffleDataset,
    ShuffleImageTextDataset,
    ImageDeduplication,
    ImageGrid,
    MergeImageLists,
    TextToLowercase,
    TextToUppercase,
    TruncateText,
    AddTextPrefix,
    AddTextSuffix,
    ReplaceText,
    StripWhitespace,
    MergeTextLists,
    LoadImageDataSetFromFolder,
    LoadImageTextDataSetFromFolder,
    SaveImageDataSetToFolder,
    SaveImageTextDataSetToFolder,
    ResolutionBucket,
]
NODE_CLASS_MAPPINGS = {cls.__name__: cls for cls in _CLASSES}
NODE_DISPLAY_NAME_MAPPINGS = {
    "ResizeImagesByShorterEdge": "Resize Images by Shorter Edge",
    "ResizeImagesByLongerEdge": "Resize Images by Longer Edge",
    "CenterCropImages": "Center Crop Images",
    "RandomCropImages": "Random Crop Images",
    "NormalizeImages": "Normalize Images",
    "AdjustBrightness": "Adjust Brightness",
    "AdjustContrast": "Adjust Contrast",
    "ShuffleDataset": "Shuffle Image Dataset",
    "ShuffleImageTextDataset": "Shuffle Image-Text Dataset",
    "ImageDeduplication": "Image Deduplication",
    "ImageGrid": "Image Grid",
    "MergeImageLists": "Merge Image Lists",
    "TextToLowercase": "Text to Lowercase",
    "TextToUppercase": "Text to Uppercase",
    "TruncateText": "Truncate Text",
    "AddTextPrefix": "Add Text Prefix",
    "AddTextSuffix": "Add Text Suffix",
    "ReplaceText": "Replace Text",
    "StripWhitespace": "Strip Whitespace",
    "MergeTextLists": "Merge Text Lists",
    "LoadImageDataSetFromFolder": "Load Image Dataset from Folder",
    "LoadImageTextDataSetFromFolder": "Load Image and Text Dataset from Folder",
    "SaveImageDataSetToFolder": "Save Image Dataset to Folder",
    "SaveImageTextDataSetToFolder": "Save Image and Text Dataset to Folder",
    "ResolutionBucket": "Resolution Bucket",
}
