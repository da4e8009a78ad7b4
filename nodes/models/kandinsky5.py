"""Kandinsky 5 diffusion models (diffusion_models/kandinsky5lite_*.safetensors): a text encoder stack (Qwen2.5-VL
states through `text_transformer_blocks`) feeding a visual decoder stack (`visual_transformer_blocks`: self-attention,
cross-attention to the text, feed-forward, each modulated from the timestep plus the CLIP-L pooled vector).

Detection (ComfyUI 0.10.0's model_detection, commit 79cdbc81 of hiddenswitch/ComfyUI, image_model "kandinsky5"):
`visual_transformer_blocks.0.cross_attention.key_norm.weight`; the width from `visual_embeddings.in_layer.bias`,
rotary axes (32, 48, 48) for the 4096-wide Pro video and 2560-wide Lite image models (the image one without rotary
scaling), (16, 24, 24) otherwise; time width, feed-forward width, visual input width and block counts from the file.
The video models see 16 latent channels joined with a 16-channel image latent and a 1-channel mask (33 x 2 x 2 = 132
inputs per patch), the image model its 16 Flux latent channels alone (64).

diffusers 0.42's Kandinsky5Transformer3DModel has the same names but rotates queries in bfloat16 and lays latents
channels-last, so this module is our own: its parameter names are the published ones, and `forward` follows
ComfyUI's diffusion_model call (the timestep is ComfyUI's, sigma x 1000).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from torch import nn

from cluster.refs import ModelRef
from nodes.arch import latent_format, sampling_config
from nodes.models.components import DiffusionModel
from nodes.models.detect import KANDINSKY5_IMAGE_EMBED, KANDINSKY5_MARKER
from nodes.models.flux_keys import strip_prefix
from nodes.models.lora import LoraTargets
from nodes.models.single_file import load_single_file_transformer

MARKER = KANDINSKY5_MARKER
PATCH = (1, 2, 2)
THETA = 10000.0


@dataclass(frozen=True)
class Kandinsky5Config:
    model_dim: int
    ff_dim: int
    time_dim: int
    in_text_dim: int
    in_text_dim2: int
    visual_embed_dim: int
    out_visual_dim: int
    num_text_blocks: int
    num_visual_blocks: int
    axes_dims: tuple[int, int, int]
    rope_scale_factor: tuple[float, float, float]

    @property
    def head_dim(self) -> int:
        return sum(self.axes_dims)


def find_prefix(keys) -> str | None:
    """The prefix the published tensors sit under ('' or `model.diffusion_model.`), None when not Kandinsky 5."""
    for key in keys:
        if key.endswith(MARKER):
            return key[: -len(MARKER)]
    return None


def _count(keys, stem: str) -> int:
    return len({k[len(stem) :].split(".")[0] for k in keys if k.startswith(stem)})


def infer_config(sd: Mapping[str, torch.Tensor]) -> Kandinsky5Config:
    """The network's sizes from an unprefixed state dict (ComfyUI's detection rule, the text widths read from the
    file where ComfyUI fixes Qwen2.5-VL 7B's 3584 and CLIP-L's 768)."""
    if MARKER not in sd:
        raise ValueError(f"not a Kandinsky 5 state dict (no {MARKER})")
    model_dim = int(sd["visual_embeddings.in_layer.bias"].shape[0])
    axes, scale = (16, 24, 24), (1.0, 2.0, 2.0)
    if model_dim in (4096, 2560):  # Pro video and Lite image
        axes = (32, 48, 48)
        if model_dim == 2560:
            scale = (1.0, 1.0, 1.0)
    if model_dim % sum(axes):
        raise ValueError(f"Kandinsky 5's width {model_dim} is not a multiple of its head width {sum(axes)}")
    patch = math.prod(PATCH)
    return Kandinsky5Config(
        model_dim=model_dim,
        ff_dim=int(sd["visual_transformer_blocks.0.feed_forward.in_layer.weight"].shape[0]),
        time_dim=int(sd["time_embeddings.in_layer.bias"].shape[0]),
        in_text_dim=int(sd["text_embeddings.in_layer.weight"].shape[1]),
        in_text_dim2=int(sd["pooled_text_embeddings.in_layer.weight"].shape[1]),
        visual_embed_dim=int(sd["visual_embeddings.in_layer.weight"].shape[1]) // patch,
        out_visual_dim=int(sd["out_layer.out_layer.weight"].shape[0]) // patch,
        num_text_blocks=_count(sd, "text_transformer_blocks."),
        num_visual_blocks=_count(sd, "visual_transformer_blocks."),
        axes_dims=axes,
        rope_scale_factor=scale,
    )


def rope_table(pos: torch.Tensor, dim: int) -> torch.Tensor:
    """[..., n] positions -> [..., n, dim/2, 2, 2] rotations (Flux's rope: float64 frequencies, float32 angles)."""
    omega = 1.0 / THETA ** torch.linspace(0, (dim - 2) / dim, dim // 2, dtype=torch.float64, device=pos.device)
    angle = pos.float()[..., None] * omega
    cos, sin = torch.cos(angle), torch.sin(angle)
    return torch.stack([cos, -sin, sin, cos], dim=-1).unflatten(-1, (2, 2)).float()


def rotate(x: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    """x [B, S, H, D] by table [1, S, 1, D/2, 2, 2]."""
    pairs = x.float().reshape(*x.shape[:-1], -1, 1, 2)
    out = table[..., 0] * pairs[..., 0] + table[..., 1] * pairs[..., 1]
    return out.reshape(x.shape).type_as(x)


def shift_scale(norm: nn.Module, x: torch.Tensor, scale: torch.Tensor, shift: torch.Tensor) -> torch.Tensor:
    return torch.addcmul(shift, norm(x), scale + 1.0)


class Embed(nn.Module):
    """A linear layer and an affine LayerNorm (text_embeddings, pooled_text_embeddings)."""

    def __init__(self, width_in: int, width: int) -> None:
        super().__init__()
        self.in_layer = nn.Linear(width_in, width)
        self.norm = nn.LayerNorm(width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(self.in_layer(x))


class TimeEmbed(nn.Module):
    def __init__(self, model_dim: int, time_dim: int) -> None:
        super().__init__()
        self.in_layer = nn.Linear(model_dim, time_dim)
        self.out_layer = nn.Linear(time_dim, time_dim)
        self.half = model_dim // 2

    def forward(self, t: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        # computed here, not held as a buffer: the loader builds the module on the meta device
        freqs = torch.exp(-math.log(THETA) * torch.arange(self.half, dtype=torch.float32, device=t.device) / self.half)
        args = torch.outer(t, freqs)
        emb = torch.cat([torch.cos(args), torch.sin(args)], dim=-1).to(dtype)
        return self.out_layer(F.silu(self.in_layer(emb)))


class Modulation(nn.Module):
    def __init__(self, time_dim: int, model_dim: int, count: int) -> None:
        super().__init__()
        self.out_layer = nn.Linear(time_dim, count * model_dim)

    def forward(self, t: torch.Tensor) -> torch.Tensor:
        return self.out_layer(F.silu(t))


class Attention(nn.Module):
    def __init__(self, width: int, head_dim: int) -> None:
        super().__init__()
        self.heads = width // head_dim
        self.to_query = nn.Linear(width, width)
        self.to_key = nn.Linear(width, width)
        self.to_value = nn.Linear(width, width)
        self.query_norm = nn.RMSNorm(head_dim)
        self.key_norm = nn.RMSNorm(head_dim)
        self.out_layer = nn.Linear(width, width)

    def heads_of(self, x: torch.Tensor) -> torch.Tensor:
        return x.view(*x.shape[:-1], self.heads, -1)

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        out = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2))
        return self.out_layer(out.transpose(1, 2).flatten(2))

    def forward(self, x: torch.Tensor, table: torch.Tensor, context: torch.Tensor | None = None) -> torch.Tensor:
        if context is None:  # self-attention: rotary after the norm
            q = rotate(self.query_norm(self.heads_of(self.to_query(x))), table)
            k = rotate(self.key_norm(self.heads_of(self.to_key(x))), table)
            return self.attend(q, k, self.heads_of(self.to_value(x)))
        q = self.query_norm(self.heads_of(self.to_query(x)))
        k = self.key_norm(self.heads_of(self.to_key(context)))
        return self.attend(q, k, self.heads_of(self.to_value(context)))


class FeedForward(nn.Module):
    def __init__(self, width: int, ff_dim: int) -> None:
        super().__init__()
        self.in_layer = nn.Linear(width, ff_dim, bias=False)
        self.out_layer = nn.Linear(ff_dim, width, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out_layer(F.gelu(self.in_layer(x)))


def _gated(params: torch.Tensor) -> list[torch.Tensor]:
    return [p.unsqueeze(1) for p in params.chunk(3, dim=-1)]


class Kandinsky5TextBlock(nn.Module):
    def __init__(self, c: Kandinsky5Config) -> None:
        super().__init__()
        self.text_modulation = Modulation(c.time_dim, c.model_dim, 6)
        self.self_attention_norm = nn.LayerNorm(c.model_dim, elementwise_affine=False)
        self.self_attention = Attention(c.model_dim, c.head_dim)
        self.feed_forward_norm = nn.LayerNorm(c.model_dim, elementwise_affine=False)
        self.feed_forward = FeedForward(c.model_dim, c.ff_dim)

    def forward(self, x: torch.Tensor, t: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
        attn, ff = self.text_modulation(t).chunk(2, dim=-1)
        shift, scale, gate = _gated(attn)
        x = torch.addcmul(x, gate, self.self_attention(shift_scale(self.self_attention_norm, x, scale, shift), table))
        shift, scale, gate = _gated(ff)
        return torch.addcmul(x, gate, self.feed_forward(shift_scale(self.feed_forward_norm, x, scale, shift)))


class VisualBlock(nn.Module):
    def __init__(self, c: Kandinsky5Config) -> None:
        super().__init__()
        self.visual_modulation = Modulation(c.time_dim, c.model_dim, 9)
        self.self_attention_norm = nn.LayerNorm(c.model_dim, elementwise_affine=False)
        self.self_attention = Attention(c.model_dim, c.head_dim)
        self.cross_attention_norm = nn.LayerNorm(c.model_dim, elementwise_affine=False)
        self.cross_attention = Attention(c.model_dim, c.head_dim)
        self.feed_forward_norm = nn.LayerNorm(c.model_dim, elementwise_affine=False)
        self.feed_forward = FeedForward(c.model_dim, c.ff_dim)

    def forward(self, x: torch.Tensor, text: torch.Tensor, t: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
        attn, cross, ff = self.visual_modulation(t).chunk(3, dim=-1)
        shift, scale, gate = _gated(attn)
        x = torch.addcmul(x, gate, self.self_attention(shift_scale(self.self_attention_norm, x, scale, shift), table))
        shift, scale, gate = _gated(cross)
        out = self.cross_attention(shift_scale(self.cross_attention_norm, x, scale, shift), table, context=text)
        x = torch.addcmul(x, gate, out)
        shift, scale, gate = _gated(ff)
        return torch.addcmul(x, gate, self.feed_forward(shift_scale(self.feed_forward_norm, x, scale, shift)))


class OutLayer(nn.Module):
    def __init__(self, c: Kandinsky5Config) -> None:
        super().__init__()
        self.modulation = Modulation(c.time_dim, c.model_dim, 2)
        self.norm = nn.LayerNorm(c.model_dim, elementwise_affine=False)
        self.out_layer = nn.Linear(c.model_dim, math.prod(PATCH) * c.out_visual_dim)

    def forward(self, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        """x [B, T, H, W, D] -> [B, C, T*pt, H*ph, W*pw]."""
        b, tt, h, w, _ = x.shape
        shift, scale = (p[:, None, None, None, :] for p in self.modulation(t).chunk(2, dim=-1))
        x = self.out_layer(shift_scale(self.norm, x, scale, shift))
        pt, ph, pw = PATCH
        x = x.view(b, tt, h, w, -1, pt, ph, pw).permute(0, 4, 1, 5, 2, 6, 3, 7)
        return x.reshape(b, x.shape[1], tt * pt, h * ph, w * pw)


class Kandinsky5Network(nn.Module):
    """The DiT under the published names (load_state_dict takes the unprefixed file)."""

    def __init__(self, config: Kandinsky5Config) -> None:
        super().__init__()
        c = self.config = config
        self.time_embeddings = TimeEmbed(c.model_dim, c.time_dim)
        self.text_embeddings = Embed(c.in_text_dim, c.model_dim)
        self.pooled_text_embeddings = Embed(c.in_text_dim2, c.time_dim)
        self.visual_embeddings = nn.Module()
        self.visual_embeddings.in_layer = nn.Linear(math.prod(PATCH) * c.visual_embed_dim, c.model_dim)
        self.text_transformer_blocks = nn.ModuleList(Kandinsky5TextBlock(c) for _ in range(c.num_text_blocks))
        self.visual_transformer_blocks = nn.ModuleList(VisualBlock(c) for _ in range(c.num_visual_blocks))
        self.out_layer = OutLayer(c)

    def visual_rope(
        self, t: int, h: int, w: int, device: torch.device, rope_options: Mapping[str, float] | None = None
    ) -> torch.Tensor:
        """[1, T*H*W, 1, D/2, 2, 2]: the patch grid's positions, each axis spread over (len - 1) / scale + 1 from 0
        (ComfyUI's rope_encode_3d; the 4096-wide Pro model scales large frames by 3.16), or with ScaleROPE's
        rope_options over (len - 1) x scale_* + 1 from shift_*."""
        lens = [(n + p // 2) // p for n, p in zip((t, h, w), PATCH)]
        if rope_options:
            spans = [(n - 1.0) * rope_options.get(f"scale_{a}", 1.0) + 1.0 for n, a in zip(lens, "tyx")]
            starts = [0.0 + rope_options.get(f"shift_{a}", 0.0) for a in "tyx"]
        else:
            scale = self.config.rope_scale_factor
            if self.config.model_dim == 4096 and h * w >= 14080:
                scale = (1.0, 3.16, 3.16)
            spans = [(n - 1.0) / s + 1.0 for n, s in zip(lens, scale)]
            starts = [0.0, 0.0, 0.0]
        axes = [
            torch.linspace(a, a + (span - 1), steps=n, device=device, dtype=torch.float32)
            for n, span, a in zip(lens, spans, starts)
        ]
        grid = torch.stack(torch.meshgrid(*axes, indexing="ij"), dim=-1).reshape(-1, 3)
        tables = [rope_table(grid[:, i], d) for i, d in enumerate(self.config.axes_dims)]
        return torch.cat(tables, dim=-3)[None, :, None]

    def forward(
        self,
        x: torch.Tensor,
        timestep: torch.Tensor,
        context: torch.Tensor,
        pooled: torch.Tensor,
        time_dim_replace: torch.Tensor | None = None,
        rope_options: Mapping[str, float] | None = None,
    ) -> torch.Tensor:
        """x [B, C, T, H, W] (or [B, C, H, W]) with its joined channels; timestep [B] in ComfyUI's scale; context
        [B, L, in_text_dim]; pooled [B, in_text_dim2]; time_dim_replace: clean start latents written over the
        first channels and frames (Kandinsky5ImageToVideo's)."""
        image = x.dim() == 4
        if image:
            x = x.unsqueeze(2)
        _, _, t, h, w = x.shape
        pads = []
        for size, p in zip((t, h, w), PATCH):
            pads = [0, (p - size % p) % p, *pads]
        x = F.pad(x, pads, mode="circular") if any(pads) else x
        if time_dim_replace is not None:
            x = x.clone()
            start = F.pad(time_dim_replace, pads, mode="circular") if any(pads) else time_dim_replace
            x[:, : start.shape[1], : start.shape[2]] = start
        visual_table = self.visual_rope(t, h, w, x.device, rope_options)
        text_pos = torch.arange(context.shape[1], device=x.device, dtype=torch.float32)
        text_table = rope_table(text_pos, self.config.head_dim)[None, :, None]

        text = self.text_embeddings(context)
        temb = self.time_embeddings(timestep, x.dtype) + self.pooled_text_embeddings(pooled)
        for block in self.text_transformer_blocks:
            text = block(text, temb, text_table)

        b, c, tt, hh, ww = x.shape
        pt, ph, pw = PATCH
        patches = x.movedim(1, -1).reshape(b, tt // pt, pt, hh // ph, ph, ww // pw, pw, c)
        patches = patches.permute(0, 1, 3, 5, 2, 4, 6, 7).flatten(4, 7)
        visual = self.visual_embeddings.in_layer(patches)
        grid = visual.shape[:-1]
        visual = visual.flatten(1, 3)
        for block in self.visual_transformer_blocks:
            visual = block(visual, text, temb, visual_table)
        out = self.out_layer(visual.reshape(*grid, -1), temb)
        return out.squeeze(2) if image else out


def concat_channels(noise: torch.Tensor, concat_mask: torch.Tensor | None) -> torch.Tensor:
    """The 17 channels the video models see after the noise (model_base.Kandinsky5.concat_cond): an all-zero image
    latent and 1 - mask (the start frames' 1), the mask resized to the latent and zero-padded to its frames; without
    a mask a zero channel."""
    from nodes.models.hunyuan_video15 import resize_to_batch, video_upscale

    image = torch.zeros_like(noise)
    if concat_mask is None:
        return torch.cat([image, torch.zeros_like(noise[:, :1])], dim=1)
    mask = video_upscale(1.0 - concat_mask.to(noise.device, noise.dtype), noise.shape[-1], noise.shape[-2])
    if mask.shape[2] < noise.shape[2]:
        mask = F.pad(mask, (0, 0, 0, 0, 0, noise.shape[2] - mask.shape[2]))
    return torch.cat([image, resize_to_batch(mask, noise.shape[0])], dim=1)


def kandinsky5_layout(state_dict: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The file's tensors under the published unprefixed names."""
    prefix = find_prefix(state_dict.keys())
    if prefix is None:
        raise ValueError(f"not a Kandinsky 5 state dict (no {MARKER})")
    return strip_prefix(state_dict, prefix)


def lora_targets(sd: Mapping[str, torch.Tensor]) -> LoraTargets:
    """The names a Kandinsky 5 LoRA gives a linear layer: bare, under `diffusion_model.` or kohya's `lora_unet_`."""
    targets = LoraTargets(("lora_unet_", "diffusion_model.") + tuple(sorted({k.split(".")[0] + "." for k in sd})), {})
    for key, value in sd.items():
        if key.endswith(".weight") and value.dim() == 2:
            name = key[: -len(".weight")]
            targets.add(key, name, "diffusion_model." + name, "lora_unet_" + name.replace(".", "_"))
    return targets


def _batched(t: torch.Tensor, b: int) -> torch.Tensor:
    return t.expand(b, *t.shape[1:]) if t.shape[0] == 1 and b > 1 else t


@dataclass
class Kandinsky5DiffusionModel(DiffusionModel):
    """ComfyUI 0.10.0's model_base.Kandinsky5 around the network: the video models take the noise joined with
    concat_channels (from the cond's concat_mask, else the latent's noise mask, else zeros), the clean start
    latent (time_dim_replace, process_latent_in'd by the denoise step) and the CLIP-L pooled vector."""

    reads_denoise_mask: ClassVar[bool] = True

    @property
    def joins_channels(self) -> bool:
        return self.module.config.visual_embed_dim > self.latent_format.channels

    def concat_image(
        self, image: torch.Tensor | None, x: torch.Tensor, mask: torch.Tensor | None = None, mask_index: int = 0
    ) -> torch.Tensor | None:
        if mask is None or not self.joins_channels:  # apply joins the noise mask's channels (or zeros)
            return None
        return concat_channels(x, mask)

    def apply(self, x: torch.Tensor, timestep: torch.Tensor, cond: dict[str, Any]) -> torch.Tensor:
        for key, what in (("control", "ControlNets"), ("ref_latents", "reference latents")):
            if cond.get(key):
                raise NotImplementedError(f"{what} are not supported for Kandinsky 5 models")
        b = x.shape[0]
        if self.joins_channels:
            if x.dim() != 5:
                raise ValueError(f"Kandinsky 5's video models take [B,16,T,H,W] latents; this one is {tuple(x.shape)}")
            joined = cond.get("concat")
            if joined is None:
                mask = cond.get("denoise_mask")
                joined = concat_channels(x, None if mask is None else mask[:, :1])
            x = torch.cat([x, joined.to(x.device, x.dtype)], dim=1)
        pooled = cond.get("pooled")
        if pooled is None:
            raise ValueError("Kandinsky 5 needs the CLIP-L pooled output in its conditioning (its text encoder's)")
        replace = cond.get("time_dim_replace")
        t = torch.as_tensor(timestep, dtype=torch.float32, device=x.device).reshape(-1)
        out = self.module(
            x.to(self.dtype),
            t.expand(b) if t.numel() == 1 else t,
            _batched(cond["context"].to(x.device, self.dtype), b),
            _batched(pooled.to(x.device, self.dtype), b),
            None if replace is None else _batched(replace.to(x.device, self.dtype), b),
            cond.get("rope_options"),  # ScaleROPE
        )
        return out.float()


def load_diffusion_model(ref: ModelRef, state_dict: Mapping[str, torch.Tensor]) -> Kandinsky5DiffusionModel:
    """A Kandinsky 5 DiffusionModel from its published file, LoRAs merged in the file's names."""
    module, config = load_single_file_transformer(
        ref,
        state_dict,
        what="Kandinsky 5 transformer",
        layout=kandinsky5_layout,
        lora_targets=lora_targets,
        convert=dict,
        infer_config=lambda sd: dataclasses.asdict(infer_config(sd)),
        model_class=lambda **c: Kandinsky5Network(Kandinsky5Config(**c)),
    )
    image = (config["model_dim"], config["visual_embed_dim"] * math.prod(PATCH)) == KANDINSKY5_IMAGE_EMBED
    arch = "kandinsky5_image" if image else "kandinsky5"  # ComfyUI's Kandinsky5Image: Flux latents, shift 3
    return Kandinsky5DiffusionModel(
        arch=arch,
        module=module,
        latent_format=latent_format(arch),
        sampling=dict(sampling_config(arch)),
        config=config,
        dtype=next(module.parameters()).dtype,
    )


# The loader (nodes.models.loader) finds the text encoders' entry point on this module too.
from nodes.models.kandinsky5_text import load_text_encoder  # noqa: E402, F401
