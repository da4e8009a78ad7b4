"""SAM 3.1's multiplex memory tracker weights (`tracker.*` beyond the interactive heads of nodes/models/sam3.py):
the propagation mask decoder for 16 objects at once, the decoupled memory attention, the memory encoder and the
object-pointer projections, named as today's ComfyUI names them after its conversion.

Facts read from Comfy-Org/ComfyUI's comfy/ldm/sam3/tracker.py (SAM31Tracker, MultiplexMaskDecoder,
DecoupledMemoryTransformer, MemoryBackbone) at upstream commit a439dcae07d6 (2026-06-16); the code is our own.
nodes/models/sam3_video.py runs them (SAM3_VideoTrack)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .sam3 import (
    LayerNorm2d,
    RandomFourier,
    Sam3Config,
    SamMaskDecoder,
    SamPromptEncoder,
    TwoWayTransformer,
    attention,
    axial_rope,
    mlp,
    rotate,
    sine_grid,
)

MEMORY_LAYERS = 4
NUM_MASKMEM = 7
MASK_OUTPUTS = 3
MEMORY_CHANNELS = (16, 64, 256, 1024)  # SAM 3.1's mask downsampler widths (in ComfyUI's code, not the config)
MEMORY_HEADS = 8
MEMORY_MASK_SIZE = 1152  # masks are resized to this before the memory encoder's downsampler


def rope_attention(q, k, v, heads: int, rope: torch.Tensor, k_plain: int = 0) -> torch.Tensor:
    """Attention with the 2-D rotary embedding on q and on k's first tokens (k's last `k_plain` tokens, the object
    pointers, unrotated; k's spatial tokens take the frame's table again for each memory frame)."""
    b, nq, c = q.shape
    d = c // heads
    qh = rotate(q.view(b, nq, heads, d).transpose(1, 2), rope)
    q = qh.transpose(1, 2).reshape(b, nq, c)
    n_rot = k.shape[1] - k_plain
    if n_rot > 0:
        reps = -(-n_rot // rope.shape[0])
        kr = rope.repeat(reps, 1, 1)[:n_rot]
        kh = rotate(k[:, :n_rot].reshape(b, n_rot, heads, d).transpose(1, 2), kr)
        k = torch.cat([kh.transpose(1, 2).reshape(b, n_rot, c), k[:, n_rot:]], dim=1)
    return attention(q, k, v, heads)


class DecoupledMemoryLayer(nn.Module):
    def __init__(self, d: int, dim_ff: int) -> None:
        super().__init__()
        for name in ("self_attn", "cross_attn"):
            for proj in ("q_proj", "k_proj", "v_proj", "out_proj"):
                setattr(self, f"{name}_{proj}", nn.Linear(d, d))
        self.image_cross_attn_q_proj = nn.Linear(d, d)
        self.image_cross_attn_k_proj = nn.Linear(d, d)
        self.linear1 = nn.Linear(d, dim_ff)
        self.linear2 = nn.Linear(dim_ff, d)
        self.norm1, self.norm2, self.norm3 = nn.LayerNorm(d), nn.LayerNorm(d), nn.LayerNorm(d)

    def forward(self, image, x, memory_image, memory, memory_image_pos, rope, k_plain):
        y = self.norm1(x)
        q, k, v = self.self_attn_q_proj(y), self.self_attn_k_proj(y), self.self_attn_v_proj(y)
        x = x + self.self_attn_out_proj(rope_attention(q, k, v, MEMORY_HEADS, rope))
        y = self.norm2(x)
        q = self.image_cross_attn_q_proj(image) + self.cross_attn_q_proj(y)
        k = self.image_cross_attn_k_proj(memory_image) + self.cross_attn_k_proj(memory) + memory_image_pos
        v = self.cross_attn_v_proj(memory)
        x = x + self.cross_attn_out_proj(rope_attention(q, k, v, MEMORY_HEADS, rope, k_plain))
        return x + self.linear2(F.gelu(self.linear1(self.norm3(x))))


class MemoryEncoder(nn.Module):
    def __init__(self, d: int, dim_ff: int) -> None:
        super().__init__()
        self.layers = nn.ModuleList(DecoupledMemoryLayer(d, dim_ff) for _ in range(MEMORY_LAYERS))
        self.norm = nn.LayerNorm(d)
        self.rope: torch.Tensor | None = None

    def forward(self, x, x_pos, memory, memory_pos, memory_image, memory_image_pos, k_plain: int) -> torch.Tensor:
        """The current frame's features [B, HW, C] attending to the memory (spatial tokens, then `k_plain`
        object pointers); the memory frames' image features beside them, zeros (with the pointers' positions)
        under the pointers."""
        side = int(x.shape[1] ** 0.5)
        if self.rope is None or self.rope.shape[0] != x.shape[1]:
            self.rope = axial_rope(side, x.shape[2] // MEMORY_HEADS)
        b = memory.shape[0]
        pad = memory.shape[1] - memory_image.shape[1]
        if pad > 0:
            memory_image = torch.cat([memory_image, memory_image.new_zeros(b, pad, memory_image.shape[2])], dim=1)
            memory_image_pos = torch.cat([memory_image_pos, memory_pos[:, -pad:]], dim=1)
        image, out = x, x + 0.1 * x_pos
        for layer in self.layers:
            out = layer(image, out, memory_image, memory, memory_image_pos, self.rope, k_plain)
        return self.norm(out)


class MemoryTransformer(nn.Module):
    def __init__(self, d: int, dim_ff: int) -> None:
        super().__init__()
        self.encoder = MemoryEncoder(d, dim_ff)


class MultiplexMaskDecoder(nn.Module):
    """Tokens: obj_score (M), iou (M), mask (M x 3); hypernetwork MLPs shared by the objects."""

    def __init__(self, d: int, multiplex: int, mlp_dim: int) -> None:
        super().__init__()
        self.transformer = TwoWayTransformer(d, mlp_dim)
        self.obj_score_token = nn.Embedding(multiplex, d)
        self.iou_token = nn.Embedding(multiplex, d)
        self.mask_tokens = nn.Embedding(multiplex * MASK_OUTPUTS, d)
        self.output_upscaling = nn.Sequential(
            nn.ConvTranspose2d(d, d // 4, 2, stride=2),
            LayerNorm2d(d // 4),
            nn.GELU(),
            nn.ConvTranspose2d(d // 4, d // 8, 2, stride=2),
            nn.GELU(),
        )
        self.conv_s0 = nn.Conv2d(d, d // 8, 1)
        self.conv_s1 = nn.Conv2d(d, d // 4, 1)
        self.output_hypernetworks_mlps = nn.ModuleList(mlp(d, d, d // 8, 3) for _ in range(MASK_OUTPUTS))
        self.iou_prediction_head = mlp(d, d, MASK_OUTPUTS, 3)
        self.pred_obj_score_head = mlp(d, d, 1, 3)
        self.multiplex = multiplex

    def forward(self, image, image_pe, high_res, extra):
        """No prompts, every slot at once: masks [B, M, 3, h, w], IoUs [B, M, 3], first mask tokens [B, M, C] and
        object logits [B, M, 1]; `extra` [B, M, C] (valid / invalid slot embeddings) is added to each slot's
        mask tokens."""
        b, m, t = image.shape[0], self.multiplex, MASK_OUTPUTS
        mask_tokens = (self.mask_tokens.weight.view(1, m, t, -1) + extra.unsqueeze(2)).flatten(1, 2)
        own = torch.cat([self.obj_score_token.weight, self.iou_token.weight]).unsqueeze(0).expand(b, -1, -1)
        tokens = torch.cat([own, mask_tokens], dim=1)
        _, c, h, w = image.shape
        hs, src = self.transformer(
            image.flatten(2).permute(0, 2, 1), image_pe.expand(b, -1, -1, -1).flatten(2).permute(0, 2, 1), tokens
        )
        src = src.permute(0, 2, 1).reshape(b, c, h, w)
        dc1, ln1, act1, dc2, act2 = self.output_upscaling
        up = act1(ln1(dc1(src) + self.conv_s1(high_res[1])))
        up = act2(dc2(up) + self.conv_s0(high_res[0]))
        per_slot = hs[:, 2 * m : 2 * m + m * t].reshape(b, m, t, -1)
        hyper = torch.stack([self.output_hypernetworks_mlps[i](per_slot[:, :, i]) for i in range(t)], dim=2)
        masks = torch.bmm(hyper.flatten(1, 2), up.flatten(2)).view(b, m, t, up.shape[2], up.shape[3])
        iou = self.iou_prediction_head(hs[:, m : 2 * m]).view(b, m, t)
        return masks, iou, per_slot[:, :, 0], self.pred_obj_score_head(hs[:, :m])


class CXBlock(nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.dwconv = nn.Conv2d(d, d, 7, padding=3, groups=d)
        self.norm = nn.LayerNorm(d)
        self.pwconv1 = nn.Linear(d, 4 * d)
        self.pwconv2 = nn.Linear(4 * d, d)
        self.gamma = nn.Parameter(torch.ones(d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.dwconv(x).permute(0, 2, 3, 1)
        y = self.pwconv2(F.gelu(self.pwconv1(self.norm(y)))) * self.gamma
        return x + y.permute(0, 3, 1, 2)


class MaskDownSampler(nn.Module):
    def __init__(self, d: int, in_chans: int) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        prev = in_chans
        for ch in MEMORY_CHANNELS:
            layers += [nn.Conv2d(prev, ch, 3, stride=2, padding=1), LayerNorm2d(ch), nn.GELU()]
            prev = ch
        layers.append(nn.Conv2d(prev, d, 1))
        self.encoder = nn.Sequential(*layers)


class Fuser(nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.layers = nn.Sequential(CXBlock(d), CXBlock(d))


class MemoryBackbone(nn.Module):
    def __init__(self, d: int, multiplex: int) -> None:
        super().__init__()
        self.mask_downsampler = MaskDownSampler(d, 2 * multiplex)
        self.pix_feat_proj = nn.Conv2d(d, d, 1)
        self.fuser = Fuser(d)

    def forward(self, image: torch.Tensor, masks: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(memory features, their positions) of the frame's features [1, C, h, w] with its multiplexed masks and
        conditioning flags [B, 2M, H, W] (already scaled, no sigmoid)."""
        if tuple(masks.shape[-2:]) != (MEMORY_MASK_SIZE, MEMORY_MASK_SIZE):
            size = (MEMORY_MASK_SIZE, MEMORY_MASK_SIZE)
            masks = F.interpolate(masks, size=size, mode="bilinear", align_corners=False, antialias=True)
        feats = self.mask_downsampler.encoder(masks)
        if feats.shape[-2:] != image.shape[-2:]:
            feats = F.interpolate(feats, size=image.shape[-2:], mode="bilinear", align_corners=False)
        feats = self.fuser.layers(self.pix_feat_proj(image) + feats)
        pos = sine_grid(feats.shape[1], feats.shape[-2], feats.shape[-1]).expand(feats.shape[0], -1, -1, -1)
        return feats, pos


class MultiplexTrackerWeights(nn.Module):
    """The SAM 3.1 tracker's weights that the interactive heads do not hold (d_model = mem_dim in SAM 3.1)."""

    def __init__(self, cfg: Sam3Config, multiplex: int, mlp_dim: int) -> None:
        super().__init__()
        d = cfg.d_model
        self.transformer = MemoryTransformer(d, cfg.dim_ff)
        self.sam_mask_decoder = MultiplexMaskDecoder(d, multiplex, mlp_dim)
        self.maskmem_backbone = MemoryBackbone(d, multiplex)
        self.maskmem_tpos_enc = nn.Parameter(torch.zeros(NUM_MASKMEM, 1, 1, d))
        self.no_obj_embed_spatial = nn.Parameter(torch.zeros(multiplex, d))
        self.obj_ptr_proj = mlp(d, d, d, 3)
        self.obj_ptr_tpos_proj = nn.Linear(d, d)
        self.no_obj_ptr_linear = nn.Linear(d, d)
        self.interactive_obj_ptr_proj = mlp(d, d, d, 3)
        self.interactive_mask_downsample = nn.Conv2d(1, 1, 4, stride=4)
        self.output_valid_embed = nn.Parameter(torch.zeros(multiplex, d))
        self.output_invalid_embed = nn.Parameter(torch.zeros(multiplex, d))
        self.image_pe_layer = RandomFourier(d // 2)


class VideoTracker(MultiplexTrackerWeights):
    """All of SAM 3.1's tracker: the propagation weights and the interactive heads."""

    def __init__(self, cfg: Sam3Config, multiplex: int, mlp_dim: int) -> None:
        super().__init__(cfg, multiplex, mlp_dim)
        self.multiplex = multiplex
        self.interactive_sam_mask_decoder = SamMaskDecoder(cfg.d_model, mlp_dim)
        self.interactive_sam_prompt_encoder = SamPromptEncoder(cfg.d_model, cfg.grid)
        self.interactivity_no_mem_embed = nn.Parameter(torch.zeros(1, 1, cfg.d_model))

    def parts(self):
        return self.interactive_sam_mask_decoder, self.interactive_sam_prompt_encoder, self.interactivity_no_mem_embed
