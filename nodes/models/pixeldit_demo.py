"""pixeldit-tiny: a deterministic tiny PixelDiT in the layout of Comfy-Org's pixeldit_1300m_1024px file (NVIDIA's
names under `core.`, each PiT block's adaLN fused) as diffusion_models/pixeldit_tiny.safetensors, and its Gemma 2 text encoder as a bare
file in ComfyUI's layout (transformers' names under `model.`, the SentencePiece model as the byte tensor
`spiece_model`) as text_encoders/gemma_2_2b_it_elm_tiny.safetensors.

Narrow but in the real design: 16-pixel patches, the 300-position text table, 64-wide patch stream of two 32-wide
heads (2D RoPE needs head widths in fours) with two MMDiT blocks, a pixel stream 8 wide with two PiT blocks over a
32-wide attention of two heads; the text width is the tiny Gemma 2's (Lumina 2's tiny one: 32 wide, its trained tiny
SentencePiece model). float32. Same seed -> byte-identical files."""

from __future__ import annotations

from pathlib import Path

import torch
from safetensors.torch import save_file

from nodes.models.flux_demo import randomize_constants
from nodes.models.lumina2_demo import GEMMA, tiny_gemma2
from nodes.models.pixeldit import PixelDiTNetwork, split_fused_modulation
from nodes.output_claims import write_atomic

SEED = 41
FILES = {
    "diffusion_model": "diffusion_models/pixeldit_tiny.safetensors",
    "text_encoder": "text_encoders/gemma_2_2b_it_elm_tiny.safetensors",
}
CONFIG = {
    "channels": 3,
    "hidden": 64,
    "heads": 2,
    "mlp_hidden": 170,  # ComfyUI's SwiGLU rule for mlp ratio 4: int(2 * 4 * 64 / 3)
    "patch": 16,
    "pixel_hidden": 8,
    "pixel_attn": 32,
    "pixel_heads": 2,
    "patch_depth": 2,
    "pixel_depth": 2,
    "text_dim": GEMMA["hidden"],
    "text_len": 300,
}


def tiny_pixeldit_state_dicts(seed: int = SEED) -> dict[str, dict[str, torch.Tensor]]:
    import sentencepiece

    from nodes.models.ltx2_demo import spiece_model

    torch.manual_seed(seed)
    network = PixelDiTNetwork(CONFIG)
    randomize_constants(network, torch.Generator().manual_seed(seed + 1))
    with torch.no_grad():
        network.y_pos_embedding.normal_(0.0, 0.5, generator=torch.Generator().manual_seed(seed + 2))
    proto = spiece_model()
    vocab = len(sentencepiece.SentencePieceProcessor(model_proto=proto))
    te = {"model." + k: v.contiguous() for k, v in tiny_gemma2(seed, vocab).state_dict().items()}
    te["spiece_model"] = torch.frombuffer(bytearray(proto), dtype=torch.uint8)
    return {"diffusion_model": published_layout(network.state_dict()), "text_encoder": te}


def published_layout(module_sd: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The module's tensors as the published files name them: under `core.`, each PiT block's msa and mlp adaLN
    fused as `adaLN_modulation.0` [P*P, 6, width] (the inverse of pixeldit.split_fused_modulation)."""
    width = CONFIG["pixel_hidden"]
    out = {}
    for k, v in module_sd.items():
        if ".adaLN_modulation_mlp." in k:
            continue
        if ".adaLN_modulation_msa." in k:
            base, suffix = k.split(".adaLN_modulation_msa.")
            mlp = module_sd[f"{base}.adaLN_modulation_mlp.{suffix}"]
            msa_rows = v.view(-1, 3, width, *v.shape[1:])
            mlp_rows = mlp.view(-1, 3, width, *v.shape[1:])
            fused = torch.cat([msa_rows, mlp_rows], dim=1).reshape(-1, *v.shape[1:])
            out[f"core.{base}.adaLN_modulation.0.{suffix}"] = fused.contiguous()
        else:
            out["core." + k] = v.contiguous()
    back = split_fused_modulation({k[len("core.") :]: t for k, t in out.items()})
    if set(back) != set(module_sd) or any(not torch.equal(back[k], module_sd[k]) for k in back):
        raise AssertionError("the tiny PixelDiT's published names do not convert back to the module's")
    return out


def build_demo_pixeldit(models_dir: Path, seed: int = SEED) -> list[Path]:
    """Write pixeldit-tiny's transformer and text encoder under a ComfyUI models folder; returns the paths."""
    with torch.random.fork_rng(devices=[]):  # the builder seeds torch's global generator
        sds = tiny_pixeldit_state_dicts(seed)
    written = []
    for part, tensors in sds.items():
        path = Path(models_dir) / FILES[part]
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, lambda tmp, tensors=tensors: save_file(tensors, tmp))
        written.append(path)
    return written
