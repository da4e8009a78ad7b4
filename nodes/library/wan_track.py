"""Wan ATI (any trajectory instruction): WanTrackToVideo (ComfyUI's comfy_extras.nodes_wan).

The tracks are JSON: one track is a list of {"x", "y"} pixel points, one per frame of a 24 fps clip of at most
121 points; a list of tracks is one sample's, a list of such lists one per sample. Each track is resampled to the
video's frames, its points made relative to the frame's centre in units of half the short edge. The start image
is encoded as WanImageToVideo does (its clip grey after the first frame); then, in model space, every later
latent frame takes the start latent's feature found under each track's first point, spread around where the
track is in that frame (each latent cell mixes its `topk` nearest tracks with weight exp(-temperature * d^2)),
and keeps its own value where no track comes near. The image-to-video mask is one minus those weights (the first
frame fixed). Without tracks the node is WanImageToVideo."""

from __future__ import annotations

import json
import math

import torch

from nodes.conditioning import require
from nodes.conditioning_ops import set_values
from nodes.library.wan import WanImageToVideo, encode_video, fit_frames, latent_frames
from nodes.models.components import WAN21_LATENT
from nodes.models.unet import resize_to_batch_size
from nodes.video_inputs import batch_input, video_length, video_size

TRACK_POINTS = 121  # ATI's tracks: 121 points (about 5 s at 24 fps), padded with invisible points
VAE_FRAMES = 4  # pixel frames per latent frame after the first


def parse_tracks(tracks: str) -> list[list[list[dict]]]:
    """The tracks input as samples -> tracks -> points; [] for text that is not JSON (ComfyUI then falls back to
    WanImageToVideo). Single quotes are read as double quotes, as ComfyUI reads them."""
    try:
        parsed = json.loads(tracks.replace("'", '"'))
    except json.JSONDecodeError:
        return []
    if not isinstance(parsed, list):
        raise ValueError(f"tracks: expected a JSON list of tracks, got a {type(parsed).__name__}")
    if not parsed:
        return []
    if isinstance(parsed[0], dict):  # one track
        parsed = [parsed]
    if isinstance(parsed[0], list) and parsed[0] and isinstance(parsed[0][0], dict):  # one sample's tracks
        parsed = [parsed]
    for sample in parsed:
        for track in sample if isinstance(sample, list) else [sample]:
            if not isinstance(track, list) or not all(isinstance(p, dict) and "x" in p and "y" in p for p in track):
                raise ValueError('tracks: each track must be a list of {"x": ..., "y": ...} points')
    return parsed


def track_points(track: list[dict]) -> torch.Tensor:
    """[121, 3]: x, y and visibility 1 per point, cut to 121 or padded with invisible points at the origin."""
    pts = torch.zeros(TRACK_POINTS, 3)
    given = torch.tensor([[float(p["x"]), float(p["y"]), 1.0] for p in track[:TRACK_POINTS]]).reshape(-1, 3)
    pts[: given.shape[0]] = given
    return pts


def resample_tracks(points: torch.Tensor, width: int, height: int, frames: int) -> torch.Tensor:
    """[N,121,3] pixel tracks -> [1+frames, N, 4]: (time in [-1,1], x, y relative to the frame centre in half
    short edges, visibility in {-1,1}); the first point, then the other 120 picked at the video's frame rate."""
    points = points.permute(1, 0, 2)  # [121, N, 3]
    xy = (points[..., :2] - torch.tensor([width, height], dtype=torch.float32) / 2) / min(width, height) * 2
    visible = points[..., 2:] * 2 - 1
    time = torch.linspace(-1, 1, TRACK_POINTS).view(-1, 1, 1).expand(*visible.shape)
    out = torch.cat([time, xy, visible], dim=-1)
    common = math.gcd(TRACK_POINTS - 1, frames)
    step, repeat = (TRACK_POINTS - 1) // common, frames // common
    later = torch.repeat_interleave(out[1:], repeat, dim=0)[1::step]
    return torch.cat([out[:1], later], dim=0)


def move_along_tracks(
    tracks: torch.Tensor, latent: torch.Tensor, temperature: float, topk: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """One sample: tracks [1+4(T-1), N, 4] on its latent [C,T,H,W] in model space -> (weights [4,T,H,W], latent
    [C,T,H,W]) with each later frame's cells mixed towards the start frame's features under the tracks."""
    _, frames, h, w = latent.shape
    n = tracks.shape[1]
    xy, visible = tracks[..., 1:3], tracks[..., 3:4]
    aspect = torch.tensor([w / min(h, w), h / min(h, w)])
    start_points = (xy[:1] / aspect).clamp(-1, 1)  # grid_sample's [-1,1] frame
    visible = visible.clamp(0, 1)
    xs = torch.linspace(-w / min(h, w), w / min(h, w), w)
    ys = torch.linspace(-h / min(h, w), h / min(h, w), h)
    grid = torch.stack(torch.meshgrid(ys, xs, indexing="ij")[::-1], dim=-1)  # [H,W,2] as (x, y)
    # the VAE's groups of four frames: each later latent frame sees the mean visible position of its four
    seen = visible[1:].view(frames - 1, VAE_FRAMES, n, 1).sum(1)
    where = (xy[1:] * visible[1:]).view(frames - 1, VAE_FRAMES, n, 2).sum(1) / (seen + 1e-5)
    dist = (where[:, None, None] - grid[None, :, :, None]).pow(2).sum(-1)  # [T-1,H,W,N]
    weight = torch.exp(-dist * temperature) * seen.clamp(0, 1).view(frames - 1, 1, 1, n)
    top_weight, top_index = torch.topk(weight, k=min(topk, n), dim=-1)
    features = torch.nn.functional.grid_sample(
        latent[:, :1].permute(1, 0, 2, 3), start_points[None].to(latent.dtype), "bilinear", "zeros", False
    )[0, :, 0].permute(1, 0)  # [N,C]: the start latent under each track's first point
    moved = torch.sum(features[top_index] * top_weight[..., None], dim=-2).permute(3, 0, 1, 2)  # [C,T-1,H,W]
    total = top_weight.sum(-1)
    mixed = moved + latent[:, 1:] * (1 - total.clamp(0, 1))
    weights = torch.cat([torch.ones_like(total[:1]), total], dim=0)
    return weights[None].expand(4, -1, -1, -1), torch.cat([latent[:, :1], mixed], dim=1)


def _picks(n: int, b: int) -> list[int]:
    return resize_to_batch_size(torch.arange(n), b).tolist()


class WanTrackToVideo:
    RELATIVE_PYTHON_MODULE = "comfy_extras.nodes_wan"
    FUNCTION = "execute"
    CATEGORY = "conditioning/video_models"
    RETURN_TYPES = ("CONDITIONING", "CONDITIONING", "LATENT")
    RETURN_NAMES = ("positive", "negative", "latent")
    DESCRIPTION = "Conditions a Wan ATI image-to-video model on a start image and point tracks (JSON) to follow."

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "positive": ("CONDITIONING", {}),
                "negative": ("CONDITIONING", {}),
                "vae": ("VAE", {}),
                "tracks": ("STRING", {"default": "[]", "multiline": True}),
                "width": video_size(832),
                "height": video_size(480),
                "length": video_length(81),
                "batch_size": batch_input(),
                "temperature": ("FLOAT", {"default": 220.0, "min": 1.0, "max": 1000.0, "step": 0.1}),
                "topk": ("INT", {"default": 2, "min": 1, "max": 10}),
                "start_image": ("IMAGE", {}),
            },
            "optional": {"clip_vision_output": ("CLIP_VISION_OUTPUT", {})},
        }

    async def execute(
        self,
        positive,
        negative,
        vae,
        tracks: str,
        width: int,
        height: int,
        length: int,
        batch_size: int,
        temperature: float,
        topk: int,
        start_image: torch.Tensor | None = None,
        clip_vision_output=None,
    ):
        samples = parse_tracks(tracks)
        if not samples:
            return await WanImageToVideo().execute(
                positive, negative, vae, width, height, length, batch_size, start_image, clip_vision_output
            )
        positive, negative = require(positive, "positive"), require(negative, "negative")
        if (length - 1) % VAE_FRAMES:
            raise ValueError(f"length: WanTrackToVideo needs 1 + a multiple of 4 frames, got {length}")
        latent = torch.zeros(batch_size, 16, latent_frames(length), height // 8, width // 8)
        resampled = [
            resample_tracks(torch.stack([track_points(t) for t in sample]), width, height, length - 1)
            for sample in samples
        ]
        if start_image is not None:
            starts = fit_frames(start_image[:batch_size], width, height)
            clips = torch.full((starts.shape[0], length, height, width, starts.shape[-1]), 0.5, dtype=starts.dtype)
            clips[:, 0] = starts
            clips = resize_to_batch_size(clips, batch_size)
            encoded = torch.cat([await encode_video(vae, clip[..., :3]) for clip in clips])
            encoded = WAN21_LATENT.process_in(encoded)  # the mixing is not linear: done in model space
            pairs = [
                move_along_tracks(resampled[i], encoded[b], temperature, topk)
                for b, i in enumerate(_picks(len(resampled), batch_size))
            ]
            weights = torch.stack([p[0] for p in pairs])
            image = WAN21_LATENT.process_out(torch.stack([p[1] for p in pairs]))
            extra = {"concat_mask": 1.0 - weights, "concat_latent_image": image}
            positive, negative = set_values(positive, extra), set_values(negative, extra)
        if clip_vision_output is not None:
            extra = {"clip_vision_output": clip_vision_output}
            positive, negative = set_values(positive, extra), set_values(negative, extra)
        return positive, negative, {"samples": latent}


NODE_CLASS_MAPPINGS = {"WanTrackToVideo": WanTrackToVideo}
NODE_DISPLAY_NAME_MAPPINGS: dict[str, str] = {}
