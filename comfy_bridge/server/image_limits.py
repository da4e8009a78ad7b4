"""The pixel limit on images the server decodes for a client (uploads, /view conversions, model previews).

A PNG of 20000x20000 pixels compresses to under 400 KB and decodes to 1.6 GB: such a file is refused by
its header, before anything is decoded. The limit is Pillow's own default guard (Image.MAX_IMAGE_PIXELS,
above which Pillow warns; it raises only at twice that), kept here as a number because node packs often
set the global to None to lift it for their own work."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from io import BytesIO
from pathlib import Path

from PIL import Image

MAX_PIXELS = 89_478_485  # PIL.Image.MAX_IMAGE_PIXELS's default: 1024**3 // 4 // 3


class TooManyPixels(ValueError):
    """An image whose header declares more than MAX_PIXELS pixels."""


def _check(img: Image.Image) -> None:
    width, height = img.size
    if width * height > MAX_PIXELS:
        raise TooManyPixels(
            f"the image is {width}x{height} = {width * height} pixels; at most {MAX_PIXELS} are accepted"
        )


@contextlib.contextmanager
def open_image(source: Path | bytes) -> Iterator[Image.Image]:
    """Image.open that raises TooManyPixels (a ValueError) past the limit, before any pixel is decoded."""
    try:
        img = Image.open(BytesIO(source) if isinstance(source, bytes) else source)
    except Image.DecompressionBombError as exc:  # past twice Pillow's global limit: also past ours
        raise TooManyPixels(f"{exc} (at most {MAX_PIXELS} pixels are accepted)") from None
    with img:
        _check(img)
        yield img


def pixels_problem(source: Path | bytes) -> str | None:
    """Why the image in `source` (only its header is read) is refused (too many pixels); None for an image
    within the limit and for bytes that are no image Pillow reads (an upload may be any file, as in ComfyUI)."""
    try:
        with open_image(source):
            return None
    except TooManyPixels as exc:
        return str(exc)
    except Exception:  # noqa: BLE001 - Pillow's plugins raise many types on bytes that are no image
        return None
