"""Style models as ComfyUI loads them (comfy.sd.load_style_model): the T2I-Adapter style adapter (SD1.x,
a small transformer that turns CLIP vision tokens into extra text tokens) and Flux Redux (two linear layers
from SigLIP tokens to T5-sized tokens). Both map a CLIP_VISION_OUTPUT's last_hidden_state to tokens that
StyleModelApply appends to the conditioning.

The key names are the files'; the sizes are read from the tensors (ComfyUI fixes them to the released
models' sizes, with 8 attention heads for the style adapter, which is kept here)."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

import torch
from torch import nn

from .errors import ModelLoadError

STYLE_HEADS = 8


class _QuickGELU(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.sigmoid(1.702 * x)


class _Block(nn.Module):
    """A pre-norm transformer block in OpenAI CLIP's layout (sequence-first MultiheadAttention)."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.attn = nn.MultiheadAttention(width, STYLE_HEADS)
        self.ln_1 = nn.LayerNorm(width)
        self.mlp = nn.Sequential(
            OrderedDict(
                [("c_fc", nn.Linear(width, width * 4)), ("gelu", _QuickGELU()), ("c_proj", nn.Linear(width * 4, width))]
            )
        )
        self.ln_2 = nn.LayerNorm(width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.ln_1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        return x + self.mlp(self.ln_2(x))


class StyleAdapter(nn.Module):
    """T2I-Adapter style: learned style tokens attend over the image tokens; the style tokens, normed and
    projected to the text width, are the output."""

    def __init__(self, width: int, context_dim: int, layers: int, tokens: int) -> None:
        super().__init__()
        self.transformer_layes = nn.Sequential(*[_Block(width) for _ in range(layers)])  # the files' spelling
        self.style_embedding = nn.Parameter(torch.zeros(1, tokens, width))
        self.ln_post = nn.LayerNorm(width)
        self.ln_pre = nn.LayerNorm(width)
        self.proj = nn.Parameter(torch.zeros(width, context_dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        tokens = self.style_embedding.shape[1]
        style = self.style_embedding + torch.zeros(
            (x.shape[0], tokens, self.style_embedding.shape[-1]), device=x.device
        )
        x = self.ln_pre(torch.cat([x, style], dim=1))
        x = self.transformer_layes(x.permute(1, 0, 2)).permute(1, 0, 2)
        return self.ln_post(x[:, -tokens:, :]) @ self.proj


class ReduxEncoder(nn.Module):
    """Flux Redux: image tokens -> 3x-wide SiLU layer -> text-token width."""

    def __init__(self, image_dim: int, text_dim: int) -> None:
        super().__init__()
        self.redux_up = nn.Linear(image_dim, text_dim * 3)
        self.redux_down = nn.Linear(text_dim * 3, text_dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.redux_down(torch.nn.functional.silu(self.redux_up(x)))


@dataclass
class StyleModel:
    kind: str  # "t2i_style" | "flux_redux"
    module: nn.Module

    def get_cond(self, last_hidden_state: torch.Tensor) -> torch.Tensor:
        return self.module(last_hidden_state)


def style_kind(keys) -> str | None:
    keys = set(keys)
    return "t2i_style" if "style_embedding" in keys else "flux_redux" if "redux_down.weight" in keys else None


def load_style_model(sd: dict[str, torch.Tensor], path: str | None = None) -> StyleModel:
    from .safetensors_io import build_module

    kind = style_kind(sd)
    if kind == "t2i_style":
        _, tokens, width = sd["style_embedding"].shape
        layers = len({k.split(".")[1] for k in sd if k.startswith("transformer_layes.")})
        module = build_module(lambda: StyleAdapter(width, sd["proj"].shape[1], layers, tokens), sd, path, "style model")
    elif kind == "flux_redux":
        module = build_module(
            lambda: ReduxEncoder(sd["redux_up.weight"].shape[1], sd["redux_down.weight"].shape[0]),
            sd,
            path,
            "style model",
        )
    else:
        raise ModelLoadError(path, "is not a style model (T2I-Adapter style or Flux Redux)")
    return StyleModel(kind, module)
