"""Today's ComfyUI Draw Text Overlay (`comfy_extras.nodes_text_overlay`, added after 0.3.64): text drawn over
every image of a batch, at the top or bottom inside a 1% margin, left / centred / right, in a font of the
workspace's fonts folder (or Pillow's default font) whose size is a percentage of the image height, shrunk
(by 10% steps, down to 2% of the height but not below 10 px) until the text fits; lines wrap at spaces, a word
wider than the image is cut; an optional black outline; "\\n" and "\\t" typed in the text are a new line and a tab.

The text is rendered once on a transparent layer and laid over each frame (RGBA frames: premultiplied
source-over, so the frame's own alpha is kept where there is no text)."""

from __future__ import annotations

import numpy as np
import torch
from PIL import Image, ImageColor, ImageDraw, ImageFont

from nodes.workspace import active

LINE_SPACING = 1.2  # line advance, in font sizes
MARGIN_PERCENT = 1.0  # of the shorter side
MIN_FONT_PERCENT = 2.0  # of the height: the size stops shrinking there ...
MIN_FONT_PIXELS = 10  # ... but never below this
OUTLINE_FACTOR = 0.04  # outline width, in font sizes (at least 1 px)


def _font(name: str, size: int) -> ImageFont.FreeTypeFont:
    if not name:
        return ImageFont.load_default(size=size)
    path = active().full_path("fonts", name)
    if path is None:
        raise ValueError(f"Draw Text Overlay: font {name!r} is not in the fonts folder")
    return ImageFont.truetype(str(path), size)


def wrap(text: str, font: ImageFont.FreeTypeFont, max_width: int) -> list[str]:
    """Lines no wider than max_width: words joined by one space, a too-wide word cut where it overflows."""
    lines = []
    for paragraph in text.split("\n"):
        words, line = paragraph.split(), ""
        if not words:
            lines.append("")
            continue
        for word in words:
            while len(word) > 1 and font.getlength(word) > max_width:
                cut = 1
                while cut < len(word) and font.getlength(word[: cut + 1]) <= max_width:
                    cut += 1
                if line:
                    lines.append(line)
                    line = ""
                lines.append(word[:cut])
                word = word[cut:]
            joined = f"{line} {word}" if line else word
            if not line or font.getlength(joined) <= max_width:
                line = joined
            else:
                lines.append(line)
                line = word
        if line:
            lines.append(line)
    return lines


def render(
    width: int,
    height: int,
    text: str,
    position: str,
    align: str,
    font_name: str,
    font_size: float,
    fill: tuple[int, ...],
    outline: tuple[int, ...],
) -> tuple[torch.Tensor, torch.Tensor]:
    """The text on a transparent width x height layer: (RGB [H,W,3], alpha [H,W,1]), values 0..1."""
    layer = Image.new("RGBA", (width, height), (0, 0, 0, 0))
    draw = ImageDraw.Draw(layer)
    margin = int(round(MARGIN_PERCENT / 100.0 * min(width, height)))
    max_width, max_height = max(1, width - 2 * margin), max(1, height - 2 * margin)
    size = max(1, int(round(font_size / 100.0 * height)))
    smallest = min(size, max(MIN_FONT_PIXELS, int(round(MIN_FONT_PERCENT / 100.0 * height))))
    while True:
        font = _font(font_name, size)
        stroke = max(1, int(round(size * OUTLINE_FACTOR))) if outline[3] > 0 else 0
        block = "\n".join(wrap(text, font, max_width))
        # the line advance asked for, less what Pillow already puts between two lines
        one = draw.textbbox((0, 0), "Ay", font=font, stroke_width=stroke)
        two = draw.multiline_textbbox((0, 0), "Ay\nAy", font=font, spacing=0, stroke_width=stroke)
        spacing = int(round(size * LINE_SPACING - ((two[3] - two[1]) - (one[3] - one[1]))))
        box = draw.multiline_textbbox((0, 0), block, font=font, spacing=spacing, stroke_width=stroke)
        if box[3] - box[1] <= max_height or size <= smallest:
            break
        size = max(smallest, int(size * 0.9))
    anchor, x = {"left": ("l", margin), "center": ("m", width / 2), "right": ("r", width - margin)}[align]
    # the block's inked top (or bottom) sits on the margin
    y = height - margin - box[3] if position == "bottom" else margin - box[1]
    draw.multiline_text(
        (x, y),
        block,
        font=font,
        fill=fill,
        anchor=anchor + "a",
        align=align,
        spacing=spacing,
        stroke_width=stroke,
        stroke_fill=outline,
    )
    rgba = torch.from_numpy(np.asarray(layer).astype(np.float32) / 255.0)
    return rgba[..., :3], rgba[..., 3:4]


def overlay(
    images: torch.Tensor, text: str, font: str, font_size: float, color: str, position: str, align: str, outline: bool
) -> torch.Tensor:
    if not text.strip():
        return images
    if position not in ("top", "bottom") or align not in ("left", "center", "right"):
        raise ValueError(
            f"Draw Text Overlay: position must be top or bottom and align left, center or right "
            f"(got {position!r}, {align!r})"
        )
    try:
        fill = ImageColor.getrgb(color)
    except ValueError:
        raise ValueError(f"Draw Text Overlay: {color!r} is not a colour") from None
    fill = fill if len(fill) == 4 else (*fill, 255)
    text = text.replace("\\n", "\n").replace("\\t", "\t")
    rgb, alpha = render(
        images.shape[2],
        images.shape[1],
        text,
        position,
        align,
        font,
        font_size,
        fill,
        (0, 0, 0, 255) if outline else (0, 0, 0, 0),
    )
    rgb, alpha = rgb.to(images), alpha.to(images)
    if images.shape[-1] == 4:
        under_rgb, under_alpha = images[..., :3], images[..., 3:]
        out_alpha = alpha + (1.0 - alpha) * under_alpha
        out_rgb = rgb * alpha + (1.0 - alpha) * under_rgb * under_alpha
        out_rgb = torch.where(out_alpha > 1e-5, out_rgb / out_alpha, torch.zeros_like(out_rgb))
        return torch.cat((out_rgb.clamp(0, 1), out_alpha), dim=-1)
    return images * (1.0 - alpha) + rgb * alpha


class TextOverlay:
    RELATIVE_PYTHON_MODULE = "comfy_extras.nodes_text_overlay"
    FUNCTION = "execute"
    CATEGORY = "text"
    SEARCH_ALIASES = ["text", "label", "caption", "subtitle", "watermark", "title", "addlabel", "overlay"]

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "images": ("IMAGE", {}),
                "text": ("STRING", {"default": "", "multiline": True}),
                "font": ("COMBO", {"multiselect": False, "options": active().list_files("fonts")}),
                "font_size": (
                    "FLOAT",
                    {
                        "default": 5.0,
                        "min": 0.5,
                        "max": 50.0,
                        "step": 0.5,
                        "tooltip": "Font size as a percentage of the image height.",
                    },
                ),
                "color": ("COLOR", {"default": "#ffffff", "tooltip": "Colour of the text."}),
                "position": ("COMBO", {"default": "top", "multiselect": False, "options": ["top", "bottom"]}),
                "align": ("COMBO", {"default": "left", "multiselect": False, "options": ["left", "center", "right"]}),
                "outline": ("BOOLEAN", {"default": True, "tooltip": "Draw a black outline around the text."}),
            }
        }

    RETURN_TYPES = ("IMAGE",)
    RETURN_NAMES = ("images",)
    OUTPUT_TOOLTIPS = (None,)
    DESCRIPTION = "Draws text over an image or a batch of images."

    def execute(
        self,
        images: torch.Tensor,
        text: str,
        font: str,
        font_size: float,
        color: str,
        position: str,
        align: str,
        outline: bool,
    ):
        return (overlay(images, text, font, font_size, color, position, align, outline),)


NODE_CLASS_MAPPINGS = {"TextOverlay": TextOverlay}
NODE_DISPLAY_NAME_MAPPINGS = {"TextOverlay": "Draw Text Overlay"}
