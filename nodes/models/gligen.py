"""GLIGEN: gated self-attention layers that let text boxes steer an SD UNet, on diffusers' GLIGEN modules.

A GLIGEN file (gligen_sd14_textbox_pruned and the like) holds one `fuser` per transformer block of the UNet, under
that block's ldm name (`input_blocks.1.1.transformer_blocks.0.fuser.*`), and the `position_net` that turns each box's
text embedding and corners into the fusers' object tokens. The rules are ComfyUI's (comfy/gligen.py), written here
from their description: fusers are taken in the UNet's order (input blocks, middle block, output blocks), 8 heads
when the object tokens are 768 wide (SD1) and 64-wide heads otherwise; up to 30 boxes, each as (x1, y1, x2, y2) in
fractions of the latent, the unused slots filled with the position net's learned null features. diffusers has the
same modules (GatedSelfAttentionDense, GLIGENTextBoundingboxProjection, with ComfyUI's key names) and runs a block's
fuser right after its self-attention, where ComfyUI's middle patch runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:  # diffusers on first use: the UNet module imports this one, and validation must not load diffusers
    from diffusers.models.attention import BasicTransformerBlock
    from diffusers.models.embeddings import GLIGENTextBoundingboxProjection

from .errors import ModelLoadError

MAX_OBJECTS = 30  # ComfyUI's Gligen.max_objs
FUSER = ".fuser."
POSITION_MARKER = "position_net.null_positive_feature"
SD1_OBJECT_WIDTH = 768  # ComfyUI's rule: 8 heads for SD1's 768-wide object tokens, else 64-wide heads
_BLOCKS = ("input_blocks", "middle_block", "output_blocks")


def is_gligen(keys) -> bool:
    keys = list(keys)
    return POSITION_MARKER in keys and any(FUSER in k for k in keys)


@dataclass
class GligenModel:
    fusers: torch.nn.ModuleList  # one per UNet transformer block, in forward order
    position_net: GLIGENTextBoundingboxProjection
    text_width: int  # the box texts' pooled CLIP width

    @property
    def module(self) -> torch.nn.Module:
        """Both parts, for moving them to the step's device."""
        return torch.nn.ModuleList([self.fusers, self.position_net])

    def objects(self, boxes: list[tuple[torch.Tensor, int, int, int, int]], latent_hw: tuple[int, int], batch: int):
        """The fusers' object tokens [batch, 30, width] for text boxes (pooled [1, D], height, width, y, x in
        latent cells), as ComfyUI's Gligen.set_position lays them out."""
        if len(boxes) > MAX_OBJECTS:
            raise ValueError(f"GLIGEN takes at most {MAX_OBJECTS} text boxes, got {len(boxes)}")
        h, w = latent_hw
        net = self.position_net
        device, dtype = net.null_positive_feature.device, net.null_positive_feature.dtype
        corners = torch.zeros(MAX_OBJECTS, 4)
        masks = torch.zeros(MAX_OBJECTS)
        texts = torch.zeros(MAX_OBJECTS, self.text_width)
        for i, (pooled, bh, bw, by, bx) in enumerate(boxes):
            corners[i] = torch.tensor((bx / w, by / h, (bx + bw) / w, (by + bh) / h))
            masks[i] = 1.0
            texts[i] = pooled.reshape(-1).float()
        with torch.no_grad():
            objs = net(
                boxes=corners[None].to(device, dtype),
                masks=masks[None].to(device, dtype),
                positive_embeddings=texts[None].to(device, dtype),
            )
        return objs.expand(batch, -1, -1)


def load_gligen(sd: dict[str, torch.Tensor], path: str | None = None) -> GligenModel:
    from diffusers.models.attention import GatedSelfAttentionDense
    from diffusers.models.embeddings import GLIGENTextBoundingboxProjection

    fusers = []
    for block in _BLOCKS:
        for index in range(20):
            where = f"{block}.{index}."
            part = {k.split(FUSER)[-1]: v for k, v in sd.items() if where in k and FUSER in k}
            if not part:
                continue
            query, width = part["linear.weight"].shape
            heads = 8 if width == SD1_OBJECT_WIDTH else query // 64
            fuser = GatedSelfAttentionDense(query, width, heads, query // heads)
            fuser.load_state_dict({k: v.float() for k, v in part.items()})
            fusers.append(fuser)
    if POSITION_MARKER not in sd or not fusers:
        raise ModelLoadError(path, "is not a GLIGEN model (no position_net and fuser layers)")
    text_width = sd[POSITION_MARKER].shape[0]
    net = GLIGENTextBoundingboxProjection(text_width, sd["position_net.linears.4.weight"].shape[0])
    net.load_state_dict({k[len("position_net.") :]: v.float() for k, v in sd.items() if k.startswith("position_net.")})
    return GligenModel(torch.nn.ModuleList(fusers).eval(), net.eval(), text_width)


def load_gligen_ref(ref) -> GligenModel:
    """The GLIGEN model a GLIGENLoader ModelRef names."""
    from .safetensors_io import load_state_dict

    return load_gligen(load_state_dict(ref.sources[0], ref.digests[0]), ref.sources[0])


class _Routed:
    """What the UNet's position net hands every block: the request's fusers and object tokens."""

    def __init__(self, fusers: torch.nn.ModuleList, objs: torch.Tensor) -> None:
        self.fusers, self.objs = fusers, objs


class _Router(torch.nn.Module):
    """Stands as the UNet's `position_net`: diffusers calls it with the `gligen` arguments of the call."""

    def forward(self, fusers: torch.nn.ModuleList, objs: torch.Tensor) -> _Routed:
        return _Routed(fusers, objs)


class _BlockFuser(torch.nn.Module):
    """Stands as one transformer block's `fuser`: runs that block's fuser of the GLIGEN of this call."""

    def __init__(self, index: int) -> None:
        super().__init__()
        self.index = index

    def forward(self, x: torch.Tensor, routed: _Routed) -> torch.Tensor:
        fuser = routed.fusers[self.index]
        return fuser(x, routed.objs.to(x.dtype))


def transformer_blocks(unet: torch.nn.Module) -> list[BasicTransformerBlock]:
    """The UNet's transformer blocks in forward order (down, middle, up; diffusers registers up before middle)."""
    from diffusers.models.attention import BasicTransformerBlock

    parts = [*unet.down_blocks, unet.mid_block, *unet.up_blocks]
    return [m for part in parts if part is not None for m in part.modules() if isinstance(m, BasicTransformerBlock)]


def gligen_kwargs(unet: torch.nn.Module, model: GligenModel, objs: torch.Tensor) -> dict[str, Any]:
    """The UNet call's cross_attention_kwargs that run `model`'s fusers: the UNet gets parameterless stand-ins for
    diffusers' GLIGEN position net and fusers once (so one cached UNet serves any GLIGEN file, and calls without
    GLIGEN never reach them)."""
    blocks = transformer_blocks(unet)
    if len(blocks) != len(model.fusers):
        raise ValueError(
            f"this GLIGEN model has {len(model.fusers)} layers for a UNet with {len(blocks)} attention blocks"
        )
    if not isinstance(getattr(unet, "position_net", None), _Router):
        unet.position_net = _Router()
        for i, block in enumerate(blocks):
            block.fuser = _BlockFuser(i)
    return {"gligen": {"fusers": model.fusers, "objs": objs}}
