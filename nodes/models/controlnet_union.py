"""Union ControlNets for SDXL (xinsir's controlnet-union-sdxl-1.0 and its ProMax file: ControlNet++), run as
ComfyUI 0.3.64 runs them (comfy/cldm/cldm.py, comfy/controlnet.py).

The published files are diffusers ControlNets plus a union part, which diffusers' ControlNetUnionModel names the
same way: `task_embedding` (one 320-wide row per control type), `transformer_layes` (a CLIP-style residual
attention block), `spatial_ch_projs` and `control_add_embedding` (a two-layer MLP over the control types'
sinusoidal embeddings); ComfyUI recognises them by `control_add_embedding.linear_1.bias` and counts the types
from `task_embedding`. How they run differs from diffusers' forward, and ComfyUI's is the reference:
- the control-type embedding is always added to the time embedding, for "auto" too (all types off);
- with a type chosen (SetUnionControlNetType), the hint features' spatial mean plus that type's task row is one
  token per sample through the transformer, and its projection is added to every hint feature (diffusers adds a
  second token, the latent's mean, which ComfyUI does not).
The network widths come from the weights (no config.json needed, as ComfyUI reads none)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from .controlnet import ControlNet
from .errors import ModelLoadError
from .safetensors_io import build_module
from .unet import SDXL_TIME_EMBED_DIM, attention_heads, norm_groups

# The type names SetUnionControlNetType offers and the task_embedding row of each (comfy/cldm/control_types.py);
# controlnet-union-sdxl-1.0 has the first 6 rows, the ProMax file all 8.
UNION_TYPES = {
    "openpose": 0,
    "depth": 1,
    "hed/pidi/scribble/ted": 2,
    "canny/lineart/anime_lineart/mlsd": 3,
    "normal": 4,
    "segment": 5,
    "tile": 6,
    "repaint": 7,
}
UNION_MARKER = "control_add_embedding.linear_1.bias"  # ComfyUI's test for a union ControlNet
TASK_CHANNELS = 320  # the task tokens' width: ComfyUI builds the union part 320 wide whatever the file
CONTROL_TYPE_EMBED_DIM = 256  # each control type's sinusoidal embedding in control_add_embedding's input


def is_union(shapes: dict[str, Any]) -> bool:
    return UNION_MARKER in shapes


def _count(shapes: dict[str, Any], prefix: str) -> int:
    found = {k[len(prefix) :].split(".")[0] for k in shapes if k.startswith(prefix)}
    return len({int(i) for i in found if i.isdigit()})


def union_config(shapes: dict[str, Any], path: str | None) -> dict[str, Any]:
    """diffusers' ControlNetUnionModel config of a union ControlNet file, read from its tensor shapes."""
    if "add_embedding.linear_1.weight" not in shapes:
        raise ModelLoadError(path, "is a union ControlNet without SDXL's size embedding (add_embedding.*)")
    levels = _count(shapes, "down_blocks.")
    channels = [shapes[f"down_blocks.{i}.resnets.0.conv1.weight"][0] for i in range(levels)]
    attn = [f"down_blocks.{i}.attentions.0.proj_in.weight" in shapes for i in range(levels)]
    mid_depth = _count(shapes, "mid_block.attentions.0.transformer_blocks.")
    depths = [
        _count(shapes, f"down_blocks.{i}.attentions.0.transformer_blocks.") if a else 0 for i, a in enumerate(attn)
    ]
    if attn[-1] and depths[-1] != mid_depth:
        raise ModelLoadError(path, "unsupported union ControlNet: its middle block and last level differ in depth")
    depths[-1] = mid_depth  # diffusers builds the middle block as deep as the last level
    to_k = next(k for k in shapes if k.endswith("attn2.to_k.weight"))
    proj_in = next(k for k in shapes if k.endswith("proj_in.weight"))
    hint = [shapes["controlnet_cond_embedding.conv_in.weight"][0]]
    hint += [shapes[f"controlnet_cond_embedding.blocks.{2 * i + 1}.weight"][0] for i in range(3)]
    types, task_width = shapes["task_embedding"]
    return {
        "in_channels": shapes["conv_in.weight"][1],
        "conditioning_channels": shapes["controlnet_cond_embedding.conv_in.weight"][1],
        "down_block_types": tuple("CrossAttnDownBlock2D" if a else "DownBlock2D" for a in attn),
        "block_out_channels": tuple(channels),
        "layers_per_block": _count(shapes, "down_blocks.0.resnets."),
        "norm_num_groups": norm_groups(channels),
        "cross_attention_dim": shapes[to_k][1],
        "transformer_layers_per_block": tuple(max(d, 1) for d in depths),
        "attention_head_dim": tuple(attention_heads("sdxl", c) for c in channels),
        "use_linear_projection": len(shapes[proj_in]) == 2,
        "addition_embed_type": "text_time",
        "addition_time_embed_dim": SDXL_TIME_EMBED_DIM,
        "projection_class_embeddings_input_dim": shapes["add_embedding.linear_1.weight"][1],
        "conditioning_embedding_out_channels": tuple(hint),
        "num_control_type": types,
        "num_trans_channel": task_width,
        "num_trans_layer": _count(shapes, "transformer_layes."),
        "num_proj_channel": shapes["spatial_ch_projs.weight"][0],
    }


@dataclass
class UnionControlNet(ControlNet):
    """A union ControlNet with the control type SetUnionControlNetType chose (None: "auto")."""

    control_type: int | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        known = self.config["num_control_type"]
        if self.control_type is not None and self.control_type >= known:
            name = {v: k for k, v in UNION_TYPES.items()}.get(self.control_type, str(self.control_type))
            raise ValueError(
                f"the union ControlNet has {known} control types, so it cannot take type {name} "
                f"({self.control_type}); the ProMax union ControlNet (controlnet-union-sdxl-1.0's "
                "diffusion_pytorch_model_promax) has all 8"
            )

    def run(self, x, t, context, cond_img, strength, added):
        net = self.module
        emb = net.time_embedding(net.time_proj(t).to(x.dtype))
        chosen = torch.zeros(net.config.num_control_type, device=x.device)
        if self.control_type is not None:
            chosen[self.control_type] = 1.0
        emb = emb + net.control_add_embedding(net.control_type_proj(chosen).reshape(1, -1).to(emb.dtype))
        sizes = net.add_time_proj(added["time_ids"].flatten()).reshape(x.shape[0], -1)
        emb = emb + net.add_embedding(torch.cat([added["text_embeds"], sizes], dim=-1).to(emb.dtype))

        hint = net.controlnet_cond_embedding(cond_img)
        if self.control_type is not None:
            token = hint.mean(dim=(2, 3)) + net.task_embedding[self.control_type].to(hint.dtype)
            token = token.unsqueeze(0)  # one token per sample (nn.MultiheadAttention takes the sequence first)
            for layer in net.transformer_layes:
                token = layer(token)
            hint = hint + net.spatial_ch_projs(token[0])[:, :, None, None]
        sample = net.conv_in(x) + hint

        skips = (sample,)
        for block in net.down_blocks:
            if getattr(block, "has_cross_attention", False):
                sample, res = block(hidden_states=sample, temb=emb, encoder_hidden_states=context)
            else:
                sample, res = block(hidden_states=sample, temb=emb)
            skips += res
        sample = net.mid_block(sample, emb, encoder_hidden_states=context)
        down = tuple(conv(s) * strength for s, conv in zip(skips, net.controlnet_down_blocks))
        return down, net.controlnet_mid_block(sample) * strength


def load_union_controlnet(state_dict: dict[str, torch.Tensor], path: str | None, control_type: int | None):
    """A union ControlNet file (diffusers layout plus the union part) as a ControlNet of arch sdxl."""
    from diffusers.models.controlnets.controlnet_union import ControlNetUnionModel

    shapes = {k: tuple(v.shape) for k, v in state_dict.items()}
    cfg = union_config(shapes, path)
    if cfg["num_trans_channel"] != TASK_CHANNELS or cfg["block_out_channels"][0] != TASK_CHANNELS:
        raise ModelLoadError(path, f"a union ControlNet's task tokens and first level are {TASK_CHANNELS} wide")
    module = build_module(lambda: ControlNetUnionModel(**cfg), dict(state_dict), path, "union ControlNet")
    return UnionControlNet(arch="sdxl", module=module, config=cfg, control_type=control_type)
