"""HunyuanVideo 1.0 diffusion models (diffusion_models/hunyuan_video_t2v_720p_bf16.safetensors and its image-to-video
files): a dual- then single-stream DiT on 16-channel video latents (1/8 of the frame, 1/4 of the frames), fed the
llava-llama3 text states through a token refiner and CLIP-L's pooled vector through `vector_in`.

Detection: ComfyUI 0.3.64's model_detection (`txt_in.individual_token_refiner.blocks.0.norm1.weight`, image_model
"hunyuan_video") with a 3-D patch embedder and a `vector_in` (which tells it from Hunyuan Image 2.1, whose embedder
is 2-D and which has none) and no `vision_in` (HunyuanVideo 1.5's). Its supported_models picks by the input
channels: 16 is HunyuanVideo (text to video, and the "v2 (replace)" image-to-video file, which takes the start
image as clean first-frame tokens modulated at timestep 0), 33 is HunyuanVideoI2V ("v1 (concat)": the start image's
latent and an inverted mask joined after the noise), 32 is SkyReels' image-to-video (the image latent joined).
Sizes as ComfyUI reads them: 128-wide heads, rotary axes 16 + 56 + 56 at theta 256, MLP ratio 4, two refiner
blocks; the `vector_in` width and the guidance embedder from the file.

The network is our own module under the published names (the file loads as is), computing as ComfyUI's
comfy/ldm/hunyuan_video/model.py does on the Flux blocks: diffusers' HunyuanVideoTransformer3DModel differs where it
matters here (it modulates the final layer of a token-replace model's first frame at the step's timestep, and
builds token replacement into the blocks rather than reading it from the conditioning).

`apply` follows model_base.HunyuanVideo: timestep sigma x 1000 (FLOW, shift 7), the conditioning's guidance (6 unless
FluxGuidance sets it, none after FluxDisableGuidance) embedded at 1000x where the file has a guidance embedder,
HunyuanImageToVideo's guiding_frame_index (token replacement) and the I2V models' concat channels.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from cluster.refs import ModelRef
from nodes.arch import latent_format, sampling_config
from nodes.models.components import DiffusionModel
from nodes.models.flux_keys import count_blocks, find_prefix, strip_prefix
from nodes.models.hunyuan_video15 import resize_to_batch, video_upscale
from nodes.models.lora import LoraTargets
from nodes.models.single_file import load_single_file_transformer

MARKER = "txt_in.individual_token_refiner.blocks.0.norm1.weight"
HEAD = 128
AXES = (16, 56, 56)
THETA = 256.0
MLP_RATIO = 4.0
REFINER_BLOCKS = 2
DEFAULT_GUIDANCE = 6.0  # model_base.HunyuanVideo.extra_conds' default


def is_hunyuan_video(shapes: Mapping[str, Any], prefix: str) -> bool:
    """ComfyUI's HunyuanVideo (1.0) rule: a 3-D patch embedder and a vector_in, no vision_in (1.5's)."""
    patch = shapes.get(prefix + "img_in.proj.weight")
    return (
        patch is not None
        and len(patch) == 5
        and any(k.startswith(prefix + "vector_in.") for k in shapes)
        and prefix + "vision_in.proj.0.weight" not in shapes
    )


@dataclass(frozen=True)
class HunyuanVideoConfig:
    in_channels: int
    out_channels: int
    hidden: int
    heads: int
    depth: int
    depth_single: int
    patch: tuple[int, int, int]
    context_dim: int
    vec_in_dim: int
    guidance_embed: bool


def infer_config(sd: Mapping[str, torch.Tensor]) -> dict[str, Any]:
    patch = sd["img_in.proj.weight"]
    if patch.dim() != 5:
        raise ValueError("the patch embedder is not 3-D (a Hunyuan Image 2.1 file?)")
    hidden = int(patch.shape[0])
    if hidden % HEAD:
        raise ValueError(f"width {hidden} is not a multiple of the {HEAD}-wide heads")
    p = tuple(int(s) for s in patch.shape[2:])
    if "time_r_in.mlp.0.weight" in sd or "byt5_in.fc1.weight" in sd:
        raise ValueError("a meanflow or ByT5 HunyuanVideo-family file is not HunyuanVideo 1.0")
    mlp = int(sd["double_blocks.0.img_mlp.fc1.weight"].shape[0])
    if mlp != int(hidden * MLP_RATIO):
        raise ValueError(f"MLP width {mlp} is not {MLP_RATIO:g} x the width {hidden}")
    return {
        "in_channels": int(patch.shape[1]),
        "out_channels": int(sd["final_layer.linear.weight"].shape[0]) // math.prod(p),
        "hidden": hidden,
        "heads": hidden // HEAD,
        "depth": count_blocks(sd, "double_blocks"),
        "depth_single": count_blocks(sd, "single_blocks"),
        "patch": p,
        "context_dim": int(sd["txt_in.input_embedder.weight"].shape[1]),
        "vec_in_dim": int(sd["vector_in.in_layer.weight"].shape[1]),
        "guidance_embed": "guidance_in.mlp.0.weight" in sd,
    }


def timestep_embedding(t: torch.Tensor, dim: int = 256, factor: float = 1.0, period: float = 10000.0) -> torch.Tensor:
    """Flux's sinusoidal embedding (cos then sin) of factor x t."""
    t = factor * t
    half = dim // 2
    freqs = torch.exp(-math.log(period) * torch.arange(half, dtype=torch.float32, device=t.device) / half)
    args = t[:, None].float() * freqs[None]
    return torch.cat([torch.cos(args), torch.sin(args)], dim=-1)


def rope_table(ids: torch.Tensor) -> torch.Tensor:
    """[B, L, D/2, 2, 2] rotations for positions ids [B, L, 3] (Flux's EmbedND over axes 16 + 56 + 56)."""
    out = []
    for i, dim in enumerate(AXES):
        scale = torch.linspace(0, (dim - 2) / dim, steps=dim // 2, dtype=torch.float64, device=ids.device)
        omega = 1.0 / (THETA**scale)
        ang = ids[..., i].to(torch.float64)[..., None] * omega
        cos, sin = torch.cos(ang), torch.sin(ang)
        out.append(torch.stack([cos, -sin, sin, cos], dim=-1).reshape(*ang.shape, 2, 2))
    return torch.cat(out, dim=-3).to(torch.float32)


def apply_rope(x: torch.Tensor, pe: torch.Tensor) -> torch.Tensor:
    """x [B, H, L, D] rotated pairwise by pe [B, 1, L, D/2, 2, 2]."""
    x_ = x.float().reshape(*x.shape[:-1], -1, 1, 2)
    out = pe[..., 0] * x_[..., 0] + pe[..., 1] * x_[..., 1]
    return out.reshape(*x.shape).type_as(x)


def attention(q, k, v, pe, mask):
    if pe is not None:
        q, k = apply_rope(q, pe), apply_rope(k, pe)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    return out.transpose(1, 2).reshape(out.shape[0], out.shape[2], -1)


def split_heads(qkv: torch.Tensor, heads: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return qkv.view(qkv.shape[0], qkv.shape[1], 3, heads, -1).permute(2, 0, 3, 1, 4)


def modulate(x: torch.Tensor, mult: torch.Tensor, add: torch.Tensor | None, dims) -> torch.Tensor:
    """Flux's apply_mod: mult/add [B, 1 or 2, D]; with `dims`, token ranges take their own row."""
    if dims is None:
        return x * mult if add is None else torch.addcmul(add, x, mult)
    x = x.clone()
    for start, end, row in dims:
        x[:, start:end] *= mult[:, row : row + 1]
        if add is not None:
            x[:, start:end] += add[:, row : row + 1]
    return x


class HunyuanRMSNorm(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return F.rms_norm(x, (x.shape[-1],), self.weight, 1e-6)


class Linear2(nn.Module):
    """`linear` under a module (the published `img_mod.linear`, `modulation.linear`)."""

    def __init__(self, i: int, o: int):
        super().__init__()
        self.linear = nn.Linear(i, o)

    def forward(self, x):
        return self.linear(F.silu(x))


class MLP(nn.Module):
    def __init__(self, dim: int, hidden: int, act: nn.Module):
        super().__init__()
        self.fc1, self.act, self.fc2 = nn.Linear(dim, hidden), act, nn.Linear(hidden, dim)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


class HunyuanEmbedder(nn.Module):
    """`mlp.0` / `mlp.2` (time_in, guidance_in, the refiner's t_embedder) or in_layer / out_layer (vector_in)."""

    def __init__(self, i: int, o: int):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(i, o), nn.SiLU(), nn.Linear(o, o))

    def forward(self, x):
        return self.mlp(x)


class VectorIn(nn.Module):
    def __init__(self, i: int, o: int):
        super().__init__()
        self.in_layer, self.out_layer = nn.Linear(i, o), nn.Linear(o, o)

    def forward(self, x):
        return self.out_layer(F.silu(self.in_layer(x)))


class CEmbedder(nn.Module):
    def __init__(self, i: int, o: int):
        super().__init__()
        self.linear_1, self.linear_2 = nn.Linear(i, o), nn.Linear(o, o)

    def forward(self, x):
        return self.linear_2(F.silu(self.linear_1(x)))


class RefinerBlock(nn.Module):
    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(dim, eps=1e-6)
        self.self_attn_qkv = nn.Linear(dim, 3 * dim)
        self.self_attn_proj = nn.Linear(dim, dim)
        self.norm2 = nn.LayerNorm(dim, eps=1e-6)
        self.mlp = MLP(dim, int(dim * MLP_RATIO), nn.SiLU())
        self.adaLN_modulation = nn.Sequential(nn.SiLU(), nn.Linear(dim, 2 * dim))

    def forward(self, x, c, mask):
        gate1, gate2 = self.adaLN_modulation(c).chunk(2, dim=1)
        q, k, v = split_heads(self.self_attn_qkv(self.norm1(x)), self.heads)
        x = x + self.self_attn_proj(attention(q, k, v, None, mask)) * gate1.unsqueeze(1)
        return x + self.mlp(self.norm2(x)) * gate2.unsqueeze(1)


class IndividualRefiner(nn.Module):
    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.blocks = nn.ModuleList([RefinerBlock(dim, heads) for _ in range(REFINER_BLOCKS)])


class TokenRefiner(nn.Module):
    def __init__(self, text_dim: int, dim: int, heads: int):
        super().__init__()
        self.input_embedder = nn.Linear(text_dim, dim)
        self.t_embedder = HunyuanEmbedder(256, dim)
        self.c_embedder = CEmbedder(text_dim, dim)
        self.individual_token_refiner = IndividualRefiner(dim, heads)

    def forward(self, x, timesteps, mask):
        t = self.t_embedder(timestep_embedding(timesteps).to(x.dtype))
        c = t + self.c_embedder(x.sum(dim=1) / x.shape[1])  # ComfyUI: the unmasked mean of the tokens
        x = self.input_embedder(x)
        m = None
        if mask is not None:  # additive [B, 1, L, L]: a masked token's row and column
            m = mask.view(mask.shape[0], 1, 1, mask.shape[1]).repeat(1, 1, mask.shape[1], 1)
            m = m + m.transpose(2, 3)
        for block in self.individual_token_refiner.blocks:
            x = block(x, c, m)
        return x


class DoubleBlock(nn.Module):
    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads = heads
        mlp = int(dim * MLP_RATIO)
        for side in ("img", "txt"):
            setattr(self, f"{side}_mod", Linear2(dim, 6 * dim))
            setattr(self, f"{side}_attn_qkv", nn.Linear(dim, 3 * dim))
            setattr(self, f"{side}_attn_q_norm", HunyuanRMSNorm(dim // heads))
            setattr(self, f"{side}_attn_k_norm", HunyuanRMSNorm(dim // heads))
            setattr(self, f"{side}_attn_proj", nn.Linear(dim, dim))
            setattr(self, f"{side}_mlp", MLP(dim, mlp, nn.GELU(approximate="tanh")))

    def _side(self, name, x, vec, dims):
        mods = getattr(self, f"{name}_mod")(vec).chunk(6, dim=-1)
        h = modulate(F.layer_norm(x, (x.shape[-1],), eps=1e-6), 1 + mods[1], mods[0], dims)
        q, k, v = split_heads(getattr(self, f"{name}_attn_qkv")(h), self.heads)
        q = getattr(self, f"{name}_attn_q_norm")(q).to(v)
        k = getattr(self, f"{name}_attn_k_norm")(k).to(v)
        return mods, q, k, v

    def _finish(self, name, x, attn, mods, dims):
        x = x + modulate(getattr(self, f"{name}_attn_proj")(attn), mods[2], None, dims)
        h = modulate(F.layer_norm(x, (x.shape[-1],), eps=1e-6), 1 + mods[4], mods[3], dims)
        return x + modulate(getattr(self, f"{name}_mlp")(h), mods[5], None, dims)

    def forward(self, img, txt, vec, pe, mask, dims_img, dims_txt):
        img_mods, iq, ik, iv = self._side("img", img, vec, dims_img)
        txt_mods, tq, tk, tv = self._side("txt", txt, vec, dims_txt)
        attn = attention(torch.cat((iq, tq), 2), torch.cat((ik, tk), 2), torch.cat((iv, tv), 2), pe, mask)
        n = img.shape[1]
        img = self._finish("img", img, attn[:, :n], img_mods, dims_img)
        txt = self._finish("txt", txt, attn[:, n:], txt_mods, dims_txt)
        return img, txt


class SingleBlock(nn.Module):
    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads, self.dim, self.mlp_dim = heads, dim, int(dim * MLP_RATIO)
        self.linear1 = nn.Linear(dim, 3 * dim + self.mlp_dim)
        self.linear2 = nn.Linear(dim + self.mlp_dim, dim)
        self.q_norm, self.k_norm = HunyuanRMSNorm(dim // heads), HunyuanRMSNorm(dim // heads)
        self.modulation = Linear2(dim, 3 * dim)

    def forward(self, x, vec, pe, mask, dims):
        shift, scale, gate = self.modulation(vec).chunk(3, dim=-1)
        h = self.linear1(modulate(F.layer_norm(x, (x.shape[-1],), eps=1e-6), 1 + scale, shift, dims))
        qkv, mlp = torch.split(h, [3 * self.dim, self.mlp_dim], dim=-1)
        q, k, v = split_heads(qkv, self.heads)
        q, k = self.q_norm(q).to(v), self.k_norm(k).to(v)
        attn = attention(q, k, v, pe, mask)
        out = self.linear2(torch.cat((attn, F.gelu(mlp, approximate="tanh")), 2))
        return x + modulate(out, gate, None, dims)


class HunyuanFinalLayer(nn.Module):
    def __init__(self, dim: int, out: int):
        super().__init__()
        self.linear = nn.Linear(dim, out)
        self.adaLN_modulation = nn.Sequential(nn.SiLU(), nn.Linear(dim, 2 * dim))

    def forward(self, x, vec, dims):
        shift, scale = self.adaLN_modulation(vec).chunk(2, dim=-1)
        return self.linear(modulate(F.layer_norm(x, (x.shape[-1],), eps=1e-6), 1 + scale, shift, dims))


class HunyuanPatchEmbed(nn.Module):
    def __init__(self, c: int, dim: int, patch: tuple[int, int, int]):
        super().__init__()
        self.proj = nn.Conv3d(c, dim, kernel_size=patch, stride=patch)

    def forward(self, x):
        return self.proj(x).flatten(2).transpose(1, 2)


class HunyuanVideoNetwork(nn.Module):
    def __init__(self, config: HunyuanVideoConfig):
        super().__init__()
        c = self.config = config
        self.img_in = HunyuanPatchEmbed(c.in_channels, c.hidden, c.patch)
        self.time_in = HunyuanEmbedder(256, c.hidden)
        self.vector_in = VectorIn(c.vec_in_dim, c.hidden)
        if c.guidance_embed:
            self.guidance_in = HunyuanEmbedder(256, c.hidden)
        self.txt_in = TokenRefiner(c.context_dim, c.hidden, c.heads)
        self.double_blocks = nn.ModuleList([DoubleBlock(c.hidden, c.heads) for _ in range(c.depth)])
        self.single_blocks = nn.ModuleList([SingleBlock(c.hidden, c.heads) for _ in range(c.depth_single)])
        self.final_layer = HunyuanFinalLayer(c.hidden, math.prod(c.patch) * c.out_channels)

    @staticmethod
    def positions(t: int, h: int, w: int, b: int, device) -> torch.Tensor:
        grid = torch.stack(
            torch.meshgrid(torch.arange(t), torch.arange(h), torch.arange(w), indexing="ij"), dim=-1
        ).reshape(1, -1, 3)
        return grid.to(device=device, dtype=torch.float32).expand(b, -1, -1)

    def forward(
        self,
        x: torch.Tensor,
        timesteps: torch.Tensor,
        context: torch.Tensor,
        y: torch.Tensor,
        guidance: torch.Tensor | None = None,
        txt_mask: torch.Tensor | None = None,
        guiding_frame_index: torch.Tensor | None = None,
        ref_latent: torch.Tensor | None = None,
    ) -> torch.Tensor:
        c = self.config
        b, _, t, h, w = x.shape
        pt, ph, pw = c.patch
        if t % pt or h % ph or w % pw:
            raise ValueError(f"the latent's size {t}x{h}x{w} is not a multiple of the patch {c.patch}")
        gt, gh, gw = t // pt, h // ph, w // pw
        img = self.img_in(x)
        img_ids = self.positions(gt, gh, gw, b, x.device)
        vec = self.time_in(timestep_embedding(timesteps).to(img.dtype))
        if ref_latent is not None:  # HunyuanImageToVideo "custom": the reference's tokens before the video's
            rt, rh, rw = (s // p for s, p in zip(ref_latent.shape[2:], c.patch, strict=True))
            ref_ids = self.positions(rt, rh, rw, b, x.device).clone()
            ref_ids[..., 0] = -1
            ref_ids[..., 2] += gw
            img = torch.cat([self.img_in(ref_latent), img], dim=1)
            img_ids = torch.cat([ref_ids, img_ids], dim=1)
        vec_y = self.vector_in(y[:, : c.vec_in_dim])
        if guiding_frame_index is not None:  # token replacement: the first frame's tokens at its own timestep
            replace = self.time_in(timestep_embedding(guiding_frame_index))
            vec = torch.stack([vec_y + replace, vec_y + vec], dim=1)
            frame = gh * gw
            dims, dims_txt = [(0, frame, 0), (frame, None, 1)], [(0, None, 1)]
        else:
            vec = (vec + vec_y)[:, None]
            dims = dims_txt = None
        if c.guidance_embed and guidance is not None:
            vec = vec + self.guidance_in(timestep_embedding(guidance, factor=1000.0).to(img.dtype))[:, None]
        if txt_mask is not None and not torch.is_floating_point(txt_mask):
            txt_mask = (txt_mask - 1).to(img.dtype) * torch.finfo(img.dtype).max
        txt = self.txt_in(context, timesteps, txt_mask)
        txt_ids = torch.zeros(b, txt.shape[1], 3, device=x.device)
        pe = rope_table(torch.cat([img_ids, txt_ids], dim=1)).unsqueeze(1)
        n = img.shape[1]
        mask = None
        if txt_mask is not None:
            mask = torch.zeros(txt_mask.shape[0], 1, 1, n + txt.shape[1], dtype=img.dtype, device=x.device)
            mask[:, 0, 0, n:] = txt_mask
        for block in self.double_blocks:
            img, txt = block(img, txt, vec, pe, mask, dims, dims_txt)
        joined = torch.cat((img, txt), 1)
        for block in self.single_blocks:
            joined = block(joined, vec, pe, mask, dims)
        img = joined[:, :n]
        if ref_latent is not None:
            img = img[:, n - gt * gh * gw :]
        img = self.final_layer(img, vec, dims)
        img = img.reshape(b, gt, gh, gw, c.out_channels, pt, ph, pw).permute(0, 4, 1, 5, 2, 6, 3, 7)
        return img.reshape(b, c.out_channels, t, h, w)


def layout(state_dict: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The file's tensors in its published names, unprefixed (bare or under `model.diffusion_model.`)."""
    prefix = find_prefix(state_dict.keys(), MARKER)
    if prefix is None:
        raise ValueError(f"not a HunyuanVideo state dict (no {MARKER})")
    sd = strip_prefix(state_dict, prefix)
    if "double_blocks.0.img_attn.qkv.weight" in sd:
        raise ValueError("the file is in ComfyUI's internal names (img_attn.qkv), not the published layout")
    return sd


def lora_targets(sd: Mapping[str, torch.Tensor]) -> LoraTargets:
    targets = LoraTargets(("diffusion_model.",) + tuple(sorted({k.split(".")[0] + "." for k in sd})), {})
    for key, value in sd.items():
        if key.endswith(".weight") and value.dim() == 2:
            name = key[: -len(".weight")]
            targets.add(key, name, "diffusion_model." + name)
    return targets


def _batched(t: torch.Tensor, b: int) -> torch.Tensor:
    return t.expand(b, *t.shape[1:]) if t.shape[0] == 1 and b > 1 else t


@dataclass
class HunyuanVideoDiffusionModel(DiffusionModel):
    def apply(self, x: torch.Tensor, timestep: torch.Tensor, cond: dict[str, Any]) -> torch.Tensor:
        for key, what in (("control", "ControlNets"), ("ref_latents", "reference latents (ReferenceLatent)")):
            if cond.get(key):
                raise NotImplementedError(f"{what} are not supported for HunyuanVideo models")
        if x.dim() != 5:
            raise ValueError(f"HunyuanVideo takes [B,16,T,H,W] latents; this one is {tuple(x.shape)}")
        joined = cond.get("concat")
        if joined is None:
            joined = self.concat_image(cond.get("concat_latent_image"), x, cond.get("concat_mask"))
        hidden = x if joined is None else torch.cat([x, joined.to(x.device, x.dtype)], dim=1)
        return self.network(hidden, timestep, cond)

    def concat_image(
        self, image: torch.Tensor | None, x: torch.Tensor, mask: torch.Tensor | None = None, mask_index: int = 0
    ) -> torch.Tensor | None:
        """ComfyUI 0.3.64's BaseModel.concat_cond for HunyuanVideoI2V (concat_keys concat_image, mask_inverted: the
        image latent process_latent_in'd, resized and padded or cut to the noise's frames, then 1 - the rounded
        mask, zeros without one) or SkyReels' (the image latent alone); None for the 16-channel models."""
        extra = self.module.config.in_channels - x.shape[1]
        if extra <= 0:
            return None
        fmt = self.latent_format.process_in
        if image is None:  # ComfyUI joins the sampled latent (an empty latent's zeros) where no image was given
            image = torch.zeros_like(x)
        else:
            image = fmt(image.float().to(x.device))
            if image.shape[1:] != x.shape[1:]:
                image = video_upscale(image, x.shape[-1], x.shape[-2])
                if image.shape[-3] < x.shape[-3]:
                    image = F.pad(image, (0, 0, 0, 0, 0, x.shape[-3] - image.shape[-3]))
                image = image[:, :, : x.shape[-3]]
            image = resize_to_batch(image, x.shape[0])
        if extra == x.shape[1]:  # SkyReels: the image latent only
            return image
        if mask is None:
            inverted = torch.zeros_like(x[:, :1])
        else:
            mask = mask.float().to(x.device)
            mask = mask[:, :1] if mask.dim() == x.dim() else mask
            mask = mask.reshape(-1, 1, *mask.shape[-3:])
            if mask.shape[-2:] != x.shape[-2:]:
                mask = video_upscale(mask, x.shape[-1], x.shape[-2])
            inverted = 1.0 - resize_to_batch(mask.round(), x.shape[0])
        return torch.cat([image, inverted], dim=1)

    def inpaint_latent(self, ms, sigma, noise, latent_image):
        """model_base.HunyuanVideo.scale_latent_inpaint: the kept frames are the clean latent, not noised."""
        return latent_image

    def network(self, x: torch.Tensor, timestep: torch.Tensor, cond: dict[str, Any]) -> torch.Tensor:
        module = self.module
        b = x.shape[0]
        context = _batched(cond["context"].to(x.device, self.dtype), b)
        pooled = cond.get("pooled")
        if pooled is None:
            raise ValueError("HunyuanVideo needs CLIP-L's pooled output in the conditioning (a hunyuan_video CLIP)")
        y = _batched(pooled.to(x.device, self.dtype), b)
        mask = cond.get("attention_mask")
        if mask is not None:
            mask = _batched(mask.to(x.device).reshape(-1, context.shape[1]), b)
        t = torch.as_tensor(timestep, dtype=torch.float32, device=x.device).reshape(-1)
        t = t.expand(b) if t.numel() == 1 else t
        guidance = None
        if module.config.guidance_embed and not cond.get("guidance_disabled"):
            g = cond.get("guidance")
            guidance = torch.full((b,), DEFAULT_GUIDANCE if g is None else float(g), device=x.device)
        index = cond.get("guiding_frame_index")
        if index is not None:
            index = torch.full((b,), float(index), device=x.device)
        ref = cond.get("ref_latent")
        if ref is not None:
            ref = _batched(ref.to(x.device, self.dtype), b)
        out = module(x.to(self.dtype), t, context, y, guidance, mask, index, ref)
        return out.float()


def load_diffusion_model(ref: ModelRef, state_dict: Mapping[str, torch.Tensor]) -> HunyuanVideoDiffusionModel:
    """A HunyuanVideo 1.0 DiffusionModel (text-to-video or image-to-video) from its published file."""
    module, config = load_single_file_transformer(
        ref,
        state_dict,
        what="HunyuanVideo transformer",
        layout=layout,
        lora_targets=lora_targets,
        convert=dict,
        infer_config=infer_config,
        model_class=lambda **c: HunyuanVideoNetwork(HunyuanVideoConfig(**c)),
    )
    return HunyuanVideoDiffusionModel(
        arch="hunyuan_video",
        module=module,
        latent_format=latent_format("hunyuan_video"),
        sampling=dict(sampling_config("hunyuan_video")),
        config=config,
        dtype=next(module.parameters()).dtype,
    )


# The loader (nodes.models.loader) finds the text encoders' entry point on this module too.
from nodes.models.hunyuan_video_text import load_text_encoder  # noqa: E402, F401
