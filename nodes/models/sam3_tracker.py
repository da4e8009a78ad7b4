"""SAM 3.1's multiplex memory tracker weights (`tracker.*` beyond the interactive heads of nodes/models/sam3.py):
the propagation mask decoder for 16 objects at once, the decoupled memory attention, the memory encoder and the
object-pointer projections, named as today's ComfyUI names them after its conversion.

Facts read from Comfy-Org/ComfyUI's comfy/ldm/sam3/tracker.py (SAM31Tracker, MultiplexMaskDecoder,
DecoupledMemoryTransformer, MemoryBackbone) at upstream commit a439dcae07d6 (2026-06-16); the code is our own.
These modules hold the weights (the demo writes them, so its file has the released key set); the video
tracking that runs them (SAM3_VideoTrack) is not implemented yet."""

from __future__ import annotations

import torch
from torch import nn

from .sam3 import LayerNorm2d, RandomFourier, Sam3Config, TwoWayTransformer, mlp

MEMORY_LAYERS = 4
NUM_MASKMEM = 7
MASK_OUTPUTS = 3
MEMORY_CHANNELS = (16, 64, 256, 1024)  # SAM 3.1's mask downsampler widths (in ComfyUI's code, not the config)


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


class MemoryEncoder(nn.Module):
    def __init__(self, d: int, dim_ff: int) -> None:
        super().__init__()
        self.layers = nn.ModuleList(DecoupledMemoryLayer(d, dim_ff) for _ in range(MEMORY_LAYERS))
        self.norm = nn.LayerNorm(d)


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


class CXBlock(nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.dwconv = nn.Conv2d(d, d, 7, padding=3, groups=d)
        self.norm = nn.LayerNorm(d)
        self.pwconv1 = nn.Linear(d, 4 * d)
        self.pwconv2 = nn.Linear(4 * d, d)
        self.gamma = nn.Parameter(torch.ones(d))


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
