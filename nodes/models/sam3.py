"""SAM 3 / SAM 3.1 (Segment Anything 3): the open-vocabulary detector and the interactive SAM heads, as today's
ComfyUI runs them for SAM3_Detect.

Facts (key names, shapes, formulas, defaults) read from Comfy-Org/ComfyUI's comfy/ldm/sam3/{sam,detector,tracker}.py,
comfy/supported_models.py (SAM3 / SAM31) and comfy/model_detection.py at upstream commit a439dcae07d6 ("Update nodes
titles", 2026-06-16; the last change of those files before the snapshot we read, 0a92ed161e6f); the code is our own.

The parts:
- the ViTDet trunk (patch 14, 1008 px in, a 72x72 grid), windowed (24) and global blocks with 2-D axial rotary
  embeddings (ComfyUI: 16 heads; the global blocks are the last of each quarter of the depth) and the learned
  position table tiled, not interpolated, to the grid;
- FPN necks (x4, x2, x1 and, for SAM 3, x0.5): the detector's `convs`, SAM 3.1's `propagation_convs` and
  `interactive_convs` (SAM 3's `sam2_convs`), with DETR's sine position encoding;
- the detector: the text resizer, the geometry encoder's CLS token, a 6+6-layer DETR encoder/decoder with a
  presence token and box relative-position bias, dot-product scoring, and the pixel-decoder segmentation head;
- the interactive SAM prompt encoder and mask decoder (`forward_segment`), which SAM3_Detect uses to refine masks
  and to segment from points or boxes.

State dict names are ComfyUI's after its conversion (supported_models.SAM3.process_unet_state_dict): `file_to_runtime`
does that conversion from the published layout (fused `in_proj_*`, `tracker.model.` in SAM 3.1, SAM's `mlp.lin1`).
The memory tracker's weights (SAM3_VideoTrack) are read by nodes/models/sam3_tracker.py."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

IMAGE_SIZE = 1008  # ComfyUI resizes every image to 1008x1008 for SAM 3 (nodes_sam3, tracker.image_size)
TRUNK_HEADS = 16  # ComfyUI's ViTDet default; the detector pops num_heads, so it is never changed
DETR_HEADS = 8
WINDOW = 24
NO_OBJECT_LOGIT = -1024.0
TRUNK = "detector.backbone.vision_backbone.trunk."
NECK = "detector.backbone.vision_backbone."
TEXT_PREFIX = "detector.backbone.language_backbone."
# Present only in SAM 3.1 files (ComfyUI's model_detection tells SAM31 by it)
MULTIPLEX_MARKER = NECK + "propagation_convs.0.conv_1x1.weight"
SAM3_MARKERS = (TRUNK + "blocks.0.attn.qkv.weight", "detector.transformer.decoder.query_embed.weight")


@dataclass(frozen=True)
class Sam3Config:
    embed_dim: int  # the trunk's width (and the text encoder's)
    depth: int
    mlp_hidden: int
    patch: int
    pretrain_grid: int  # the learned position table's side (336 px / 14)
    d_model: int
    num_queries: int
    dim_ff: int
    enc_layers: int
    dec_layers: int
    geo_layers: int
    geo_dim_ff: int
    multiplex: bool

    @property
    def grid(self) -> int:
        return IMAGE_SIZE // self.patch

    @property
    def global_blocks(self) -> frozenset[int]:
        # ComfyUI's (7, 15, 23, 31) for the released 32 blocks: the last block of each quarter
        return frozenset((i + 1) * self.depth // 4 - 1 for i in range(4))


def _count(sd: dict, prefix: str) -> int:
    n = 0
    while any(k.startswith(f"{prefix}{n}.") for k in sd):
        n += 1
    return n


def config_from_state_dict(sd: dict[str, torch.Tensor]) -> Sam3Config:
    """The sizes of a runtime-layout state dict (the released files: 1024 wide, 32 blocks, d_model 256)."""
    pe = sd[TRUNK + "patch_embed.proj.weight"]
    tables = sd[TRUNK + "pos_embed"].shape[1] - 1
    return Sam3Config(
        embed_dim=pe.shape[0],
        depth=_count(sd, TRUNK + "blocks."),
        mlp_hidden=sd[TRUNK + "blocks.0.mlp.fc1.weight"].shape[0],
        patch=pe.shape[-1],
        pretrain_grid=math.isqrt(tables),
        d_model=sd[TEXT_PREFIX + "resizer.weight"].shape[0],
        num_queries=sd["detector.transformer.decoder.query_embed.weight"].shape[0],
        dim_ff=sd["detector.transformer.encoder.layers.0.linear1.weight"].shape[0],
        enc_layers=_count(sd, "detector.transformer.encoder.layers."),
        dec_layers=_count(sd, "detector.transformer.decoder.layers."),
        geo_layers=_count(sd, "detector.geometry_encoder.encode."),
        geo_dim_ff=sd["detector.geometry_encoder.encode.0.linear1.weight"].shape[0],
        multiplex=MULTIPLEX_MARKER in sd,
    )


# ---- the published layout -> ComfyUI's runtime names ---------------------------------------------------------


def file_to_runtime(sd: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """ComfyUI's SAM3 conversion of the released file's names: the text tower leaves (nodes/models/sam3_text.py reads
    it), `tracker.model.` becomes `tracker.`, per-block rotary tables go, fused attention projections are split
    into q/k/v, and SAM's two-way transformer names (`mlp.lin1`, `norm_final_attn`) take ComfyUI's."""
    out: dict[str, torch.Tensor] = {}
    for k, v in sd.items():
        if "language_backbone" in k and "resizer" not in k:
            continue
        if k.startswith("tracker.model."):
            k = "tracker." + k[len("tracker.model.") :]
        if ".attn.freqs_cis" in k:
            continue
        if k.endswith((".in_proj_weight", ".in_proj_bias")):
            base, kind = k.rsplit(".in_proj_", 1)
            for name, part in zip(("q_proj", "k_proj", "v_proj"), v.chunk(3, dim=0)):
                out[f"{base}.{name}.{kind}"] = part
            continue
        if "sam_mask_decoder.transformer." in k:
            k = k.replace(".mlp.lin1.", ".mlp.0.").replace(".mlp.lin2.", ".mlp.2.")
            k = k.replace(".norm_final_attn.", ".norm_final.")
        out[k] = v
    return out


def runtime_to_file(sd: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The inverse of file_to_runtime for the detector's fused attentions and SAM's names (the demo writes the
    released layout with it); the text tower is added by the caller."""
    out: dict[str, torch.Tensor] = {}
    fused = {}
    for k, v in sd.items():
        if (
            k.startswith("detector.")
            and any(f".{p}_proj." in k for p in "qkv")
            and not k.startswith("detector.backbone")
        ):
            base, rest = k.rsplit(".", 2)[0], k.rsplit(".", 2)[1:]
            fused.setdefault((base, rest[1]), {})[rest[0][0]] = v
            continue
        if "sam_mask_decoder.transformer." in k:
            k = k.replace(".mlp.0.", ".mlp.lin1.").replace(".mlp.2.", ".mlp.lin2.")
            k = k.replace(".norm_final.", ".norm_final_attn.")
        if k.startswith("tracker."):
            k = "tracker.model." + k[len("tracker.") :]
        out[k] = v
    for (base, kind), parts in fused.items():
        out[f"{base}.in_proj_{kind}"] = torch.cat([parts["q"], parts["k"], parts["v"]])
    return out


# ---- shared pieces --------------------------------------------------------------------------------------------


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, heads: int, mask=None) -> torch.Tensor:
    """[B, N, heads*D] in and out (ComfyUI's optimized_attention on CPU: torch's SDPA)."""
    b, n, _ = q.shape
    q, k, v = (t.view(b, t.shape[1], heads, -1).transpose(1, 2) for t in (q, k, v))
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    return out.transpose(1, 2).reshape(b, n, -1)


class Sam3Mlp(nn.Module):
    """Linear layers with ReLU between them (DETR's and SAM's MLP)."""

    def __init__(self, dims: list[int]) -> None:
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in zip(dims[:-1], dims[1:]))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for i, layer in enumerate(self.layers):
            x = layer(x)
            if i + 1 < len(self.layers):
                x = F.relu(x)
        return x


def mlp(d_in: int, hidden: int, d_out: int, layers: int) -> Sam3Mlp:
    return Sam3Mlp([d_in] + [hidden] * (layers - 1) + [d_out])


class LayerNorm2d(nn.LayerNorm):
    """LayerNorm over the channels of [B, C, H, W] (ComfyUI's, with LayerNorm's default eps)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)


def sine_features(values: torch.Tensor, half: int, temperature: float = 10000.0) -> torch.Tensor:
    """DETR's interleaved sin/cos of values scaled by 2*pi: [...] -> [..., half]."""
    freqs = temperature ** (2 * (torch.arange(half, dtype=torch.float32, device=values.device) // 2) / half)
    raw = values[..., None] * (2 * math.pi) / freqs
    return torch.stack((raw[..., 0::2].sin(), raw[..., 1::2].cos()), dim=-1).flatten(-2)


def sine_grid(d_model: int, h: int, w: int, device=None) -> torch.Tensor:
    """[1, d_model, h, w]: y's features then x's, each position normalised by (size - 1)."""
    gy = torch.arange(h, dtype=torch.float32, device=device) / (h - 1 + 1e-6)
    gx = torch.arange(w, dtype=torch.float32, device=device) / (w - 1 + 1e-6)
    yy, xx = torch.meshgrid(gy, gx, indexing="ij")
    half = d_model // 2
    return torch.cat((sine_features(yy, half), sine_features(xx, half)), dim=-1).permute(2, 0, 1).unsqueeze(0)


class RandomFourier(nn.Module):
    """SAM's position encoding by a fixed Gaussian projection (the matrix is in the file)."""

    def __init__(self, feats: int) -> None:
        super().__init__()
        self.register_buffer("positional_encoding_gaussian_matrix", torch.zeros(2, feats))

    def encode(self, xy01: torch.Tensor) -> torch.Tensor:
        proj = 2 * math.pi * (2 * xy01.float() - 1) @ self.positional_encoding_gaussian_matrix.float()
        return torch.cat([proj.sin(), proj.cos()], dim=-1)

    def grid(self, h: int, w: int) -> torch.Tensor:
        ys = (torch.arange(h, dtype=torch.float32) + 0.5) / h
        xs = (torch.arange(w, dtype=torch.float32) + 0.5) / w
        yy, xx = torch.meshgrid(ys, xs, indexing="ij")
        return self.encode(torch.stack([xx, yy], dim=-1)).permute(2, 0, 1).unsqueeze(0)


# ---- the ViTDet trunk -----------------------------------------------------------------------------------------


def axial_rope(side: int, head_dim: int, scale: float = 1.0, theta: float = 10000.0) -> torch.Tensor:
    """[N, head_dim/2, 2] (cos, sin) per rotated pair: the first half of the pairs turn with x, the rest with y
    (token t sits at x = t % side, y = t // side, both times `scale`)."""
    t = torch.arange(side * side, dtype=torch.float64)
    parts = []
    for pos in ((t % side) * scale, torch.div(t, side, rounding_mode="floor") * scale):
        d = head_dim // 2
        omega = 1.0 / theta ** torch.linspace(0, (d - 2) / d, d // 2, dtype=torch.float64)
        # ComfyUI rounds the positions to float32 before taking the angles
        ang = pos.to(torch.float32).to(torch.float64)[:, None] * omega
        parts.append(torch.stack([ang.cos(), ang.sin()], dim=-1))
    return torch.cat(parts, dim=1).to(torch.float32)


def rotate(x: torch.Tensor, rope: torch.Tensor) -> torch.Tensor:
    """Rotate consecutive pairs of x [..., N, D] by rope [N, D/2, 2] (computed in float32)."""
    xf = x.float().reshape(*x.shape[:-1], -1, 2)
    cos, sin = rope[..., 0], rope[..., 1]
    even, odd = xf[..., 0], xf[..., 1]
    out = torch.stack([cos * even - sin * odd, sin * even + cos * odd], dim=-1)
    return out.reshape(x.shape).type_as(x)


class TrunkAttention(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.qkv = nn.Linear(dim, dim * 3)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor, rope: torch.Tensor) -> torch.Tensor:
        b, n, c = x.shape
        q, k, v = self.qkv(x).reshape(b, n, 3, TRUNK_HEADS, c // TRUNK_HEADS).permute(2, 0, 3, 1, 4).unbind(0)
        q, k = rotate(q, rope), rotate(k, rope)
        out = F.scaled_dot_product_attention(q, k, v)
        return self.proj(out.transpose(1, 2).reshape(b, n, c))


class TrunkMlp(nn.Module):
    def __init__(self, dim: int, hidden: int) -> None:
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(F.gelu(self.fc1(x)))


class TrunkBlock(nn.Module):
    def __init__(self, dim: int, hidden: int, window: int) -> None:
        super().__init__()
        self.window = window
        self.norm1 = nn.LayerNorm(dim)
        self.attn = TrunkAttention(dim)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = TrunkMlp(dim, hidden)

    def forward(self, x: torch.Tensor, rope: torch.Tensor) -> torch.Tensor:
        b, h, w, c = x.shape
        y = self.norm1(x)
        s = self.window
        if s:
            ph, pw = -h % s, -w % s
            y = F.pad(y, (0, 0, 0, pw, 0, ph))
            hp, wp = h + ph, w + pw
            y = y.view(b, hp // s, s, wp // s, s, c).permute(0, 1, 3, 2, 4, 5).reshape(-1, s * s, c)
            y = self.attn(y, rope)
            y = y.view(b, hp // s, wp // s, s, s, c).permute(0, 1, 3, 2, 4, 5).reshape(b, hp, wp, c)[:, :h, :w]
        else:
            y = self.attn(y.reshape(b, h * w, c), rope).view(b, h, w, c)
        x = x + y
        return x + self.mlp(self.norm2(x))


class Sam3PatchEmbed(nn.Module):
    def __init__(self, dim: int, patch: int) -> None:
        super().__init__()
        self.proj = nn.Conv2d(3, dim, patch, stride=patch, bias=False)


class ViTDetTrunk(nn.Module):
    def __init__(self, cfg: Sam3Config) -> None:
        super().__init__()
        self.cfg = cfg
        self.patch_embed = Sam3PatchEmbed(cfg.embed_dim, cfg.patch)
        self.pos_embed = nn.Parameter(torch.zeros(1, cfg.pretrain_grid**2 + 1, cfg.embed_dim))
        self.ln_pre = nn.LayerNorm(cfg.embed_dim)
        self.blocks = nn.ModuleList(
            TrunkBlock(cfg.embed_dim, cfg.mlp_hidden, 0 if i in cfg.global_blocks else WINDOW) for i in range(cfg.depth)
        )
        head_dim = cfg.embed_dim // TRUNK_HEADS
        self._rope_global = axial_rope(cfg.grid, head_dim, scale=cfg.pretrain_grid / cfg.grid)
        self._rope_window = axial_rope(WINDOW, head_dim)

    def tiled_positions(self, side: int) -> torch.Tensor:
        """The learned table's spatial part repeated side by side to cover side x side (the CLS entry unused)."""
        old = self.cfg.pretrain_grid
        table = self.pos_embed[:, 1:].reshape(1, old, old, -1)
        if old == side:
            return table.reshape(1, side * side, -1)
        reps = side // old + 1
        return table.repeat(1, reps, reps, 1)[:, :side, :side].reshape(1, side * side, -1)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        x = self.patch_embed.proj(images)
        b, c, h, w = x.shape
        x = x.permute(0, 2, 3, 1).reshape(b, h * w, c) + self.tiled_positions(h).to(x.dtype)
        x = self.ln_pre(x.view(b, h, w, c))
        for block in self.blocks:
            x = block(x, self._rope_window if block.window else self._rope_global)
        return x.permute(0, 3, 1, 2)


class NeckLevel(nn.Module):
    """One FPN level: up (x4: two transposed convs with GELU between, x2: one), same, or max-pooled down (x0.5)."""

    def __init__(self, dim: int, d_model: int, scale: float) -> None:
        super().__init__()
        self.scale = scale
        proj_in = dim
        if scale == 4.0:
            self.dconv_2x2_0 = nn.ConvTranspose2d(dim, dim // 2, 2, stride=2)
            self.dconv_2x2_1 = nn.ConvTranspose2d(dim // 2, dim // 4, 2, stride=2)
            proj_in = dim // 4
        elif scale == 2.0:
            self.dconv_2x2 = nn.ConvTranspose2d(dim, dim // 2, 2, stride=2)
            proj_in = dim // 2
        self.conv_1x1 = nn.Conv2d(proj_in, d_model, 1)
        self.conv_3x3 = nn.Conv2d(d_model, d_model, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.scale == 4.0:
            x = self.dconv_2x2_1(F.gelu(self.dconv_2x2_0(x)))
        elif self.scale == 2.0:
            x = self.dconv_2x2(x)
        elif self.scale == 0.5:
            x = F.max_pool2d(x, 2, 2)
        return self.conv_3x3(self.conv_1x1(x))


class VisionBackbone(nn.Module):
    def __init__(self, cfg: Sam3Config) -> None:
        super().__init__()
        self.cfg = cfg
        self.trunk = ViTDetTrunk(cfg)
        scales = (4.0, 2.0, 1.0) if cfg.multiplex else (4.0, 2.0, 1.0, 0.5)

        def neck() -> nn.ModuleList:
            return nn.ModuleList(NeckLevel(cfg.embed_dim, cfg.d_model, s) for s in scales)

        self.convs = neck()
        if cfg.multiplex:
            self.propagation_convs = neck()
            self.interactive_convs = neck()
        else:
            self.sam2_convs = neck()

    def levels(self, trunk_out: torch.Tensor, neck: str) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        feats = [conv(trunk_out) for conv in getattr(self, neck)]
        return feats, [
            sine_grid(self.cfg.d_model, f.shape[-2], f.shape[-1]).to(f.dtype).expand(f.shape[0], -1, -1, -1)
            for f in feats
        ]


# ---- the detector ---------------------------------------------------------------------------------------------


class ProjAttention(nn.Module):
    """Multi-head attention with separate q/k/v projections (nn.MultiheadAttention's fused weights, split)."""

    def __init__(self, d: int, heads: int = DETR_HEADS, d_inner: int | None = None, kv_dim: int | None = None) -> None:
        super().__init__()
        self.heads = heads
        inner = d_inner or d
        self.q_proj = nn.Linear(d, inner)
        self.k_proj = nn.Linear(kv_dim or d, inner)
        self.v_proj = nn.Linear(kv_dim or d, inner)
        self.out_proj = nn.Linear(inner, d)

    def forward(self, q: torch.Tensor, k: torch.Tensor | None = None, v: torch.Tensor | None = None, mask=None):
        k = q if k is None else k
        v = k if v is None else v
        if mask is not None and mask.ndim == 2:
            mask = mask[:, None, None, :]
        return self.out_proj(attention(self.q_proj(q), self.k_proj(k), self.v_proj(v), self.heads, mask))


class EncoderLayer(nn.Module):
    def __init__(self, d: int, dim_ff: int) -> None:
        super().__init__()
        self.self_attn = ProjAttention(d)
        self.cross_attn_image = ProjAttention(d)
        self.linear1 = nn.Linear(d, dim_ff)
        self.linear2 = nn.Linear(dim_ff, d)
        self.norm1, self.norm2, self.norm3 = nn.LayerNorm(d), nn.LayerNorm(d), nn.LayerNorm(d)

    def ffn(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.linear2(F.relu(self.linear1(self.norm3(x))))

    def forward(self, x, pos, text=None, text_mask=None):
        y = self.norm1(x)
        x = x + self.self_attn(y + pos, y + pos, y)
        if text is not None:
            x = x + self.cross_attn_image(self.norm2(x), text, text, mask=text_mask)
        return self.ffn(x)

    def forward_cls(self, x, memory, memory_pos):
        """The geometry encoder's CLS token: plain self-attention, then attention to the image with its positions."""
        x = x + self.self_attn(self.norm1(x))
        x = x + self.cross_attn_image(self.norm2(x), memory + memory_pos, memory)
        return self.ffn(x)


class DecoderLayer(nn.Module):
    def __init__(self, d: int, dim_ff: int) -> None:
        super().__init__()
        self.self_attn = ProjAttention(d)
        self.cross_attn = ProjAttention(d)
        self.ca_text = ProjAttention(d)
        self.norm1, self.norm2, self.norm3 = nn.LayerNorm(d), nn.LayerNorm(d), nn.LayerNorm(d)
        self.catext_norm = nn.LayerNorm(d)
        self.linear1 = nn.Linear(d, dim_ff)
        self.linear2 = nn.Linear(dim_ff, d)

    def forward(self, x, memory, pos, memory_pos, text, text_mask, bias):
        qk = x + pos
        x = self.norm2(x + self.self_attn(qk, qk, x))
        if text is not None:
            x = self.catext_norm(x + self.ca_text(x + pos, text, text, mask=text_mask))
        x = self.norm1(x + self.cross_attn(x + pos, memory + memory_pos, memory, mask=bias))
        return self.norm3(x + self.linear2(F.relu(self.linear1(x))))


def cxcywh_to_xyxy(b: torch.Tensor) -> torch.Tensor:
    cx, cy, w, h = b.unbind(-1)
    return torch.stack([cx - 0.5 * w, cy - 0.5 * h, cx + 0.5 * w, cy + 0.5 * h], dim=-1)


def inverse_sigmoid(x: torch.Tensor) -> torch.Tensor:
    return torch.log(x / (1 - x + 1e-6) + 1e-6)


def box_sine(boxes: torch.Tensor, d_model: int) -> torch.Tensor:
    """Each of the 4 box coordinates as d_model/2 sine features, concatenated: [..., 4] -> [..., 2*d_model]."""
    return torch.cat([sine_features(boxes[..., c].float(), d_model // 2) for c in range(4)], dim=-1).to(boxes.dtype)


def _log_scaled(d: torch.Tensor) -> torch.Tensor:
    return torch.sign(d * 8) * torch.log2(torch.abs(d * 8) + 1.0) / 3.0  # log2(8) = 3


class TransformerDecoder(nn.Module):
    def __init__(self, cfg: Sam3Config) -> None:
        super().__init__()
        d = cfg.d_model
        self.d = d
        self.layers = nn.ModuleList(DecoderLayer(d, cfg.dim_ff) for _ in range(cfg.dec_layers))
        self.norm = nn.LayerNorm(d)
        self.query_embed = nn.Embedding(cfg.num_queries, d)
        self.reference_points = nn.Embedding(cfg.num_queries, 4)
        self.ref_point_head = mlp(2 * d, d, d, 2)
        self.bbox_embed = mlp(d, d, 4, 3)
        self.boxRPB_embed_x = mlp(2, d, DETR_HEADS, 2)
        self.boxRPB_embed_y = mlp(2, d, DETR_HEADS, 2)
        self.presence_token = nn.Embedding(1, d)
        self.presence_token_head = mlp(d, d, 1, 3)
        self.presence_token_out_norm = nn.LayerNorm(d)

    def box_bias(self, ref: torch.Tensor, h: int, w: int) -> torch.Tensor:
        """[B, heads, 1+Q, H*W] additive attention bias from each query box's distance to every cell (the
        presence token's row is zero)."""
        xyxy = cxcywh_to_xyxy(ref)
        b, q, _ = xyxy.shape
        ys = torch.arange(h, dtype=torch.float32) / h
        xs = torch.arange(w, dtype=torch.float32) / w
        dx = _log_scaled(xs.view(1, 1, -1, 1) - xyxy[:, :, None, 0::2]).to(ref.dtype)
        dy = _log_scaled(ys.view(1, 1, -1, 1) - xyxy[:, :, None, 1::2]).to(ref.dtype)
        bias = self.boxRPB_embed_y(dy).unsqueeze(3) + self.boxRPB_embed_x(dx).unsqueeze(2)
        bias = bias.flatten(2, 3).permute(0, 3, 1, 2)
        return torch.cat([bias.new_zeros(b, bias.shape[1], 1, bias.shape[3]), bias], dim=2)

    def forward(self, memory, memory_pos, text, text_mask, h: int, w: int):
        b = memory.shape[0]
        tgt = self.query_embed.weight.to(memory.dtype).unsqueeze(0).expand(b, -1, -1)
        presence = self.presence_token.weight.to(memory.dtype)[None].expand(b, -1, -1)
        ref = self.reference_points.weight.to(memory.dtype).unsqueeze(0).expand(b, -1, -1).sigmoid()
        for i, layer in enumerate(self.layers):
            query_pos = self.ref_point_head(box_sine(ref, self.d))
            x = torch.cat([presence, tgt], dim=1)
            pos = torch.cat([torch.zeros_like(presence), query_pos], dim=1)
            x = layer(x, memory, pos, memory_pos, text, text_mask, self.box_bias(ref, h, w))
            presence, tgt = x[:, :1], x[:, 1:]
            if i + 1 < len(self.layers):
                ref = (inverse_sigmoid(ref) + self.bbox_embed(self.norm(tgt))).sigmoid()
        out = self.norm(tgt)
        boxes = (inverse_sigmoid(ref) + self.bbox_embed(out)).sigmoid()
        presence_logit = self.presence_token_head(self.presence_token_out_norm(presence)).squeeze(-1)
        return out, boxes, presence_logit


class TransformerEncoder(nn.Module):
    def __init__(self, cfg: Sam3Config) -> None:
        super().__init__()
        self.layers = nn.ModuleList(EncoderLayer(cfg.d_model, cfg.dim_ff) for _ in range(cfg.enc_layers))

    def forward(self, x, pos, text, text_mask):
        for layer in self.layers:
            x = layer(x, pos, text, text_mask)
        return x


class DetrTransformer(nn.Module):
    def __init__(self, cfg: Sam3Config) -> None:
        super().__init__()
        self.encoder = TransformerEncoder(cfg)
        self.decoder = TransformerDecoder(cfg)


class GeometryEncoder(nn.Module):
    """Point and box prompts for the detector; with text alone only its CLS token is used (SAM3_Detect never
    gives the detector points, and boxes only with text)."""

    def __init__(self, cfg: Sam3Config) -> None:
        super().__init__()
        d = cfg.d_model
        self.points_direct_project = nn.Linear(2, d)
        self.points_pool_project = nn.Linear(d, d)
        self.points_pos_enc_project = nn.Linear(d, d)
        self.boxes_direct_project = nn.Linear(4, d)
        self.boxes_pool_project = nn.Conv2d(d, d, 7)
        self.boxes_pos_enc_project = nn.Linear(d + 2, d)
        self.label_embed = nn.Embedding(2, d)
        self.cls_embed = nn.Embedding(1, d)
        self.norm = nn.LayerNorm(d)
        self.img_pre_norm = nn.LayerNorm(d)
        self.encode = nn.ModuleList(EncoderLayer(d, cfg.geo_dim_ff) for _ in range(cfg.geo_layers))
        self.encode_norm = nn.LayerNorm(d)
        self.final_proj = nn.Linear(d, d)

    def cls_token(self, img: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        b = img.shape[0]
        x = self.norm(self.final_proj(self.cls_embed.weight.to(img.dtype).view(1, 1, -1).expand(b, -1, -1)))
        for layer in self.encode:
            x = layer.forward_cls(x, img, pos)
        return self.encode_norm(x)

    def boxes(self, boxes: torch.Tensor, img: torch.Tensor) -> torch.Tensor:
        """Box prompts [B, N, 4] (normalised cx, cy, w, h) -> [B, N, d]: their coordinates, the image pooled
        inside them (ROI align, 7x7), their sine positions and the positive label; then normed and encoded
        against the image."""
        b, n, _ = boxes.shape
        hw, c = img.shape[1], img.shape[2]
        side = math.isqrt(hw)
        feat = self.img_pre_norm(img).permute(0, 2, 1).reshape(b, c, side, side)
        embed = self.boxes_direct_project(boxes)
        xyxy = cxcywh_to_xyxy(boxes) * torch.tensor([side, side, side, side], dtype=boxes.dtype)
        pooled = torch.cat([roi_align(feat[i : i + 1], xyxy[i], 7) for i in range(b)])
        embed = embed + self.boxes_pool_project(pooled).view(b, n, -1)
        cx, cy, w, h = (boxes[..., i].flatten() for i in range(4))
        half = c // 2
        enc = torch.cat((sine_features(cy, half), sine_features(cx, half), h[:, None], w[:, None]), dim=1)
        embed = embed + self.boxes_pos_enc_project(enc.view(b, n, -1).to(embed.dtype))
        embed = embed + self.label_embed.weight[1].to(embed.dtype)
        geo = self.norm(embed)
        zeros = torch.zeros_like(geo)
        for layer in self.encode:
            geo = layer(geo, zeros, img)
        return self.final_proj(self.encode_norm(geo))


def roi_align(feat: torch.Tensor, boxes: torch.Tensor, size: int) -> torch.Tensor:
    """torchvision's roi_align (spatial scale 1, adaptive sampling, aligned=False) on one image [1, C, H, W]
    for boxes [N, 4] in feature cells: [N, C, size, size]."""
    _, c, h, w = feat.shape
    out = []
    for x1, y1, x2, y2 in boxes.tolist():
        bw, bh = max(x2 - x1, 1.0), max(y2 - y1, 1.0)
        gh, gw = math.ceil(bh / size), math.ceil(bw / size)
        ys = y1 + (torch.arange(size)[:, None] + (torch.arange(gh)[None] + 0.5) / gh) * (bh / size)
        xs = x1 + (torch.arange(size)[:, None] + (torch.arange(gw)[None] + 0.5) / gw) * (bw / size)
        yy = ys.reshape(-1)[:, None].expand(-1, xs.numel())
        xx = xs.reshape(-1)[None, :].expand(ys.numel(), -1)
        vals = _bilinear(feat[0], yy, xx, h, w)  # [C, size*gh, size*gw]
        out.append(vals.view(c, size, gh, size, gw).mean(dim=(2, 4)))
    return torch.stack(out)


def _bilinear(f: torch.Tensor, y: torch.Tensor, x: torch.Tensor, h: int, w: int) -> torch.Tensor:
    """torchvision's roi_align sampling: zero outside [-1, size], clamped at the border."""
    outside = (y < -1.0) | (y > h) | (x < -1.0) | (x > w)
    y, x = y.clamp(min=0), x.clamp(min=0)
    y0 = y.floor().long().clamp(max=h - 1)
    x0 = x.floor().long().clamp(max=w - 1)
    y = torch.where(y0 >= h - 1, y0.to(y.dtype), y)
    x = torch.where(x0 >= w - 1, x0.to(x.dtype), x)
    y1, x1 = (y0 + 1).clamp(max=h - 1), (x0 + 1).clamp(max=w - 1)
    ly, lx = y - y0, x - x0
    hy, hx = 1 - ly, 1 - lx
    v = hy * hx * f[:, y0, x0] + hy * lx * f[:, y0, x1] + ly * hx * f[:, y1, x0] + ly * lx * f[:, y1, x1]
    return torch.where(outside, torch.zeros_like(v), v)


class MLPWithNorm(nn.Module):
    def __init__(self, d: int, hidden: int) -> None:
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(d, hidden), nn.Linear(hidden, d)])
        self.out_norm = nn.LayerNorm(d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out_norm(self.layers[1](F.relu(self.layers[0](x))) + x)


class DotProductScoring(nn.Module):
    def __init__(self, d: int, hidden: int) -> None:
        super().__init__()
        self.hs_proj = nn.Linear(d, d)
        self.prompt_proj = nn.Linear(d, d)
        self.prompt_mlp = MLPWithNorm(d, hidden)
        self.scale = 1.0 / d**0.5

    def forward(self, queries: torch.Tensor, prompt: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        p = self.prompt_mlp(prompt)
        weight = mask.unsqueeze(-1).to(p.dtype)
        pooled = (p * weight).sum(dim=1) / weight.sum(dim=1).clamp(min=1)
        scores = self.hs_proj(queries) @ self.prompt_proj(pooled).unsqueeze(-1)
        return (scores * self.scale).clamp(-12.0, 12.0).squeeze(-1)


class PixelDecoder(nn.Module):
    def __init__(self, d: int, stages: int = 3) -> None:
        super().__init__()
        self.conv_layers = nn.ModuleList(nn.Conv2d(d, d, 3, padding=1) for _ in range(stages))
        self.norms = nn.ModuleList(nn.GroupNorm(8, d) for _ in range(stages))

    def forward(self, feats: list[torch.Tensor]) -> torch.Tensor:
        x = feats[-1]
        for conv, norm, f in zip(self.conv_layers, self.norms, feats[:-1][::-1]):
            x = F.relu(norm(conv(f + F.interpolate(x, size=f.shape[-2:], mode="nearest"))))
        return x


class MaskPredictor(nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.mask_embed = mlp(d, d, d, 3)


class SegmentationHead(nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.d = d
        self.pixel_decoder = PixelDecoder(d)
        self.mask_predictor = MaskPredictor(d)
        self.cross_attend_prompt = ProjAttention(d)
        self.cross_attn_norm = nn.LayerNorm(d)
        self.instance_seg_head = nn.Conv2d(d, d, 1)
        self.semantic_seg_head = nn.Conv2d(d, 1, 1)  # in the file; SAM3_Detect reads only the instance masks

    def forward(self, queries, feats, memory, prompt, prompt_mask):
        memory = memory + self.cross_attend_prompt(self.cross_attn_norm(memory), prompt, prompt, mask=prompt_mask)
        b, h, w = memory.shape[0], feats[-1].shape[-2], feats[-1].shape[-1]
        feats = [*feats[:-1], memory[:, : h * w].permute(0, 2, 1).reshape(b, self.d, h, w)]
        pixels = self.instance_seg_head(self.pixel_decoder(feats))
        return torch.einsum("bqc,bchw->bqhw", self.mask_predictor.mask_embed(queries), pixels)


class LanguageBackbone(nn.Module):
    def __init__(self, cfg: Sam3Config) -> None:
        super().__init__()
        self.resizer = nn.Linear(cfg.embed_dim, cfg.d_model)


class Backbone(nn.Module):
    def __init__(self, cfg: Sam3Config) -> None:
        super().__init__()
        self.vision_backbone = VisionBackbone(cfg)
        self.language_backbone = LanguageBackbone(cfg)


@dataclass
class Detections:
    boxes: torch.Tensor  # [B, Q, 4] x1, y1, x2, y2 (normalised, or pixels of orig_size)
    scores: torch.Tensor  # [B, Q] logits
    masks: torch.Tensor  # [B, Q, H, W] logits
    presence: torch.Tensor  # [B, 1] logit


class Detector(nn.Module):
    def __init__(self, cfg: Sam3Config) -> None:
        super().__init__()
        self.cfg = cfg
        self.backbone = Backbone(cfg)
        self.transformer = DetrTransformer(cfg)
        self.segmentation_head = SegmentationHead(cfg.d_model)
        self.geometry_encoder = GeometryEncoder(cfg)
        self.dot_prod_scoring = DotProductScoring(cfg.d_model, cfg.dim_ff)

    def detect(
        self,
        trunk_out: torch.Tensor,
        text: torch.Tensor,
        text_mask: torch.Tensor,
        boxes: torch.Tensor | None = None,
        orig_size: tuple[int, int] | None = None,
    ) -> Detections:
        """Detect what the (unresized) text states describe, optionally within box prompts [B, N, 4] (normalised
        cx, cy, w, h)."""
        feats, pos = self.backbone.vision_backbone.levels(trunk_out, "convs")
        seg_feats = feats
        if not self.cfg.multiplex:  # SAM 3 drops its x0.5 level before the encoder
            feats, pos = feats[:-1], pos[:-1]
        b, _, h, w = feats[-1].shape
        img = feats[-1].flatten(2).permute(0, 2, 1)
        img_pos = pos[-1].flatten(2).permute(0, 2, 1)
        prompt = self.backbone.language_backbone.resizer(text)
        if prompt.shape[0] != b:
            prompt, text_mask = prompt.expand(b, -1, -1), text_mask.expand(b, -1)
        geo = self.geometry_encoder
        parts = [prompt]
        if boxes is not None:
            parts.append(geo.boxes(boxes, img))
        parts.append(geo.cls_token(img, img_pos))
        prompt = torch.cat(parts, dim=1)
        extra = prompt.shape[1] - text_mask.shape[1]
        mask = torch.cat([text_mask.bool(), text_mask.new_ones(b, extra, dtype=torch.bool)], dim=1)
        memory = self.transformer.encoder(img, img_pos, prompt, mask)
        queries, ref_boxes, presence = self.transformer.decoder(memory, img_pos, prompt, mask, h, w)
        scores = self.dot_prod_scoring(queries, prompt, mask)
        masks = self.segmentation_head(queries, seg_feats, memory, prompt, mask)
        xyxy = cxcywh_to_xyxy(ref_boxes)
        if orig_size is not None:
            oh, ow = orig_size
            xyxy = xyxy * torch.tensor([ow, oh, ow, oh], dtype=xyxy.dtype)
            masks = F.interpolate(masks, size=orig_size, mode="bilinear", align_corners=False)
        return Detections(xyxy, scores, masks, presence)


# ---- the interactive SAM heads --------------------------------------------------------------------------------


class SamAttention(nn.Module):
    def __init__(self, d: int, heads: int = 8, downsample: int = 1) -> None:
        super().__init__()
        self.heads = heads
        inner = d // downsample
        self.q_proj, self.k_proj, self.v_proj = nn.Linear(d, inner), nn.Linear(d, inner), nn.Linear(d, inner)
        self.out_proj = nn.Linear(inner, d)

    def forward(self, q, k, v):
        return self.out_proj(attention(self.q_proj(q), self.k_proj(k), self.v_proj(v), self.heads))


class TwoWayBlock(nn.Module):
    def __init__(self, d: int, mlp_dim: int, first: bool) -> None:
        super().__init__()
        self.first = first
        self.self_attn = SamAttention(d)
        self.cross_attn_token_to_image = SamAttention(d, downsample=2)
        self.cross_attn_image_to_token = SamAttention(d, downsample=2)
        self.mlp = nn.Sequential(nn.Linear(d, mlp_dim), nn.ReLU(), nn.Linear(mlp_dim, d))
        self.norm1, self.norm2, self.norm3, self.norm4 = (nn.LayerNorm(d) for _ in range(4))

    def forward(self, queries, keys, query_pe, key_pe):
        if self.first:  # the first block's self-attention has no residual and no positions
            queries = self.norm1(self.self_attn(queries, queries, queries))
        else:
            q = queries + query_pe
            queries = self.norm1(queries + self.self_attn(q, q, queries))
        queries = self.norm2(queries + self.cross_attn_token_to_image(queries + query_pe, keys + key_pe, keys))
        queries = self.norm3(queries + self.mlp(queries))
        keys = self.norm4(keys + self.cross_attn_image_to_token(keys + key_pe, queries + query_pe, queries))
        return queries, keys


class TwoWayTransformer(nn.Module):
    def __init__(self, d: int, mlp_dim: int, depth: int = 2) -> None:
        super().__init__()
        self.layers = nn.ModuleList(TwoWayBlock(d, mlp_dim, i == 0) for i in range(depth))
        self.final_attn_token_to_image = SamAttention(d, downsample=2)
        self.norm_final = nn.LayerNorm(d)

    def forward(self, image, image_pe, tokens):
        queries, keys = tokens, image
        for layer in self.layers:
            queries, keys = layer(queries, keys, tokens, image_pe)
        queries = self.norm_final(queries + self.final_attn_token_to_image(queries + tokens, keys + image_pe, keys))
        return queries, keys


class SamMaskDecoder(nn.Module):
    """SAM's single-object mask decoder (SAM 3.1's interactive one): 1 + 3 mask tokens."""

    def __init__(self, d: int, mlp_dim: int) -> None:
        super().__init__()
        self.transformer = TwoWayTransformer(d, mlp_dim)
        self.iou_token = nn.Embedding(1, d)
        self.mask_tokens = nn.Embedding(4, d)
        self.obj_score_token = nn.Embedding(1, d)
        self.output_upscaling = nn.Sequential(
            nn.ConvTranspose2d(d, d // 4, 2, stride=2),
            LayerNorm2d(d // 4),
            nn.GELU(),
            nn.ConvTranspose2d(d // 4, d // 8, 2, stride=2),
            nn.GELU(),
        )
        self.conv_s0 = nn.Conv2d(d, d // 8, 1)
        self.conv_s1 = nn.Conv2d(d, d // 4, 1)
        self.output_hypernetworks_mlps = nn.ModuleList(mlp(d, d, d // 8, 3) for _ in range(4))
        self.iou_prediction_head = mlp(d, d, 4, 3)
        self.pred_obj_score_head = mlp(d, d, 1, 3)

    def run(self, image, image_pe, sparse, dense):
        """The two-way transformer: (token states [B, 6+n, d], image states [B, HW, d])."""
        b = sparse.shape[0]
        own = torch.cat([self.obj_score_token.weight, self.iou_token.weight, self.mask_tokens.weight]).to(sparse.dtype)
        tokens = torch.cat([own.unsqueeze(0).expand(b, -1, -1), sparse], dim=1)
        src = image.expand(b, -1, -1, -1) + dense
        pe = image_pe.expand(b, -1, -1, -1).flatten(2).permute(0, 2, 1)
        return self.transformer(src.flatten(2).permute(0, 2, 1), pe, tokens)

    def tokens(self, image, image_pe, sparse, dense):
        return self.run(image, image_pe, sparse, dense)[0]

    def forward(self, image, image_pe, sparse, dense, high_res, multimask: bool):
        b = sparse.shape[0]
        _, c, h, w = image.shape
        hs, src_out = self.run(image, image_pe, sparse, dense)
        src_out = src_out.permute(0, 2, 1).reshape(b, c, h, w)
        dc1, ln1, act1, dc2, act2 = self.output_upscaling
        up = act1(ln1(dc1(src_out) + self.conv_s1(high_res[1])))
        up = act2(dc2(up) + self.conv_s0(high_res[0]))
        mask_out = hs[:, 2:6]
        hyper = torch.stack([m(mask_out[:, i]) for i, m in enumerate(self.output_hypernetworks_mlps)], dim=1)
        masks = (hyper @ up.flatten(2)).view(b, 4, up.shape[2], up.shape[3])
        iou = self.iou_prediction_head(hs[:, 1])
        obj = self.pred_obj_score_head(hs[:, 0])
        return (masks[:, 1:], iou[:, 1:], obj) if multimask else (masks[:, :1], iou[:, :1], obj)


class SamPromptEncoder(nn.Module):
    def __init__(self, d: int, grid: int) -> None:
        super().__init__()
        self.d = d
        self.grid = grid
        self.pe_layer = RandomFourier(d // 2)
        self.point_embeddings = nn.ModuleList(nn.Embedding(1, d) for _ in range(4))
        self.not_a_point_embed = nn.Embedding(1, d)
        self.mask_downscaling = nn.Sequential(
            nn.Conv2d(1, 4, 2, stride=2),
            LayerNorm2d(4),
            nn.GELU(),
            nn.Conv2d(4, 16, 2, stride=2),
            LayerNorm2d(16),
            nn.GELU(),
            nn.Conv2d(16, d, 1),
        )
        self.no_mask_embed = nn.Embedding(1, d)

    def forward(self, coords, labels, boxes, masks, dtype):
        """Sparse tokens [B, n, d] (points, padded with a not-a-point when there is no box, then box corners)
        and the dense embedding [B, d, grid, grid] (the mask prompt's, or the no-mask one)."""
        b = coords.shape[0]
        if boxes is None:
            coords = torch.cat([coords, coords.new_zeros(b, 1, 2)], dim=1)
            labels = torch.cat([labels, -labels.new_ones(b, 1)], dim=1)
        pe = self.pe_layer.encode((coords + 0.5) / IMAGE_SIZE).to(dtype)
        for i in range(4):
            pe = torch.where((labels == i)[..., None], pe + self.point_embeddings[i].weight.to(dtype), pe)
        pe = torch.where((labels == -1)[..., None], self.not_a_point_embed.weight.to(dtype).expand_as(pe), pe)
        sparse = pe
        if boxes is not None:
            corners = self.pe_layer.encode((boxes.reshape(-1, 2, 2) + 0.5) / IMAGE_SIZE).to(dtype)
            corners = corners + torch.stack([self.point_embeddings[2].weight[0], self.point_embeddings[3].weight[0]])
            sparse = torch.cat([sparse, corners.to(dtype)], dim=1)
        if masks is not None:
            dense = self.mask_downscaling(masks)
        else:
            dense = self.no_mask_embed.weight.to(dtype).reshape(1, -1, 1, 1).expand(b, -1, self.grid, self.grid)
        return sparse, dense


class InteractiveHeads(nn.Module):
    """The tracker's weights that SAM3_Detect uses (SAM 3.1's interactive decoder; SAM 3's single decoder)."""

    def __init__(self, cfg: Sam3Config, mlp_dim: int) -> None:
        super().__init__()
        d = cfg.d_model
        self.multiplex = cfg.multiplex
        if cfg.multiplex:
            self.interactive_sam_mask_decoder = SamMaskDecoder(d, mlp_dim)
            self.interactive_sam_prompt_encoder = SamPromptEncoder(d, cfg.grid)
            self.interactivity_no_mem_embed = nn.Parameter(torch.zeros(1, 1, d))
        else:
            self.sam_mask_decoder = SamMaskDecoder(d, mlp_dim)
            self.sam_prompt_encoder = SamPromptEncoder(d, cfg.grid)
            self.no_mem_embed = nn.Parameter(torch.zeros(1, 1, d))

    def parts(self) -> tuple[SamMaskDecoder, SamPromptEncoder, torch.Tensor]:
        if self.multiplex:
            return (
                self.interactive_sam_mask_decoder,
                self.interactive_sam_prompt_encoder,
                self.interactivity_no_mem_embed,
            )
        return self.sam_mask_decoder, self.sam_prompt_encoder, self.no_mem_embed


class Sam3Model(nn.Module):
    """What SAM3_Detect runs: `detector.*` and the interactive `tracker.*` weights."""

    def __init__(self, cfg: Sam3Config, mlp_dim: int) -> None:
        super().__init__()
        self.cfg = cfg
        self.detector = Detector(cfg)
        self.tracker = InteractiveHeads(cfg, mlp_dim)

    @property
    def vision(self) -> VisionBackbone:
        return self.detector.backbone.vision_backbone

    def trunk(self, images: torch.Tensor) -> torch.Tensor:
        """images [B, 3, 1008, 1008] in 0..1 (ComfyUI feeds them unnormalised)."""
        return self.vision.trunk(images)

    def segment(
        self,
        trunk_out: torch.Tensor,
        points: tuple[torch.Tensor, torch.Tensor] | None = None,
        boxes: torch.Tensor | None = None,
        mask_logits: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """SAM's promptable segmentation (ComfyUI's forward_segment): points (coords [B, N, 2] in 1008 pixels,
        labels [B, N]), box corners [B, 2, 2] or mask logits [B, 1, h, w] -> mask logits [B, 1, 1008, 1008]."""
        neck = "interactive_convs" if self.cfg.multiplex else "sam2_convs"
        feats, _ = self.vision.levels(trunk_out, neck)
        if not self.cfg.multiplex:
            feats = feats[:-1]
        decoder, prompts, no_mem = self.tracker.parts()
        image = feats[-1] + no_mem.to(feats[-1].dtype).view(1, -1, 1, 1)
        dtype = image.dtype
        if mask_logits is not None:
            b = mask_logits.shape[0]
        elif boxes is not None:
            b = boxes.shape[0]
        elif points is not None:
            b = points[0].shape[0]
        else:
            b = image.shape[0]
        if points is None:
            points = (torch.zeros(b, 1, 2), -torch.ones(b, 1, dtype=torch.int32))
        side = prompts.grid * 4
        if mask_logits is not None and tuple(mask_logits.shape[-2:]) != (side, side):
            mask_logits = F.interpolate(
                mask_logits, size=(side, side), mode="bilinear", align_corners=False, antialias=True
            )
        sparse, dense = prompts(points[0], points[1], boxes, mask_logits, dtype)
        image_pe = prompts.pe_layer.grid(prompts.grid, prompts.grid).to(dtype)
        multimask = 0 < points[1].shape[1] <= 1 and points[1].ge(0).any().item()
        masks, iou, obj = decoder(image, image_pe, sparse, dense, feats[:-1], multimask)
        masks = torch.where((obj > 0)[:, None, None], masks, torch.tensor(NO_OBJECT_LOGIT, dtype=masks.dtype))
        high = F.interpolate(masks, size=(IMAGE_SIZE, IMAGE_SIZE), mode="bilinear", align_corners=False)
        if multimask:
            best = iou.argmax(dim=-1)
            high = high[torch.arange(b), best].unsqueeze(1)
        return high


def tracker_mlp_dim(sd: dict[str, torch.Tensor]) -> int:
    key = "tracker.interactive_sam_mask_decoder.transformer.layers.0.mlp.0.weight"
    if key not in sd:
        key = "tracker.sam_mask_decoder.transformer.layers.0.mlp.0.weight"
    return sd[key].shape[0]


def model_keys(model: nn.Module) -> set[str]:
    return set(model.state_dict())


def load_sam3(sd_file: dict[str, torch.Tensor], path: str | None) -> Sam3Model:
    """The detector and interactive heads from a released-layout SAM 3 / 3.1 state dict (float32 on CPU)."""
    from .safetensors_io import build_module

    sd = file_to_runtime(sd_file)
    cfg = config_from_state_dict(sd)
    mlp_dim = tracker_mlp_dim(sd)
    with torch.device("meta"):
        wanted = model_keys(Sam3Model(cfg, mlp_dim))
    own = {k: v for k, v in sd.items() if k in wanted}
    model = build_module(lambda: Sam3Model(cfg, mlp_dim), own, path, "SAM 3 model")
    # buffers built from sizes (not in the file) were created on the meta device: rebuild them on the CPU
    trunk = model.vision.trunk
    head_dim = cfg.embed_dim // TRUNK_HEADS
    trunk._rope_global = axial_rope(cfg.grid, head_dim, scale=cfg.pretrain_grid / cfg.grid)
    trunk._rope_window = axial_rope(WINDOW, head_dim)
    return model
