"""A tiny SAM 3.1 multiplex checkpoint for `demo-models`, in the released file's layout
(Comfy-Org/sam3.1's sam3.1_multiplex_fp16.safetensors: `detector.*`, `tracker.model.*`, the detector's fused
`in_proj_*` attentions, the CLIP text tower in OpenCLIP names under `detector.backbone.language_backbone.encoder.`).

Tiny where ComfyUI's SAM 3 code lets sizes vary (it reads no sizes from the file; the recorder builds its modules with
these): the trunk 64 wide (16 heads of 4) and 6 blocks (global 0, 2, 3, 5 by ComfyUI's quarter rule), d_model 32,
16 queries, the text tower 64 wide with 2 layers and one head (OpenAI's 49408-token vocabulary and 32 positions, as
released). What ComfyUI's code fixes stays as released: 1008 px, patch 14, the 336 px position table, feed-forward
widths of 2048, 8 DETR heads, 16 multiplexed objects, the memory encoder's channel widths. The released file's
per-block rotary tables (`attn.freqs_cis`, which ComfyUI drops) are not written. Float16 like the release.

Same seed -> same bytes."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import torch
from safetensors.torch import save_file

from nodes.models.clip import hf_to_open_clip
from nodes.models.flux_demo import randomize_constants
from nodes.models.sam3 import Sam3Config, Sam3Model, runtime_to_file
from nodes.models.sam3_text import TEXT_PREFIX
from nodes.models.sam3_tracker import MultiplexTrackerWeights
from nodes.output_claims import write_atomic

SEED = 3031
FILE = "checkpoints/sam3.1_multiplex_fp16_tiny.safetensors"
MLP_DIM = 2048
MULTIPLEX = 16
TINY = Sam3Config(
    embed_dim=64,
    depth=6,
    mlp_hidden=296,  # ComfyUI's mlp_ratio 4.625
    patch=14,
    pretrain_grid=24,
    d_model=32,
    num_queries=16,
    dim_ff=2048,
    enc_layers=6,
    dec_layers=6,
    geo_layers=3,
    geo_dim_ff=2048,
    multiplex=True,
)
TEXT_LAYERS, TEXT_HEADS, TEXT_FF = 2, 1, 256
# What the recorder passes to ComfyUI's SAM3Model / SAM3_CLIP_CONFIG to build the same sizes
COMFY_KWARGS = {
    "image_model": "SAM31",
    "embed_dim": TINY.embed_dim,
    "depth": TINY.depth,
    "mlp_ratio": TINY.mlp_hidden / TINY.embed_dim,
    "global_att_blocks": tuple(sorted(TINY.global_blocks)),
    "d_model": TINY.d_model,
    "num_queries": TINY.num_queries,
    "mem_dim": TINY.d_model,  # the tracker's memory width, d_model as released (256)
}


def _text_tower(gen: torch.Generator) -> dict[str, torch.Tensor]:
    from transformers import CLIPTextConfig, CLIPTextModel

    cfg = CLIPTextConfig(
        vocab_size=49408,
        hidden_size=TINY.embed_dim,
        intermediate_size=TEXT_FF,
        num_hidden_layers=TEXT_LAYERS,
        num_attention_heads=TEXT_HEADS,
        max_position_embeddings=32,
        hidden_act="quick_gelu",
    )
    module = CLIPTextModel(cfg)
    randomize_constants(module, gen)
    sd = {k: v for k, v in module.state_dict().items() if not k.endswith("position_ids")}
    return {TEXT_PREFIX + k: v for k, v in hf_to_open_clip(sd).items()}


def tiny_state_dict(seed: int = SEED, multiplex: bool = True) -> dict[str, torch.Tensor]:
    """The released layout's names with the tiny sizes, float16. `multiplex=False` gives a SAM 3 (not 3.1) file for
    the tests: its 4-level necks and single SAM decoder, without the memory tracker's weights (which SAM3_Detect
    never reads; the SAM 3 tracker is not implemented)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = Sam3Model(TINY if multiplex else replace(TINY, multiplex=False), MLP_DIM)
        tracker = MultiplexTrackerWeights(TINY, MULTIPLEX, MLP_DIM) if multiplex else torch.nn.Module()
        gen = torch.Generator().manual_seed(seed)
        randomize_constants(model, gen)
        randomize_constants(tracker, gen)
        with torch.no_grad():
            for name, t in [*model.named_buffers(), *tracker.named_buffers()]:
                if name.endswith("positional_encoding_gaussian_matrix"):
                    t.normal_(generator=gen)
            # learned embeddings start as unit normals (the pointer / memory tables are zeros in torch's init)
            for module in (model, tracker):
                for p in module.parameters():
                    if p.ndim >= 2 and bool((p == 0).all()):
                        p.normal_(0, 0.5, generator=gen)
        sd = {k: v for k, v in model.state_dict().items()}
        sd.update({"tracker." + k: v for k, v in tracker.state_dict().items()})
        sd = runtime_to_file(sd)
        sd.update(_text_tower(gen))
    return {k: v.contiguous().to(torch.float16) for k, v in sorted(sd.items())}


def build_demo_sam3(models_dir: Path, seed: int = SEED) -> list[Path]:
    """Write the tiny SAM 3.1 checkpoint under a ComfyUI models folder; returns the paths written."""
    path = Path(models_dir) / FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    sd = tiny_state_dict(seed)
    write_atomic(path, lambda tmp: save_file(sd, tmp, metadata={"format": "pt"}))
    return [path]
