"""cogvideox-tiny: deterministic tiny CogVideoX files for VOID's template, in ComfyUI's key layout
(nodes/models/cogvideox.py): diffusion_models/void_pass{1,2}_tiny.safetensors (CogVideoX 1.5's linear 2x2x2 patcher
with VOID's 48 input channels: 16 latent + VOIDInpaintConditioning's 32; 2 heads of 64, a 64-wide time embedding,
2 blocks, rotary positions, text states 32 wide: flux-tiny-t5's width, which CLIPLoader type cogvideox reads) and
vae/cogvideox_vae_tiny.safetensors (diffusers' AutoencoderKLCogVideoX names as released: 4 blocks of width 32, one
residual block each, 4x time and 8x space, 16 latent channels). bfloat16 as the released transformers; seeded, so
the files are byte-identical from run to run. ComfyUI's detection gives the transformer 2 heads, so its 2B latent
scale (1.15258426) applies to these files; the VAE is built at the released sizes there, so its recorder gives it
these."""

from __future__ import annotations

from pathlib import Path

import torch
from safetensors.torch import save_file

from nodes.models.cogvideox import to_diffusers
from nodes.models.flux_demo import randomize_constants
from nodes.output_claims import write_atomic

SEED = 41
DIT_FILES = ("diffusion_models/void_pass1_tiny.safetensors", "diffusion_models/void_pass2_tiny.safetensors")
VAE_FILE = "vae/cogvideox_vae_tiny.safetensors"
DIT = dict(
    num_attention_heads=2,
    attention_head_dim=64,
    in_channels=48,
    out_channels=16,
    time_embed_dim=64,
    text_embed_dim=32,
    num_layers=2,
    patch_size=2,
    patch_size_t=2,
    sample_height=96,
    sample_width=170,
    sample_frames=81,
    use_rotary_positional_embeddings=True,
)
VAE = dict(
    block_out_channels=(32, 32, 32, 32),
    layers_per_block=1,
    latent_channels=16,
    down_block_types=("CogVideoXDownBlock3D",) * 4,
    up_block_types=("CogVideoXUpBlock3D",) * 4,
)


def _comfy_names(sd: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """diffusers' names -> ComfyUI's (the inverse of cogvideox.to_diffusers, found by converting every key)."""
    inverse = {}
    for key in sd:
        for comfy in _candidates(key):
            if to_diffusers({comfy: sd[key]}).keys() == {key}:
                inverse[comfy] = sd[key]
                break
        else:
            raise KeyError(f"no ComfyUI name for {key}")
    return inverse


def _candidates(key: str) -> list[str]:
    names = [
        ("transformer_blocks.", "blocks."),
        ("attn1.to_q.", "q."),
        ("attn1.to_k.", "k."),
        ("attn1.to_v.", "v."),
        ("attn1.norm_q.", "norm_q."),
        ("attn1.norm_k.", "norm_k."),
        ("attn1.to_out.0.", "attn_out."),
        ("ff.net.0.proj.", "ff_proj."),
        ("ff.net.2.", "ff_out."),
        ("time_embedding.linear_", "time_embedding_linear_"),
        ("ofs_embedding.linear_", "ofs_embedding_linear_"),
    ]
    out = key
    for a, b in names:
        out = out.replace(a, b)
    return [out, key]


def tiny_dit_state_dict(seed: int) -> dict[str, torch.Tensor]:
    from diffusers import CogVideoXTransformer3DModel

    torch.manual_seed(seed)
    model = CogVideoXTransformer3DModel(**DIT)
    randomize_constants(model, torch.Generator().manual_seed(seed + 1))
    sd = {k: v.to(torch.bfloat16).contiguous() for k, v in model.state_dict().items()}
    return dict(sorted(_comfy_names(sd).items()))


def tiny_vae_state_dict(seed: int = SEED + 10) -> dict[str, torch.Tensor]:
    from diffusers import AutoencoderKLCogVideoX

    torch.manual_seed(seed)
    model = AutoencoderKLCogVideoX(**VAE)
    randomize_constants(model, torch.Generator().manual_seed(seed + 1))
    return {k: v.contiguous() for k, v in sorted(model.state_dict().items()) if k.startswith(("encoder.", "decoder."))}


def build_demo_cogvideox(models_dir: Path) -> list[Path]:
    written = []
    files = [(name, tiny_dit_state_dict(SEED + 2 * i)) for i, name in enumerate(DIT_FILES)]
    for name, sd in files + [(VAE_FILE, tiny_vae_state_dict())]:
        path = Path(models_dir) / name
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, lambda tmp, sd=sd: save_file(sd, str(tmp), metadata={"format": "pt"}))
        written.append(path)
    return written
