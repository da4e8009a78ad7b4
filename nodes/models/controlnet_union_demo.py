"""A tiny SDXL union ControlNet (xinsir's controlnet-union-sdxl-1.0 ProMax layout: ControlNet++ with
task_embedding, transformer_layes, spatial_ch_projs and control_add_embedding beside a diffusers ControlNet), for
`demo-models`: controlnet/controlnet-union-sdxl-promax-tiny.safetensors, written from diffusers'
ControlNetUnionModel, whose state dict is the published file's layout. What the union part computes has widths
fixed by ComfyUI (320-wide task tokens added to the hint features, 256-wide control-type embeddings), so the
ControlNet is 320 channels wide at its one level; its text states (80) and pooled width (32) are sdxl-tiny's.
diffusion_models/sdxl-union-base-tiny.safetensors is an SDXL UNet of that width for it. Same seed -> same bytes."""

from __future__ import annotations

from pathlib import Path

import torch
from safetensors.torch import save_file

from nodes.models.flux_demo import randomize_constants
from nodes.output_claims import write_atomic

from .controlnet_union import CONTROL_TYPE_EMBED_DIM, TASK_CHANNELS
from .unet import SDXL_TIME_EMBED_DIM, UNetLayout, diffusers_to_ldm

SEED = 31
UNION_CONTROLNET = "controlnet/controlnet-union-sdxl-promax-tiny.safetensors"
# An SDXL UNet as wide as the union ControlNet (sdxl-tiny's 32 cannot take its 320-wide residuals): one level of one
# resnet and one transformer (ComfyUI reads the text width from the first level's), a middle block one transformer
# deep, 64-wide heads, sdxl-tiny's text and pooled widths.
UNION_BASE = "diffusion_models/sdxl-union-base-tiny.safetensors"
CONTEXT, POOLED, SIZES = 80, 32, 6  # sdxl-tiny's text states, pooled output and size values
PROMAX_TYPES = 8  # the ProMax file's task_embedding rows (controlnet-union-sdxl-1.0 has 6)


def tiny_union_state_dict(seed: int = SEED) -> dict[str, torch.Tensor]:
    from diffusers.models.controlnets.controlnet_union import ControlNetUnionModel

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        net = ControlNetUnionModel(
            in_channels=4,
            down_block_types=("DownBlock2D",),
            block_out_channels=(TASK_CHANNELS,),
            layers_per_block=1,
            cross_attention_dim=CONTEXT,
            attention_head_dim=(TASK_CHANNELS // 64,),  # SDXL's 64-wide heads (heads are not in the weights)
            use_linear_projection=True,
            addition_embed_type="text_time",
            addition_time_embed_dim=SDXL_TIME_EMBED_DIM,
            projection_class_embeddings_input_dim=SIZES * SDXL_TIME_EMBED_DIM + POOLED,
            conditioning_embedding_out_channels=(16, 32, 96, 256),  # ComfyUI's fixed hint encoder widths
            num_control_type=PROMAX_TYPES,
            num_trans_channel=TASK_CHANNELS,
            num_proj_channel=TASK_CHANNELS,
        )
        assert CONTROL_TYPE_EMBED_DIM == SDXL_TIME_EMBED_DIM
        gen = torch.Generator().manual_seed(seed)
        with torch.no_grad():  # zero-initialised outputs (zero convs, spatial_ch_projs) would hide the union part
            for p in net.parameters():
                if bool((p == 0).all()) and p.ndim > 1:
                    p.copy_(torch.randn(p.shape, generator=gen) * p[0].numel() ** -0.5)
        randomize_constants(net, gen)
        with torch.no_grad():  # diffusers draws the task rows sqrt(320) wide; unit rows keep the residuals near 1
            net.task_embedding.mul_(TASK_CHANNELS**-0.5)
    return {k: v.to(torch.float16).contiguous() for k, v in net.state_dict().items()}


def tiny_union_base_state_dict(seed: int = SEED) -> dict[str, torch.Tensor]:
    """The UNet for the union ControlNet, in the ldm layout (`input_blocks.*`, `label_emb.*`) SDXL files have."""
    from diffusers import UNet2DConditionModel

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed + 1)
        unet = UNet2DConditionModel(
            sample_size=8,
            in_channels=4,
            out_channels=4,
            block_out_channels=(TASK_CHANNELS,),
            layers_per_block=1,
            down_block_types=("CrossAttnDownBlock2D",),
            up_block_types=("CrossAttnUpBlock2D",),
            cross_attention_dim=CONTEXT,
            attention_head_dim=(TASK_CHANNELS // 64,),
            use_linear_projection=True,
            addition_embed_type="text_time",
            addition_time_embed_dim=SDXL_TIME_EMBED_DIM,
            projection_class_embeddings_input_dim=SIZES * SDXL_TIME_EMBED_DIM + POOLED,
        )
        gen = torch.Generator().manual_seed(seed + 1)
        with torch.no_grad():  # diffusers zero-initialises the output conv
            for p in unet.parameters():
                if bool((p == 0).all()) and p.ndim > 1:
                    p.copy_(torch.randn(p.shape, generator=gen) * p[0].numel() ** -0.5)
        randomize_constants(unet, gen)
    layout = UNetLayout(4, 4, 0, [TASK_CHANNELS], [[1]], [[1, 1]], 1, CONTEXT, True, None)
    return {k: v.to(torch.float16).contiguous() for k, v in diffusers_to_ldm(unet.state_dict(), layout).items()}


def build_demo_controlnet_union(models_dir: Path, seed: int = SEED) -> list[Path]:
    """Write the tiny union ControlNet and its UNet under a ComfyUI models folder; returns the paths written."""
    written = []
    for name, build in ((UNION_CONTROLNET, tiny_union_state_dict), (UNION_BASE, tiny_union_base_state_dict)):
        path = Path(models_dir) / name
        path.parent.mkdir(parents=True, exist_ok=True)
        sd = build(seed)
        write_atomic(path, lambda tmp, sd=sd: save_file(sd, tmp, metadata={"format": "pt"}))
        written.append(path)
    return written
