"""chroma-tiny: a deterministic tiny Chroma written in the layout of Chroma1-HD's files (ComfyUI's / lodestones'
names: `img_in`, `distilled_guidance_layer.layers.N.in_layer`, `double_blocks.N.img_attn.qkv`, `single_blocks.N.linear1`,
`final_layer.linear`) as diffusion_models/chroma_tiny.safetensors: 2 double and 2 single blocks, 2 heads 16 wide, the
approximator 32 wide and 5 layers deep (Chroma1's depth), over the tiny T5's 32-wide states. Its metadata names the
flux-tiny config (RoPE axes 4/4/8 for the 16-wide heads); the text encoder and VAE are flux-tiny's T5 and autoencoder.
Same seed -> byte-identical files."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import torch
from safetensors.torch import save_file

from nodes.models.chroma import build_chroma, to_diffusers_layout
from nodes.models.flux_configs import METADATA_KEY
from nodes.models.flux_demo import CONFIG_NAME, randomize_constants
from nodes.models.flux_keys import count_blocks
from nodes.output_claims import write_atomic

SEED = 11
FILE = "diffusion_models/chroma_tiny.safetensors"
CONFIG = {
    "patch_size": 1,
    "in_channels": 64,
    "out_channels": 64,
    "num_layers": 2,
    "num_single_layers": 2,
    "attention_head_dim": 16,
    "num_attention_heads": 2,
    "joint_attention_dim": 32,
    "axes_dims_rope": (4, 4, 8),
    "approximator_num_channels": 64,
    "approximator_hidden_dim": 32,
    "approximator_layers": 5,
}
_GLOBAL = {"x_embedder": "img_in", "context_embedder": "txt_in", "proj_out": "final_layer.linear"}
_DOUBLE = {
    "attn.to_out.0.": "img_attn.proj.",
    "attn.to_add_out.": "txt_attn.proj.",
    "ff.net.0.proj.": "img_mlp.0.",
    "ff.net.2.": "img_mlp.2.",
    "ff_context.net.0.proj.": "txt_mlp.0.",
    "ff_context.net.2.": "txt_mlp.2.",
    "attn.norm_q.weight": "img_attn.norm.query_norm.scale",
    "attn.norm_k.weight": "img_attn.norm.key_norm.scale",
    "attn.norm_added_q.weight": "txt_attn.norm.query_norm.scale",
    "attn.norm_added_k.weight": "txt_attn.norm.key_norm.scale",
}
_SINGLE = {
    "proj_out.": "linear2.",
    "attn.norm_q.weight": "norm.query_norm.scale",
    "attn.norm_k.weight": "norm.key_norm.scale",
}


def comfy_names(sd: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """diffusers' Chroma state dict under ComfyUI's names (q/k/v fused as the published files hold them)."""
    out: dict[str, torch.Tensor] = {}
    for i in range(count_blocks(sd, "transformer_blocks")):
        src, dst = f"transformer_blocks.{i}.", f"double_blocks.{i}."
        for end in ("weight", "bias"):
            for fused, parts in (
                ("img_attn.qkv", ("to_q", "to_k", "to_v")),
                ("txt_attn.qkv", ("add_q_proj", "add_k_proj", "add_v_proj")),
            ):
                out[f"{dst}{fused}.{end}"] = torch.cat([sd.pop(f"{src}attn.{p}.{end}") for p in parts])
        for key in [k for k in sd if k.startswith(src)]:
            rest = key[len(src) :]
            name = next(v + rest[len(k) :] for k, v in _DOUBLE.items() if rest.startswith(k))
            out[dst + name] = sd.pop(key)
    for i in range(count_blocks(sd, "single_transformer_blocks")):
        src, dst = f"single_transformer_blocks.{i}.", f"single_blocks.{i}."
        for end in ("weight", "bias"):
            parts = ("attn.to_q", "attn.to_k", "attn.to_v", "proj_mlp")
            out[f"{dst}linear1.{end}"] = torch.cat([sd.pop(f"{src}{p}.{end}") for p in parts])
        for key in [k for k in sd if k.startswith(src)]:
            rest = key[len(src) :]
            name = next(v + rest[len(k) :] for k, v in _SINGLE.items() if rest.startswith(k))
            out[dst + name] = sd.pop(key)
    for key, value in sd.items():  # the embedders, the output projection and the approximator
        module, _, end = key.rpartition(".")
        if module.startswith("distilled_guidance_layer."):
            name = module.replace(".linear_1", ".in_layer").replace(".linear_2", ".out_layer")
            end = "scale" if ".norms." in module else end
        else:
            name = _GLOBAL[module]
        out[f"{name}.{end}"] = value
    return {k: v.contiguous() for k, v in out.items()}


def require_round_trip(back: dict[str, torch.Tensor], module_sd: dict[str, torch.Tensor], model: str) -> None:
    """The published names converted back (`back`) must give the module's own state dict, name for name."""
    if set(back) != set(module_sd) or any(not torch.equal(back[k], module_sd[k]) for k in back):
        raise AssertionError(f"the tiny {model}'s names do not convert back to the module's")


def tiny_chroma_state_dict(seed: int = SEED) -> dict[str, torch.Tensor]:
    torch.manual_seed(seed)
    network = build_chroma(CONFIG)
    randomize_constants(network, torch.Generator().manual_seed(seed + 1))
    module_sd = network.state_dict()
    sd = comfy_names(dict(module_sd))
    require_round_trip(to_diffusers_layout(sd), module_sd, "Chroma")
    return sd


def write_flux_tiny_config_file(
    models_dir: Path, file: str, state_dict: Callable[[int], dict[str, torch.Tensor]], seed: int
) -> list[Path]:
    """Write `state_dict(seed)` as FILE under a ComfyUI models folder, its metadata naming the flux-tiny config;
    returns the paths written."""
    with torch.random.fork_rng(devices=[]):  # the builder seeds torch's global generator
        sd = state_dict(seed)
    path = Path(models_dir) / file
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, lambda tmp: save_file(sd, tmp, metadata={METADATA_KEY: CONFIG_NAME}))
    return [path]


def build_demo_chroma(models_dir: Path, seed: int = SEED) -> list[Path]:
    """Write chroma-tiny under a ComfyUI models folder; returns the paths written."""
    return write_flux_tiny_config_file(models_dir, FILE, tiny_chroma_state_dict, seed)
