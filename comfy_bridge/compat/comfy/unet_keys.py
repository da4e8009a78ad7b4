"""The key names of an SD UNet state dict in ComfyUI's (LDM) and in diffusers' layout, as `comfy.utils`
offers them (UNET_MAP_*, TRANSFORMER_BLOCKS, unet_to_diffusers); packs such as Advanced-ControlNet convert
diffusers-format control models with them."""

from __future__ import annotations

from itertools import product

# Inside a spatial transformer: the projections and the norm around its blocks.
UNET_MAP_ATTENTIONS = {f"{part}.{p}" for part, p in product(("proj_in", "proj_out", "norm"), ("weight", "bias"))}

# Inside one transformer block (names are the same in both layouts).
TRANSFORMER_BLOCKS = (
    {f"norm{i}.{p}" for i in (1, 2, 3) for p in ("weight", "bias")}
    | {f"attn{a}.to_{x}.weight" for a in (1, 2) for x in ("q", "k", "v")}
    | {f"attn{a}.to_out.0.{p}" for a in (1, 2) for p in ("weight", "bias")}
    | {f"ff.net.{i}.{p}" for i, p in product(("0.proj", "2"), ("weight", "bias"))}
)

# A resnet block: LDM name -> diffusers name.
_RESNET_PARTS = {
    "in_layers.2": "conv1",
    "emb_layers.1": "time_emb_proj",
    "out_layers.3": "conv2",
    "skip_connection": "conv_shortcut",
    "in_layers.0": "norm1",
    "out_layers.0": "norm2",
}
UNET_MAP_RESNET = {
    f"{ldm}.{p}": f"{diffusers}.{p}" for ldm, diffusers in _RESNET_PARTS.items() for p in ("weight", "bias")
}

# Top-level layers: (LDM name, diffusers name); the label embedding has two diffusers spellings.
_BASIC_PARTS = [
    ("label_emb.0.0", "class_embedding.linear_1"),
    ("label_emb.0.2", "class_embedding.linear_2"),
    ("label_emb.0.0", "add_embedding.linear_1"),
    ("label_emb.0.2", "add_embedding.linear_2"),
    ("input_blocks.0.0", "conv_in"),
    ("out.0", "conv_norm_out"),
    ("out.2", "conv_out"),
    ("time_embed.0", "time_embedding.linear_1"),
    ("time_embed.2", "time_embedding.linear_2"),
]
UNET_MAP_BASIC = {(f"{ldm}.{p}", f"{diffusers}.{p}") for ldm, diffusers in _BASIC_PARTS for p in ("weight", "bias")}


def _attention(out: dict, diffusers: str, ldm: str, depth: int) -> None:
    for b in UNET_MAP_ATTENTIONS:
        out[f"{diffusers}.{b}"] = f"{ldm}.{b}"
    for t in range(depth):
        for b in TRANSFORMER_BLOCKS:
            out[f"{diffusers}.transformer_blocks.{t}.{b}"] = f"{ldm}.transformer_blocks.{t}.{b}"


def _resnet(out: dict, diffusers: str, ldm: str) -> None:
    for ldm_part, diffusers_part in UNET_MAP_RESNET.items():
        out[f"{diffusers}.{diffusers_part}"] = f"{ldm}.{ldm_part}"


def unet_to_diffusers(unet_config: dict) -> dict[str, str]:
    """{diffusers key: LDM key} for a UNet of this config ({} for configs that are not a UNet's)."""
    if "num_res_blocks" not in unet_config:
        return {}
    res_blocks = list(unet_config["num_res_blocks"])
    levels = len(unet_config["channel_mult"])
    depth_in = list(unet_config["transformer_depth"])
    depth_out = list(unet_config["transformer_depth_output"])
    out: dict[str, str] = {}
    # Down: input block n holds level x's resnet i (and its attention); each level but none ends in a downsampler.
    for x in range(levels):
        n = 1 + (res_blocks[x] + 1) * x
        for i in range(res_blocks[x]):
            _resnet(out, f"down_blocks.{x}.resnets.{i}", f"input_blocks.{n}.0")
            depth = depth_in.pop(0)
            if depth > 0:
                _attention(out, f"down_blocks.{x}.attentions.{i}", f"input_blocks.{n}.1", depth)
            n += 1
        for p in ("weight", "bias"):
            out[f"down_blocks.{x}.downsamplers.0.conv.{p}"] = f"input_blocks.{n}.0.op.{p}"
    # Middle: resnet, attention, resnet.
    _attention(out, "mid_block.attentions.0", "middle_block.1", unet_config.get("transformer_depth_middle") or 0)
    for i, n in enumerate((0, 2)):
        _resnet(out, f"mid_block.resnets.{i}", f"middle_block.{n}")
    # Up: levels in reverse, one more resnet per level; the last of each level carries the upsampler.
    res_blocks.reverse()
    for x in range(levels):
        n = (res_blocks[x] + 1) * x
        count = res_blocks[x] + 1
        for i in range(count):
            _resnet(out, f"up_blocks.{x}.resnets.{i}", f"output_blocks.{n}.0")
            slot = 1
            depth = depth_out.pop()
            if depth > 0:
                slot += 1
                _attention(out, f"up_blocks.{x}.attentions.{i}", f"output_blocks.{n}.1", depth)
            if i == count - 1:
                for p in ("weight", "bias"):
                    out[f"up_blocks.{x}.upsamplers.0.conv.{p}"] = f"output_blocks.{n}.{slot}.conv.{p}"
            n += 1
    for ldm, diffusers in UNET_MAP_BASIC:
        out[diffusers] = ldm
    return out
