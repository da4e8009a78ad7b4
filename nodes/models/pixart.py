"""PixArt-α and PixArt-Σ DiTs in their authors' single-file layout (PixArt-alpha/PixArt-sigma releases, the names
ComfyUI 0.3.64's comfy/ldm/pixart/pixartms.py loads: `x_embedder.proj`, `t_embedder.mlp`, `t_block.1`,
`y_embedder.y_proj`, `blocks.N.{attn.qkv, cross_attn.q_linear/kv_linear, mlp.fc1}`, `final_layer`), bare or under
`model.diffusion_model.`, or diffusers' PixArtTransformer2DModel names (the Hugging Face repos' transformer/ folder,
renamed as ComfyUI's pixart_to_diffusers pairs them); PixArt-α's also carry the size and aspect-ratio embedders (`csize_embedder`,
`ar_embedder`), which is how ComfyUI's model_detection tells the two apart.

Our own module, as the network is small and ComfyUI's behaviour is the reference: 72-wide attention heads (ComfyUI's
16 heads at the released width 1152), the sinusoidal positions computed for every latent size from its mean side
(or, when the file stores its `pos_embed`, at the interpolation its training size implies, as ComfyUI guesses it),
the text states projected and attended per sample, the learned-variance half of the output dropped. PixArt-α reads
the image size and aspect ratio (CLIPTextEncodePixArtAlpha's width and height, else the latent's). Sampling is
ComfyUI's: discrete eps with betas linear from 1e-4 to 0.02; latents are SD1's (α) or SDXL's (Σ)."""

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
from nodes.models.errors import ModelLoadError
from nodes.models.lora import LoraTargets, lora_modules, merge_loras
from nodes.models.safetensors_io import load_state_dict

MARKER = "t_block.1.weight"  # ComfyUI's model_detection rule for PixArt
ALPHA_MARKER = "ar_embedder.mlp.0.weight"  # only PixArt-α has micro-conditions
PREFIXES = ("model.diffusion_model.", "")
HEAD_WIDTH = 72  # ComfyUI builds 16 heads for the 1152-wide release
FREQUENCIES = 256


DIFFUSERS_MARKERS = ("adaln_single.emb.timestep_embedder.linear_1.bias", "pos_embed.proj.bias")  # ComfyUI's rule
# diffusers' PixArtTransformer2DModel names -> the authors' (what ComfyUI's pixart_to_diffusers pairs); q/k/v joined
_RENAMES = {
    "pos_embed.proj.": "x_embedder.proj.",
    "adaln_single.emb.timestep_embedder.linear_1.": "t_embedder.mlp.0.",
    "adaln_single.emb.timestep_embedder.linear_2.": "t_embedder.mlp.2.",
    "adaln_single.emb.resolution_embedder.linear_1.": "csize_embedder.mlp.0.",
    "adaln_single.emb.resolution_embedder.linear_2.": "csize_embedder.mlp.2.",
    "adaln_single.emb.aspect_ratio_embedder.linear_1.": "ar_embedder.mlp.0.",
    "adaln_single.emb.aspect_ratio_embedder.linear_2.": "ar_embedder.mlp.2.",
    "adaln_single.linear.": "t_block.1.",
    "caption_projection.linear_1.": "y_embedder.y_proj.fc1.",
    "caption_projection.linear_2.": "y_embedder.y_proj.fc2.",
    "proj_out.": "final_layer.linear.",
    "scale_shift_table": "final_layer.scale_shift_table",
}
_BLOCK_RENAMES = {
    "scale_shift_table": "scale_shift_table",
    "attn1.to_out.0.": "attn.proj.",
    "attn2.to_q.": "cross_attn.q_linear.",
    "attn2.to_out.0.": "cross_attn.proj.",
    "ff.net.0.proj.": "mlp.fc1.",
    "ff.net.2.": "mlp.fc2.",
}
_JOINED = {
    ("attn1.to_q.", "attn1.to_k.", "attn1.to_v."): "attn.qkv.",
    ("attn2.to_k.", "attn2.to_v."): "cross_attn.kv_linear.",
}
# the prefixes of LoRAs in diffusers' names (ComfyUI's lora.py: the default, diffusers' and the old peft scripts')
DIFFUSERS_LORA_PREFIXES = ("transformer.", "base_model.model.", "unet.base_model.model.")


def to_diffusers(sd: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The authors' names back to diffusers' (q/k/v split), for LoRAs trained on diffusers' module."""
    renames = {v: k for k, v in _RENAMES.items()}
    block_renames = {v: k for k, v in _BLOCK_RENAMES.items()}
    out: dict[str, torch.Tensor] = {}
    for key, value in sd.items():
        if not key.startswith("blocks."):
            out[next(v + key[len(k) :] for k, v in renames.items() if key.startswith(k))] = value
            continue
        _, n, rest = key.split(".", 2)
        joined = next(((parts, j) for parts, j in _JOINED.items() if rest.startswith(j)), None)
        if joined is None:
            out[
                f"transformer_blocks.{n}."
                + next(v + rest[len(k) :] for k, v in block_renames.items() if rest.startswith(k))
            ] = value
            continue
        parts, j = joined
        for part, chunk in zip(parts, value.chunk(len(parts))):
            out[f"transformer_blocks.{n}.{part}{rest[len(j) :]}"] = chunk
    return out


def _targets(sd: Mapping[str, torch.Tensor], family: tuple[str, ...], aliases) -> LoraTargets:
    targets = LoraTargets(family, {})
    for key, value in sd.items():
        if key.endswith(".weight") and value.dim() >= 2:
            targets.add(key, *aliases(key[: -len(".weight")]))
    return targets


def merge_pixart_loras(patches, sd: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """LoRAs merged as ComfyUI's lora.py addresses PixArt's layers: its own names (`lora_unet_blocks_0_attn_qkv`,
    `diffusion_model.blocks.0.attn.qkv`) or diffusers' (`transformer.` / `base_model.model.` /
    `unet.base_model.model.` + `transformer_blocks.0.attn1.to_q`, a third of the joined qkv)."""
    for patch in patches:
        names = lora_modules(load_state_dict(patch.path, patch.digest), patch.path)
        if any(n.startswith(DIFFUSERS_LORA_PREFIXES) for n in names):
            dsd = to_diffusers(sd)
            targets = _targets(dsd, DIFFUSERS_LORA_PREFIXES, lambda base: [p + base for p in DIFFUSERS_LORA_PREFIXES])
            sd = from_diffusers(merge_loras((patch,), targets, dsd)[0])
        else:
            native = ("lora_unet_", "diffusion_model.")
            targets = _targets(
                sd, native, lambda base: ["lora_unet_" + base.replace(".", "_"), "diffusion_model." + base]
            )
            sd = merge_loras((patch,), targets, sd)[0]
    return sd


def find_pixart_prefix(keys) -> str | None:
    keys = set(keys)
    return next((p for p in PREFIXES if p + MARKER in keys), None)


def is_diffusers_pixart(keys) -> bool:
    keys = set(keys)
    return all(m in keys for m in DIFFUSERS_MARKERS)


def from_diffusers(sd: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """A diffusers-layout PixArt transformer (the Hugging Face repos' transformer/ folder) in the authors' names."""
    out: dict[str, torch.Tensor] = {}
    for key, value in sd.items():
        if key.startswith("transformer_blocks."):
            _, n, rest = key.split(".", 2)
            new = next((v + rest[len(k) :] for k, v in _BLOCK_RENAMES.items() if rest.startswith(k)), None)
            if new is not None:
                out[f"blocks.{n}.{new}"] = value
            elif not any(rest.startswith(p) for parts in _JOINED for p in parts):
                raise ValueError(f"unexpected diffusers PixArt tensor {key}")
            continue
        new = next((v + key[len(k) :] for k, v in _RENAMES.items() if key.startswith(k)), None)
        if new is None:
            raise ValueError(f"unexpected diffusers PixArt tensor {key}")
        out[new] = value
    for n in {k.split(".")[1] for k in sd if k.startswith("transformer_blocks.")}:
        for parts, joined in _JOINED.items():
            for suffix in ("weight", "bias"):
                out[f"blocks.{n}.{joined}{suffix}"] = torch.cat(
                    [sd[f"transformer_blocks.{n}.{p}{suffix}"] for p in parts]
                )
    return out


def sinusoid(t: torch.Tensor, dim: int = FREQUENCIES) -> torch.Tensor:
    """Cosines then sines of t at geometric frequencies (ldm's timestep embedding)."""
    half = dim // 2
    freqs = torch.exp(-math.log(10000) * torch.arange(half, dtype=torch.float32, device=t.device) / half)
    args = t[:, None].float() * freqs[None]
    return torch.cat([torch.cos(args), torch.sin(args)], dim=-1)


def positions(width: int, h: int, w: int, interpolation: float, base: int, dtype: torch.dtype, device) -> torch.Tensor:
    """2-D sin/cos positions [h*w, width]: the column's half first, then the row's."""
    rows = torch.arange(h, dtype=dtype, device=device) / (h / base) / interpolation
    cols = torch.arange(w, dtype=dtype, device=device) / (w / base) / interpolation
    grid_h, grid_w = torch.meshgrid(rows, cols, indexing="ij")

    def axis(pos: torch.Tensor) -> torch.Tensor:
        omega = torch.arange(width // 4, dtype=dtype, device=device) / (width / 4.0)
        out = pos.reshape(-1)[:, None] * (1.0 / 10000**omega)[None]
        return torch.cat([torch.sin(out), torch.cos(out)], dim=1)

    return torch.cat([axis(grid_w), axis(grid_h)], dim=1)


class TwoLayer(nn.Module):
    """Linear, activation, Linear as `mlp.0` / `mlp.2` (the timestep and size embedders)."""

    def __init__(self, n_in: int, width: int) -> None:
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(n_in, width), nn.SiLU(), nn.Linear(width, width))


class PixArtMlp(nn.Module):
    def __init__(self, n_in: int, hidden: int, n_out: int) -> None:
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(n_in, hidden), nn.Linear(hidden, n_out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(F.gelu(self.fc1(x), approximate="tanh"))


class SelfAttention(nn.Module):
    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.qkv, self.proj = nn.Linear(width, 3 * width), nn.Linear(width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, c = x.shape
        q, k, v = self.qkv(x).reshape(b, n, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        out = F.scaled_dot_product_attention(q, k, v)
        return self.proj(out.transpose(1, 2).reshape(b, n, c))


class CrossAttention(nn.Module):
    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.q_linear, self.kv_linear, self.proj = (
            nn.Linear(width, width),
            nn.Linear(width, 2 * width),
            nn.Linear(width, width),
        )

    def forward(self, x: torch.Tensor, context: torch.Tensor) -> torch.Tensor:
        b, n, c = x.shape
        d = c // self.heads
        q = self.q_linear(x).reshape(b, n, self.heads, d).transpose(1, 2)
        k, v = self.kv_linear(context).reshape(b, -1, 2, self.heads, d).permute(2, 0, 3, 1, 4)
        out = F.scaled_dot_product_attention(q, k, v)
        return self.proj(out.transpose(1, 2).reshape(b, n, c))


def modulate(x: torch.Tensor, shift: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    return x * (1 + scale) + shift


class PixArtBlock(nn.Module):
    def __init__(self, width: int, heads: int, mlp_width: int) -> None:
        super().__init__()
        self.attn, self.cross_attn = SelfAttention(width, heads), CrossAttention(width, heads)
        self.mlp = PixArtMlp(width, mlp_width, width)
        self.scale_shift_table = nn.Parameter(torch.zeros(6, width))

    def forward(self, x: torch.Tensor, context: torch.Tensor, t6: torch.Tensor) -> torch.Tensor:
        mods = (self.scale_shift_table[None].to(x.dtype) + t6.reshape(x.shape[0], 6, -1)).chunk(6, dim=1)
        shift_msa, scale_msa, gate_msa, shift_mlp, scale_mlp, gate_mlp = mods
        norm = F.layer_norm(x, x.shape[-1:], eps=1e-6)
        x = x + gate_msa * self.attn(modulate(norm, shift_msa, scale_msa))
        x = x + self.cross_attn(x, context)
        norm = F.layer_norm(x, x.shape[-1:], eps=1e-6)
        return x + gate_mlp * self.mlp(modulate(norm, shift_mlp, scale_mlp))


class FinalLayer(nn.Module):
    def __init__(self, width: int, out: int) -> None:
        super().__init__()
        self.linear = nn.Linear(width, out)
        self.scale_shift_table = nn.Parameter(torch.zeros(2, width))

    def forward(self, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        shift, scale = (self.scale_shift_table[None].to(x.dtype) + t[:, None]).chunk(2, dim=1)
        return self.linear(modulate(F.layer_norm(x, x.shape[-1:], eps=1e-6), shift, scale))


class CaptionProjection(nn.Module):
    def __init__(self, n_in: int, width: int) -> None:
        super().__init__()
        self.y_proj = PixArtMlp(n_in, width, width)


class PixArtNet(nn.Module):
    def __init__(self, cfg: dict[str, Any]) -> None:
        super().__init__()
        width, patch, c = cfg["width"], cfg["patch"], cfg["in_channels"]
        self.cfg = cfg
        self.x_embedder = nn.Module()
        self.x_embedder.proj = nn.Conv2d(c, width, patch, stride=patch)
        self.t_embedder = TwoLayer(FREQUENCIES, width)
        self.t_block = nn.Sequential(nn.SiLU(), nn.Linear(width, 6 * width))
        self.y_embedder = CaptionProjection(cfg["caption_channels"], width)
        if cfg["micro_condition"]:
            self.csize_embedder = TwoLayer(FREQUENCIES, width // 3)
            self.ar_embedder = TwoLayer(FREQUENCIES, width // 3)
        heads = width // HEAD_WIDTH
        self.blocks = nn.ModuleList(PixArtBlock(width, heads, cfg["mlp_width"]) for _ in range(cfg["depth"]))
        self.final_layer = FinalLayer(width, patch * patch * cfg["out_channels"])

    def _sizes(self, embedder: TwoLayer, s: torch.Tensor) -> torch.Tensor:
        b, n = s.shape
        return embedder.mlp(sinusoid(s.reshape(-1)).to(s.dtype)).reshape(b, -1)

    def forward(self, x, timestep, context, c_size=None, c_ar=None) -> torch.Tensor:
        b, _, h, w = x.shape
        cfg, p = self.cfg, self.cfg["patch"]
        side = (h + w) // 2
        if round(side / 64) == 0:  # ComfyUI's position scale is then a division by zero
            raise ValueError(f"PixArt needs a latent whose mean side is at least 33 (256 px); got {h}x{w}")
        interpolation = cfg["pe_interpolation"]
        if interpolation is None:  # ComfyUI's guess: the mean side over 512 px
            interpolation = round(side / (512 / 8.0))
        pos = positions(cfg["width"], h // p, w // p, interpolation, (round(side / 64) * 64) // p, x.dtype, x.device)
        tokens = self.x_embedder.proj(x).flatten(2).transpose(1, 2) + pos[None]
        t = self.t_embedder.mlp(sinusoid(timestep).to(x.dtype))
        if cfg["micro_condition"]:
            t = t + torch.cat([self._sizes(self.csize_embedder, c_size), self._sizes(self.ar_embedder, c_ar)], dim=1)
        t6 = self.t_block(t)
        context = self.y_embedder.y_proj(context)
        for block in self.blocks:
            tokens = block(tokens, context, t6)
        out = self.final_layer(tokens, t)
        c = cfg["out_channels"]
        out = out.reshape(b, h // p, w // p, p, p, c).permute(0, 5, 1, 3, 2, 4).reshape(b, c, h, w)
        return out[:, : cfg["in_channels"]]  # the learned variance is not used


def infer_config(sd: Mapping[str, torch.Tensor], path: str | None) -> dict[str, Any]:
    width, c, patch, _ = sd["x_embedder.proj.weight"].shape
    if width % HEAD_WIDTH:
        raise ModelLoadError(path, f"PixArt's width {width} is not a whole number of {HEAD_WIDTH}-wide heads")
    pos = sd.get("pos_embed")
    # ComfyUI: a stored table fixes the interpolation at its training size / 512 px, else it follows each image
    trained = int(math.sqrt(pos.shape[1])) * patch if pos is not None else None
    return {
        "width": width,
        "in_channels": c,
        "patch": patch,
        "depth": len({k.split(".")[1] for k in sd if k.startswith("blocks.")}),
        "mlp_width": sd["blocks.0.mlp.fc1.weight"].shape[0],
        "caption_channels": sd["y_embedder.y_proj.fc1.weight"].shape[1],
        "out_channels": sd["final_layer.linear.weight"].shape[0] // (patch * patch),
        "micro_condition": ALPHA_MARKER in sd,
        "pe_interpolation": trained // (512 // 8) if trained is not None else None,
    }


@dataclass
class PixArtDiffusionModel(DiffusionModel):
    def apply(self, x: torch.Tensor, timestep: torch.Tensor, cond: dict[str, Any]) -> torch.Tensor:
        if cond.get("control") is not None:
            raise NotImplementedError("ControlNet is not supported for PixArt models")
        b, _, h, w = x.shape
        dtype = self.dtype
        context = cond["context"].to(x.device, dtype)
        context = context.expand(b, -1, -1) if context.shape[0] != b else context
        t = torch.as_tensor(timestep, dtype=torch.float32).reshape(-1).to(x.device)
        t = t.expand(b) if t.numel() == 1 else t
        c_size = c_ar = None
        if self.config["micro_condition"]:  # the cond's size (CLIPTextEncodePixArtAlpha), else the latent's
            size = cond.get("pixart_size")
            if size is None:
                size = torch.tensor([[h * 8.0, w * 8.0, h / w]], device=x.device).expand(b, -1)
            c_size, c_ar = size[:, :2].to(dtype), size[:, 2:].to(dtype)
        return self.module(x.to(dtype), t.to(dtype), context, c_size, c_ar).float()


def load_diffusion_model(ref: ModelRef, state_dict: Mapping[str, torch.Tensor]) -> PixArtDiffusionModel:
    from nodes.models.safetensors_io import build_module

    path = ref.sources[0] if ref.sources else None
    if is_diffusers_pixart(state_dict.keys()):
        try:
            sd = from_diffusers(state_dict)
        except (KeyError, ValueError) as e:
            raise ModelLoadError(path, f"not a usable diffusers PixArt transformer: {e}") from None
    else:
        prefix = find_pixart_prefix(state_dict.keys())
        if prefix is None:
            raise ModelLoadError(path, "not a PixArt DiT (no t_block.1.weight)")
        sd = {k[len(prefix) :]: v for k, v in state_dict.items() if k.startswith(prefix)}
    pos = sd.pop("pos_embed", None)  # read for the config only: positions are computed for each size
    sd.pop("y_embedder.y_embedding", None)  # the training-time null caption, unused when sampling
    if ref.patches:
        sd = merge_pixart_loras(ref.patches, sd)
    try:
        config = infer_config({**sd, **({"pos_embed": pos} if pos is not None else {})}, path)
    except KeyError as e:
        raise ModelLoadError(path, f"not a usable PixArt DiT: {e} is missing") from None
    arch = "pixart_alpha" if config["micro_condition"] else "pixart_sigma"
    dtype = torch.float32  # ComfyUI runs it in float32 on the CPU whatever the file stores
    module = build_module(lambda: PixArtNet(config), sd, path, "PixArt DiT", dtype=dtype)
    return PixArtDiffusionModel(
        arch=arch,
        module=module,
        latent_format=latent_format(arch),
        sampling=dict(sampling_config(arch)),
        config=config,
        dtype=dtype,
    )


def load_text_encoder(ref: ModelRef, state_dicts):
    """CLIPLoader type pixart: T5-XXL alone with PixArt's tokenizer settings (ComfyUI builds the same encoder for
    its types pixart and chroma: comfy/text_encoders/pixart_t5.py)."""
    from nodes.models.chroma_text import load_text_encoder as load_pixart_t5

    return load_pixart_t5(ref, state_dicts)


__all__ = ["infer_config", "load_diffusion_model", "load_text_encoder"]
