"""Wan HuMo (ComfyUI 0.3.64's WAN21_HuMo / HumoWanModel; Comfy-Org's humo_17B and 1.7B files: Wan's key names with
`audio_proj.audio_proj_glob_{1,2,3,norm}.layer.*` and `blocks.N.audio_cross_attn_wrapper.*`), read for facts from
ComfyUI's code; our own code.

- The transformer is Wan 2.1 text-to-video's (nodes.models.wan, LoRAs included) with two additions.
- The audio projection turns each latent frame's window of Whisper features ([8 audio frames, 5 layer groups,
  width], WanHuMoImageToVideo's) into 16 audio tokens: two ReLU linear layers, a third to 16 x the token width, a
  LayerNorm.
- In every block, after the text cross-attention, the tokens (LayerNorm `norm1_audio`) attend to the audio tokens
  of their own frame (q, k, v, o with RMS norms on q and k); the result is added to the tokens.
- The reference image's latent (the last reference latent of the conditioning) rides as one more latent frame
  after the video's (its tokens through the same patch embedding and rotary positions after the video's), with
  zero audio; its output is dropped. The 17B model (36 input channels) reads the reference as 16 zero channels, 4
  channels of ones and the latent, and the video with 4 zero channels and HuMo's fixed latent of a blank frame
  (three 16-value rows: the first frame's, the second's and the others') joined to the noise; the 1.7B model (16
  channels) reads both as they are.

The sizes come from the tensors (ComfyUI fixes the released ones: 1280-wide features, 512 hidden, 1536-wide tokens);
a conditioning without audio carries ComfyUI's zeros 1280 wide, which project as zeros of any width would."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import ExitStack
from dataclasses import dataclass, fields
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from cluster.refs import ModelRef
from nodes.models.errors import ModelLoadError
from nodes.models.flux_keys import count_blocks
from nodes.models.safetensors_io import build_module
from nodes.models.wan import HEAD_DIM, WanDiffusionModel

MARKER = "audio_proj.audio_proj_glob_1.layer.bias"  # ComfyUI's model_detection: model_type "humo"
PREFIXES = ("audio_proj.", "blocks.")
WRAPPER = ".audio_cross_attn_wrapper."
WINDOW, GROUPS, TOKENS = 8, 5, 16  # audio frames per latent frame, layer groups, audio tokens per latent frame
# HuMo's latent of a blank frame (ComfyUI's zero_vae_values): the first latent frame, the second, the others
BLANK_FIRST = (0.8660, -0.4326, -0.0017, -0.4884, -0.5283, 0.9207, -0.9896, 0.4433)
BLANK_FIRST += (-0.5543, -0.0113, 0.5753, -0.6000, -0.8346, -0.3497, -0.1926, -0.6938)
BLANK_SECOND = (1.0869, -1.2370, 0.0206, -0.4357, -0.6411, 2.0307, -1.5972, 1.2659)
BLANK_SECOND += (-0.8595, -0.4654, 0.9638, -1.6330, -1.4310, -0.1098, -0.3856, -1.4583)
BLANK_REST = (0.8642, -1.8583, 0.1577, 0.1350, -0.3641, 2.5863, -1.9670, 1.6065)
BLANK_REST += (-1.0475, -0.8678, 1.1734, -1.8138, -1.5933, -0.7721, -0.3289, -1.3745)
MASK_CHANNELS = 4


class _Layer(nn.Module):
    """ComfyUI's DummyAdapterLayer: the names carry a `.layer` level."""

    def __init__(self, layer: nn.Module) -> None:
        super().__init__()
        self.layer = layer

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layer(x)


class HumoAudioProjection(nn.Module):
    def __init__(self, features: int, hidden: int, width: int) -> None:
        super().__init__()
        self.features, self.width = features, width
        self.audio_proj_glob_1 = _Layer(nn.Linear(WINDOW * GROUPS * features, hidden))
        self.audio_proj_glob_2 = _Layer(nn.Linear(hidden, hidden))
        self.audio_proj_glob_3 = _Layer(nn.Linear(hidden, TOKENS * width))
        self.audio_proj_glob_norm = _Layer(nn.LayerNorm(width))

    def forward(self, audio: torch.Tensor) -> torch.Tensor:
        """[B, F, 8, 5, features] -> [B, F * 16, width], frame after frame."""
        b, f = audio.shape[:2]
        h = torch.relu(self.audio_proj_glob_1(audio.reshape(b * f, -1)))
        h = torch.relu(self.audio_proj_glob_2(h))
        tokens = self.audio_proj_glob_norm(self.audio_proj_glob_3(h).reshape(b * f, TOKENS, self.width))
        return tokens.reshape(b, f * TOKENS, self.width)


class AudioAttention(nn.Module):
    def __init__(self, dim: int, width: int) -> None:
        super().__init__()
        self.q, self.k, self.v = nn.Linear(dim, dim), nn.Linear(width, dim), nn.Linear(width, dim)
        self.o = nn.Linear(dim, dim)
        self.norm_q, self.norm_k = nn.RMSNorm(dim, eps=1e-6), nn.RMSNorm(dim, eps=1e-6)


class AudioWrapper(nn.Module):
    def __init__(self, dim: int, width: int) -> None:
        super().__init__()
        self.audio_cross_attn = AudioAttention(dim, width)
        self.norm1_audio = nn.LayerNorm(dim, eps=1e-6)


class _Block(nn.Module):
    def __init__(self, dim: int, width: int) -> None:
        super().__init__()
        self.audio_cross_attn_wrapper = AudioWrapper(dim, width)


class HumoParts(nn.Module):
    """HuMo's tensors beside the Wan transformer's, in the file's names."""

    def __init__(self, dim: int, features: int, hidden: int, width: int, blocks: int) -> None:
        super().__init__()
        self.audio_proj = HumoAudioProjection(features, hidden, width)
        self.blocks = nn.ModuleList(_Block(dim, width) for _ in range(blocks))


def parts_sizes(parts: Mapping[str, torch.Tensor]) -> dict[str, int]:
    hidden, inputs = (int(v) for v in parts["audio_proj.audio_proj_glob_1.layer.weight"].shape)
    width = int(parts["audio_proj.audio_proj_glob_norm.layer.weight"].shape[0])
    if inputs % (WINDOW * GROUPS) or parts["audio_proj.audio_proj_glob_3.layer.weight"].shape[0] != TOKENS * width:
        raise ValueError("the audio projection is not 16 tokens from 8 x 5 feature windows")
    return {
        "dim": int(parts[f"blocks.0{WRAPPER}norm1_audio.weight"].shape[0]),
        "features": inputs // (WINDOW * GROUPS),
        "hidden": hidden,
        "width": width,
        "blocks": count_blocks({k: v for k, v in parts.items() if k.startswith("blocks.")}, "blocks"),
    }


def audio_attention(wrapper: AudioWrapper, x: torch.Tensor, audio: torch.Tensor, heads: int) -> torch.Tensor:
    """x [B, L, dim] (L: whole frames' tokens) attend, frame by frame, to audio [B, F * 16, width]: [B, L, dim]."""
    att = wrapper.audio_cross_attn
    b, d = x.shape[0], x.shape[-1] // heads
    q = att.norm_q(att.q(wrapper.norm1_audio(x)))
    k = att.norm_k(att.k(audio)).reshape(-1, TOKENS, heads, d).transpose(1, 2)
    v = att.v(audio).reshape(-1, TOKENS, heads, d).transpose(1, 2)
    q = q.reshape(k.shape[0], -1, heads, d).transpose(1, 2)
    out = F.scaled_dot_product_attention(q, k, v)
    return att.o(out.transpose(1, 2).reshape(b, -1, heads * d))


def _with_audio(forward: Callable, module: nn.Module, audio: torch.Tensor, heads: int) -> Callable:
    """`forward` with every block's audio cross-attention added after its text cross-attention."""
    parts: HumoParts = module.humo
    state: dict = {}

    def before_norm2(_m: nn.Module, args: tuple) -> None:
        state["residual"] = args[0]

    def after_attn2(index: int) -> Callable:
        wrapper = parts.blocks[index].audio_cross_attn_wrapper

        def hook(_m: nn.Module, _args: tuple, out: torch.Tensor) -> torch.Tensor:
            hidden = (state.pop("residual") + out).type_as(out)
            # ComfyUI adds it to the tokens after the text cross-attention's; here to that attention's output (the
            # block adds it to the same tokens: the sum is ordered otherwise, within float32 rounding)
            return out + audio_attention(wrapper, hidden, audio.to(hidden.dtype), heads)

        return hook

    def run() -> torch.Tensor:
        with ExitStack() as stack:
            for i, block in enumerate(module.blocks):
                stack.callback(block.norm2.register_forward_pre_hook(before_norm2).remove)
                stack.callback(block.attn2.register_forward_hook(after_attn2(i)).remove)
            return forward()

    return run


def _blank_video(x: torch.Tensor, channels: int) -> torch.Tensor:
    """The 17B model's extra input channels: 4 zeros, then HuMo's blank-frame latent."""
    out = torch.zeros(x.shape[0], channels, *x.shape[2:], dtype=x.dtype, device=x.device)
    rows = [torch.tensor(r, dtype=x.dtype, device=x.device).view(1, -1, 1, 1, 1) for r in (BLANK_FIRST, BLANK_SECOND)]
    out[:, MASK_CHANNELS:] = torch.tensor(BLANK_REST, dtype=x.dtype, device=x.device).view(1, -1, 1, 1, 1)
    out[:, MASK_CHANNELS:, :1] = rows[0]
    out[:, MASK_CHANNELS:, 1:2] = rows[1]
    return out


@dataclass
class WanHumoDiffusionModel(WanDiffusionModel):
    """A Wan HuMo model (see the module's docstring)."""

    def apply(self, x: torch.Tensor, timestep: torch.Tensor, cond: dict[str, Any]) -> torch.Tensor:
        if x.dim() != 5:
            raise ValueError(f"Wan models take [B,C,T,H,W] video latents, got {tuple(x.shape)}")
        parts: HumoParts = self.module.humo
        cond = {k: v for k, v in cond.items() if k not in ("concat", "time_dim_concat")}
        refs = cond.pop("ref_latents", None)
        reference = refs[-1].to(x) if refs else None
        extra = self.module.config.in_channels - x.shape[1]
        if extra > 0:  # the 17B model: HuMo's own extra channels (ComfyUI's c_concat for it)
            cond["concat"] = _blank_video(x, extra)
            if reference is not None:
                full = torch.zeros(reference.shape[0], extra + x.shape[1], *reference.shape[2:]).to(reference)
                full[:, x.shape[1] : extra] = 1.0
                full[:, extra:] = reference
                reference = full
        if reference is not None:  # one more frame after the video's (cut off the output by the base model)
            if reference.shape[-2:] != x.shape[-2:]:
                raise ValueError(f"the reference latent is {tuple(reference.shape[-2:])}, the video {x.shape[-2:]}")
            cond["time_dim_concat"] = reference.expand(x.shape[0], *reference.shape[1:])
        audio = cond.pop("audio_embed", None)
        if audio is None:
            return super().apply(x, timestep, cond)
        audio = audio.to(x)
        if audio.shape[-1] != parts.audio_proj.features:
            if audio.any():
                raise ValueError(
                    f"audio_embed: {audio.shape[-1]}-wide audio features; this HuMo model reads "
                    f"{parts.audio_proj.features}-wide ones (its Whisper encoder's)"
                )
            audio = audio.new_zeros(*audio.shape[:-1], parts.audio_proj.features)  # zeros project as zeros
        if reference is not None:  # the reference frame hears nothing
            audio = torch.cat([audio, audio.new_zeros(audio.shape[0], reference.shape[2], *audio.shape[2:])], dim=1)
        tokens = parts.audio_proj(audio.to(self.dtype))
        heads = self.config["num_attention_heads"]
        return _with_audio(lambda: WanDiffusionModel.apply(self, x, timestep, cond), self.module, tokens, heads)()


def load_diffusion_model(ref: ModelRef, state_dict: Mapping[str, torch.Tensor]) -> WanDiffusionModel:
    """Any Wan diffusion model (nodes.loader tries this module first for the wan21 family): a HuMo file is the Wan
    transformer with HumoParts beside it; every other file goes on to nodes.models.wan_s2v (then nodes.models.wan)."""
    from nodes.models import wan, wan_s2v

    path = ref.sources[0] if ref.sources else None
    if not any(k.endswith(MARKER) for k in state_dict):
        return wan_s2v.load_diffusion_model(ref, state_dict)
    try:
        sd = wan.to_wan_layout(state_dict)
    except ValueError as e:
        raise ModelLoadError(path, f"not a usable Wan HuMo model: {e}") from None
    parts = {k: v for k, v in sd.items() if k.startswith("audio_proj.") or WRAPPER in k}
    model = wan.load_diffusion_model(ref, {k: v for k, v in sd.items() if k not in parts})
    if "image_dim" in model.config or model.arch != "wan21" or model.config["in_channels"] not in (16, 36):
        raise ModelLoadError(path, "HuMo parts found, but the transformer is not Wan 2.1 text-to-video's (16 or 36)")
    try:
        size = parts_sizes(parts)
    except (KeyError, ValueError) as e:
        raise ModelLoadError(path, f"not a usable Wan HuMo model: {e}") from None
    if size["dim"] != model.config["num_attention_heads"] * HEAD_DIM or size["blocks"] != model.config["num_layers"]:
        raise ModelLoadError(path, "HuMo's audio blocks do not match the Wan transformer's")
    model.module.humo = build_module(lambda: HumoParts(**size), parts, path, "Wan HuMo parts")
    return WanHumoDiffusionModel(**{f.name: getattr(model, f.name) for f in fields(model)})
