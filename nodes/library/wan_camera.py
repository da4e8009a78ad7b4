"""Wan Fun Camera: WanCameraEmbedding (ComfyUI's comfy_extras.nodes_camera_trajectory) and WanCameraImageToVideo
(comfy_extras.nodes_wan).

The embedding is a Plücker ray map per frame (Sitzmann et al. 2021, as CameraCtrl and VideoX-Fun build it): a
preset camera motion (rotation about the camera's axes and a translation, growing linearly over the frames),
made relative to the first frame; for every pixel the unit ray direction d and the moment o x d. The six
channels of each group of four frames (the first frame counted four times, as the Wan VAE groups frames) are
stacked to 24 channels per latent frame: [1, 24, 1+(length-1)/4, height, width], what the camera model's
control adapter reads."""

from __future__ import annotations

import math

import torch

from nodes import MAX_RESOLUTION
from nodes.conditioning import require
from nodes.conditioning_ops import set_values
from nodes.library.wan import (
    WAN21_VAE_ARCH,
    encode_video,
    fit_frames,
    latent_frames,
)
from nodes.models.components import WAN21_LATENT
from nodes.video_inputs import video_inputs

# preset -> (rotation about x, y, z in units of 60 degrees, translation in units of 1.5) at the last frame
POSES = {
    "Static": ((0, 0, 0), (0, 0, 0)),
    "Pan Up": ((0, 0, 0), (0, -1, 0)),
    "Pan Down": ((0, 0, 0), (0, 1, 0)),
    "Pan Left": ((0, 0, 0), (-1, 0, 0)),
    "Pan Right": ((0, 0, 0), (1, 0, 0)),
    "Zoom In": ((0, 0, 0), (0, 0, 2)),
    "Zoom Out": ((0, 0, 0), (0, 0, -2)),
    "Anti Clockwise (ACW)": ((0, 0, -1), (0, 0, 0)),
    "ClockWise (CW)": ((0, 0, 1), (0, 0, 0)),
}
POSE_WIDTH, POSE_HEIGHT = 1280, 720  # the frame the presets' intrinsics are given for


def _rotation(ax: float, ay: float, az: float) -> torch.Tensor:
    cx, sx, cy, sy, cz, sz = math.cos(ax), math.sin(ax), math.cos(ay), math.sin(ay), math.cos(az), math.sin(az)
    rx = torch.tensor([[1, 0, 0], [0, cx, -sx], [0, sx, cx]], dtype=torch.float64)
    ry = torch.tensor([[cy, 0, sy], [0, 1, 0], [-sy, 0, cy]], dtype=torch.float64)
    rz = torch.tensor([[cz, -sz, 0], [sz, cz, 0], [0, 0, 1]], dtype=torch.float64)
    return rz @ (ry @ rx)


def camera_poses(pose: str, speed: float, n: int) -> torch.Tensor:
    """[n, 4, 4] camera-to-world matrices relative to the first frame's camera (float32)."""
    angle, move = POSES[pose]
    c2w = torch.eye(4, dtype=torch.float64).repeat(n, 1, 1)
    for i in range(n):
        f = i / n * speed
        c2w[i, :3, :3] = _rotation(*(f * math.pi / 3 * a for a in angle))
        c2w[i, :3, 3] = torch.tensor([f * 1.5 * t for t in move], dtype=torch.float64)
    relative = torch.linalg.inv(c2w[0]) @ c2w
    relative[0] = torch.eye(4, dtype=torch.float64)
    return relative.to(torch.float32)


def plucker(poses: torch.Tensor, width: int, height: int, fx: float, fy: float, cx: float, cy: float) -> torch.Tensor:
    """[n, height, width, 6]: each pixel's ray moment o x d and unit direction d, in the first camera's frame."""
    if POSE_WIDTH / POSE_HEIGHT > width / height:  # the intrinsics follow the pose frame's aspect
        fx = height * (POSE_WIDTH / POSE_HEIGHT) * fx / width
    else:
        fy = width / (POSE_WIDTH / POSE_HEIGHT) * fy / height
    k = torch.tensor([fx * width, fy * height, cx * width, cy * height], dtype=torch.float32)
    j, i = torch.meshgrid(torch.linspace(0, height - 1, height), torch.linspace(0, width - 1, width), indexing="ij")
    dirs = torch.stack([(i + 0.5 - k[2]) / k[0], (j + 0.5 - k[3]) / k[1], torch.ones_like(i)], dim=-1)
    dirs = (dirs / dirs.norm(dim=-1, keepdim=True)).reshape(1, -1, 3)
    rays_d = dirs @ poses[:, :3, :3].transpose(-1, -2)  # [n, HW, 3]
    rays_o = poses[:, None, :3, 3].expand_as(rays_d)
    return torch.cat([torch.cross(rays_o, rays_d, dim=-1), rays_d], dim=-1).reshape(len(poses), height, width, 6)


def camera_embedding(
    pose: str,
    width: int,
    height: int,
    length: int,
    speed: float = 1.0,
    fx: float = 0.5,
    fy: float = 0.5,
    cx: float = 0.5,
    cy: float = 0.5,
) -> torch.Tensor:
    if pose not in POSES:
        raise ValueError(f"camera_pose: {pose!r} is not one of {', '.join(POSES)}")
    if (length - 1) % 4:
        raise ValueError(
            f"length: the camera embedding groups frames in fours after the first; {length} is not 1 + a multiple of 4"
        )
    rays = plucker(camera_poses(pose, speed, length), width, height, fx, fy, cx, cy).permute(0, 3, 1, 2)
    frames = torch.cat([rays[:1].expand(4, -1, -1, -1), rays[1:]])  # [4 * latent frames, 6, H, W]
    groups = frames.reshape(-1, 4, 6, height, width).transpose(1, 2).reshape(-1, 24, height, width)
    return groups.transpose(0, 1).unsqueeze(0).contiguous()


class WanCameraEmbedding:
    RELATIVE_PYTHON_MODULE = "comfy_extras.nodes_camera_trajectory"
    FUNCTION = "execute"
    CATEGORY = "camera"
    RETURN_TYPES = ("WAN_CAMERA_EMBEDDING", "INT", "INT", "INT")
    RETURN_NAMES = ("camera_embedding", "width", "height", "length")
    DESCRIPTION = "A preset camera motion as Plücker ray maps for Wan's Fun Camera models."

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "camera_pose": ("COMBO", {"options": list(POSES), "default": "Static", "multiselect": False}),
                "width": ("INT", {"default": 832, "min": 16, "max": MAX_RESOLUTION, "step": 16}),
                "height": ("INT", {"default": 480, "min": 16, "max": MAX_RESOLUTION, "step": 16}),
                "length": ("INT", {"default": 81, "min": 1, "max": MAX_RESOLUTION, "step": 4}),
            },
            "optional": {
                "speed": ("FLOAT", {"default": 1.0, "min": 0, "max": 10.0, "step": 0.1}),
                "fx": ("FLOAT", {"default": 0.5, "min": 0, "max": 1, "step": 0.000000001}),
                "fy": ("FLOAT", {"default": 0.5, "min": 0, "max": 1, "step": 0.000000001}),
                "cx": ("FLOAT", {"default": 0.5, "min": 0, "max": 1, "step": 0.01}),
                "cy": ("FLOAT", {"default": 0.5, "min": 0, "max": 1, "step": 0.01}),
            },
        }

    def execute(
        self,
        camera_pose: str,
        width: int,
        height: int,
        length: int,
        speed: float = 1.0,
        fx: float = 0.5,
        fy: float = 0.5,
        cx: float = 0.5,
        cy: float = 0.5,
    ):
        return camera_embedding(camera_pose, width, height, length, speed, fx, fy, cx, cy), width, height, length


class WanCameraImageToVideo:
    RELATIVE_PYTHON_MODULE = "comfy_extras.nodes_wan"
    FUNCTION = "execute"
    CATEGORY = "conditioning/video_models"
    RETURN_TYPES = ("CONDITIONING", "CONDITIONING", "LATENT")
    RETURN_NAMES = ("positive", "negative", "latent")
    DESCRIPTION = "Conditions a Wan Fun Camera model on a start image and a camera embedding."

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": video_inputs(),
            "optional": {
                "clip_vision_output": ("CLIP_VISION_OUTPUT", {}),
                "start_image": ("IMAGE", {}),
                "camera_conditions": ("WAN_CAMERA_EMBEDDING", {}),
            },
        }

    async def execute(
        self,
        positive,
        negative,
        vae,
        width: int,
        height: int,
        length: int,
        batch_size: int,
        start_image: torch.Tensor | None = None,
        clip_vision_output=None,
        camera_conditions: torch.Tensor | None = None,
    ):
        positive, negative = require(positive, "positive"), require(negative, "negative")
        frames = latent_frames(length)
        latent = torch.zeros(batch_size, 16, frames, height // 8, width // 8)
        extra = {}
        if start_image is not None:
            concat = WAN21_LATENT.process_out(torch.zeros(batch_size, 16, frames, height // 8, width // 8))
            image = await encode_video(vae, fit_frames(start_image[:length], width, height)[..., :3], WAN21_VAE_ARCH)
            n = min(image.shape[2], frames)
            concat[:, :, :n] = image[:, :, :n]
            mask = torch.ones(1, 1, frames * 4, height // 8, width // 8)
            mask[:, :, : min(start_image.shape[0], length) + 3] = 0.0
            mask = mask.view(1, frames, 4, height // 8, width // 8).transpose(1, 2)
            extra = {"concat_latent_image": concat, "concat_mask": mask}
        if camera_conditions is not None:
            extra["camera_conditions"] = camera_conditions
        if clip_vision_output is not None:
            extra["clip_vision_output"] = clip_vision_output
        if extra:
            positive, negative = set_values(positive, extra), set_values(negative, extra)
        return positive, negative, {"samples": latent}


NODE_CLASS_MAPPINGS = {"WanCameraEmbedding": WanCameraEmbedding, "WanCameraImageToVideo": WanCameraImageToVideo}
NODE_DISPLAY_NAME_MAPPINGS: dict[str, str] = {}
