"""Deterministic tiny NetaYume Lumina (`netayume-lumina-tiny`): one all-in-one checkpoint in the layout ComfyUI
saves Lumina 2 in and the NetaYume template loads with CheckpointLoaderSimple (comfy/sd.py save_checkpoint with
supported_models.Lumina2's prefixes): the NextDiT under `model.diffusion_model.` in ComfyUI's names, Gemma 2 under
`text_encoders.gemma2_2b.transformer.model.` (transformers' names) with its SentencePiece model as the byte tensor
`text_encoders.spiece_model` (and SDClipModel's `text_encoders.gemma2_2b.logit_scale`, as ComfyUI's saving writes
it), and a tiny Flux autoencoder under `vae.` in ldm names; beside it a rank-4 LoRA for the NextDiT
(loras/netayume-lumina-tiny-lora.safetensors, kohya and ComfyUI names, the fused qkv among its layers).

Narrow but in the real design: the NextDiT keeps Lumina 2's 96-wide heads (RoPE axes 32/32/32), grouped kv heads
(2 heads, 1 kv head), two refiner blocks of each kind and a SiLU-first modulation; Gemma 2 keeps its 256-wide
heads, four norms per layer and grouped kv heads, 32 wide with a tiny trained SentencePiece model carrying Gemma's
special ids (nodes.models.ltx2_demo's). float32, so that ComfyUI on the CPU computes what we compute. Same seed ->
byte-identical file."""

from __future__ import annotations

from pathlib import Path

import torch
from safetensors.torch import save_file

from nodes.models.flux_demo import randomize_constants, tiny_flux_state_dicts
from nodes.models.gemma2_text import gemma2_config
from nodes.models.lumina2 import AXES_LENS, make_transformer
from nodes.output_claims import write_atomic

FILES = {
    "checkpoint": "checkpoints/netayume-lumina-tiny.safetensors",
    "lora": "loras/netayume-lumina-tiny-lora.safetensors",
}
SEED = 38
TE_PREFIX = "text_encoders.gemma2_2b.transformer.model."
GEMMA = {"hidden": 32, "intermediate": 64, "layers": 3, "heads": 2, "kv_heads": 1}
TINY_CONFIG = {
    "patch_size": 2,
    "in_channels": 16,
    "hidden_size": 192,
    "num_layers": 2,
    "num_refiner_layers": 2,
    "num_attention_heads": 2,
    "num_kv_heads": 1,
    "norm_eps": 1e-5,
    "axes_dim_rope": (32, 32, 32),
    "axes_lens": AXES_LENS,
    "cap_feat_dim": GEMMA["hidden"],
}
TINY_FFN = 768  # ComfyUI's rule for a 192-wide NextDiT: 4 x dim rounded up to a multiple of 256

# diffusers' names -> ComfyUI's NextDiT names (the inverse of diffusers' convert_lumina2_to_diffusers), in order.
_RENAMES = (
    ("time_caption_embed.caption_embedder.", "cap_embedder."),
    ("time_caption_embed.timestep_embedder.linear_1.", "t_embedder.mlp.0."),
    ("time_caption_embed.timestep_embedder.linear_2.", "t_embedder.mlp.2."),
    ("norm_out.linear_1.", "final_layer.adaLN_modulation.1."),
    ("norm_out.linear_2.", "final_layer.linear."),
    (".attn.to_out.0.", ".attention.out."),
    (".attn.norm_q.", ".attention.q_norm."),
    (".attn.norm_k.", ".attention.k_norm."),
    (".feed_forward.linear_1.", ".feed_forward.w1."),
    (".feed_forward.linear_2.", ".feed_forward.w2."),
    (".feed_forward.linear_3.", ".feed_forward.w3."),
    (".norm1.linear.", ".adaLN_modulation.1."),
    (".norm1.norm.", ".attention_norm1."),
    (".norm1.", ".attention_norm1."),  # the context refiner's plain norm
    (".norm2.", ".attention_norm2."),
)


def diffusers_to_comfy(sd: dict[str, torch.Tensor], gen: torch.Generator) -> dict[str, torch.Tensor]:
    """A diffusers Lumina2Transformer2DModel state dict under ComfyUI's names (q/k/v fused into qkv), with the
    unused `norm_final` scale the released files carry."""
    out: dict[str, torch.Tensor] = {}
    for k, v in sd.items():
        if ".attn.to_k." in k or ".attn.to_v." in k:
            continue
        if ".attn.to_q." in k:
            fused = torch.cat([v, sd[k.replace("to_q", "to_k")], sd[k.replace("to_q", "to_v")]])
            out[k.replace(".attn.to_q.", ".attention.qkv.")] = fused.contiguous()
            continue
        for old, new in _RENAMES:
            k = k.replace(old, new)
        out[k] = v.contiguous()
    out["norm_final.weight"] = 1.0 + 0.1 * torch.randn(sd["x_embedder.weight"].shape[0], generator=gen)
    return out


def tiny_transformer(seed: int = SEED):
    torch.manual_seed(seed)
    model = make_transformer(TINY_CONFIG, TINY_FFN)
    randomize_constants(model, torch.Generator().manual_seed(seed + 1))
    return model.eval()


def tiny_gemma2(seed: int, vocab: int):
    from transformers import Gemma2Model

    torch.manual_seed(seed)
    model = Gemma2Model(gemma2_config({**GEMMA, "vocab": vocab}))
    randomize_constants(model, torch.Generator().manual_seed(seed + 2))
    return model.eval()


def tiny_lumina2_state_dict(seed: int = SEED) -> dict[str, torch.Tensor]:
    """The all-in-one checkpoint's tensors."""
    import sentencepiece

    from nodes.models.ltx2_demo import spiece_model

    proto = spiece_model()
    vocab = len(sentencepiece.SentencePieceProcessor(model_proto=proto))
    gen = torch.Generator().manual_seed(seed + 3)
    sd = {
        "model.diffusion_model." + k: v for k, v in diffusers_to_comfy(tiny_transformer(seed).state_dict(), gen).items()
    }
    sd |= {TE_PREFIX + k: v.contiguous() for k, v in tiny_gemma2(seed, vocab).state_dict().items()}
    sd["text_encoders.spiece_model"] = torch.frombuffer(bytearray(proto), dtype=torch.uint8)
    # ComfyUI's saved CLIP carries SDClipModel's unused logit scale (log 100) beside the encoder.
    sd["text_encoders.gemma2_2b.logit_scale"] = torch.tensor(4.6052)
    sd |= {"vae." + k: v.contiguous() for k, v in tiny_flux_state_dicts(seed)["vae"].items()}
    return sd


# The tiny LoRA's layers (ComfyUI's names, the fused qkv among them) and the naming each uses: kohya's
# `lora_unet_` with underscores or ComfyUI's own under `diffusion_model.`, the two that ComfyUI 0.3.64 accepts.
LORA_LAYERS = (
    ("layers.0.attention.qkv", "kohya"),
    ("layers.1.feed_forward.w2", "kohya"),
    ("noise_refiner.0.adaLN_modulation.1", "kohya"),
    ("context_refiner.1.attention.out", "comfy"),
    ("cap_embedder.1", "comfy"),
)


def tiny_lora_state_dict(checkpoint: dict[str, torch.Tensor], seed: int = SEED, rank: int = 4) -> dict:
    """A rank-4 LoRA (lora_down / lora_up / alpha) for the tiny checkpoint's LORA_LAYERS."""
    gen = torch.Generator().manual_seed(seed + 4)
    out = {}
    for layer, naming in LORA_LAYERS:
        rows, cols = checkpoint[f"model.diffusion_model.{layer}.weight"].shape
        name = "lora_unet_" + layer.replace(".", "_") if naming == "kohya" else "diffusion_model." + layer
        out[f"{name}.lora_down.weight"] = 0.1 * torch.randn(rank, cols, generator=gen)
        out[f"{name}.lora_up.weight"] = 0.1 * torch.randn(rows, rank, generator=gen)
        out[f"{name}.alpha"] = torch.tensor(rank / 2)
    return out


def build_demo_lumina2(models_dir: Path, seed: int = SEED) -> list[Path]:
    """Write netayume-lumina-tiny's checkpoint and LoRA under a ComfyUI models folder; returns the paths written."""
    with torch.random.fork_rng(devices=[]):  # the builders seed torch's global generator
        sd = tiny_lumina2_state_dict(seed)
    written = []
    for part, tensors in (("checkpoint", sd), ("lora", tiny_lora_state_dict(sd, seed))):
        path = Path(models_dir) / FILES[part]
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, lambda tmp, tensors=tensors: save_file(tensors, tmp))
        written.append(path)
    return written
