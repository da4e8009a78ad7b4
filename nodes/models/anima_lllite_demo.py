"""Tiny Anima LLLite files in the published layout (nodes.models.anima_lllite) for anima-tiny's DiT (64 wide, two
blocks), under models/model_patches: anima_lllite_any_tiny.safetensors (an RGB control, two residual blocks and
an ASPP with dilations 1,2, every target of both blocks) and anima_lllite_inpainting_tiny.safetensors (RGB and
mask, metadata asking for the masked input, block 0's self-attention and block 1's MLP only). Weights are random
and none is zero, so each path changes the output. Same seed -> byte-identical files."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import save

from nodes.models.anima_lllite import AnimaLLLite
from nodes.output_claims import write_atomic

SEED = 38
DIM = 64  # anima_demo's DiT width (2 heads of 32)
ANY_FILE = "model_patches/anima_lllite_any_tiny.safetensors"
INPAINT_FILE = "model_patches/anima_lllite_inpainting_tiny.safetensors"
TARGETS = ("self_attn_q_proj", "self_attn_k_proj", "self_attn_v_proj", "cross_attn_q_proj", "mlp_layer1")


def _config(in_channels: int, resblocks: int, dilations: tuple[int, ...], modules: list[str]) -> dict:
    return {
        "in_channels": in_channels,
        "width": 16,
        "emb": 8,
        "resblocks": resblocks,
        "dilations": dilations,
        "masked_input": False,
        "modules": {name: (DIM, 12) for name in modules},
    }


FILES = {
    ANY_FILE: (
        _config(3, 2, (1, 2), [f"lllite_dit_blocks_{b}_{t}" for b in range(2) for t in TARGETS]),
        {"lllite.aspp_dilations": "1,2", "lllite.version": "2"},
    ),
    INPAINT_FILE: (
        _config(
            4,
            1,
            (),
            [
                "lllite_dit_blocks_0_self_attn_q_proj",
                "lllite_dit_blocks_0_self_attn_v_proj",
                "lllite_dit_blocks_1_mlp_layer1",
            ],
        ),
        {"lllite.version": "2", "lllite.inpaint_masked_input": "true"},
    ),
}


def tiny_lllite_state_dict(config: dict, seed: int) -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    sd = AnimaLLLite(config).state_dict()
    return {k: (torch.randn(v.shape, generator=generator) * 0.3).contiguous() for k, v in sd.items()}


def _with_metadata_in_order(data: bytes, metadata: dict[str, str]) -> bytes:
    """A safetensors file's bytes with its header's metadata in `metadata`'s order: safetensors writes metadata in its
    hash map's order, which changes from one process to the next, and the files must be byte-identical (their
    recorded digests). The same keys and values, so the header keeps its length."""
    size = int.from_bytes(data[:8], "little")
    header = data[8 : 8 + size].decode()
    written = json.dumps(json.loads(header)["__metadata__"], separators=(",", ":"))
    ordered = json.dumps(metadata, separators=(",", ":"))
    assert len(written) == len(ordered) and header.count(written) == 1
    return data[:8] + header.replace(written, ordered).encode() + data[8 + size :]


def build_demo_anima_lllite(models_dir: Path, seed: int = SEED) -> list[Path]:
    """Write the tiny LLLite files under a ComfyUI models folder; returns the paths written."""
    written = []
    for k, (name, (config, meta)) in enumerate(FILES.items()):
        sd = tiny_lllite_state_dict(config, seed + k)
        path = Path(models_dir) / name
        path.parent.mkdir(parents=True, exist_ok=True)
        data = _with_metadata_in_order(save(sd, metadata=meta), meta)
        write_atomic(path, lambda tmp, data=data: Path(tmp).write_bytes(data))
        written.append(path)
    return written
