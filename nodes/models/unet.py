"""The SD-family UNet: hyperparameters inferred from ldm tensor shapes (as ComfyUI's model_detection
does), the ldm <-> diffusers key mapping for any level/block count, and the DiffusionModel wrapper."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

from nodes.upscale import common_upscale

from .components import DiffusionModel
from .errors import ModelLoadError
from .gligen import gligen_kwargs

LDM_UNET_PREFIX = "model.diffusion_model."
SDXL_TIME_EMBED_DIM = 256  # ComfyUI embeds each SDXL size condition with a fixed 256-wide Timestep
# The SDXL refiner's ADM (ComfyUI's model_base.SDXLRefiner.encode_adm): CLIP-G's pooled output, as wide as its
# states (context 1280, adm 2560 in supported_models.SDXLRefiner), then height, width, crop_h, crop_w and the
# aesthetic score; SDXL base has six sizes after a pooled output narrower than its joined L+G context.
REFINER_TIME_IDS = 5
REFINER_AESTHETIC = {"positive": 6.0, "negative": 2.5}  # ComfyUI's defaults by prompt type


def is_refiner(adm_in: int | None, context_dim: int | None) -> bool:
    """An SDXL-style UNet whose ADM input is its context width plus five size embeddings: the refiner."""
    return (
        adm_in is not None
        and context_dim is not None
        and adm_in - context_dim == REFINER_TIME_IDS * SDXL_TIME_EMBED_DIM
    )


Shapes = dict[str, tuple[int, ...]]

_RESNET_RENAMES = {
    "in_layers.0": "norm1",
    "in_layers.2": "conv1",
    "out_layers.0": "norm2",
    "out_layers.3": "conv2",
    "emb_layers.1": "time_emb_proj",
    "skip_connection": "conv_shortcut",
}


def norm_groups(channels: list[int] | tuple[int, ...]) -> int:
    """GroupNorm group count: ldm's 32 when every width allows it, else the largest that divides all
    (tiny test models). Group counts are not stored in weights, so this rule is the convention."""
    for g in (32, 16, 8, 4, 2, 1):
        if all(c % g == 0 for c in channels):
            return g
    return 1


def attention_heads(arch: str, channels: int) -> int:
    """Heads are not in the weights either: ComfyUI's conventions are 8 heads for SD1 and 64-wide heads
    for SD2/SDXL; narrower tiny models fall back to 8-wide heads. Lotus-D runs with 8 heads, as ComfyUI's
    diffusers config for it says (model_detection's LotusD: num_heads 8), not SD2's 64-wide ones."""
    if arch in ("sd1", "lotus"):
        return 8 if channels % 8 == 0 else 1
    head_dim = 64 if channels % 64 == 0 else 8 if channels % 8 == 0 else channels
    return channels // head_dim


@dataclass
class UNetLayout:
    """What the ldm weights say about a UNet, level by level (level 0 = full resolution)."""

    in_channels: int
    out_channels: int
    time_embed_dim: int
    channels: list[int]
    down_depths: list[list[int]]  # per level, per resnet: transformer depth after it (0 = none)
    up_depths: list[list[int]]  # per level (level order), per output resnet
    mid_depth: int | None  # None: no middle block
    context_dim: int | None
    use_linear: bool
    adm_in: int | None

    @property
    def levels(self) -> int:
        return len(self.channels)


def strip_prefix(shapes: dict[str, Any], prefix: str) -> dict[str, Any]:
    return {k[len(prefix) :]: v for k, v in shapes.items() if k.startswith(prefix)}


def _count(shapes: Shapes, prefix: str) -> int:
    n = 0
    while any(k.startswith(f"{prefix}{n}.") for k in shapes):
        n += 1
    return n


def _depth(shapes: Shapes, block: str) -> int:
    return _count(shapes, f"{block}.1.transformer_blocks.")


def infer_layout(shapes: Shapes, path: str | None = None, decoder: bool = True) -> UNetLayout:
    """Read levels, resnets per level, attention depth, context width, projections and adm width from
    un-prefixed ldm UNet key shapes. Works for pruned (BK-SDM style) and tiny UNets. `decoder=False`
    reads only the encoder half (a ControlNet)."""
    if "input_blocks.0.0.weight" not in shapes:
        raise ModelLoadError(path, "no UNet found (input_blocks.0.0.weight is missing)")
    try:
        in_channels = shapes["input_blocks.0.0.weight"][1]
        channels, down_depths, level, last = [], [], [], None
        for i in range(1, _count(shapes, "input_blocks.")):
            block = f"input_blocks.{i}"
            if f"{block}.0.op.weight" in shapes:
                channels.append(shapes[f"{block}.0.op.weight"][0])  # a downsample keeps its level's width
                down_depths.append(level)
                level = []
            else:
                level.append(_depth(shapes, block))
                last = shapes[f"{block}.0.out_layers.3.weight"][0]
        if last is None:
            raise ModelLoadError(path, "incomplete UNet: no resnet blocks")
        channels.append(last)
        down_depths.append(level)
        up_depths: list[list[int]] = []
        level = []
        for o in range(_count(shapes, "output_blocks.") if decoder else 0):
            block = f"output_blocks.{o}"
            level.append(_depth(shapes, block))
            if any(f"{block}.{j}.conv.weight" in shapes for j in (1, 2)):
                up_depths.append(level)
                level = []
        if decoder:
            up_depths.append(level)
            up_depths.reverse()
        mid_depth = None
        if "middle_block.0.in_layers.0.weight" in shapes:
            if "middle_block.2.in_layers.0.weight" not in shapes:
                raise ModelLoadError(path, "unsupported UNet: a middle block without two resnets")
            mid_depth = _depth(shapes, "middle_block")
        attn = next((k for k in shapes if k.endswith("transformer_blocks.0.attn2.to_k.weight")), None)
        proj = next((k for k in shapes if k.endswith(".1.proj_in.weight")), None)
        adm = shapes.get("label_emb.0.0.weight")
        out_channels = shapes["out.2.weight"][0] if decoder else in_channels
        return UNetLayout(
            in_channels,
            out_channels,
            shapes["time_embed.0.weight"][0],
            channels,
            down_depths,
            up_depths,
            mid_depth,
            shapes[attn][1] if attn else None,
            proj is not None and len(shapes[proj]) == 2,
            adm[1] if adm else None,
        )
    except KeyError as e:
        raise ModelLoadError(path, f"incomplete UNet: tensor {e.args[0]} is missing") from None


def diffusers_config(layout: UNetLayout, arch: str, path: str | None = None) -> dict[str, Any]:
    """The UNet2DConditionModel config for a layout; refuses layouts diffusers cannot express."""
    n = layout.levels
    if len(layout.up_depths) != n:
        raise ModelLoadError(path, f"unsupported UNet: {n} input levels but {len(layout.up_depths)} output levels")
    for i in range(n):
        down, up = layout.down_depths[i], layout.up_depths[i]
        if len(up) != len(down) + 1:
            raise ModelLoadError(
                path,
                f"unsupported UNet: level {i} has {len(down)} input and {len(up)} output "
                "resnets (diffusers needs one more output than input)",
            )
        if len(set(d > 0 for d in down)) > 1 or len(set(d > 0 for d in up)) > 1 or len(set(down)) > 1:
            raise ModelLoadError(path, f"unsupported UNet: attention is not uniform within level {i}")
    has_down_attn = [bool(d) and d[0] > 0 for d in layout.down_depths]
    has_up_attn = [u[0] > 0 for u in layout.up_depths]
    depths = [d[0] if a else 1 for d, a in zip(layout.down_depths, has_down_attn)]
    if layout.mid_depth:
        if has_down_attn[-1] and depths[-1] != layout.mid_depth:
            raise ModelLoadError(path, "unsupported UNet: middle block depth differs from the last level's")
        depths[-1] = layout.mid_depth  # diffusers' mid block takes the last level's depth
    cfg: dict[str, Any] = {
        "sample_size": 128 if arch == "sdxl" else 64,
        "in_channels": layout.in_channels,
        "out_channels": layout.out_channels,
        "block_out_channels": tuple(layout.channels),
        "layers_per_block": tuple(len(d) for d in layout.down_depths),
        "down_block_types": tuple("CrossAttnDownBlock2D" if a else "DownBlock2D" for a in has_down_attn),
        "up_block_types": tuple("CrossAttnUpBlock2D" if a else "UpBlock2D" for a in reversed(has_up_attn)),
        "mid_block_type": None if layout.mid_depth is None else "UNetMidBlock2DCrossAttn",
        "cross_attention_dim": layout.context_dim or 768,
        "attention_head_dim": tuple(attention_heads(arch, c) for c in layout.channels),
        "use_linear_projection": layout.use_linear,
        "transformer_layers_per_block": tuple(depths),
        "norm_num_groups": norm_groups(layout.channels),
        "time_embedding_dim": layout.time_embed_dim,
    }
    if any(u != [depths[i]] * len(u) for i, u in enumerate(layout.up_depths) if has_up_attn[i]):
        cfg["reverse_transformer_layers_per_block"] = tuple(
            tuple(max(1, x) for x in u) for u in reversed(layout.up_depths)
        )
    if layout.adm_in is not None and arch in ("lotus", "sd2"):
        # Lotus' task switch: ldm's sequential label embedding of a 4-wide vector, added to the time embedding
        # (as SD2.1 unCLIP's noised image embedding, the only SD2 UNet with a label embedding)
        cfg.update(class_embed_type="projection", projection_class_embeddings_input_dim=layout.adm_in)
    elif layout.adm_in is not None:
        cfg.update(
            addition_embed_type="text_time",
            addition_time_embed_dim=SDXL_TIME_EMBED_DIM,
            projection_class_embeddings_input_dim=layout.adm_in,
        )
    return cfg


def block_map(layout: UNetLayout, label: str = "add_embedding") -> dict[str, tuple[str, bool]]:
    """ldm block prefix -> (diffusers prefix, is_resnet), for every block of the layout. `label` is the diffusers
    module ldm's label_emb becomes: SDXL's added (text-time) embedding, or Lotus' class embedding."""
    m: dict[str, tuple[str, bool]] = {
        "time_embed.0.": ("time_embedding.linear_1.", False),
        "time_embed.2.": ("time_embedding.linear_2.", False),
        "label_emb.0.0.": (f"{label}.linear_1.", False),
        "label_emb.0.2.": (f"{label}.linear_2.", False),
        "input_blocks.0.0.": ("conv_in.", False),
        "out.0.": ("conv_norm_out.", False),
        "out.2.": ("conv_out.", False),
        "middle_block.0.": ("mid_block.resnets.0.", True),
        "middle_block.1.": ("mid_block.attentions.0.", False),
        "middle_block.2.": ("mid_block.resnets.1.", True),
    }
    idx = 1
    for i, level in enumerate(layout.down_depths):
        for j, _depth in enumerate(level):
            m[f"input_blocks.{idx}.0."] = (f"down_blocks.{i}.resnets.{j}.", True)
            m[f"input_blocks.{idx}.1."] = (f"down_blocks.{i}.attentions.{j}.", False)
            idx += 1
        if i < layout.levels - 1:
            m[f"input_blocks.{idx}.0.op."] = (f"down_blocks.{i}.downsamplers.0.conv.", False)
            idx += 1
    o = 0
    for u, level in enumerate(reversed(layout.up_depths)):
        for j, depth in enumerate(level):
            m[f"output_blocks.{o}.0."] = (f"up_blocks.{u}.resnets.{j}.", True)
            m[f"output_blocks.{o}.1."] = (f"up_blocks.{u}.attentions.{j}.", False)
            if j == len(level) - 1 and u < layout.levels - 1:
                m[f"output_blocks.{o}.{2 if depth else 1}.conv."] = (f"up_blocks.{u}.upsamplers.0.conv.", False)
            o += 1
    return m


def _split(key: str, prefixes: dict[str, Any]) -> tuple[str, str] | None:
    parts = key.split(".")
    for n in range(min(5, len(parts) - 1), 0, -1):
        p = ".".join(parts[:n]) + "."
        if p in prefixes:
            return p, key[len(p) :]
    return None


def ldm_to_diffusers(
    sd: dict[str, Any], layout: UNetLayout, path: str | None = None, mapping: dict[str, tuple[str, bool]] | None = None
) -> dict[str, Any]:
    """Rename un-prefixed ldm UNet keys to UNet2DConditionModel keys (values are passed through).
    `mapping` replaces the UNet's block map (ControlNets add their own blocks)."""
    m = mapping or block_map(layout)
    out = {}
    for key, v in sd.items():
        hit = _split(key, m)
        if hit is None:
            raise ModelLoadError(path, f"unexpected UNet tensor {key} for the inferred layout")
        prefix, rest = hit
        target, resnet = m[prefix]
        if resnet:
            head, _, tail = rest.rpartition(".")
            rest = f"{_RESNET_RENAMES.get(head, head)}.{tail}"
        out[target + rest] = v
    return out


def diffusers_to_ldm(
    sd: dict[str, Any], layout: UNetLayout, mapping: dict[str, tuple[str, bool]] | None = None
) -> dict[str, Any]:
    """The inverse of ldm_to_diffusers (used to write checkpoints in the layout users have)."""
    inv = {d: (l, r) for l, (d, r) in (mapping or block_map(layout)).items()}
    back = {v: k for k, v in _RESNET_RENAMES.items()}
    out = {}
    for key, v in sd.items():
        hit = _split(key, inv)
        if hit is None:
            raise KeyError(f"no ldm name for UNet key {key}")
        prefix, rest = hit
        target, resnet = inv[prefix]
        if resnet:
            head, _, tail = rest.rpartition(".")
            rest = f"{back.get(head, head)}.{tail}"
        out[target + rest] = v
    return out


SD2_V_MARKER = "output_blocks.11.1.transformer_blocks.0.norm1.bias"  # the bias ComfyUI's SD20.model_type reads


def prediction_type(arch: str, sd: dict[str, torch.Tensor]) -> str:
    """eps or v: an explicit `v_pred` marker key (as ComfyUI reads it), or for SD2 ComfyUI's heuristic
    on the spread of one late norm bias, which v-models trained from 768px weights show."""
    if "v_pred" in sd:
        return "v"
    if arch == "sd2":
        bias = sd.get(SD2_V_MARKER)
        if bias is not None and torch.std(bias.float(), unbiased=False) > 0.09:
            return "v"
    return "eps"


class UNetModel(DiffusionModel):
    """SD1/SD2/SDXL UNet behind ComfyUI's apply convention."""

    @property
    def refiner(self) -> bool:
        """The SDXL refiner: its size conditioning is [height, width, crop_h, crop_w, aesthetic score]."""
        cfg = self.module.config
        return is_refiner(cfg.get("projection_class_embeddings_input_dim"), cfg.get("cross_attention_dim"))

    def concat_image(
        self, image: torch.Tensor | None, x: torch.Tensor, mask: torch.Tensor | None = None, mask_index: int = 0
    ) -> torch.Tensor | None:
        """InstructPix2Pix UNets (twice the latent's input channels, as ComfyUI detects them) take the image's
        raw latent (zeros without one) joined to the input, resized to the input's size (bilinear, centre
        crop) and batch, as ComfyUI's IP2P concat_cond."""
        in_channels = self.module.config.in_channels
        if in_channels == self.latent_format.channels:
            return None
        if in_channels != 2 * self.latent_format.channels:
            raise ValueError(f"UNets with {in_channels} input channels (inpainting models) are not supported")
        if image is None:
            return torch.zeros_like(x)
        image = image.to(x.device, x.dtype)
        if image.shape[1:] != x.shape[1:]:
            image = common_upscale(image, x.shape[-1], x.shape[-2], "bilinear", "center")
        return resize_to_batch_size(image, x.shape[0])

    def apply(self, x: torch.Tensor, timestep: torch.Tensor, cond: dict[str, Any]) -> torch.Tensor:
        context = cond["context"].to(self.dtype)
        b = x.shape[0]
        # float32 timesteps in any compute dtype: the sinusoidal embedding is taken in float32 and cast to the
        # network's dtype after, as ComfyUI's model_base does (bf16 would round t=999 to 1000)
        t = timestep.reshape(-1).float()
        t = t.expand(b) if t.numel() == 1 else t
        added = None
        if self.arch == "sdxl":
            pooled = cond.get("pooled")
            if pooled is None:
                raise ValueError("SDXL needs the pooled text embedding in cond['pooled']")
            added = {
                "text_embeds": _batch(pooled, b).to(self.dtype),
                "time_ids": _batch(sdxl_time_ids(x, cond.get("time_ids"), self.refiner), b).to(self.dtype),
            }
        class_labels = None
        if self.arch == "lotus":  # ComfyUI's model_base.Lotus adds its depth task embedding to every call
            class_labels = lotus_task_embedding(b, x.device).to(self.dtype)
        elif self.arch == "sd2" and self.module.config.class_embed_type == "projection":
            # SD2.1 unCLIP: the image embedding's ADM (nodes/models/unclip.py), zeros without an image as in ComfyUI
            adm = cond.get("adm")
            width = self.module.config.projection_class_embeddings_input_dim
            adm = torch.zeros(1, width, device=x.device) if adm is None else adm
            class_labels = _batch(adm, b).to(self.dtype)
        control = cond.get("control")
        down = mid = None
        if control is not None:
            down, mid = tuple(r.to(self.dtype) for r in control.down), control.mid.to(self.dtype)
        if cond.get("concat") is not None:  # the model's extra input channels (concat_image)
            x = torch.cat([x, cond["concat"].to(x.dtype)], dim=1)
        out = self.module(
            x.to(self.dtype),
            t,
            encoder_hidden_states=_batch(context, b),
            class_labels=class_labels,
            added_cond_kwargs=added,
            cross_attention_kwargs=None if cond.get("gligen") is None else gligen_kwargs(self.module, *cond["gligen"]),
            down_block_additional_residuals=down,
            mid_block_additional_residual=mid,
            return_dict=False,
        )[0]
        return out.to(x.dtype)


def lotus_task_embedding(b: int, device: torch.device) -> torch.Tensor:
    """Lotus-D's task vector [sin(1), sin(0), cos(1), cos(0)] (the depth task of its 2-task switch, as ComfyUI's
    model_base.Lotus builds it), one row per sample."""
    task = torch.tensor([1.0, 0.0], device=device)
    return torch.cat([torch.sin(task), torch.cos(task)]).unsqueeze(0).expand(b, -1)


def sdxl_time_ids(x: torch.Tensor, time_ids: torch.Tensor | None, refiner: bool = False) -> torch.Tensor:
    """SDXL size conditioning [height, width, crop_h, crop_w, target_h, target_w] (the refiner's: [height,
    width, crop_h, crop_w, aesthetic score]); ComfyUI's defaults are the image size (latent * 8), no crop and a
    positive prompt's aesthetic score."""
    if time_ids is not None:
        return time_ids
    h, w = x.shape[-2] * 8, x.shape[-1] * 8
    last = [REFINER_AESTHETIC["positive"]] if refiner else [h, w]
    return torch.tensor([[h, w, 0, 0, *last]], dtype=torch.float32, device=x.device)


def resize_to_batch_size(t: torch.Tensor, b: int) -> torch.Tensor:
    """A batch of b from t's samples spread evenly over it (ComfyUI's rule: fewer pick from both ends, more
    repeat each in turn)."""
    n = t.shape[0]
    if n == b or b <= 1:
        return t[:b]
    if b < n:
        picks = [min(round(i * (n - 1) / (b - 1)), n - 1) for i in range(b)]
    else:
        picks = [min(math.floor((i + 0.5) * n / b), n - 1) for i in range(b)]
    return t[picks]


def _batch(t: torch.Tensor, b: int) -> torch.Tensor:
    if t.shape[0] == b:
        return t
    if b % t.shape[0]:
        raise ValueError(f"conditioning batch {t.shape[0]} does not divide the latent batch {b}")
    return t.repeat(b // t.shape[0], *([1] * (t.dim() - 1)))
