"""Today's ComfyUI tile and size nodes (`comfy_extras.nodes_images`, added after 0.3.64): Split Image into List
of Tiles (overlapping tiles, each a list item, so the nodes after it run once per tile), Merge List of
Tiles to Image (the tiles blended back with sine-feathered weights where they overlap) and Get
Image/Video Latent Size."""

from __future__ import annotations

import math

import torch

from nodes import MAX_RESOLUTION

MODULE = "comfy_extras.nodes_images"


def tile_grid(
    width: int, height: int, tile_width: int, tile_height: int, overlap: int
) -> list[tuple[int, int, int, int]]:
    """(x0, y0, x1, y1) of each tile, rows top to bottom: tiles step by their size less the overlap (at least a
    quarter of the tile), and the last tile of a row or column is pushed back to end at the image's edge."""
    step_x = round(max(tile_width * 0.25, tile_width - overlap))
    step_y = round(max(tile_height * 0.25, tile_height - overlap))
    tiles = []
    y = 0
    while True:
        y1 = min(y + tile_height, height)
        y0 = max(0, y1 - tile_height)
        x = 0
        while True:
            x1 = min(x + tile_width, width)
            tiles.append((max(0, x1 - tile_width), y0, x1, y1))
            if x1 >= width:
                break
            x += step_x
        if y1 >= height:
            break
        y += step_y
    return tiles


class SplitImageToTileList:
    RELATIVE_PYTHON_MODULE = MODULE
    FUNCTION = "execute"
    CATEGORY = "image/batch"

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "image": ("IMAGE", {}),
                "tile_width": ("INT", {"default": 1024, "min": 64, "max": MAX_RESOLUTION}),
                "tile_height": ("INT", {"default": 1024, "min": 64, "max": MAX_RESOLUTION}),
                "overlap": ("INT", {"default": 128, "min": 0, "max": 4096}),
            }
        }

    RETURN_TYPES = ("IMAGE",)
    OUTPUT_IS_LIST = (True,)
    OUTPUT_TOOLTIPS = (None,)
    SEARCH_ALIASES = ["split image", "tile image", "slice image"]
    DESCRIPTION = "The image cut into overlapping tiles, one list item each (left to right, top to bottom)."

    def execute(self, image: torch.Tensor, tile_width: int, tile_height: int, overlap: int):
        grid = tile_grid(image.shape[2], image.shape[1], tile_width, tile_height, overlap)
        return ([image[:, y0:y1, x0:x1, :] for x0, y0, x1, y1 in grid],)


class ImageMergeTileList:
    RELATIVE_PYTHON_MODULE = MODULE
    FUNCTION = "execute"
    CATEGORY = "image/batch"
    INPUT_IS_LIST = True

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "image_list": ("IMAGE", {}),
                "final_width": ("INT", {"default": 1024, "min": 64, "max": 32768}),
                "final_height": ("INT", {"default": 1024, "min": 64, "max": 32768}),
                "overlap": ("INT", {"default": 128, "min": 0, "max": 4096}),
            }
        }

    RETURN_TYPES = ("IMAGE",)
    OUTPUT_IS_LIST = (False,)
    OUTPUT_TOOLTIPS = (None,)
    SEARCH_ALIASES = ["split image", "tile image", "slice image"]
    DESCRIPTION = (
        "The tiles (as Split Image into List of Tiles cut them, all the first tile's size) put back into "
        "one image; overlaps are blended, each tile weighted by a sine falling to its edges."
    )

    def execute(
        self, image_list: list[torch.Tensor], final_width: list[int], final_height: list[int], overlap: list[int]
    ):
        width, height, ovl = final_width[0], final_height[0], overlap[0]
        first = image_list[0]
        b, th, tw, c = first.shape
        canvas = torch.zeros((b, height, width, c), dtype=first.dtype)
        weights = torch.zeros((b, height, width, 1), dtype=first.dtype)
        if ovl > 0:
            # a sine bump, never quite 0, so every pixel some tile covers gets weight
            wy = torch.sin(math.pi * torch.linspace(0, 1, th, dtype=first.dtype)).clamp(min=1e-5)
            wx = torch.sin(math.pi * torch.linspace(0, 1, tw, dtype=first.dtype)).clamp(min=1e-5)
            bump = (wy[:, None] * wx[None, :])[None, :, :, None]
        else:
            bump = torch.ones((1, th, tw, 1), dtype=first.dtype)
        for tile, (x0, y0, x1, y1) in zip(image_list, tile_grid(width, height, tw, th, ovl)):
            h, w = min(y1 - y0, tile.shape[1]), min(x1 - x0, tile.shape[2])
            canvas[:, y0 : y0 + h, x0 : x0 + w] += tile[:, :h, :w] * bump[:, :h, :w]
            weights[:, y0 : y0 + h, x0 : x0 + w] += bump[:, :h, :w]
        weights[weights == 0] = 1.0
        return (canvas / weights,)


class GetLatentSize:
    RELATIVE_PYTHON_MODULE = MODULE
    FUNCTION = "execute"
    CATEGORY = "latent"

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {"latent": ("LATENT", {"tooltip": "An image or video latent."})},
            "hidden": {"unique_id": "UNIQUE_ID"},
        }

    RETURN_TYPES = ("INT", "INT", "INT", "INT")
    RETURN_NAMES = ("width", "height", "frames", "batch_size")
    OUTPUT_TOOLTIPS = ("Latent width.", "Latent height.", "Frames (1 for an image latent).", "Latents in the batch.")
    SEARCH_ALIASES = ["dimensions", "resolution", "latent info", "video latent size"]
    DESCRIPTION = "The width, height, frame count and batch size of an image or video latent (in latent units)."

    def execute(self, latent: dict, unique_id: str | None = None):
        samples = latent["samples"]
        if samples.is_nested:  # audio-video latents: the first part
            samples = samples.unbind()[0]
        if samples.ndim == 5:
            batch, _, frames, height, width = samples.shape
        else:
            (batch, _, height, width), frames = samples.shape, 1
        return (width, height, frames, batch)


NODE_CLASS_MAPPINGS = {cls.__name__: cls for cls in (SplitImageToTileList, ImageMergeTileList, GetLatentSize)}
NODE_DISPLAY_NAME_MAPPINGS = {
    "SplitImageToTileList": "Split Image into List of Tiles",
    "ImageMergeTileList": "Merge List of Tiles to Image",
    "GetLatentSize": "Get Image/Video Latent Size",
}
