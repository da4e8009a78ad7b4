"""MOSS-Image diffusion models (OpenMOSS's 5B single-stream DiT; Comfy-Org/MOSS-Image's
diffusion_models/moss_image_{sft,base}_*.safetensors, bare or under `model.diffusion_model.`).

Sources of the layout and the math (neither ComfyUI's MOSS code nor OpenMOSS's pipeline_moss_image.py is readable
here; diffusers and transformers do not have the model): kohakumoss 0.1.0 (PyPI, Apache-2.0 with a naming clause:
model/io/keymap.py, model/io/load.py infer_config, types/arch.py) for the key names, ComfyUI's fused
`layers.N.proj.qkv` (q;k;v rows) and the config read from shapes; moss-image-mlx 0.2.0 (PyPI, Apache-2.0: dit.py,
scheduler.py, "mirrors MOSSImageTransformer in the official pipeline_moss_image.py") for the forward pass. Keys:
`video_embedder`, `text_embedder.{proj,blocks.N.*}`, `time_embedding.{0,2}`, `shared_block_modulation`,
`layers.N.{norm1,norm2,q_norm,k_norm,proj.{qkv|q,k,v},o,ffn_up_gate,ffn_down}`, `final_norm_video`,
`final_linear_video`, `video_head_modulation` (`rope.bands`, a derived constant, is dropped). The template's
int8 ConvRot files are dequantized at load (nodes/models/comfy_quant.py).

The network: the latent's 128 channels (FLUX.2's patchified latent) and the text states (Qwen3.5's last hidden
states) are embedded, the text through two pre-norm text blocks, then both run as one [image; text] sequence
through `depth` joint blocks sharing one adaLN modulation of the timestep (shift/scale/gate for attention and
for the FFN), RMS-normed q/k, a four-axis rotary embedding (r, t, h, w: image tokens at t = text length and
centred h, w; text tokens along t), and the SiTU gated FFN; a modulated RMSNorm and a linear read the image
tokens back. Timestep: sigma x 1000 (flow matching with velocity output; the official sampler shifts by 5).
The joint blocks are ComfyUI's "single_block"s for dit_replace patches (the template's SkipLayerGuidanceDiTSimple
skips block 22 in the negative prediction)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from cluster.refs import ModelRef
from nodes.arch import latent_format, sampling_config
from nodes.models import comfy_quant
from nodes.models.components import DiffusionModel
from nodes.models.errors import ModelLoadError
from nodes.models.flux_keys import find_prefix, strip_prefix
from nodes.models.safetensors_io import build_module

MARKERS = ("shared_block_modulation.weight", "video_head_modulation.weight")
DERIVED = ("rope.bands",)
EPS = 1e-6
ROPE_AXES = 4
ROPE_BASE = 10000.0
TIME_SCALE = 1000.0


def situ(hidden: torch.Tensor, gate: torch.Tensor) -> torch.Tensor:
    """The FFN's gated activation: soft-capped sigmoid gate times a soft-capped value."""
    return (4.0 * torch.tanh(gate / 4.0) * torch.sigmoid(gate)) * (25.0 * torch.tanh(hidden / 25.0))


class RMSNorm(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x.float()
        return (y * torch.rsqrt(y.pow(2).mean(-1, keepdim=True) + EPS)).to(x.dtype) * self.weight


def rotate(x: torch.Tensor, sin: torch.Tensor, cos: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return x * cos + torch.cat([-x[..., half:], x[..., :half]], dim=-1) * sin


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, rope: tuple, heads: int) -> torch.Tensor:
    """[B, N, dim] projections (q, k already normed per head) -> [B, N, dim]; rope (sin, cos) [N, head_dim]."""
    b, n, dim = q.shape
    sin, cos = rope
    q, k, v = (t.reshape(b, n, heads, dim // heads) for t in (q, k, v))
    q, k = rotate(q, sin[:, None], cos[:, None]), rotate(k, sin[:, None], cos[:, None])
    out = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2))
    return out.transpose(1, 2).reshape(b, n, dim)


def _head_norm(norm: RMSNorm, x: torch.Tensor, heads: int) -> torch.Tensor:
    b, n, dim = x.shape
    return norm(x.reshape(b, n, heads, dim // heads)).reshape(b, n, dim)


class TextBlock(nn.Module):
    """A pre-norm text block (biased projections, no modulation)."""

    def __init__(self, dim: int, ffn_dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = RMSNorm(dim), RMSNorm(dim)
        self.q_norm, self.k_norm = RMSNorm(dim // heads), RMSNorm(dim // heads)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.ffn_gate, self.ffn_up = nn.Linear(dim, ffn_dim), nn.Linear(dim, ffn_dim)
        self.ffn_down = nn.Linear(ffn_dim, dim)

    def forward(self, x: torch.Tensor, rope: tuple) -> torch.Tensor:
        q, k, v = self.qkv(self.norm1(x)).chunk(3, dim=-1)
        q, k = _head_norm(self.q_norm, q, self.heads), _head_norm(self.k_norm, k, self.heads)
        x = x + self.proj(attention(q, k, v, rope, self.heads))
        y = self.norm2(x)
        return x + self.ffn_down(situ(self.ffn_up(y), self.ffn_gate(y)))


class TextEmbedder(nn.Module):
    def __init__(self, text_dim: int, dim: int, ffn_dim: int, heads: int, blocks: int) -> None:
        super().__init__()
        self.proj = nn.Linear(text_dim, dim)
        self.blocks = nn.ModuleList(TextBlock(dim, ffn_dim, heads) for _ in range(blocks))

    def forward(self, x: torch.Tensor, rope: tuple) -> torch.Tensor:
        x = self.proj(x)
        for block in self.blocks:
            x = block(x, rope)
        return x


class JointBlock(nn.Module):
    """One joint block over [image; text]; called as a diffusers single block (image, text, modulation, rope) ->
    (text, image) so that nodes.modelfns.network_patches can replace it (ComfyUI's dit_replace)."""

    def __init__(self, dim: int, ffn_dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = RMSNorm(dim), RMSNorm(dim)
        self.q_norm, self.k_norm = RMSNorm(dim // heads), RMSNorm(dim // heads)
        self.proj = nn.ModuleDict(
            {
                "qkv": nn.Linear(dim, 3 * dim, bias=False),
                "o": nn.Linear(dim, dim, bias=False),
                "ffn_up_gate": nn.Linear(dim, 2 * ffn_dim, bias=False),
                "ffn_down": nn.Linear(ffn_dim, dim, bias=False),
            }
        )

    def forward(
        self,
        hidden_states: torch.Tensor,
        encoder_hidden_states: torch.Tensor,
        temb: torch.Tensor,
        image_rotary_emb: tuple,
        joint_attention_kwargs: Any = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        n_img = hidden_states.shape[1]
        x = torch.cat([hidden_states, encoder_hidden_states], dim=1)
        shift_a, scale_a, gate_a, shift_f, scale_f, gate_f = temb.unbind(1)
        p = self.proj
        y = self.norm1(x) * (1 + scale_a[:, None]) + shift_a[:, None]
        q, k, v = p["qkv"](y).chunk(3, dim=-1)
        q, k = _head_norm(self.q_norm, q, self.heads), _head_norm(self.k_norm, k, self.heads)
        x = x + p["o"](attention(q, k, v, image_rotary_emb, self.heads)) * gate_a[:, None]
        y = self.norm2(x) * (1 + scale_f[:, None]) + shift_f[:, None]
        hidden, gate = p["ffn_up_gate"](y).chunk(2, dim=-1)
        x = x + p["ffn_down"](situ(hidden, gate)) * gate_f[:, None]
        return x[:, n_img:], x[:, :n_img]


def timestep_embedding(t: torch.Tensor, dim: int) -> torch.Tensor:
    """[B] model timesteps -> [B, dim] float32 sinusoid (cos first), computed in float64 as the reference does."""
    half = dim // 2
    freq = 10000.0 ** (-torch.arange(half, dtype=torch.float64) / half)
    phase = t.to(torch.float64)[:, None] * freq.to(t.device)[None]
    return torch.cat([torch.cos(phase), torch.sin(phase)], dim=-1).float()


def rope_table(height: int, width: int, text_length: int, head_dim: int, device: torch.device) -> tuple:
    """(sin, cos), each [H*W + L, head_dim], image tokens (row-major) then text tokens; axes (r, t, h, w)."""
    bands_n = head_dim // (2 * ROPE_AXES)
    bands = 1.0 / (ROPE_BASE ** (torch.arange(bands_n, dtype=torch.float32) / bands_n))
    h, w = torch.meshgrid(torch.arange(height), torch.arange(width), indexing="ij")
    image = torch.stack([torch.zeros_like(h), torch.full_like(h, text_length), h, w], -1).reshape(-1, 4).float()
    image[:, 2] -= (height - 1) / 2
    image[:, 3] -= (width - 1) / 2
    text = torch.zeros(text_length, 4)
    text[:, 1] = torch.arange(text_length, dtype=torch.float32)
    phase = (torch.cat([image, text], 0)[..., None] * bands).reshape(height * width + text_length, -1)
    sin, cos = torch.sin(phase), torch.cos(phase)
    return torch.cat([sin, sin], -1).to(device), torch.cat([cos, cos], -1).to(device)


class MossImageTransformer(nn.Module):
    def __init__(
        self,
        dim: int = 3072,
        ffn_dim: int = 8192,
        num_heads: int = 24,
        num_layers: int = 42,
        text_dim: int = 4096,
        text_blocks: int = 2,
        freq_dim: int = 256,
        latent_channels: int = 128,
    ) -> None:
        super().__init__()
        self.dim, self.heads, self.freq_dim = dim, num_heads, freq_dim
        self.video_embedder = nn.Linear(latent_channels, dim)
        self.text_embedder = TextEmbedder(text_dim, dim, ffn_dim, num_heads, text_blocks)
        self.time_embedding = nn.Sequential(nn.Linear(freq_dim, dim), nn.SiLU(), nn.Linear(dim, dim))
        self.shared_block_modulation = nn.Linear(dim, 6 * dim)
        self.layers = nn.ModuleList(JointBlock(dim, ffn_dim, num_heads) for _ in range(num_layers))
        self.final_norm_video = RMSNorm(dim)
        self.final_linear_video = nn.Linear(dim, latent_channels, bias=False)
        self.video_head_modulation = nn.Linear(dim, 2 * dim)

    # network_patches.dit_replaced swaps blocks in these lists: MOSS has only joint ("single") blocks
    transformer_blocks: tuple = ()

    @property
    def single_transformer_blocks(self) -> nn.ModuleList:
        return self.layers

    def forward(self, latents: torch.Tensor, timestep: torch.Tensor, context: torch.Tensor) -> torch.Tensor:
        """latents [B, C, H, W], timestep [B] (sigma x 1000), context [B, L, text_dim] -> velocity [B, C, H, W]."""
        b, c, height, width = latents.shape
        dtype = self.video_embedder.weight.dtype
        time = self.time_embedding(timestep_embedding(timestep, self.freq_dim).to(dtype))
        mod = self.shared_block_modulation(time).reshape(b, 6, self.dim)
        shift, scale = self.video_head_modulation(time).reshape(b, 2, self.dim).unbind(1)
        sin, cos = rope_table(height, width, context.shape[1], self.dim // self.heads, latents.device)
        sin, cos = sin.to(dtype), cos.to(dtype)
        n_img = height * width
        img = self.video_embedder(latents.reshape(b, c, n_img).transpose(1, 2).to(dtype))
        txt = self.text_embedder(context.to(dtype), (sin[n_img:], cos[n_img:]))
        for layer in self.layers:
            txt, img = layer(img, txt, mod, (sin, cos))
        out = self.final_norm_video(img) * (1 + scale[:, None]) + shift[:, None]
        return self.final_linear_video(out).transpose(1, 2).reshape(b, c, height, width)


def comfy_layout(state_dict: Mapping[str, torch.Tensor], path: str | None = None) -> dict[str, torch.Tensor]:
    """The file's weights in ComfyUI's names, unprefixed, float: quantized layers dequantized, the derived rotary
    bands dropped, and separate q/k/v (the diffusers folder's layout) fused as ComfyUI stores them."""
    prefix = find_prefix(state_dict.keys(), MARKERS[0])
    if prefix is None or prefix + MARKERS[1] not in state_dict:
        raise ModelLoadError(path, f"not a MOSS-Image transformer (no {' / '.join(MARKERS)})")
    sd = strip_prefix(dict(state_dict), prefix)
    sd = comfy_quant.dequantize(sd, path, torch.float32) if comfy_quant.is_quantized(sd) else sd
    out = {k: v for k, v in sd.items() if k not in DERIVED}
    for key in [k for k in out if k.startswith("layers.") and k.endswith(".proj.q.weight")]:
        base = key[: -len("q.weight")]
        out[base + "qkv.weight"] = torch.cat([out.pop(base + n + ".weight") for n in ("q", "k", "v")], 0)
    return out


def infer_config(sd: Mapping[str, torch.Tensor]) -> dict[str, int]:
    """MossImageTransformer's sizes from a ComfyUI-layout state dict's shapes (kohakumoss's infer_config)."""
    dim = int(sd["shared_block_modulation.weight"].shape[0]) // 6
    head_dim = int(sd["layers.0.q_norm.weight"].shape[0])
    if dim % head_dim or head_dim % (2 * ROPE_AXES):
        raise ValueError(f"width {dim} and head width {head_dim} do not give {ROPE_AXES} even rotary axes")
    return {
        "dim": dim,
        "ffn_dim": int(sd["layers.0.proj.ffn_up_gate.weight"].shape[0]) // 2,
        "num_heads": dim // head_dim,
        "num_layers": 1 + max(int(k.split(".")[1]) for k in sd if k.startswith("layers.")),
        "text_dim": int(sd["text_embedder.proj.weight"].shape[1]),
        "text_blocks": sum(1 for k in sd if k.startswith("text_embedder.blocks.") and k.endswith(".qkv.weight")),
        "freq_dim": int(sd["time_embedding.0.weight"].shape[1]),
        "latent_channels": int(sd["video_embedder.weight"].shape[1]),
    }


@dataclass
class MossImageDiffusionModel(DiffusionModel):
    def apply(self, x: torch.Tensor, timestep: torch.Tensor, cond: dict[str, Any]) -> torch.Tensor:
        if cond.get("control") is not None:
            raise NotImplementedError("ControlNets are not supported for MOSS-Image models")
        module: MossImageTransformer = self.module
        b = x.shape[0]
        context = cond["context"].to(x.device, self.dtype)
        if context.shape[-1] != self.config["text_dim"]:
            raise ValueError(
                f"MOSS-Image takes text states {self.config['text_dim']} wide; the conditioning is "
                f"{tuple(context.shape)} (encode the prompt with a CLIPLoader of type moss_image)"
            )
        context = context.expand(b, -1, -1) if context.shape[0] == 1 else context
        t = torch.as_tensor(timestep, dtype=torch.float32, device=x.device).reshape(-1).expand(b)
        return module(x.to(self.dtype), t, context).float()


def load_diffusion_model(ref: ModelRef, state_dict: Mapping[str, torch.Tensor]) -> MossImageDiffusionModel:
    """A MOSS-Image DiffusionModel from a bare or `model.diffusion_model.`-prefixed transformer file (bf16,
    int8 ConvRot or the diffusers folder's separate q/k/v); it computes in float32."""
    path = ref.sources[0] if ref.sources else None
    if ref.patches:
        raise ModelLoadError(path, "LoRAs on MOSS-Image models are not supported yet")
    sd = comfy_layout(state_dict, path)
    try:
        config = infer_config(sd)
    except (KeyError, ValueError) as e:
        raise ModelLoadError(path, f"not a usable MOSS-Image transformer: {e}") from None
    module = build_module(lambda: MossImageTransformer(**config), sd, path, "MOSS-Image transformer")
    return MossImageDiffusionModel(
        arch="moss_image",
        module=module,
        latent_format=latent_format("moss_image"),
        sampling=dict(sampling_config("moss_image")),
        config=config,
    )


__all__ = ["MossImageTransformer", "comfy_layout", "infer_config", "load_diffusion_model"]
