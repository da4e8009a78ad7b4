"""Wan-Move (point trajectories for Wan 2.1 image-to-video): ComfyUI's comfy_extras.nodes_wanmove nodes.

A TRACKS value is a dict as ComfyUI passes it between these nodes: "track_path" [frames, tracks, 2] float32 pixel
(x, y) positions and "track_visibility", a bool [frames, tracks] (or [frames, 1] where a mask gave it: the mask's
frames, each visible where any of its pixels is above 0, for every track). GenerateTracks draws tracks along a line
or a quadratic Bezier curve, spread perpendicular to the path; WanMoveTracksFromCoords reads them from JSON points;
WanMoveConcatTrack joins two sets; WanMoveVisualizeTracks draws them over frames (circles and fading tails, drawn
with PIL as ComfyUI draws them); WanMoveTrackToVideo is WanImageToVideo whose image latent, in every latent frame
after the first, takes at each track's cell a blend (by `strength`) towards the first latent frame's feature at the
track's first cell."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import torch
from PIL import Image, ImageDraw

from nodes.conditioning import require
from nodes.conditioning_ops import set_values
from nodes.library.wan import encode_video, fit_frames, grey_clip_from, latent_frames
from nodes.video_inputs import batch_input, video_length, video_size

CATEGORY = "model/conditioning/video_models"
MODULE = "comfy_extras.nodes_wanmove"
LATENT_STRIDE = (4, 8, 8)  # the Wan 2.1 VAE's frames and pixels per latent cell
INTERPOLATIONS = ("linear", "ease_in", "ease_out", "ease_in_out", "constant")
# the colours tracks are drawn in, in turn (Wan-Move's visualiser's)
TRACK_COLOURS = ((102, 153, 255), (0, 255, 255), (255, 255, 0), (255, 102, 204), (0, 255, 0))


def tracks_value(path: torch.Tensor, visibility: torch.Tensor) -> dict[str, torch.Tensor]:
    return {"track_path": path, "track_visibility": visibility}


def visibility_of(mask: torch.Tensor | None, frames: int, tracks: int) -> torch.Tensor:
    """All visible without a mask; with one, [mask frames, 1]: a frame is visible where any mask pixel is above 0."""
    if mask is None:
        return torch.ones(frames, tracks, dtype=torch.bool)
    return (mask > 0).flatten(1).any(dim=1)[:, None]


def eased(t: torch.Tensor, interpolation: str) -> torch.Tensor:
    """How far along the path each frame is (0..1) under the timing curve."""
    if interpolation == "linear":
        return t
    if interpolation == "constant":
        return torch.zeros_like(t)
    if interpolation == "ease_in":
        return t**2
    if interpolation == "ease_out":
        return 1 - (1 - t) ** 2
    if interpolation == "ease_in_out":
        return t * t * (3 - 2 * t)
    raise ValueError(f"interpolation: one of {', '.join(INTERPOLATIONS)}, got {interpolation!r}")


def path_and_tangent(
    u: torch.Tensor, start: tuple[float, float], mid: tuple[float, float], end: tuple[float, float], bezier: bool
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """x, y and the direction of motion (dx, dy) at each frame's position u along the path, in float32 as ComfyUI
    evaluates them (the spread is then added in double precision)."""
    if not bezier:
        xs = [a + (b - a) * u for a, b in zip(start, end, strict=True)]
        return (*xs, torch.full_like(u, end[0] - start[0]), torch.full_like(u, end[1] - start[1]))
    v = 1 - u
    xs = [v**2 * a + 2 * v * u * m + u**2 * b for a, m, b in zip(start, mid, end, strict=True)]
    ds = [2 * v * (m - a) + 2 * u * (b - m) for a, m, b in zip(start, mid, end, strict=True)]
    return (*xs, *ds)


class GenerateTracks:
    RELATIVE_PYTHON_MODULE = MODULE
    FUNCTION = "execute"
    CATEGORY = CATEGORY
    RETURN_TYPES = ("TRACKS", "INT")
    RETURN_NAMES = ("TRACKS", "track_length")
    SEARCH_ALIASES = ["motion paths", "camera movement", "trajectory"]
    DESCRIPTION = "Point tracks along a straight line or a curve, several side by side, for Wan-Move."

    @classmethod
    def INPUT_TYPES(cls):
        def unit(default: float, tip: str) -> tuple:
            return ("FLOAT", {"default": default, "min": 0.0, "max": 1.0, "step": 0.01, "tooltip": tip})

        return {
            "required": {
                "width": ("INT", {"default": 832, "min": 16, "max": 4096, "step": 16}),
                "height": ("INT", {"default": 480, "min": 16, "max": 4096, "step": 16}),
                "start_x": unit(0.0, "Where the path starts, as a fraction of the width."),
                "start_y": unit(0.0, "Where the path starts, as a fraction of the height."),
                "end_x": unit(1.0, "Where the path ends, as a fraction of the width."),
                "end_y": unit(1.0, "Where the path ends, as a fraction of the height."),
                "num_frames": ("INT", {"default": 81, "min": 1, "max": 1024}),
                "num_tracks": ("INT", {"default": 5, "min": 1, "max": 100}),
                "track_spread": (
                    "FLOAT",
                    {
                        "default": 0.025,
                        "min": 0.0,
                        "max": 1.0,
                        "step": 0.001,
                        "tooltip": "Gap between neighbouring tracks, across the direction of motion, as a fraction "
                        "of the mean of width and height.",
                    },
                ),
                "bezier": ("BOOLEAN", {"default": False, "tooltip": "Curve through the mid point's pull."}),
                "mid_x": unit(0.5, "The curve's control point, as a fraction of the width (bezier only)."),
                "mid_y": unit(0.5, "The curve's control point, as a fraction of the height (bezier only)."),
                "interpolation": (
                    "COMBO",
                    {
                        "multiselect": False,
                        "options": list(INTERPOLATIONS),
                        "tooltip": "How the speed along the path changes.",
                    },
                ),
            },
            "optional": {"track_mask": ("MASK", {"tooltip": "Frames where the tracks are visible."})},
        }

    def execute(
        self,
        width: int,
        height: int,
        start_x: float,
        start_y: float,
        end_x: float,
        end_y: float,
        num_frames: int,
        num_tracks: int,
        track_spread: float,
        bezier: bool = False,
        mid_x: float = 0.5,
        mid_y: float = 0.5,
        interpolation: str = "linear",
        track_mask: torch.Tensor | None = None,
    ) -> tuple[dict, int]:
        u = eased(torch.linspace(0, 1, num_frames), interpolation)
        start, mid, end = ((px * width, py * height) for px, py in ((start_x, start_y), (mid_x, mid_y), (end_x, end_y)))
        x, y, dx, dy = (v.tolist() for v in path_and_tangent(u, start, mid, end, bezier))
        spread = track_spread * (width + height) / 2
        offsets = [(k - (num_tracks - 1) / 2) * spread for k in range(num_tracks)]
        rows = []
        for cx, cy, tx, ty in zip(x, y, dx, dy, strict=True):
            norm = math.sqrt(tx * tx + ty * ty)
            # across the motion (the direction turned a quarter); sideways where the path stands still
            across = (-ty / norm, tx / norm) if norm > 0 else (1.0, 0.0)
            rows.append([[cx + across[0] * o, cy + across[1] * o] for o in offsets])
        path = torch.tensor(rows, dtype=torch.float32)
        return tracks_value(path, visibility_of(track_mask, num_frames, num_tracks)), num_frames


def parse_track_coords(coords: str | list[str]) -> list[list[dict]]:
    """JSON tracks (lists of {"x", "y"} points; one track alone is allowed; single quotes read as double) -> tracks.
    A list of strings holds one track per string. Text that is not JSON gives no tracks."""
    try:
        if isinstance(coords, str):
            tracks = list(json.loads(coords.replace("'", '"')))
        else:
            tracks = [json.loads(c.replace("'", '"')) for c in coords]
    except json.JSONDecodeError:
        return []
    if tracks and isinstance(tracks[0], dict) and "x" in tracks[0]:
        tracks = [tracks]
    return tracks


class WanMoveTracksFromCoords:
    RELATIVE_PYTHON_MODULE = MODULE
    FUNCTION = "execute"
    CATEGORY = CATEGORY
    RETURN_TYPES = ("TRACKS", "INT")
    RETURN_NAMES = ("TRACKS", "track_length")
    DESCRIPTION = "Tracks from JSON points (as the Wan-Move track editors write them), one point per frame."

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {},
            "optional": {
                "track_coords": ("STRING", {"default": "[]", "forceInput": True, "multiline": False}),
                "track_mask": ("MASK", {}),
            },
        }

    def execute(self, track_coords: str | list[str] = "[]", track_mask: torch.Tensor | None = None) -> tuple:
        tracks = parse_track_coords(track_coords)
        if not tracks:
            raise ValueError('track_coords: no tracks (expected JSON lists of {"x": ..., "y": ...} points)')
        frames = len(tracks[0])
        if any(len(t) < frames for t in tracks):
            raise ValueError(f"track_coords: every track needs as many points as the first ({frames})")
        path = torch.tensor([[[t[f]["x"], t[f]["y"]] for t in tracks] for f in range(frames)], dtype=torch.float32)
        return tracks_value(path, visibility_of(track_mask, frames, len(tracks))), frames


class WanMoveConcatTrack:
    RELATIVE_PYTHON_MODULE = MODULE
    FUNCTION = "execute"
    CATEGORY = CATEGORY
    RETURN_TYPES = ("TRACKS",)
    DESCRIPTION = "Both sets of tracks as one (the second's after the first's)."

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"tracks_1": ("TRACKS", {})}, "optional": {"tracks_2": ("TRACKS", {})}}

    def execute(self, tracks_1: dict, tracks_2: dict | None = None) -> tuple[dict]:
        if tracks_2 is None:
            return (tracks_1,)
        path = torch.cat([tracks_1["track_path"], tracks_2["track_path"]], dim=1)
        visible = torch.cat([tracks_1["track_visibility"], tracks_2["track_visibility"]], dim=-1)
        return (tracks_value(path, visible),)


def _fading_tail(layer: Image.Image, points: np.ndarray, colour: tuple, width: int, opacity: float) -> None:
    """The track's last points as a line from the newest point back, thinning and fading with the distance walked:
    one two-pixel stroke per pixel of length (drawn over, not blended, as ComfyUI's visualiser does)."""
    pen = ImageDraw.Draw(layer, "RGBA")
    points = points[::-1].tolist()
    lengths = [((b[0] - a[0]) ** 2 + (b[1] - a[1]) ** 2) ** 0.5 for a, b in zip(points, points[1:])]
    total = sum(lengths)
    if total == 0:
        return
    walked = 0.0
    for (ax, ay), (bx, by), length in zip(points, points[1:], lengths):
        steps = max(int(length), 1)
        for i in range(steps):
            fade = 1 - (walked + i / steps * length) / total
            x, y = int(ax + (bx - ax) * i / steps), int(ay + (by - ay) * i / steps)
            pen.line([(x, y), (x + 1, y)], fill=(*colour, int(255 * fade * opacity)), width=max(int(width * fade), 1))
        walked += length


def _over(frame: np.ndarray, layer: Image.Image) -> np.ndarray:
    rgba = np.array(layer)
    alpha = rgba[:, :, 3:4] / 255.0
    return rgba[:, :, :3] * alpha + frame * (1 - alpha)


def draw_tracks(
    frames: np.ndarray, path: np.ndarray, visible: np.ndarray, tail: int, radius: int, opacity: float, width: int
) -> list[np.ndarray]:
    """uint8 frames [T,H,W,3] with each visible track's point as a circle and its last `tail` steps as a fading
    line (integer pixel positions, truncated) -> uint8 frames."""
    out = []
    h, w = frames.shape[1:3]
    for t, frame in enumerate(frames):
        circles = Image.new("RGBA", (w, h), (0, 0, 0, 0))
        pen = ImageDraw.Draw(circles)
        tails = []
        for n in range(path.shape[1]):
            if not visible[t, n]:
                continue
            colour = TRACK_COLOURS[n % len(TRACK_COLOURS)]
            x, y = path[t, n]
            pen.ellipse((x - radius, y - radius, x + radius, y + radius), fill=(*colour, int(255 * opacity)))
            recent = path[max(t - tail, 0) : t + 1, n]
            if len(recent) > 1:
                tails.append((recent, colour))
        blended = _over(frame.astype(np.float32), circles)
        if tails:
            lines = Image.new("RGBA", (w, h), (0, 0, 0, 0))
            for recent, colour in tails:
                _fading_tail(lines, recent, colour, width, opacity)
            blended = _over(blended, lines)
        out.append(blended.astype(np.uint8))
    return out


class WanMoveVisualizeTracks:
    RELATIVE_PYTHON_MODULE = MODULE
    FUNCTION = "execute"
    CATEGORY = CATEGORY
    RETURN_TYPES = ("IMAGE",)
    DESCRIPTION = "Draws the tracks over the frames (the frames repeated to the tracks' length where fewer)."

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "images": ("IMAGE", {}),
                "line_resolution": ("INT", {"default": 24, "min": 1, "max": 1024}),
                "circle_size": ("INT", {"default": 12, "min": 1, "max": 128, "advanced": True}),
                "opacity": ("FLOAT", {"default": 0.75, "min": 0.0, "max": 1.0, "step": 0.01}),
                "line_width": ("INT", {"default": 16, "min": 1, "max": 128, "advanced": True}),
            },
            "optional": {"tracks": ("TRACKS", {})},
        }

    def execute(
        self,
        images: torch.Tensor,
        line_resolution: int,
        circle_size: int,
        opacity: float,
        line_width: int,
        tracks: dict | None = None,
    ) -> tuple[torch.Tensor]:
        if tracks is None:
            return (images,)
        path, visible = tracks["track_path"], tracks["track_visibility"]
        frames = (images * 255.0).to(torch.uint8)
        if frames.shape[0] != path.shape[0]:  # a still (or a shorter clip) repeated over the tracks' frames
            frames = frames.repeat(path.shape[0] // images.shape[0], 1, 1, 1)
        drawn = draw_tracks(
            frames.numpy(), path.long().numpy(), visible.numpy(), line_resolution, circle_size, opacity, line_width
        )
        return (torch.from_numpy(np.stack(drawn)).float() / 255,)


def track_cells(path: torch.Tensor, visible: torch.Tensor, width: int, height: int) -> list[list[tuple[int, int]]]:
    """Each track's latent cell (row, column) in every fourth frame (one per latent frame), (-1, -1) where it is
    hidden or outside the picture."""
    frames, n = path.shape[:2]
    if visible.shape[-1] != n:
        raise ValueError(
            f"tracks: visibility for {visible.shape[-1]} tracks, but there are {n} (a track_mask "
            "gives every track one visibility; ComfyUI fails here too)"
        )
    per_frame, down_h, down_w = LATENT_STRIDE
    cells = []
    for k in range(n):
        row = []
        for f in range(0, frames, per_frame):
            x, y = path[f, k].tolist()
            inside = bool(visible[f, k]) and 0 <= x < width and 0 <= y < height
            row.append((int(y // down_h), int(x // down_w)) if inside else (-1, -1))
        cells.append(row)
    return cells


def move_features(latent: torch.Tensor, cells: list[list[tuple[int, int]]], strength: float) -> torch.Tensor:
    """latent [C,T,H,W]: in each later latent frame, the cell under each track moves towards the first frame's
    feature under the track's first cell (by `strength`); all blends read the latent as encoded. Where two tracks
    land on one cell the later track's blend is kept (ComfyUI shuffles the tracks at random there). A track hidden
    in the first frame reads its first cell as (-1, -1), the last row's last column, as ComfyUI's indexing does."""
    out = latent.clone()
    blended: dict[tuple[int, int, int], torch.Tensor] = {}
    for track in cells:
        src_h, src_w = track[0]
        for t, (h, w) in enumerate(track[1:], start=1):
            if h < 0 or w < 0:
                continue
            src, dst = latent[:, 0, src_h, src_w], latent[:, t, h, w]
            blended[(t, h, w)] = dst + (src - dst) * strength
    for (t, h, w), value in blended.items():
        out[:, t, h, w] = value
    return out


class WanMoveTrackToVideo:
    RELATIVE_PYTHON_MODULE = MODULE
    FUNCTION = "execute"
    CATEGORY = CATEGORY
    RETURN_TYPES = ("CONDITIONING", "CONDITIONING", "LATENT")
    RETURN_NAMES = ("positive", "negative", "latent")
    DESCRIPTION = "Conditions a Wan-Move image-to-video model on a start image and the tracks its content follows."

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "positive": ("CONDITIONING", {}),
                "negative": ("CONDITIONING", {}),
                "vae": ("VAE", {}),
                "strength": (
                    "FLOAT",
                    {
                        "default": 1.0,
                        "min": 0.0,
                        "max": 100.0,
                        "step": 0.01,
                        "tooltip": "How far the tracked cells move towards the first frame's features.",
                    },
                ),
                "width": video_size(832),
                "height": video_size(480),
                "length": video_length(81),
                "batch_size": batch_input(),
                "start_image": ("IMAGE", {}),
            },
            "optional": {"tracks": ("TRACKS", {}), "clip_vision_output": ("CLIP_VISION_OUTPUT", {})},
        }

    async def execute(
        self,
        positive: Any,
        negative: Any,
        vae: Any,
        strength: float,
        width: int,
        height: int,
        length: int,
        batch_size: int,
        start_image: torch.Tensor | None = None,
        tracks: dict | None = None,
        clip_vision_output: Any = None,
    ) -> tuple[list, list, dict]:
        positive, negative = require(positive, "positive"), require(negative, "negative")
        latent = torch.zeros(batch_size, 16, latent_frames(length), height // 8, width // 8)
        if start_image is not None:
            given = fit_frames(start_image[:length], width, height)
            image = await encode_video(vae, grey_clip_from(given, length)[..., :3])
            mask = torch.ones(1, 1, latent.shape[2], *image.shape[-2:], dtype=given.dtype)
            mask[:, :, : latent_frames(given.shape[0])] = 0.0
            if tracks is not None and strength > 0.0:
                if batch_size != 1:  # ComfyUI's feature move asserts the image latent's batch of one
                    raise ValueError(f"batch_size: WanMoveTrackToVideo moves tracks for a batch of 1, got {batch_size}")
                path = tracks["track_path"][:length]
                visible = tracks.get("track_visibility")
                if visible is None:
                    visible = torch.ones(length, path.shape[1], dtype=torch.bool)
                image = move_features(image[0], track_cells(path, visible, width, height), strength)[None]
            # ComfyUI moves the features in place, so the negative's image has them moved too
            extra = {"concat_latent_image": image, "concat_mask": mask}
            positive, negative = set_values(positive, extra), set_values(negative, extra)
        if clip_vision_output is not None:
            extra = {"clip_vision_output": clip_vision_output}
            positive, negative = set_values(positive, extra), set_values(negative, extra)
        return positive, negative, {"samples": latent}


NODE_CLASS_MAPPINGS = {
    "WanMoveTrackToVideo": WanMoveTrackToVideo,
    "WanMoveTracksFromCoords": WanMoveTracksFromCoords,
    "WanMoveConcatTrack": WanMoveConcatTrack,
    "WanMoveVisualizeTracks": WanMoveVisualizeTracks,
    "GenerateTracks": GenerateTracks,
}
NODE_DISPLAY_NAME_MAPPINGS: dict[str, str] = {}
