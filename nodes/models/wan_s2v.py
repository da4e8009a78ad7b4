"""Wan 2.2 S2V (sound to video, ComfyUI's WanModel_S2V; written here from its definition, nothing copied): a Wan
text-to-video transformer (16 input channels, loaded by nodes.models.wan on diffusers' WanTransformer3DModel) with
audio, a reference image and the previous clip's motion beside the latent.

Told by `casual_audio_encoder.encoder.final_linear.weight`, as ComfyUI tells it. Its extra parts:
- `casual_audio_encoder`: a softmax-free weighted sum of the audio encoder's layers (SiLU of one weight per layer,
  normalised), then causal 1-D convolutions (replicate-padded on the left; the last two stride 2, so 4 audio
  frames per latent frame): per latent frame `num_audio_token` local tokens plus a learned padding token, and one
  global vector (through `final_linear`);
- `audio_injector`: after blocks 0, 4, 8, 12, 16, 20, 24, 27, 30, 33, 36, 39 (ComfyUI's fixed list; a smaller
  model uses the ones it has), each latent frame's video tokens, layer-normed and modulated by that frame's global
  audio vector (AdaLN, `injector_adain_layers`), cross-attend to the frame's audio tokens and the result is added;
- `trainable_cond_mask`: three learned vectors added to the video, reference and motion tokens;
- `cond_encoder`: a patch convolution of the control video latent added to the patch embedding;
- the reference latent's tokens after the video's (rotary frame position max(30, frames + 9), timestep 0);
- `frame_packer`: the last 19 latent frames of the previous clip packed as 1 frame at 2x2, 2 at 4x4 and 16 at
  8x8 patches (rotary positions -1, -3 and -19..-16 on a thinned grid), timestep 0.
Every token has its own modulation: the timestep is one per latent frame (twice over with motion, ComfyUI's
layout, 0 for reference and motion), spread over the tokens as ComfyUI's repeat_e does.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from cluster.refs import ModelRef
from nodes.models import wan
from nodes.models.audio_encoder import native_conv1d
from nodes.models.errors import ModelLoadError
from nodes.models.flux_keys import count_blocks
from nodes.models.safetensors_io import build_module
from nodes.models.wan import HEAD_DIM, PATCH, WanDiffusionModel, pad_to_patch

MARKER = "casual_audio_encoder.encoder.final_linear.weight"
PREFIXES = ("trainable_cond_mask.", "casual_audio_encoder.", "cond_encoder.", "audio_injector.", "frame_packer.")
INJECT_AFTER = (0, 4, 8, 12, 16, 20, 24, 27, 30, 33, 36, 39)  # ComfyUI's audio_inject_layers
MOTION_BUCKETS = (16, 2, 1)  # farthest to nearest: frames packed at 8x8, 4x4 and 2x2 patches
MOTION_FRAMES = sum(MOTION_BUCKETS)
AUDIO_FRAMES_PER_LATENT = 4
ROPE_THETA = 10000.0


class CausalConv1d(nn.Module):
    """A 1-D convolution over time, the past replicated in front so that no output reads a later input."""

    def __init__(self, cin: int, cout: int, kernel: int, stride: int = 1) -> None:
        super().__init__()
        self.conv = nn.Conv1d(cin, cout, kernel, stride=stride)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return native_conv1d(self.conv, F.pad(x, (self.conv.kernel_size[0] - 1, 0), mode="replicate"))


class AudioMotionEncoder(nn.Module):
    """The audio features' encoder: local tokens per latent frame and one global vector."""

    def __init__(self, audio_dim: int, dim: int, tokens: int) -> None:
        super().__init__()
        self.tokens = tokens
        self.conv1_local = CausalConv1d(audio_dim, dim // 4 * tokens, 3)
        self.conv1_global = CausalConv1d(audio_dim, dim // 4, 3)
        self.conv2 = CausalConv1d(dim // 4, dim // 2, 3, stride=2)
        self.conv3 = CausalConv1d(dim // 2, dim, 3, stride=2)
        self.final_linear = nn.Linear(dim, dim)
        self.padding_tokens = nn.Parameter(torch.empty(1, 1, 1, dim))

    def _tail(self, x: torch.Tensor) -> torch.Tensor:
        """The shared layers: [N, C, T] after the first convolution -> [N, T / 4, dim]."""
        x = F.silu(F.layer_norm(x.transpose(1, 2), (x.shape[1],), eps=1e-6))
        x = self.conv2(x.transpose(1, 2)).transpose(1, 2)
        x = F.silu(F.layer_norm(x, (x.shape[-1],), eps=1e-6))
        x = self.conv3(x.transpose(1, 2)).transpose(1, 2)
        return F.silu(F.layer_norm(x, (x.shape[-1],), eps=1e-6))

    def forward(self, feat: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """feat [B, T, audio_dim] -> (global [B, T/4, 1, dim], local [B, T/4, tokens + 1, dim])."""
        b = feat.shape[0]
        x = feat.transpose(1, 2)
        local = self.conv1_local(x)  # [B, tokens * C, T]: each token its own channel group
        local = local.unflatten(1, (self.tokens, -1)).flatten(0, 1)
        local = self._tail(local)
        local = local.unflatten(0, (b, self.tokens)).transpose(1, 2)  # [B, T', tokens, dim]
        pad = self.padding_tokens.to(local).expand(b, local.shape[1], 1, -1)
        local = torch.cat([local, pad], dim=2)
        glob = self.final_linear(self._tail(self.conv1_global(x)))
        return glob.unsqueeze(2), local


class CausalAudioEncoder(nn.Module):
    def __init__(self, layers: int, audio_dim: int, dim: int, tokens: int) -> None:
        super().__init__()
        self.weights = nn.Parameter(torch.empty(1, layers, 1, 1))
        self.encoder = AudioMotionEncoder(audio_dim, dim, tokens)

    def forward(self, features: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """features [B, layers, audio_dim, T] -> the encoder's (global, local)."""
        w = F.silu(self.weights.to(features))
        mixed = ((features * w) / w.sum(dim=1, keepdim=True)).sum(dim=1)
        return self.encoder(mixed.transpose(1, 2))


class S2VAudioCrossAttention(nn.Module):
    """q/k/v/o with RMS-normed queries and keys (Wan's text cross-attention, here for the audio tokens)."""

    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.q, self.k, self.v, self.o = (nn.Linear(dim, dim) for _ in range(4))
        self.norm_q = nn.RMSNorm(dim, eps=1e-6)
        self.norm_k = nn.RMSNorm(dim, eps=1e-6)

    def forward(self, x: torch.Tensor, context: torch.Tensor) -> torch.Tensor:
        q = self.norm_q(self.q(x)).unflatten(-1, (self.heads, -1)).transpose(1, 2)
        k = self.norm_k(self.k(context)).unflatten(-1, (self.heads, -1)).transpose(1, 2)
        v = self.v(context).unflatten(-1, (self.heads, -1)).transpose(1, 2)
        return self.o(F.scaled_dot_product_attention(q, k, v).transpose(1, 2).flatten(2))


class AdaLayerNorm(nn.Module):
    """LayerNorm (no affine, eps 1e-5) shifted and scaled by a projection of a conditioning vector."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.linear = nn.Linear(dim, 2 * dim)

    def forward(self, x: torch.Tensor, vec: torch.Tensor) -> torch.Tensor:
        shift, scale = self.linear(F.silu(vec)).chunk(2, dim=1)
        return F.layer_norm(x, (x.shape[-1],), eps=1e-5) * (1 + scale[:, None]) + shift[:, None]


class AudioInjector(nn.Module):
    def __init__(self, dim: int, heads: int, count: int) -> None:
        super().__init__()
        self.injector = nn.ModuleList(S2VAudioCrossAttention(dim, heads) for _ in range(count))
        self.injector_adain_layers = nn.ModuleList(AdaLayerNorm(dim) for _ in range(count))

    def forward(self, x: torch.Tensor, index: int, local: torch.Tensor, glob: torch.Tensor, seq_len: int):
        """x with the audio of each latent frame added to that frame's video tokens (the first seq_len)."""
        b, frames = local.shape[:2]
        video = x[:, :seq_len].reshape(b * frames, seq_len // frames, x.shape[-1])
        normed = self.injector_adain_layers[index](video, glob.flatten(0, 1)[:, 0])
        out = self.injector[index](normed, local.flatten(0, 1)).reshape(b, seq_len, -1)
        return torch.cat([x[:, :seq_len] + out, x[:, seq_len:]], dim=1)


class FramePacker(nn.Module):
    def __init__(self, dim: int, channels: int = 16) -> None:
        super().__init__()
        self.proj = nn.Conv3d(channels, dim, (1, 2, 2), stride=(1, 2, 2))
        self.proj_2x = nn.Conv3d(channels, dim, (2, 4, 4), stride=(2, 4, 4))
        self.proj_4x = nn.Conv3d(channels, dim, (4, 8, 8), stride=(4, 8, 8))


class S2VParts(nn.Module):
    """The S2V model's parts beside the Wan transformer, under ComfyUI's key names."""

    def __init__(self, dim: int, heads: int, audio_layers: int, audio_dim: int, tokens: int, injectors: int) -> None:
        super().__init__()
        self.trainable_cond_mask = nn.Embedding(3, dim)
        self.casual_audio_encoder = CausalAudioEncoder(audio_layers, audio_dim, dim, tokens)
        self.cond_encoder = nn.Conv3d(16, dim, PATCH, stride=PATCH)
        self.audio_injector = AudioInjector(dim, heads, injectors)
        self.frame_packer = FramePacker(dim)


def parts_config(sd: Mapping[str, torch.Tensor], dim: int) -> dict[str, int]:
    """S2VParts' sizes from the S2V keys' shapes."""
    local = sd["casual_audio_encoder.encoder.conv1_local.conv.weight"]
    return {
        "dim": dim,
        "heads": dim // HEAD_DIM,
        "audio_layers": int(sd["casual_audio_encoder.weights"].shape[1]),
        "audio_dim": int(local.shape[1]),
        "tokens": int(local.shape[0]) // (dim // 4),
        "injectors": count_blocks(sd, "audio_injector.injector"),
    }


def sinusoid(t: torch.Tensor, dim: int) -> torch.Tensor:
    """Wan's time sinusoid in float32, cosines first (ComfyUI's sinusoidal_embedding_1d)."""
    half = dim // 2
    pos = t.to(torch.float32)
    angle = torch.outer(pos, torch.pow(10000, -torch.arange(half).to(pos).div(half)))
    return torch.cat([torch.cos(angle), torch.sin(angle)], dim=1)


def positions(frames: int, h: int, w: int, t_start: float, steps_h: int | None = None, steps_w: int | None = None):
    """[tokens, 3] rotary positions of a latent block of `frames` x h x w cells (ComfyUI's rope_encode): frames from
    t_start on, rows and columns 0 .. cells - 1 spread over steps_h / steps_w tokens (fewer: fractional)."""
    t_len, h_len, w_len = frames, (h + 1) // PATCH[1], (w + 1) // PATCH[2]
    steps_h, steps_w = steps_h or h_len, steps_w or w_len
    grid = torch.zeros(t_len, steps_h, steps_w, 3)
    grid[..., 0] += torch.linspace(t_start, t_start + t_len - 1, t_len).reshape(-1, 1, 1)
    grid[..., 1] += torch.linspace(0, h_len - 1, steps_h).reshape(1, -1, 1)
    grid[..., 2] += torch.linspace(0, w_len - 1, steps_w).reshape(1, 1, -1)
    return grid.reshape(-1, 3)


def rope_table(pos: torch.Tensor, head_dim: int) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin [tokens, head_dim / 2] for [tokens, 3] positions: frame, row and column axes of Wan's split,
    angles in float64 (ComfyUI's flux rope)."""
    side = 2 * (head_dim // 6)
    angles = []
    for axis, width in enumerate((head_dim - 2 * side, side, side)):
        scale = torch.linspace(0, (width - 2) / width, steps=width // 2, dtype=torch.float64)
        angles.append(pos[:, axis].to(torch.float32)[:, None] * (1.0 / (ROPE_THETA**scale)))
    angle = torch.cat(angles, dim=1)
    return torch.cos(angle).to(torch.float32), torch.sin(angle).to(torch.float32)


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x [B, S, heads, head_dim] rotated on interleaved pairs."""
    x1, x2 = x.float().unflatten(-1, (-1, 2)).unbind(-1)
    c, s = cos[None, :, None], sin[None, :, None]
    return torch.stack([c * x1 - s * x2, s * x1 + c * x2], dim=-1).flatten(-2).type_as(x)


def spread(e: torch.Tensor, tokens: int) -> torch.Tensor:
    """Per-entry modulation [B, n, dim] over `tokens` tokens as ComfyUI's repeat_e: each entry repeated
    tokens // n times, or once more and cut where that does not divide."""
    n = e.shape[1]
    repeats = tokens // n if n > 1 else 1
    if repeats == 1:
        return e
    if repeats * n == tokens:
        return e.repeat_interleave(repeats, dim=1)
    return e.repeat_interleave(repeats + 1, dim=1)[:, :tokens]


def _attention(attn: Any, x: torch.Tensor, rope: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    heads = attn.heads
    q = rotate(attn.norm_q(attn.to_q(x)).unflatten(2, (heads, -1)), *rope)
    k = rotate(attn.norm_k(attn.to_k(x)).unflatten(2, (heads, -1)), *rope)
    v = attn.to_v(x).unflatten(2, (heads, -1))
    out = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2))
    return attn.to_out[0](out.transpose(1, 2).flatten(2))


def _cross(attn: Any, x: torch.Tensor, context: torch.Tensor) -> torch.Tensor:
    heads = attn.heads
    q = attn.norm_q(attn.to_q(x)).unflatten(2, (heads, -1)).transpose(1, 2)
    k = attn.norm_k(attn.to_k(context)).unflatten(2, (heads, -1)).transpose(1, 2)
    v = attn.to_v(context).unflatten(2, (heads, -1)).transpose(1, 2)
    return attn.to_out[0](F.scaled_dot_product_attention(q, k, v).transpose(1, 2).flatten(2))


def block_forward(block: Any, x: torch.Tensor, e: torch.Tensor, rope: tuple, context: torch.Tensor) -> torch.Tensor:
    """One Wan block (diffusers' modules, ComfyUI's order) with a modulation per entry of e [B, n, 6, dim]."""
    mod = [spread(m, x.shape[1]) for m in (block.scale_shift_table.unsqueeze(0) + e).unbind(2)]
    y = _attention(block.attn1, torch.addcmul(mod[0], block.norm1(x), 1 + mod[1]), rope)
    x = torch.addcmul(x, y, mod[2])
    x = x + _cross(block.attn2, block.norm2(x), context)
    y = block.ffn(torch.addcmul(mod[3], block.norm3(x), 1 + mod[4]))
    return torch.addcmul(x, y, mod[5])


@dataclass
class S2VInputs:
    """What an S2V step reads beside the latent and prompt (ComfyUI's WAN22_S2V extra_conds), in model space
    except the audio features."""

    audio_embed: torch.Tensor | None = None  # [B, layers, audio_dim, audio frames]
    reference_latent: torch.Tensor | None = None  # [B, 16, frames, H, W]
    control_video: torch.Tensor | None = None  # [B, 16, frames, H, W]
    reference_motion: torch.Tensor | None = None  # [B, 16, frames, H, W]


def _motion(parts: S2VParts, motion: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The previous clip's last latent frames as tokens and their rotary positions."""
    b, _, _, h, w = motion.shape
    packed = torch.zeros(b, 16, MOTION_FRAMES, h, w, dtype=motion.dtype, device=motion.device)
    kept = min(MOTION_FRAMES, motion.shape[2])
    if kept:
        packed[:, :, -kept:] = motion[:, :, -kept:]
    far, mid, near = packed.split(MOTION_BUCKETS, dim=2)
    packer = parts.frame_packer
    near = packer.proj(near)
    mid = packer.proj_2x(mid)
    far = packer.proj_4x(far)
    tokens = torch.cat([t.flatten(2).transpose(1, 2) for t in (near, mid, far)], dim=1)
    pos = torch.cat(
        [
            positions(1, h, w, -1),
            positions(1, h, w, -3, mid.shape[-2], mid.shape[-1]),
            positions(4, h, w, -19, far.shape[-2], far.shape[-1]),
        ]
    )
    return tokens, pos


def forward(module: Any, x: torch.Tensor, t: torch.Tensor, context: torch.Tensor, extra: S2VInputs) -> torch.Tensor:
    """The S2V network on a [B, 16, T, H, W] latent in model space; t [B] (sigma x 1000)."""
    parts: S2VParts = module.s2v
    b, _, frames, h, w = x.shape
    x = pad_to_patch(x)
    audio = None
    if extra.audio_embed is not None:
        feat = extra.audio_embed[..., : x.shape[2] * AUDIO_FRAMES_PER_LATENT].to(x)
        audio = parts.casual_audio_encoder(feat)
    tokens = module.patch_embedding(x.float())
    if extra.control_video is not None:
        tokens = tokens + parts.cond_encoder(pad_to_patch(extra.control_video.to(x)))
    grid = tokens.shape[2:]
    t = t.reshape(-1, 1).repeat(1, grid[0])
    tokens = tokens.flatten(2).transpose(1, 2)
    seq_len = tokens.shape[1]
    cond_mask = parts.trainable_cond_mask.weight.to(tokens)
    tokens = tokens + cond_mask[0]
    pos = [positions(grid[0], x.shape[3], x.shape[4], 0)]
    ref = extra.reference_latent
    if ref is not None:
        ref = ref.to(x)
        ref_tokens = module.patch_embedding(ref.float()).flatten(2).transpose(1, 2) + cond_mask[1]
        tokens = torch.cat([tokens, ref_tokens], dim=1)
        pos.append(positions(ref.shape[2], ref.shape[3], ref.shape[4], max(30, frames + 9)))
        t = torch.cat([t, t.new_zeros(t.shape[0], ref.shape[2])], dim=1)
    if extra.reference_motion is not None:
        motion, motion_pos = _motion(parts, extra.reference_motion.to(x))
        tokens = torch.cat([tokens, motion + cond_mask[2]], dim=1)
        pos.append(motion_pos)
        t = torch.cat([t.repeat_interleave(2, dim=1), t.new_zeros(t.shape[0], 3)], dim=1)
    rope = tuple(r.to(x.device) for r in rope_table(torch.cat(pos), HEAD_DIM))

    embedder = module.condition_embedder
    e = embedder.time_embedder(sinusoid(t.flatten(), 256).to(tokens.dtype)).reshape(t.shape[0], -1, tokens.shape[-1])
    e0 = embedder.time_proj(embedder.act_fn(e)).unflatten(2, (6, -1))
    text = embedder.text_embedder(context)

    injected = {layer: i for i, layer in enumerate(INJECT_AFTER[: len(parts.audio_injector.injector)])}
    for i, block in enumerate(module.blocks):
        tokens = block_forward(block, tokens, e0, rope, text)
        if audio is not None and i in injected:
            tokens = parts.audio_injector(tokens, injected[i], audio[1], audio[0], seq_len)

    mod = (module.scale_shift_table.unsqueeze(0) + e.unsqueeze(2)).unbind(2)
    out = module.proj_out(
        torch.addcmul(spread(mod[0], tokens.shape[1]), module.norm_out(tokens), 1 + spread(mod[1], tokens.shape[1]))
    )
    out = out[:, : grid[0] * grid[1] * grid[2]].reshape(b, *grid, *PATCH, -1)
    out = out.permute(0, 7, 1, 4, 2, 5, 3, 6).reshape(b, -1, grid[0] * PATCH[0], grid[1] * PATCH[1], grid[2] * PATCH[2])
    return out[:, :, :frames, :h, :w]


@dataclass
class WanS2VDiffusionModel(WanDiffusionModel):
    """A Wan 2.2 S2V model (see the module's docstring)."""

    def apply(self, x: torch.Tensor, timestep: torch.Tensor, cond: dict[str, Any]) -> torch.Tensor:
        if cond.get("control"):
            raise NotImplementedError("ControlNets are not supported for Wan models")
        if x.dim() != 5:
            raise ValueError(f"Wan models take [B,C,T,H,W] video latents, got {tuple(x.shape)}")
        device, dtype = x.device, self.dtype
        t = torch.as_tensor(timestep, dtype=torch.float32, device=device).reshape(-1).expand(x.shape[0])
        refs = cond.get("ref_latents")

        def get(name: str) -> torch.Tensor | None:
            value = cond.get(name)
            return None if value is None else value.to(device, dtype)

        extra = S2VInputs(
            audio_embed=get("audio_embed"),
            reference_latent=refs[-1].to(device, dtype) if refs else None,
            control_video=get("control_video"),
            reference_motion=get("reference_motion"),
        )
        context = cond["context"].to(device, dtype)
        return forward(self.module, x.to(dtype), t, context, extra).float()


def load_diffusion_model(ref: ModelRef, state_dict: Mapping[str, torch.Tensor]) -> WanDiffusionModel:
    """Any Wan diffusion model (nodes.loader tries this module first for the wan21 family): an S2V file is the Wan
    transformer (loaded by nodes.models.wan, LoRAs included) with S2VParts beside it; every other file is
    nodes.models.wan's."""
    path = ref.sources[0] if ref.sources else None
    if not any(k.endswith(MARKER) for k in state_dict):  # by name first: the other Wan files are loaded once
        return wan.load_diffusion_model(ref, state_dict)
    try:
        sd = wan.to_wan_layout(state_dict)
    except ValueError as e:
        raise ModelLoadError(path, f"not a usable Wan S2V model: {e}") from None
    parts = {k: v for k, v in sd.items() if k.startswith(PREFIXES)}
    model = wan.load_diffusion_model(ref, {k: v for k, v in sd.items() if k not in parts})
    config = model.config
    if "image_dim" in config or config["in_channels"] != 16 or model.arch != "wan21":
        raise ModelLoadError(
            path, "Wan S2V parts found, but the transformer is not Wan 2.2 S2V's (16 channels, no image)"
        )
    try:
        size = parts_config(parts, config["num_attention_heads"] * HEAD_DIM)
    except KeyError as e:
        raise ModelLoadError(path, f"not a usable Wan S2V model: missing {e}") from None
    model.module.s2v = build_module(lambda: S2VParts(**size), parts, path, "Wan S2V parts")
    return WanS2VDiffusionModel(**{f.name: getattr(model, f.name) for f in fields(model)})
