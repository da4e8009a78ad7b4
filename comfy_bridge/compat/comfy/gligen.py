"""`comfy.gligen`: GLIGEN, grounded generation with boxes. Its modules are real torch modules here, built as
ComfyUI builds them (same parameter names, so a GLIGEN state dict loads into them), and `load_gligen` builds the
model from a state dict in-process. Sampling with a GLIGEN model is not done by this backend's executors
(comfy.samplers refuses a "gligen" conditioning entry, naming the pack and node). Packs also patch these classes
at import (ComfyUI-TiledDiffusion replaces `Gligen._set_position`), which works as on ComfyUI."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from comfy_bridge.compat.comfy import ops as comfy_ops
from comfy_bridge.compat.comfy.ldm.modules.attention import CrossAttention, FeedForward

ops = comfy_ops.manual_cast
MAX_OBJECTS = 30  # boxes per image a GLIGEN model conditions on


class _Gated(nn.Module):
    """What the three gated blocks share: attention and feed-forward residuals scaled by tanh of learned gates
    that start at zero (an untrained block leaves its input unchanged)."""

    def __init__(self, query_dim: int, context_dim: int, n_heads: int | None, d_head: int, self_attn: bool) -> None:
        super().__init__()
        if self_attn:  # grounding tokens are projected to the visual width and attended with the visual tokens
            self.linear = ops.Linear(context_dim, query_dim)
        heads = {} if n_heads is None else {"heads": n_heads}
        self.attn = CrossAttention(
            query_dim=query_dim,
            context_dim=query_dim if self_attn else context_dim,
            dim_head=d_head,
            operations=ops,
            **heads,
        )
        self.ff = FeedForward(query_dim, glu=True)
        self.norm1 = ops.LayerNorm(query_dim)
        self.norm2 = ops.LayerNorm(query_dim)
        self.alpha_attn = nn.Parameter(torch.tensor(0.0))
        self.alpha_dense = nn.Parameter(torch.tensor(0.0))
        self.scale = 1  # callers may set it to fade the whole block in or out

    def _dense(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.scale * torch.tanh(self.alpha_dense) * self.ff(self.norm2(x))


class GatedCrossAttentionDense(_Gated):
    """Visual tokens attend to the grounding tokens."""

    def __init__(self, query_dim: int, context_dim: int, n_heads: int, d_head: int) -> None:
        super().__init__(query_dim, context_dim, n_heads, d_head, self_attn=False)

    def forward(self, x: torch.Tensor, objs: torch.Tensor) -> torch.Tensor:
        x = x + self.scale * torch.tanh(self.alpha_attn) * self.attn(self.norm1(x), objs, objs)
        return self._dense(x)


class GatedSelfAttentionDense(_Gated):
    """Self-attention over visual and grounding tokens together; the visual part is the residual."""

    def __init__(self, query_dim: int, context_dim: int, n_heads: int, d_head: int) -> None:
        super().__init__(query_dim, context_dim, n_heads, d_head, self_attn=True)

    def forward(self, x: torch.Tensor, objs: torch.Tensor) -> torch.Tensor:
        visual = x.shape[1]
        joint = self.attn(self.norm1(torch.cat([x, self.linear(objs)], dim=1)))
        x = x + self.scale * torch.tanh(self.alpha_attn) * joint[:, :visual]
        return self._dense(x)


class GatedSelfAttentionDense2(_Gated):
    """As GatedSelfAttentionDense, but the residual is the grounding part, resized (bicubic) from its square
    grid to the visual tokens' square grid. The attention keeps CrossAttention's default head count, as there."""

    def __init__(self, query_dim: int, context_dim: int, n_heads: int, d_head: int) -> None:
        super().__init__(query_dim, context_dim, None, d_head, self_attn=True)

    def forward(self, x: torch.Tensor, objs: torch.Tensor) -> torch.Tensor:
        batch, visual, _ = x.shape
        grounding = objs.shape[1]
        side_v, side_g = math.isqrt(visual), math.isqrt(grounding)
        if side_v * side_v != visual or side_g * side_g != grounding:
            raise ValueError(
                f"GatedSelfAttentionDense2: {visual} visual and {grounding} grounding tokens; both "
                "counts must be square numbers"
            )
        out = self.attn(self.norm1(torch.cat([x, self.linear(objs)], dim=1)))[:, visual:]
        grid = out.permute(0, 2, 1).reshape(batch, -1, side_g, side_g)
        grid = torch.nn.functional.interpolate(grid, (side_v, side_v), mode="bicubic")
        x = x + self.scale * torch.tanh(self.alpha_attn) * grid.reshape(batch, -1, visual).permute(0, 2, 1)
        return self._dense(x)


class FourierEmbedder:
    """sin and cos of x at `num_freqs` frequencies temperature^(i / num_freqs), interleaved per frequency and
    concatenated along `cat_dim`."""

    def __init__(self, num_freqs: int = 64, temperature: float = 100) -> None:
        self.num_freqs = num_freqs
        self.temperature = temperature
        self.freq_bands = temperature ** (torch.arange(num_freqs) / num_freqs)

    @torch.no_grad()
    def __call__(self, x: torch.Tensor, cat_dim: int = -1) -> torch.Tensor:
        return torch.cat([f(freq * x) for freq in self.freq_bands for f in (torch.sin, torch.cos)], cat_dim)


class PositionNet(nn.Module):
    """Grounding tokens from box embeddings (xyxy, Fourier-embedded) and their text embeddings; padded slots
    (mask 0) take learned null features."""

    def __init__(self, in_dim: int, out_dim: int, fourier_freqs: int = 8) -> None:
        super().__init__()
        self.in_dim, self.out_dim = in_dim, out_dim
        self.fourier_embedder = FourierEmbedder(num_freqs=fourier_freqs)
        self.position_dim = fourier_freqs * 2 * 4  # sin and cos of the four box coordinates
        self.linears = nn.Sequential(
            ops.Linear(in_dim + self.position_dim, 512),
            nn.SiLU(),
            ops.Linear(512, 512),
            nn.SiLU(),
            ops.Linear(512, out_dim),
        )
        self.null_positive_feature = nn.Parameter(torch.zeros([in_dim]))
        self.null_position_feature = nn.Parameter(torch.zeros([self.position_dim]))

    def forward(self, boxes: torch.Tensor, masks: torch.Tensor, positive_embeddings: torch.Tensor) -> torch.Tensor:
        masks = masks.unsqueeze(-1)
        like = {"device": boxes.device, "dtype": boxes.dtype}
        text_null = self.null_positive_feature.to(**like).view(1, 1, -1)
        box_null = self.null_position_feature.to(**like).view(1, 1, -1)
        text = positive_embeddings * masks + (1 - masks) * text_null
        xyxy = self.fourier_embedder(boxes) * masks + (1 - masks) * box_null
        return self.linears(torch.cat([text, xyxy], dim=-1))


class Gligen(nn.Module):
    """The loaded model: one gated block per transformer of the UNet and the position net. set_position /
    set_empty return the patch ComfyUI installs on each transformer block (x, extra_options) -> x."""

    def __init__(self, modules: list[nn.Module], position_net: PositionNet, key_dim: int) -> None:
        super().__init__()
        self.module_list = nn.ModuleList(modules)
        self.position_net = position_net
        self.key_dim = key_dim
        self.max_objs = MAX_OBJECTS
        self.current_device = torch.device("cpu")

    def _set_position(
        self, boxes: torch.Tensor, masks: torch.Tensor, positive_embeddings: torch.Tensor
    ) -> Callable[[torch.Tensor, dict], torch.Tensor]:
        objs = self.position_net(boxes, masks, positive_embeddings)

        def patch(x: torch.Tensor, extra_options: dict) -> torch.Tensor:
            block = self.module_list[extra_options["transformer_index"]]
            return block(x, objs.to(device=x.device, dtype=x.dtype))

        return patch

    def set_position(self, latent_image_shape: tuple, position_params: list, device: Any) -> Callable:
        """`position_params`: (text embedding, height, width, y, x) per box, in latent pixels (GLIGENTextBoxApply's
        entries); boxes are normalised to the latent's size and padded to max_objs."""
        batch, _, h, w = latent_image_shape
        count = len(position_params)
        masks = torch.zeros([self.max_objs])
        masks[:count] = 1.0
        boxes = [
            torch.tensor(((x / w), (y / h), ((x + bw) / w), ((y + bh) / h))).unsqueeze(0)
            for _, bh, bw, y, x in position_params
        ]
        texts = [p[0] for p in position_params]
        if count < self.max_objs:
            boxes.append(torch.zeros([self.max_objs - count, 4]))
            texts.append(torch.zeros([self.max_objs - count, self.key_dim]))
        return self._set_position(
            torch.cat(boxes).unsqueeze(0).repeat(batch, 1, 1).to(device),
            masks.unsqueeze(0).repeat(batch, 1).to(device),
            torch.cat(texts).unsqueeze(0).repeat(batch, 1, 1).to(device),
        )

    def set_empty(self, latent_image_shape: tuple, device: Any) -> Callable:
        batch = latent_image_shape[0]
        return self._set_position(
            torch.zeros([batch, self.max_objs, 4], device=device),
            torch.zeros([batch, self.max_objs], device=device),
            torch.zeros([batch, self.max_objs, self.key_dim], device=device),
        )


def load_gligen(sd: dict[str, torch.Tensor]) -> Gligen:
    """A Gligen of a GLIGEN checkpoint's state dict: a gated self-attention block per `<blocks>.<n>.…fuser.`
    prefix (input, middle, then output blocks), heads from the key width (768: SD1's 8 heads; else 64 per head),
    and the position net."""
    blocks, key_dim = [], 768
    for part in ("input_blocks", "middle_block", "output_blocks"):
        for n in range(20):
            tag = f"{part}.{n}."
            weights = {k.split(".fuser.")[-1]: v for k, v in sd.items() if tag in k and ".fuser." in k}
            if not weights:
                continue
            query_dim, key_dim = weights["linear.weight"].shape
            heads, d_head = (8, query_dim // 8) if key_dim == 768 else (query_dim // 64, 64)
            block = GatedSelfAttentionDense(query_dim, key_dim, heads, d_head)
            block.load_state_dict(weights, strict=False)
            blocks.append(block)
    if "position_net.null_positive_feature" not in sd:
        raise ValueError("comfy.gligen.load_gligen: the state dict has no position_net (not a GLIGEN model)")
    position_net = PositionNet(
        sd["position_net.null_positive_feature"].shape[0], sd["position_net.linears.4.weight"].shape[0]
    )
    position_net.load_state_dict(
        {k[len("position_net.") :]: v for k, v in sd.items() if k.startswith("position_net.")}, strict=False
    )
    return Gligen(blocks, position_net, key_dim)
