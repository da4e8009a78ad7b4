"""Deterministic tiny Stable Cascade: the two all-in-one checkpoints ComfyUI's Stable Cascade workflow loads with
CheckpointLoaderSimple, in the layout ComfyUI saves them in (comfy/sd.py save_checkpoint with
supported_models.Stable_Cascade_C/_B's prefixes):

- checkpoints/stable_cascade_stage_c-tiny.safetensors: the stage C prior under `model.diffusion_model.` (ComfyUI's
  names: the attention's q/k/v split), CLIP-G under `text_encoder.clip_g.transformer.` (transformers' names) and
  the stage C coder (EfficientNet encoder and previewer) under `vae.encoder.` / `vae.previewer.`;
- checkpoints/stable_cascade_stage_b-tiny.safetensors: the stage B decoder under `model.diffusion_model.` and stage
  A under `vae.`;
- diffusion_models/stable_cascade_stage_c-tiny.safetensors: the same stage C bare, in Stability's published names (fused
  `attention.attn.in_proj_*`), for UNETLoader.

Narrow but in the real design: stage C keeps its 16 latent channels, the CLIP image slot's 768 width (ComfyUI feeds
it zeros of that width), 64-wide heads and its sca/crp timestep mappers; stage B its 4 channels, effnet and pixel
mappers, an attention-free outer level and repeat mappers on the way up; stage A its two levels and batch-normed
latent; CLIP-G the OpenAI vocabulary (49408 tokens), GELU and a text projection. The networks in float32 and
CLIP-G in float16, the dtypes ComfyUI computes them in on the CPU, so that it computes what we compute. Same seed -> byte-identical files."""

from __future__ import annotations

from pathlib import Path

import torch
from safetensors.torch import save_file

from nodes.output_claims import write_atomic

FILES = {
    "stage_c": "checkpoints/stable_cascade_stage_c-tiny.safetensors",
    "stage_b": "checkpoints/stable_cascade_stage_b-tiny.safetensors",
    "stage_c_unet": "diffusion_models/stable_cascade_stage_c-tiny.safetensors",
}
SEED = 39
CLIP_G = {"hidden": 32, "intermediate": 64, "layers": 2, "projection": 32, "vocab": 49408}
ATTN = ("SDCascadeResBlock", "SDCascadeTimestepBlock", "SDCascadeAttnBlock")
STAGE_C = {
    "in_channels": 16,
    "out_channels": 16,
    "conditioning_dim": 128,
    "block_out_channels": (128, 128),
    "num_attention_heads": (2, 2),
    "down_num_layers_per_block": (1, 1),
    "up_num_layers_per_block": (1, 1),
    "down_blocks_repeat_mappers": (1, 1),
    "up_blocks_repeat_mappers": (1, 1),
    "block_types_per_layer": (ATTN, ATTN),
    "clip_text_in_channels": CLIP_G["hidden"],
    "clip_text_pooled_in_channels": CLIP_G["projection"],
    "clip_image_in_channels": 768,
    "dropout": (0.0, 0.0),
    "switch_level": (False,),
}
STAGE_B = {
    "in_channels": 4,
    "out_channels": 4,
    "patch_size": 2,
    "conditioning_dim": 64,
    "block_out_channels": (32, 128),
    "num_attention_heads": (-1, 2),
    "down_num_layers_per_block": (1, 1),
    "up_num_layers_per_block": (1, 1),
    "down_blocks_repeat_mappers": (1, 1),
    "up_blocks_repeat_mappers": (2, 2),
    "block_types_per_layer": (ATTN[:2], ATTN),
    "clip_text_pooled_in_channels": CLIP_G["projection"],
    "effnet_in_channels": 16,
    "pixel_mapper_in_channels": 3,
    "dropout": (0.0, 0.0),
    "timestep_conditioning_type": ("sca",),
}
STAGE_A = {"widths": (16, 32), "bottleneck": 2, "latent": 4, "codebook": 64}
# The stage C coder: EfficientNetV2-S's six stages (fused, then squeeze-excite) at tiny widths, one or two blocks
# each, its 1280-wide head (ComfyUI's mapper reads 1280 channels); the previewer 32 wide (512 in the release).
# (fused, expansion, kernel, in, out, blocks) per stage
CODER_STAGES = (
    (True, 1, 3, 8, 8, 1),
    (True, 4, 3, 8, 16, 1),
    (True, 4, 3, 16, 16, 2),
    (False, 4, 3, 16, 32, 1),
    (False, 6, 3, 32, 32, 2),
    (False, 6, 3, 32, 48, 1),
)
CODER_HEAD, PREVIEWER_HIDDEN = 1280, 32


def tiny_coder():
    """(EfficientNetEncoder, Previewer) at the tiny sizes, weights not yet drawn."""
    from nodes.models.stable_cascade_coder import STAGE_STRIDES, BlockShape, EfficientNetEncoder, Previewer

    stages = [
        [
            BlockShape(fused, cin if j == 0 else cout, (cin if j == 0 else cout) * e, cout, k, stride if j == 0 else 1)
            for j in range(n)
        ]
        for (fused, e, k, cin, cout, n), stride in zip(CODER_STAGES, STAGE_STRIDES)
    ]
    return EfficientNetEncoder(CODER_STAGES[0][3], stages, CODER_HEAD, 16), Previewer(16, PREVIEWER_HIDDEN)


def _randomize(module: torch.nn.Module, gen: torch.Generator, scale: float = 0.2) -> dict[str, torch.Tensor]:
    out = {}
    for k, v in module.state_dict().items():
        if k.endswith("num_batches_tracked"):
            out[k] = v.clone()
        elif k.endswith("running_var"):
            out[k] = torch.rand(v.shape, generator=gen) + 0.5
        else:
            out[k] = torch.randn(v.shape, generator=gen) * scale
    return out


def comfy_names(sd: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """diffusers' StableCascadeUNet names -> ComfyUI's module names (what ComfyUI saves in a checkpoint)."""
    out = {}
    for k, v in sd.items():
        k = k.replace("attention.to_out.0.", "attention.attn.out_proj.")
        for qkv in ("to_q", "to_k", "to_v"):
            k = k.replace(f"attention.{qkv}.", f"attention.attn.{qkv}.")
        if k.startswith("clip_txt_pooled_mapper.") and "clip_txt_mapper.weight" not in sd:
            k = "clip_mapper." + k[len("clip_txt_pooled_mapper.") :]  # stage B's name
        out[k] = v
    return out


def stability_names(sd: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """ComfyUI's split q/k/v -> the fused `in_proj_*` of Stability's published files."""
    out = dict(sd)
    for k in [k for k in sd if ".attention.attn.to_q." in k]:
        base, leaf = k.split(".attention.attn.to_q.")
        parts = [out.pop(f"{base}.attention.attn.{n}.{leaf}") for n in ("to_q", "to_k", "to_v")]
        out[f"{base}.attention.attn.in_proj_{leaf}"] = torch.cat(parts)
    return out


def tiny_state_dicts(seed: int = SEED) -> dict[str, dict[str, torch.Tensor]]:
    from diffusers.models.unets.unet_stable_cascade import StableCascadeUNet
    from transformers import CLIPTextConfig, CLIPTextModelWithProjection

    from nodes.models.stable_cascade_vae import StageA

    gen = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    stage_c = comfy_names(_randomize(StableCascadeUNet(**STAGE_C), gen, scale=0.1))
    stage_b = comfy_names(_randomize(StableCascadeUNet(**STAGE_B), gen, scale=0.1))
    stage_a = _randomize(StageA(**STAGE_A), gen, scale=0.1)
    # a quiet output layer around mid grey, so that the tiny images are pictures rather than saturated noise
    stage_a["out_block.0.weight"] *= 0.02
    stage_a["out_block.0.bias"] = torch.full_like(stage_a["out_block.0.bias"], 0.5)
    cfg = CLIPTextConfig(
        vocab_size=CLIP_G["vocab"],
        hidden_size=CLIP_G["hidden"],
        intermediate_size=CLIP_G["intermediate"],
        num_hidden_layers=CLIP_G["layers"],
        num_attention_heads=CLIP_G["hidden"] // 8,  # the tiny CLIPs' 8-wide heads (nodes/models/clip.py)
        max_position_embeddings=77,
        projection_dim=CLIP_G["projection"],
        hidden_act="gelu",
        bos_token_id=49406,
        eos_token_id=49407,
        pad_token_id=49407,
    )
    clip = _randomize(CLIPTextModelWithProjection(cfg), gen, scale=0.1)
    # CLIP-G in float16, the dtype ComfyUI keeps text encoders in on the CPU (model_management.text_encoder_dtype)
    clip = {k: v.half() for k, v in clip.items() if not k.endswith("position_ids")}
    encoder, previewer = tiny_coder()
    coder = {f"encoder.{k}": v for k, v in _randomize(encoder, gen).items() if k not in ("mean", "std")}
    coder.update({"encoder.mean": encoder.mean.detach().clone(), "encoder.std": encoder.std.detach().clone()})
    coder.update({f"previewer.{k}": v for k, v in _randomize(previewer, gen).items()})
    te = "text_encoder.clip_g.transformer."
    return {
        "stage_c": {
            **{f"model.diffusion_model.{k}": v for k, v in stage_c.items()},
            **{te + k: v for k, v in clip.items()},
            **{f"vae.{k}": v for k, v in coder.items()},
        },
        "stage_b": {
            **{f"model.diffusion_model.{k}": v for k, v in stage_b.items()},
            **{f"vae.{k}": v for k, v in stage_a.items()},
        },
        "stage_c_unet": stability_names(stage_c),
    }


def build_demo_stable_cascade(models_dir: Path, seed: int = SEED) -> list[Path]:
    """Write the tiny Stable Cascade files under a ComfyUI models folder; returns the paths written."""
    with torch.random.fork_rng(devices=[]):  # the builders seed torch's global generator
        sds = tiny_state_dicts(seed)
    written = []
    for part, tensors in sds.items():
        path = Path(models_dir) / FILES[part]
        path.parent.mkdir(parents=True, exist_ok=True)
        tensors = {k: v.contiguous() for k, v in sorted(tensors.items())}
        write_atomic(path, lambda tmp, tensors=tensors: save_file(tensors, tmp, metadata={"format": "pt"}))
        written.append(path)
    return written
