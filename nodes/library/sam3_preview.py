"""SAM3_TrackPreview (today's ComfyUI's comfy_extras.nodes_sam3, Comfy-Org/ComfyUI a439dcae07d6): SAM3_VideoTrack's
objects drawn over the frames as a video preview (an H.264 MP4 in the temp folder, shown by the UI).

As ComfyUI draws it: each object in its colour of a 12-colour palette, blended with the frame at `opacity` (a pixel
of several objects takes the first's colour), and at each object's centroid (integer mean of its pixels, when it has
more than one) its number in a 5x3 pixel font with a black outline, scaled max(3, height/240) times but no more than
sqrt(area)/15, with its detection score in percent below it (scale two thirds of that) when the score is under 1."""

from __future__ import annotations

import os
import random
from fractions import Fraction

import torch
import torch.nn.functional as F

from nodes.library.sam3 import MODULE, unpack_masks
from nodes.media.video import VideoCodec, VideoComponents, VideoContainer, VideoFromComponents
from nodes.output_claims import write_atomic
from nodes.workspace import active

PALETTE = [
    (0.12, 0.47, 0.71),
    (1.0, 0.5, 0.05),
    (0.17, 0.63, 0.17),
    (0.84, 0.15, 0.16),
    (0.58, 0.4, 0.74),
    (0.55, 0.34, 0.29),
    (0.89, 0.47, 0.76),
    (0.5, 0.5, 0.5),
    (0.74, 0.74, 0.13),
    (0.09, 0.75, 0.81),
    (0.94, 0.76, 0.06),
    (0.42, 0.68, 0.84),
]
# digits 0-9, five rows of three pixels each ("#" lit)
FONT = [
    "### #.# #.# #.# ###",
    ".#. ##. .#. .#. ###",
    "### ..# ### #.. ###",
    "### ..# ### ..# ###",
    "#.# #.# ### ..# ..#",
    "### #.. ### ..# ###",
    "### #.. ### #.# ###",
    "### ..# ..# ..# ..#",
    "### #.# ### #.# ###",
    "### #.# ### ..# ###",
]


def glyph(digit: int, scale: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(the digit's lit pixels, its outline: the lit pixels grown by one) as bool masks, the outline 2 larger."""
    rows = [[c == "#" for c in row] for row in FONT[digit].split()]
    g = torch.tensor(rows).repeat_interleave(scale, 0).repeat_interleave(scale, 1)
    padded = F.pad(g.float()[None, None], (1, 1, 1, 1))
    return g, F.max_pool2d(padded, 3, stride=1, padding=1)[0, 0] > 0


def _paste(frame: torch.Tensor, mask: torch.Tensor, y: int, x: int, value: torch.Tensor) -> None:
    h, w = frame.shape[:2]
    mh, mw = mask.shape
    y1, x1, y2, x2 = max(0, -y), max(0, -x), min(mh, h - y), min(mw, w - x)
    if y2 > y1 and x2 > x1:
        frame[y + y1 : y + y2, x + x1 : x + x2][mask[y1:y2, x1:x2]] = value


def draw_number(frame: torch.Tensor, number: int, cx: int, cy: int, color, scale: int) -> None:
    """`number` centred at (cx, cy), each digit outlined in black."""
    digits = [int(d) for d in str(number)]
    gh, gw = 5 * scale, 3 * scale
    x0 = cx - (len(digits) * (gw + scale) - scale) // 2
    y0 = cy - gh // 2
    fill = torch.tensor(color, dtype=frame.dtype)
    for i, d in enumerate(digits):
        lit, outline = glyph(d, scale)
        dx = x0 + i * (gw + scale)
        _paste(frame, outline, y0 - 1, dx - 1, torch.zeros(3, dtype=frame.dtype))
        _paste(frame, lit, y0, dx, fill)


def render_tracks(track: dict, images: torch.Tensor | None, opacity: float) -> torch.Tensor:
    """The preview's frames [N, H, W, 3] in 0..1."""
    packed = track["packed_masks"]
    h, w = (images.shape[1], images.shape[2]) if images is not None else track["orig_size"]
    n, objects = (track["n_frames"], 0) if packed is None else packed.shape[:2]
    scores = track.get("scores", [])
    colors = torch.tensor([PALETTE[i % len(PALETTE)] for i in range(objects)], dtype=torch.float32)
    ys, xs = torch.arange(h).view(1, h, 1), torch.arange(w).view(1, 1, w)
    out = []
    for t in range(n):
        frame = (
            images[t, ..., :3].float().clone() if images is not None and t < images.shape[0] else torch.zeros(h, w, 3)
        )
        if objects:
            masks = F.interpolate(unpack_masks(packed[t : t + 1]).float(), size=(h, w), mode="nearest")[0] > 0.5
            anywhere = masks.any(dim=0)
            if anywhere.any():
                first = masks.to(torch.uint8).argmax(dim=0)
                frame = torch.where(anywhere[..., None], frame * (1 - opacity) + colors[first] * opacity, frame)
            area = masks.sum(dim=(-1, -2)).clamp(min=1)
            cy = (masks * ys).sum(dim=(-1, -2)) // area
            cx = (masks * xs).sum(dim=(-1, -2)) // area
            scale = max(3, h // 240)
            caps = (area.float().sqrt() / 15).clamp(min=1).long().tolist()
            for i in range(objects):
                if area[i] <= 1:
                    continue
                s = min(scale, caps[i])
                x, y, color = int(cx[i]), int(cy[i]), PALETTE[i % len(PALETTE)]
                draw_number(frame, i, x, y, color, s)
                if i < len(scores) and scores[i] < 1.0:
                    draw_number(frame, int(scores[i] * 100), x, y + 5 * s + 3, color, max(1, s * 2 // 3))
        out.append(frame.clamp(0, 1))
    return torch.stack(out)


class SAM3_TrackPreview:
    RELATIVE_PYTHON_MODULE = MODULE
    FUNCTION = "execute"
    CATEGORY = "image/detection"
    RETURN_TYPES = ()
    OUTPUT_NODE = True
    DESCRIPTION = "Shows SAM3 Video Track's objects over the frames, numbered and coloured, as a preview video."

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "track_data": ("SAM3_TRACK_DATA", {}),
                "opacity": ("FLOAT", {"default": 0.5, "min": 0.0, "max": 1.0, "step": 0.05}),
                "fps": ("FLOAT", {"default": 24.0, "min": 1.0, "max": 120.0, "step": 1.0}),
            },
            "optional": {"images": ("IMAGE", {"tooltip": "The frames to draw on (black without them)."})},
        }

    def execute(self, track_data: dict, opacity: float = 0.5, fps: float = 24.0, images: torch.Tensor | None = None):
        frames = render_tracks(track_data, images, float(opacity))
        video = VideoFromComponents(VideoComponents(images=frames, frame_rate=Fraction(round(fps * 1000), 1000)))
        folder = active().temp_dir
        folder.mkdir(parents=True, exist_ok=True)
        name = f"sam3_track_preview_{random.getrandbits(32):08x}.mp4"
        write_atomic(
            os.path.join(folder, name),
            lambda tmp: video.save_to(tmp, format=VideoContainer.MP4, codec=VideoCodec.H264),
        )
        return {"ui": {"images": [{"filename": name, "subfolder": "", "type": "temp"}], "animated": (True,)}}


NODE_CLASS_MAPPINGS = {"SAM3_TrackPreview": SAM3_TrackPreview}
NODE_DISPLAY_NAME_MAPPINGS = {"SAM3_TrackPreview": "SAM3 Track Preview"}
