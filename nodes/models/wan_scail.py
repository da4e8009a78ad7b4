"""Wan SCAIL and SCAIL-2 (zai-org's character animation models on Wan 2.1 image-to-video 14B; ComfyUI's
SCAILWanModel / SCAIL2WanModel in comfy/ldm/wan/model.py, newer than every ComfyUI that runs here; written from
their definition).

Files: Wan 2.1 image-to-video's layout with 20 input channels (noise and 4 history-mask channels) plus
`patch_embedding_pose` (SCAIL; a 2x2 patch embedding of the pose video's latent) and, for SCAIL-2,
`patch_embedding_mask` (a 2x2 patch embedding of 28 binary identity-mask channels: 7 colours x 4 frames). ComfyUI
tells them apart by those keys, the mask one first (`variant`).

The network is the Wan transformer (diffusers' WanTransformer3DModel, loaded by nodes.models.wan) over a longer
token sequence: the reference latents' frames (each with 4 channels of ones; additional references first, the
primary one last, next to the video) before the video's, all through `patch_embedding`, plus SCAIL-2's reference
and video identity masks through `patch_embedding_mask`; then the pose latent's tokens (half the resolution,
`patch_embedding_pose`, plus SCAIL-2's driving mask through `patch_embedding_mask`). Every token runs at the step's
timestep through plain Wan blocks; the pose tokens and the reference frames are cut off after the head.

Rotary positions (ComfyUI's rope_encode with rope_options, float positions): in animation mode the reference and
video frames count on from 0, the pose tokens take the video's frames, stretched to the video's grid (scale video /
pose, centred) and 120 to the right. In replacement mode (SCAIL-2's ref_mask_flag False) the references sit 120
lower, the video starts at the last reference's frame, and the pose tokens start there too.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import torch

from nodes.models.wan import HEAD_DIM, PATCH, WanDiffusionModel, pad_to_patch
from nodes.models.wan_animate2 import attend, embed_context, embed_time, finish_block, modulation, normed, qkv
from nodes.upscale import common_upscale

POSE = "patch_embedding_pose."  # SCAIL and SCAIL-2
MASK = "patch_embedding_mask."  # SCAIL-2 only
HISTORY_CHANNELS = 4  # the input channels after the noise: 1 - noise mask (SCAIL-2), zeros otherwise
SIDE_SHIFT = 120.0  # how far (in patches) the pose tokens sit to the right, and replacement references below
ROPE_THETA = 10000.0


def variant(keys: Any) -> str | None:
    """ "scail2" / "scail" for a Wan-layout state dict's keys, as ComfyUI's model_detection orders the rules."""
    keys = set(keys)
    if MASK + "weight" in keys:
        return "scail2"
    if POSE + "weight" in keys:
        return "scail"
    return None


def pop_embeddings(sd: dict[str, torch.Tensor]) -> dict[str, dict[str, torch.Tensor]]:
    """The pose / mask patch embeddings' weights taken out of a Wan-layout state dict, by module name."""
    out: dict[str, dict[str, torch.Tensor]] = {}
    for prefix in (POSE, MASK):
        weights = {k[len(prefix) :]: sd.pop(k) for k in [k for k in sd if k.startswith(prefix)]}
        if weights:
            out[prefix[:-1]] = weights
    return out


def embedding_for(weights: Mapping[str, torch.Tensor]) -> torch.nn.Conv3d:
    """An empty Wan 2x2 patch embedding (kernel = stride = the patch) of the weight's channels."""
    out_channels, in_channels = weights["weight"].shape[:2]
    return torch.nn.Conv3d(in_channels, out_channels, PATCH, stride=PATCH)


def _positions(start: float, length: float, steps: int) -> torch.Tensor:
    """ComfyUI's rope positions along one axis: `steps` values from start to start + length - 1, in float32."""
    return torch.linspace(start, start + (length - 1), steps=steps, dtype=torch.float32)


def grid_positions(
    frames: int, rows: int, cols: int, t_start: float = 0.0, shift: tuple[float, float] = (0.0, 0.0), scale=(1.0, 1.0)
) -> torch.Tensor:
    """[frames * rows * cols, 3] (frame, row, column) positions of a token grid, stretched by `scale` (the grid's
    spacing; its first position stays) and moved by `shift` along rows and columns, as ComfyUI's rope_options."""
    t = _positions(t_start, frames, frames)
    h = _positions(shift[0], (rows - 1.0) * scale[0] + 1.0, rows)
    w = _positions(shift[1], (cols - 1.0) * scale[1] + 1.0, cols)
    grid = torch.zeros(frames, rows, cols, 3, dtype=torch.float32)
    grid[..., 0] += t.view(-1, 1, 1)
    grid[..., 1] += h.view(1, -1, 1)
    grid[..., 2] += w.view(1, 1, -1)
    return grid.reshape(-1, 3)


def rope_tables(positions: torch.Tensor, head_dim: int = HEAD_DIM) -> tuple[torch.Tensor, torch.Tensor]:
    """Wan's rotary tables (cos, sin as [1, S, 1, head_dim], each angle twice, as diffusers' layout) at float
    positions: frame, row and column axes of head_dim - 4 * (head_dim // 6), 2 * (head_dim // 6) and as many
    dimensions; angles in float64 from float32 positions, as ComfyUI computes them."""
    third = 2 * (head_dim // 6)
    cos, sin = [], []
    for axis, dim in enumerate((head_dim - 2 * third, third, third)):
        omega = 1.0 / ROPE_THETA ** torch.linspace(0, (dim - 2) / dim, dim // 2, dtype=torch.float64)
        angle = positions[:, axis].to(torch.float64)[:, None] * omega[None]
        cos.append(torch.cos(angle).to(torch.float32).repeat_interleave(2, dim=-1))
        sin.append(torch.sin(angle).to(torch.float32).repeat_interleave(2, dim=-1))
    return torch.cat(cos, dim=-1)[None, :, None], torch.cat(sin, dim=-1)[None, :, None]


def _patches(n: int, patch: int) -> int:
    return (n + patch // 2) // patch


def sequence_positions(
    frames: int, h: int, w: int, references: int, pose: tuple[int, int, int] | None, replacement: bool
) -> torch.Tensor:
    """Positions of the whole sequence: `references` reference frames then the video's (`frames` latent frames of
    h x w before padding, references included), then the pose grid (its padded latent frames / rows / columns)."""
    rows, cols = _patches(h, PATCH[1]), _patches(w, PATCH[2])
    refs = _patches(references, PATCH[0]) if references else 0
    video_start = float(max(refs - 1, 0)) if replacement else float(refs)
    parts = []
    if replacement:
        if refs:
            parts.append(grid_positions(refs, rows, cols, 0.0, (SIDE_SHIFT, 0.0)))
        if frames - refs > 0:
            parts.append(grid_positions(frames - refs, rows, cols, video_start))
    else:
        parts.append(grid_positions(frames, rows, cols))
    if pose is not None:
        pf, ph, pw = pose
        scale = (h / ph, w / pw)  # the pose grid stretched over the video's, centred on its patches
        shift = ((scale[0] - 1) / 2, SIDE_SHIFT + (scale[1] - 1) / 2)
        parts.append(grid_positions(pf, _patches(ph, PATCH[1]), _patches(pw, PATCH[2]), video_start, shift, scale))
    return torch.cat(parts)


@dataclass
class ScailInputs:
    """What a SCAIL step reads beside the Wan inputs (ComfyUI's WAN21_SCAIL / WAN21_SCAIL2 extra_conds), in model
    space: reference frames [B, 20, R, H, W] (ones joined), pose [B, 20, F, H/2, W/2], SCAIL-2's masks
    [B, 28, frames, ...] and whether the reference sits in replacement mode."""

    reference: torch.Tensor | None = None
    pose: torch.Tensor | None = None
    ref_mask: torch.Tensor | None = None
    driving_mask: torch.Tensor | None = None
    replacement: bool = False


def forward(
    module: Any,
    x: torch.Tensor,
    t: torch.Tensor,
    context: torch.Tensor,
    clip_fea: torch.Tensor | None,
    extra: ScailInputs,
) -> torch.Tensor:
    """The SCAIL network on [B, 20, T, H, W] (noise and history mask): its prediction for the video's frames."""
    b, _, frames, h, w = x.shape
    x = pad_to_patch(x)
    refs = 0
    if extra.reference is not None:
        reference = pad_to_patch(extra.reference.to(x))
        refs = reference.shape[2]
        x = torch.cat([reference, x], dim=2)
    tokens = module.patch_embedding(x)
    mask_embedding = getattr(module, "patch_embedding_mask", None)
    if extra.ref_mask is not None and mask_embedding is not None:
        tokens = tokens + mask_embedding(pad_to_patch(extra.ref_mask.to(x)))
    grid = tokens.shape[2:]
    tokens = tokens.flatten(2).transpose(1, 2)
    pose_tokens = 0
    pose_grid = None
    if extra.pose is not None:
        pose = pad_to_patch(extra.pose.to(x))
        pose_grid = tuple(pose.shape[2:])
        p = module.patch_embedding_pose(pose)
        if extra.driving_mask is not None and mask_embedding is not None:
            p = p + mask_embedding(pad_to_patch(extra.driving_mask.to(x)))
        p = p.flatten(2).transpose(1, 2)
        pose_tokens = p.shape[1]
        tokens = torch.cat([tokens, p], dim=1)
    tokens = tokens.contiguous()
    positions = sequence_positions(refs + frames, h, w, refs, pose_grid, extra.replacement)
    rope = tuple(r.to(x.device) for r in rope_tables(positions))
    temb, mod_t = embed_time(module, t, tokens)
    ctx = embed_context(module, context, clip_fea)
    for block in module.blocks:
        mod = modulation(block, mod_t)
        out = attend(*qkv(block.attn1, normed(block, tokens, mod), rope))
        tokens = finish_block(block, tokens, out, mod, ctx)
    shift, scale = (module.scale_shift_table.to(temb.device) + temb.unsqueeze(1)).chunk(2, dim=1)
    out = module.proj_out((module.norm_out(tokens.float()) * (1 + scale) + shift).type_as(tokens))
    if pose_tokens:
        out = out[:, :-pose_tokens]
    f, gh, gw = grid
    out = out.reshape(b, f, gh, gw, *PATCH, -1).permute(0, 7, 1, 4, 2, 5, 3, 6)
    out = out.flatten(6, 7).flatten(4, 5).flatten(2, 3)
    return out[:, :, refs:][:, :, :frames, :h, :w]


def history_mask(denoise_mask: torch.Tensor | None, x: torch.Tensor) -> torch.Tensor:
    """SCAIL-2's 4 input channels after the noise (ComfyUI's WAN21_SCAIL2.concat_cond): 1 - the noise mask (1 at the
    previous chunk's clean anchor frames), bilinear to the latent, frames padded with 0, repeated to 4; zeros
    without a noise mask."""
    shape = (x.shape[0], HISTORY_CHANNELS, *x.shape[2:])
    if denoise_mask is None:
        return torch.zeros(shape, dtype=x.dtype, device=x.device)
    mask = denoise_mask.to(x.device, x.dtype)
    if mask.shape[1] != HISTORY_CHANNELS:
        mask = mask.mean(dim=1, keepdim=True)
    mask = common_upscale(1.0 - mask, x.shape[-1], x.shape[-2], "bilinear", "center")
    if mask.shape[2] < x.shape[2]:
        mask = torch.nn.functional.pad(mask, (0, 0, 0, 0, 0, x.shape[2] - mask.shape[2]))
    if mask.shape[1] == 1:
        mask = mask.repeat(1, HISTORY_CHANNELS, 1, 1, 1)
    if mask.shape[0] != x.shape[0]:
        mask = mask.repeat(-(-x.shape[0] // mask.shape[0]), 1, 1, 1, 1)[: x.shape[0]]
    return mask


def _with_ones(latent: torch.Tensor) -> torch.Tensor:
    """A 16-channel latent with SCAIL's 4 channels of ones after it (its references and pose)."""
    return torch.cat([latent, torch.ones_like(latent[:, :HISTORY_CHANNELS])], dim=1)


def _frames_second(mask: torch.Tensor) -> torch.Tensor:
    """WanSCAILToVideo's [B, frames, 28, H, W] masks as the network takes them, [B, 28, frames, H, W]."""
    return mask.movedim(1, 2).contiguous()


@dataclass
class WanScailDiffusionModel(WanDiffusionModel):
    """A Wan SCAIL / SCAIL-2 model (see the module's docstring)."""

    scail2: bool = True
    reads_denoise_mask: ClassVar[bool] = True  # SCAIL-2's history channels come from the noise mask

    def concat_image(self, image, x, mask=None, mask_index=0):  # noqa: ANN001 - WanDiffusionModel's signature
        return None  # apply joins the history channels itself, from the noise mask

    def inpaint_latent(
        self, ms: Any, sigma: torch.Tensor, noise: torch.Tensor, latent_image: torch.Tensor
    ) -> torch.Tensor:
        """SCAIL-2 holds the previous chunk's anchor frames clean at every sigma (ComfyUI's scale_latent_inpaint)."""
        return latent_image if self.scail2 else super().inpaint_latent(ms, sigma, noise, latent_image)

    def inputs(self, cond: dict[str, Any], device: torch.device, dtype: torch.dtype) -> ScailInputs:
        """The step's SCAIL inputs from the denoise step's conds (ComfyUI's extra_conds, here in one place)."""
        extra = ScailInputs()
        refs = cond.get("ref_latents")
        if refs:  # additional references first, the primary (the first given) last, next to the video
            ordered = list(refs[1:]) + list(refs[:1])
            extra.reference = torch.cat([_with_ones(r.to(device, dtype)) for r in ordered], dim=2)
        pose = cond.get("pose_latents")
        if pose is not None:
            extra.pose = _with_ones(pose.to(device, dtype))
        if self.scail2:
            for name, field in (("ref_mask_28ch", "ref_mask"), ("driving_mask_28ch", "driving_mask")):
                if cond.get(name) is not None:
                    setattr(extra, field, _frames_second(cond[name]).to(device, dtype))
            flag = cond.get("ref_mask_flag")
            extra.replacement = flag is not None and not bool(flag)
        return extra

    def apply(self, x: torch.Tensor, timestep: torch.Tensor, cond: dict[str, Any]) -> torch.Tensor:
        if cond.get("control"):
            raise NotImplementedError("ControlNets are not supported for Wan models")
        if x.dim() != 5:
            raise ValueError(f"Wan models take [B,C,T,H,W] video latents, got {tuple(x.shape)}")
        module = self.module
        device, dtype = x.device, self.dtype
        history = history_mask(cond.get("denoise_mask") if self.scail2 else None, x)
        inp = torch.cat([x, history], dim=1)
        if inp.shape[1] != module.config.in_channels:
            raise ValueError(
                f"this Wan SCAIL model takes {module.config.in_channels} input channels, got {inp.shape[1]} "
                "(a 16-channel Wan 2.1 latent and its 4 history channels)"
            )
        t = torch.as_tensor(timestep, dtype=torch.float32, device=device).reshape(-1).expand(x.shape[0])
        clip_fea = cond.get("clip_fea")
        context = cond["context"].to(device, dtype)
        extra = self.inputs(cond, device, dtype)
        out = forward(
            module, inp.to(dtype), t, context, None if clip_fea is None else clip_fea.to(device, dtype), extra
        )
        return out.float()
