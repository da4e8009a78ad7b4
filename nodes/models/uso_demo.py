"""A tiny USO style projector for flux-tiny and sigclip-vision-tiny (nodes.models.redux_demo), for `demo-models`:
model_patches/uso-flux1-projector-v1-tiny.safetensors in the published file's layout (`feature_embedder.*`,
nodes/models/uso_projector.py): SigLIP's 729 tokens to USO's 64 style tokens per level, from the tiny tower's
width 32 to flux-tiny's hidden width 32 (1152 and 3072 in uso-flux1-projector-v1). Same seed -> same bytes.

And USO's DiT LoRA: loras/uso-flux1-dit-lora-v1-tiny.safetensors in the released file's layout (its trainer's
processor names, `double_blocks.N.processor.qkv_lora1.down.weight`, ..., nodes/models/flux_lora.py), which ComfyUI
recognises by the keys of the released depth (19 double, 38 single blocks); so beside it
checkpoints/flux1-dev-uso-tiny.safetensors, flux-tiny's all-in-one checkpoint with a transformer of that depth at
flux-tiny's width."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import save_file

from nodes.models.flux_configs import CONFIGS_DIR
from nodes.models.flux_demo import randomize_constants
from nodes.models.redux_demo import SIGLIP_SIZES
from nodes.models.uso_projector import PREFIX, UsoStyleProjector
from nodes.output_claims import write_atomic

SEED = 29
USO_PROJECTOR = "model_patches/uso-flux1-projector-v1-tiny.safetensors"
USO_LORA = "loras/uso-flux1-dit-lora-v1-tiny.safetensors"
USO_CHECKPOINT = "checkpoints/flux1-dev-uso-tiny.safetensors"
RELEASED_DEPTH = (19, 38)  # FLUX.1's double and single blocks, which ComfyUI's USO LoRA test reads
LORA_RANK = 4
STYLE_TOKENS = 64
FLUX_HIDDEN = 32  # flux-tiny: 2 heads of 16


def tiny_uso_state_dict(seed: int = SEED) -> dict[str, torch.Tensor]:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        net = UsoStyleProjector(SIGLIP_SIZES.side**2, STYLE_TOKENS, SIGLIP_SIZES.width, FLUX_HIDDEN)
        randomize_constants(net, torch.Generator().manual_seed(seed))  # layer norms of one would hide mix-ups
    return {f"{PREFIX}{k[len('levels.') :].replace('.', '_', 1)}": v.contiguous() for k, v in net.state_dict().items()}


def deep_flux_checkpoint(seed: int = SEED) -> dict[str, torch.Tensor]:
    """flux-tiny's all-in-one checkpoint with its transformer RELEASED_DEPTH deep (its own random weights)."""
    from diffusers import FluxTransformer2DModel

    from nodes.models.flux_demo import CONFIG_NAME, tiny_flux_state_dicts
    from nodes.models.flux_keys import diffusers_to_bfl

    with torch.random.fork_rng(devices=[]):
        sds = tiny_flux_state_dicts(0)
        torch.manual_seed(seed)
        axes = json.loads((CONFIGS_DIR / CONFIG_NAME / "flux.json").read_text())["axes_dim"]
        net = FluxTransformer2DModel(
            patch_size=1,
            in_channels=64,
            num_layers=RELEASED_DEPTH[0],
            num_single_layers=RELEASED_DEPTH[1],
            attention_head_dim=16,
            num_attention_heads=2,
            joint_attention_dim=32,
            pooled_projection_dim=32,
            guidance_embeds=True,
            axes_dims_rope=tuple(axes),
        )
        randomize_constants(net, torch.Generator().manual_seed(seed))
    sds["transformer"] = diffusers_to_bfl(net.state_dict())
    prefixes = {
        "transformer": "model.diffusion_model.",
        "vae": "vae.",
        "clip_l": "text_encoders.clip_l.transformer.",
        "t5xxl": "text_encoders.t5xxl.transformer.",
    }
    return {prefixes[c] + k: v.contiguous() for c, sd in sds.items() for k, v in sd.items()}


def tiny_uso_lora(transformer: dict[str, torch.Tensor], seed: int = SEED) -> dict[str, torch.Tensor]:
    """USO's DiT LoRA layout for a BFL-named transformer: per double block qkv_lora1/2 (hidden -> 3 hidden) and
    proj_lora1/2 (hidden -> hidden), per single block qkv_lora (hidden -> 3 hidden) and proj_lora (linear2's input,
    5 hidden -> hidden); nn.Linear down / up weights, no alpha."""
    gen = torch.Generator().manual_seed(seed + 1)
    hidden = transformer["img_in.weight"].shape[0]
    out: dict[str, torch.Tensor] = {}

    def pair(name: str, fan_in: int, fan_out: int) -> None:
        out[f"{name}.down.weight"] = 0.1 * torch.randn(LORA_RANK, fan_in, generator=gen)
        out[f"{name}.up.weight"] = 0.1 * torch.randn(fan_out, LORA_RANK, generator=gen)

    for i in range(RELEASED_DEPTH[0]):
        for stream in ("1", "2"):
            pair(f"double_blocks.{i}.processor.qkv_lora{stream}", hidden, 3 * hidden)
            pair(f"double_blocks.{i}.processor.proj_lora{stream}", hidden, hidden)
    for i in range(RELEASED_DEPTH[1]):
        pair(f"single_blocks.{i}.processor.qkv_lora", hidden, 3 * hidden)
        pair(
            f"single_blocks.{i}.processor.proj_lora", transformer[f"single_blocks.{i}.linear2.weight"].shape[1], hidden
        )
    return out


def build_demo_uso(models_dir: Path, seed: int = SEED) -> list[Path]:
    """Write the tiny USO projector, DiT LoRA and deep checkpoint under a ComfyUI models folder; returns the paths."""
    from nodes.models.flux_configs import METADATA_KEY
    from nodes.models.flux_demo import CONFIG_NAME

    checkpoint = deep_flux_checkpoint(seed)
    transformer = {k[len("model.diffusion_model.") :]: v for k, v in checkpoint.items() if k.startswith("model.")}
    files = {
        USO_PROJECTOR: (tiny_uso_state_dict(seed), {"format": "pt"}),
        USO_LORA: (tiny_uso_lora(transformer, seed), {"format": "pt"}),
        USO_CHECKPOINT: (checkpoint, {METADATA_KEY: CONFIG_NAME}),
    }
    written = []
    for rel, (sd, meta) in files.items():
        path = Path(models_dir) / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, lambda tmp, sd=sd, meta=meta: save_file(sd, tmp, metadata=meta))
        written.append(path)
    return written
