"""MoGe-2 (monocular geometry estimation, microsoft/MoGe): a DINOv2 ViT encoder whose last layers' patch tokens are
projected and summed into one feature map, a five-level convolutional neck over it and a view-plane UV pyramid, and
per-output convolutional heads (points, mask, normals) plus a metric-scale MLP on the class token; then the focal
length and depth shift are recovered by least squares and the depth is projected into a point map.

Facts (key layout, config detection, formulas, defaults) from ComfyUI's newest comfy/ldm/moge/{model,modules,
geometry}.py and comfy/image_encoders/dino2.py (Comfy-Org/ComfyUI, read 2026-12; newer than 0.10.0); the code is
ours. Files are read in MoGe's own layout (Meta's DINOv2 names: blocks.N.attn.qkv, ls1.gamma, pos_embed, ...) or
in ComfyUI's renamed one (encoder.layer.N.attention.attention.query, ...). MoGe-1 (no encoder.) and MoGe-3 (a
sparse 3D refiner, refiner.*) are refused by name. Checked against that code run on the same tiny weights by
tests/models/test_moge.py."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from cluster.local import torch_threads

PATCH = 14
IMAGE_MEAN = (0.485, 0.456, 0.406)
IMAGE_STD = (0.229, 0.224, 0.225)
NUM_TOKENS_RANGE = (1200, 3600)  # MoGe-2's token budget from resolution level 0 to 9
MASK_THRESHOLD = 0.5
BACKBONE = "encoder.backbone."


# ---------------------------------------------------------------- the DINOv2 encoder


class _Attention(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.heads = dim // 64  # MoGe's DINOv2 sizes all use 64-wide heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, c = x.shape
        # q, k and v as three products (not one fused one): the same rounding as the split layers ComfyUI runs
        weights, biases = self.qkv.weight.chunk(3), self.qkv.bias.chunk(3)
        q, k, v = (F.linear(x, w, bias).view(b, n, self.heads, -1).transpose(1, 2) for w, bias in zip(weights, biases))
        out = F.scaled_dot_product_attention(q, k, v)
        return self.proj(out.transpose(1, 2).reshape(b, n, c))


class _Mlp(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(F.gelu(self.fc1(x)))


class _SwiGLU(nn.Module):
    """ViT-g's feed-forward (MoGe-3's giant encoder): SiLU-gated, hidden width 2/3 of 4x rounded up to 8."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        hidden = (int(4 * dim * 2 / 3) + 7) // 8 * 8
        self.w12, self.w3 = nn.Linear(dim, 2 * hidden), nn.Linear(hidden, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a, b = self.w12(x).chunk(2, dim=-1)
        return self.w3(F.silu(a) * b)


class _LayerScale(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.gamma = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.gamma


class _Block(nn.Module):
    def __init__(self, dim: int, swiglu: bool) -> None:
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(dim, eps=1e-6), nn.LayerNorm(dim, eps=1e-6)
        self.attn = _Attention(dim)
        self.mlp = _SwiGLU(dim) if swiglu else _Mlp(dim)
        self.ls1, self.ls2 = _LayerScale(dim), _LayerScale(dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.ls1(self.attn(self.norm1(x)))
        return x + self.ls2(self.mlp(self.norm2(x)))


class _PatchEmbed(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.proj = nn.Conv2d(3, dim, PATCH, PATCH)


class DinoV2(nn.Module):
    """The ViT in Meta's parameter names; its position table is a square grid, resampled for other grids."""

    def __init__(self, dim: int, depth: int, grid: int, swiglu: bool) -> None:
        super().__init__()
        self.patch_embed = _PatchEmbed(dim)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos_embed = nn.Parameter(torch.zeros(1, grid * grid + 1, dim))
        self.mask_token = nn.Parameter(torch.zeros(1, dim))  # a training parameter, unused here
        self.blocks = nn.ModuleList(_Block(dim, swiglu) for _ in range(depth))
        self.norm = nn.LayerNorm(dim, eps=1e-6)

    def _positions(self, rows: int, cols: int) -> torch.Tensor:
        table = self.pos_embed.float()
        grid = int(math.isqrt(table.shape[1] - 1))
        if rows * cols == grid * grid:
            return table
        patches = table[:, 1:].reshape(1, grid, grid, -1).permute(0, 3, 1, 2)
        # as DINOv2 does: a scale factor nudged by 0.1 (its float rounding guard), rows first; that factor, not the
        # sizes' ratio, is what the bicubic sampling positions follow
        scale = ((rows + 0.1) / grid, (cols + 0.1) / grid)
        patches = F.interpolate(patches, scale_factor=scale, mode="bicubic", antialias=False)
        return torch.cat([table[:, :1], patches.permute(0, 2, 3, 1).flatten(1, 2)], dim=1)

    def layer_features(self, pixels: torch.Tensor, layers: list[int]) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """(patch tokens, class token) after each of `layers`, final-normed."""
        x = self.patch_embed.proj(pixels).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls_token.to(x.dtype).expand(x.shape[0], -1, -1), x], dim=1)
        x = x + self._positions(pixels.shape[-2] // PATCH, pixels.shape[-1] // PATCH).to(x.dtype)
        found: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
        for i, block in enumerate(self.blocks[: max(layers) + 1]):
            x = block(x)
            if i in layers:
                normed = self.norm(x)
                found[i] = (normed[:, 1:], normed[:, 0])
        return [found[i] for i in layers]


# ---------------------------------------------------------------- the convolutional neck and heads


class _PointwiseConv(nn.Conv2d):
    """A 1x1 convolution on one thread: oneDNN's 1x1 kernels round by the thread count (5e-7 apart between one and
    two threads), which would part an executor's result from `--executors 0`'s; these are small next to the 3x3s."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with torch_threads(1):
            return super().forward(x)


def bilinear(x: torch.Tensor, size: tuple[int, int] | None = None, scale: float | None = None) -> torch.Tensor:
    """F.interpolate bilinear (corners not aligned, no antialias) on one thread: its CPU kernel rounds some sizes by
    the thread count (5e-7 apart between one and two threads, 672 -> 128 px)."""
    with torch_threads(1):
        return F.interpolate(x, size, scale_factor=scale, mode="bilinear", align_corners=False)


class _Upsample2x(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return bilinear(x, scale=2.0)


def _conv(c_in: int, c_out: int, k: int = 3) -> nn.Conv2d:
    if k == 1:
        return _PointwiseConv(c_in, c_out, 1)
    return nn.Conv2d(c_in, c_out, k, padding=k // 2, padding_mode="replicate")


class _GroupNorm(nn.GroupNorm):
    """GroupNorm on one thread: ATen's kernel rounds its statistics by the thread count (6e-8 apart)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with torch_threads(1):
            return super().forward(x)


class _ResBlock(nn.Module):
    def __init__(self, channels: int, hidden: int, norms: bool) -> None:
        super().__init__()
        self.layers = nn.Sequential(
            _GroupNorm(1, channels) if norms else nn.Identity(),
            nn.ReLU(),
            _conv(channels, hidden),
            _GroupNorm(max(hidden // 32, 1), hidden) if norms else nn.Identity(),
            nn.ReLU(),
            _conv(hidden, channels),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x) + x


@dataclass(frozen=True)
class StackConfig:
    dim_in: tuple[int | None, ...]
    dim_res: tuple[int, ...]
    dim_out: tuple[int | None, ...]
    num_res: tuple[int, ...]
    transposed: tuple[bool, ...]  # per resampler: a 2x2 transposed conv (else bilinear 2x)
    norms: bool


class ConvStack(nn.Module):
    """Levels from coarse to fine: each adds its projected input, runs residual blocks, emits an output and is
    upsampled 2x into the next."""

    def __init__(self, cfg: StackConfig) -> None:
        super().__init__()
        ident = nn.Identity
        self.input_blocks = nn.ModuleList(
            ident() if i is None else _conv(i, r, 1) for i, r in zip(cfg.dim_in, cfg.dim_res)
        )
        self.resamplers = nn.ModuleList(
            nn.Sequential(nn.ConvTranspose2d(a, b, 2, 2), _conv(b, b))
            if t
            else nn.Sequential(_Upsample2x(), _conv(a, b))
            for a, b, t in zip(cfg.dim_res[:-1], cfg.dim_res[1:], cfg.transposed)
        )
        self.res_blocks = nn.ModuleList(
            nn.Sequential(*(_ResBlock(r, r, cfg.norms) for _ in range(n))) for r, n in zip(cfg.dim_res, cfg.num_res)
        )
        self.output_blocks = nn.ModuleList(
            ident() if o is None else _conv(r, o, 1) for o, r in zip(cfg.dim_out, cfg.dim_res)
        )

    def forward(self, features: list[torch.Tensor | None]) -> list[torch.Tensor]:
        outputs, x = [], None
        for i, res in enumerate(self.res_blocks):
            feat = None if features[i] is None else self.input_blocks[i](features[i])
            x = feat if x is None else (x if feat is None else x + feat)
            x = res(x)
            outputs.append(self.output_blocks[i](x))
            if i < len(self.resamplers):
                x = self.resamplers[i](x)
        return outputs


def view_plane_uv(width: int, height: int, aspect: float, dtype=torch.float32) -> torch.Tensor:
    """[H, W, 2] view-plane coordinates of pixel centres; the corners at +-(W, H) / diagonal."""
    diag = (1 + aspect**2) ** 0.5
    span_x, span_y = aspect / diag, 1 / diag
    u = torch.linspace(-span_x * (width - 1) / width, span_x * (width - 1) / width, width, dtype=dtype)
    v = torch.linspace(-span_y * (height - 1) / height, span_y * (height - 1) / height, height, dtype=dtype)
    u, v = torch.meshgrid(u, v, indexing="xy")
    return torch.stack([u, v], dim=-1)


def _uv_map(batch: int, height: int, width: int, aspect: float, device: torch.device) -> torch.Tensor:
    uv = view_plane_uv(width, height, aspect).to(device)
    return uv.permute(2, 0, 1).unsqueeze(0).expand(batch, -1, -1, -1)


class MoGe2(nn.Module):
    def __init__(
        self,
        dim: int,
        depth: int,
        grid: int,
        swiglu: bool,
        dim_proj: int,
        stacks: dict[str, StackConfig],
        scale_dims: list[int],
    ) -> None:
        super().__init__()
        self.layers = [(depth // 4) * (i + 1) - 1 for i in range(4)]  # four evenly spaced layers, the last one last
        self.encoder = nn.Module()
        self.encoder.backbone = DinoV2(dim, depth, grid, swiglu)
        self.encoder.output_projections = nn.ModuleList(_conv(dim, dim_proj, 1) for _ in self.layers)
        # the normalisation constants are in the file (MoGe's buffers: ImageNet's, rounded as the file stores them)
        self.encoder.register_buffer("image_mean", torch.tensor(IMAGE_MEAN).view(1, 3, 1, 1))
        self.encoder.register_buffer("image_std", torch.tensor(IMAGE_STD).view(1, 3, 1, 1))
        for name, cfg in stacks.items():
            setattr(self, name, ConvStack(cfg))
        mlp: list[nn.Module] = []
        for a, b in zip(scale_dims[:-2], scale_dims[1:-1]):
            mlp += [nn.Linear(a, b), nn.ReLU()]
        self.scale_head = nn.Sequential(*mlp, nn.Linear(scale_dims[-2], scale_dims[-1]))

    def forward(self, image: torch.Tensor, num_tokens: int) -> dict[str, torch.Tensor]:
        b, _, h, w = image.shape
        aspect = w / h
        rows, cols = round((num_tokens / aspect) ** 0.5), round((num_tokens * aspect) ** 0.5)
        x = F.interpolate(image, (rows * PATCH, cols * PATCH), mode="bilinear", align_corners=False, antialias=True)
        x = (x - self.encoder.image_mean) / self.encoder.image_std
        feats = self.encoder.backbone.layer_features(x, self.layers)
        top = torch.stack(
            [
                proj(tokens.permute(0, 2, 1).unflatten(2, (rows, cols)).contiguous())
                for proj, (tokens, _) in zip(self.encoder.output_projections, feats)
            ],
            dim=1,
        ).sum(dim=1)
        levels = [_uv_map(b, rows * 2**i, cols * 2**i, aspect, image.device) for i in range(5)]
        levels[0] = torch.cat([top, levels[0]], dim=1)
        neck = self.neck(levels)

        def full(t: torch.Tensor) -> torch.Tensor:
            return bilinear(t, (h, w))

        raw = full(self.points_head(neck)[-1]).permute(0, 2, 3, 1)
        xy, z = raw.split([2, 1], dim=-1)
        z = torch.exp(z)
        out = {
            "points": torch.cat([xy * z, z], dim=-1),
            "mask": full(self.mask_head(neck)[-1]).squeeze(1).sigmoid(),
            "metric_scale": self.scale_head(feats[-1][1]).squeeze(1).exp(),
        }
        if hasattr(self, "normal_head"):
            out["normal"] = F.normalize(full(self.normal_head(neck)[-1]).permute(0, 2, 3, 1), dim=-1)
        return out


# ---------------------------------------------------------------- reading the files


def _from_comfy_names(sd: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """ComfyUI's renamed DINOv2 keys back to Meta's (q, k and v fused again)."""
    renames = {
        "embeddings.patch_embeddings.projection.": "patch_embed.proj.",
        "embeddings.cls_token": "cls_token",
        "embeddings.position_embeddings": "pos_embed",
        "embeddings.mask_token": "mask_token",
        "layernorm.": "norm.",
    }
    parts = {"layer_scale1.lambda1": "ls1.gamma", "layer_scale2.lambda1": "ls2.gamma"}
    parts |= {"attention.output.dense.": "attn.proj.", "mlp.weights_in.": "mlp.w12.", "mlp.weights_out.": "mlp.w3."}
    out: dict[str, torch.Tensor] = {}
    for key, value in sd.items():
        if not key.startswith(BACKBONE):
            out[key] = value
            continue
        rel = key[len(BACKBONE) :]
        if rel.startswith("encoder.layer."):
            index, sub = rel[len("encoder.layer.") :].split(".", 1)
            if sub.startswith("attention.attention."):
                which, tail = sub[len("attention.attention.") :].split(".")
                if which != "query":
                    continue
                base = f"{BACKBONE}encoder.layer.{index}.attention.attention."
                fused = torch.cat([sd[f"{base}{n}.{tail}"] for n in ("query", "key", "value")])
                out[f"{BACKBONE}blocks.{index}.attn.qkv.{tail}"] = fused
                continue
            for old, new in parts.items():
                sub = sub.replace(old, new)
            out[f"{BACKBONE}blocks.{index}.{sub}"] = value
            continue
        for old, new in renames.items():
            if rel.startswith(old):
                rel = new + rel[len(old) :]
                break
        out[BACKBONE + rel] = value
    return out


def _stack_config(sd: dict[str, torch.Tensor], prefix: str) -> StackConfig:
    """A ConvStack's widths from its keys: every level has a 1x1 input projection; outputs and norms may be absent."""

    def indices(sub: str) -> set[int]:
        start = prefix + sub
        return {int(k[len(start) :].split(".")[0]) for k in sd if k.startswith(start)}

    count = 1 + max(indices("input_blocks."))
    shapes = [sd[f"{prefix}input_blocks.{i}.weight"].shape for i in range(count)]
    outs = [sd.get(f"{prefix}output_blocks.{i}.weight") for i in range(count)]
    return StackConfig(
        dim_in=tuple(s[1] for s in shapes),
        dim_res=tuple(s[0] for s in shapes),
        dim_out=tuple(None if o is None else o.shape[0] for o in outs),
        num_res=tuple(len(indices(f"res_blocks.{i}.")) for i in range(count)),
        transposed=tuple(f"{prefix}resamplers.{i}.0.weight" in sd for i in range(count - 1)),
        norms=f"{prefix}res_blocks.0.0.layers.0.weight" in sd,
    )


def moge_version(keys) -> str:
    """ "moge1", "moge2" or "moge3" from a file's keys (ComfyUI's dispatch: no encoder is v1, a refiner is v3)."""
    keys = list(keys)
    if not any(k.startswith(BACKBONE) for k in keys):
        return "moge1"
    return "moge3" if any(k.startswith("refiner.") for k in keys) else "moge2"


def is_moge(keys) -> bool:
    """A MoGe file: a DINOv2 under encoder.backbone. (v2, v3) or backbone. (v1) beside a points head or a v1 head."""
    keys = set(keys)
    has_vit = any(k.startswith(("encoder.backbone.", "backbone.")) and k.endswith("cls_token") for k in keys)
    return has_vit and any(k.startswith(("points_head.", "head.")) for k in keys)


def build_moge(sd: dict[str, torch.Tensor]) -> MoGe2:
    """A MoGe-2 model from its state dict (MoGe's layout or ComfyUI's), float32 on the CPU, in eval mode."""
    if "model" in sd and "model_config" in sd:
        sd = sd["model"]
    version = moge_version(sd)
    if version != "moge2":
        what = "MoGe-1 (a v1 head)" if version == "moge1" else "MoGe-3 (its sparse 3D depth refiner)"
        raise NotImplementedError(f"{what} is not supported yet; MoGe-2 files are")
    if BACKBONE + "embeddings.cls_token" in sd:
        sd = _from_comfy_names(sd)
    dim = sd[BACKBONE + "cls_token"].shape[-1]
    depth = 1 + max(int(k[len(BACKBONE) + 7 :].split(".")[0]) for k in sd if k.startswith(BACKBONE + "blocks."))
    grid = math.isqrt(sd[BACKBONE + "pos_embed"].shape[1] - 1)
    stacks = {name: _stack_config(sd, name + ".") for name in ("neck", "points_head", "mask_head", "normal_head")}
    if not any(k.startswith("normal_head.") for k in sd):
        stacks.pop("normal_head")
    idx = sorted({int(k.split(".")[1]) for k in sd if k.startswith("scale_head.")})
    scale_dims = [sd[f"scale_head.{idx[0]}.weight"].shape[1]] + [sd[f"scale_head.{i}.weight"].shape[0] for i in idx]
    model = MoGe2(
        dim,
        depth,
        grid,
        BACKBONE + "blocks.0.mlp.w12.weight" in sd,
        sd["encoder.output_projections.0.weight"].shape[0],
        stacks,
        scale_dims,
    )
    model.load_state_dict({k: v.float() for k, v in sd.items()}, strict=True)
    return model.eval()


# ---------------------------------------------------------------- inference: focal, shift, projection


def _solve_shift(uv: np.ndarray, xyz: np.ndarray, focal: float | None) -> tuple[float, float]:
    """The depth shift (and, without a given focal, the focal) that best reprojects the points onto their pixels:
    Levenberg-Marquardt from 0, as MoGe does (scipy, ftol 1e-3)."""
    from scipy.optimize import least_squares

    uv, xy, z = uv.reshape(-1, 2), xyz[..., :2].reshape(-1, 2), xyz[..., 2].reshape(-1)

    def residual(shift):
        proj = xy / (z + shift)[:, None]
        f = focal if focal is not None else (proj * uv).sum() / np.square(proj).sum()
        return (f * proj - uv).ravel()

    shift = float(np.asarray(least_squares(residual, x0=0.0, ftol=1e-3, method="lm")["x"]).squeeze())
    if focal is None:
        proj = xy / (z + shift)[:, None]
        focal = float((proj * uv).sum() / np.square(proj).sum())
    return shift, focal


def recover_focal_shift(
    points: torch.Tensor, mask: torch.Tensor, focal: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per image: the focal (relative to half the diagonal) and the depth shift, fitted on a 64x64 nearest sample."""
    b, h, w, _ = points.shape
    uv = view_plane_uv(w, h, w / h)
    pts = F.interpolate(points.permute(0, 3, 1, 2), (64, 64), mode="nearest").permute(0, 2, 3, 1).numpy()
    uv = F.interpolate(uv.permute(2, 0, 1)[None], (64, 64), mode="nearest")[0].permute(1, 2, 0).numpy()
    sel = (F.interpolate(mask.float()[:, None], (64, 64), mode="nearest")[:, 0] > 0).numpy()
    focals, shifts = [], []
    for i in range(b):
        if sel[i].sum() < 2:
            focals.append(1.0)
            shifts.append(0.0)
            continue
        shift, f = _solve_shift(uv[sel[i]], pts[i][sel[i]], None if focal is None else float(focal[i]))
        focals.append(f)
        shifts.append(shift)
    shift_t = torch.tensor(shifts, dtype=points.dtype)
    return (torch.tensor(focals, dtype=points.dtype) if focal is None else focal), shift_t


def intrinsics(fx: torch.Tensor, fy: torch.Tensor, cx: torch.Tensor, cy: torch.Tensor) -> torch.Tensor:
    fx, fy, cx, cy = torch.broadcast_tensors(fx, fy, cx, cy)
    zero, one = torch.zeros_like(fx), torch.ones_like(fx)
    rows = [torch.stack(r, dim=-1) for r in ((fx, zero, cx), (zero, fy, cy), (zero, zero, one))]
    return torch.stack(rows, dim=-2)


def depth_to_points(depth: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """[B, H, W] depth through K^-1 (normalised image coordinates, pixel centres) into [B, H, W, 3] points."""
    h, w = depth.shape[-2:]
    u = (torch.arange(w, dtype=depth.dtype) + 0.5) / w
    v = (torch.arange(h, dtype=depth.dtype) + 0.5) / h
    gv, gu = torch.meshgrid(v, u, indexing="ij")
    pix = torch.stack([gu, gv, torch.ones_like(gu)], dim=-1)
    rays = torch.einsum("...ij,hwj->...hwi", torch.linalg.inv(k), pix)
    return rays * depth.unsqueeze(-1)


@torch.no_grad()
def infer(
    model: MoGe2,
    image: torch.Tensor,
    resolution_level: int = 9,
    fov_x: float | None = None,
    force_projection: bool = True,
    apply_mask: bool = True,
    apply_metric_scale: bool = True,
) -> dict[str, torch.Tensor]:
    """One batch [B, 3, H, W] in 0..1 to points, depth, intrinsics, mask (bool) and normals, as ComfyUI's
    MoGeModel.infer post-processes MoGe-2's outputs."""
    image = image.to(next(model.parameters()).device, torch.float32)
    h, w = image.shape[-2:]
    aspect = w / h
    lo, hi = NUM_TOKENS_RANGE
    out = model(image, num_tokens=int(lo + (resolution_level / 9) * (hi - lo)))
    # the rest on the CPU: the focal fit is scipy's, and the elementwise steps are the same there
    out = {k: v.float().cpu() for k, v in out.items()}
    points, mask = out["points"].float(), out["mask"] > MASK_THRESHOLD
    normal, scale = out.get("normal"), out["metric_scale"]
    diag = (1 + aspect**2) ** 0.5

    def focal_of(degrees: float) -> torch.Tensor:
        return aspect / diag / torch.tan(torch.deg2rad(torch.as_tensor(degrees, dtype=points.dtype) / 2))

    if fov_x is None:
        focal, shift = recover_focal_shift(points, mask)
        bad = ~torch.isfinite(focal) | (focal <= 0)
        if bool(bad.any()):  # the solver flipped the focal's sign: fall back to a 60 degree view
            focal = torch.where(bad, focal_of(60.0), focal)
            _, shift = recover_focal_shift(points, mask, focal)
    else:
        focal = focal_of(fov_x).expand(points.shape[0])
        _, shift = recover_focal_shift(points, mask, focal)
    f_diag = focal / 2 * diag
    half = torch.tensor(0.5, dtype=points.dtype)
    k = intrinsics(f_diag / aspect, f_diag, half, half)
    points[..., 2] = points[..., 2] + shift[..., None, None]
    mask = mask & (points[..., 2] > 0)  # negative depths after the shift are artefacts
    depth = points[..., 2].clone()
    if force_projection:
        points = depth_to_points(depth, k)
    if apply_metric_scale:
        points = points * scale[:, None, None, None]
        depth = depth * scale[:, None, None]
    if apply_mask:
        points = torch.where(mask[..., None], points, torch.full_like(points, float("inf")))
        depth = torch.where(mask, depth, torch.full_like(depth, float("inf")))
        if normal is not None:
            normal = torch.where(mask[..., None], normal, torch.zeros_like(normal))
    result = {"points": points, "depth": depth, "intrinsics": k, "mask": mask}
    if normal is not None:
        result["normal"] = normal.float()
    return result
