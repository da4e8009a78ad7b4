"""flux3-tiny: a deterministic tiny FLUX 3 transformer written in the layout black-forest-labs/flux-3-image-klein-
comfy publishes (BFL's names: `emb_in.{image,image_cond}`, `txt_in`, `time_in.{in,out}_layer`, `{early,single}_
stream_modulations.*.lin`, `content_mode_blocks.{image,image_cond}.N`, `txt_mode_blocks.N`, `single_blocks.N` with
`q_proj/k_proj/v_proj/attn_out/mlp_in/mlp_out/norm.{query,key}_norm.scale`, `final_layer.image.linear` and its
adaLN as [shift, scale]) as diffusion_models/flux3_klein_tiny.safetensors: 1 per-mode and 2 joint blocks of 2
heads 16 wide over 8 text layers 16 wide, and the step-distilled model beside it (`ref_time_in` added) as
diffusion_models/flux3_klein_distilled_tiny.safetensors; and its text encoder as text_encoders/qwen3vl_4b_flux3_tiny.safetensors:
a Qwen3-VL (`model.language_model.*`, `model.visual.*`) with the real 151,936-token vocabulary, 16 wide and 36
layers deep like the 4B, so that FLUX 3's taps (layers 4..32) read inner layers. The VAE is FLUX.2's
(vae/flux2-klein-tiny-vae.safetensors, nodes.models.flux2_demo); the edit templates' prompt upsampler is
nodes.models.qwen35_demo's. Same seed -> byte-identical files."""

from __future__ import annotations

from pathlib import Path

import torch
from diffusers import Flux3Transformer2DModel
from safetensors.torch import save_file

from nodes.models.flux3 import to_diffusers_layout
from nodes.models.flux_demo import randomize_constants
from nodes.models.qwen35_demo import build_demo_qwen35
from nodes.output_claims import write_atomic

SEED = 3
FILE = "diffusion_models/flux3_klein_tiny.safetensors"
# the step-distilled (flow-map) model: the same network with `ref_time_in`, the embedder of the target sigma
DISTILLED_FILE = "diffusion_models/flux3_klein_distilled_tiny.safetensors"
TEXT_FILE = "text_encoders/qwen3vl_4b_flux3_tiny.safetensors"
TEXT_WIDTH = 16
TEXT_LAYERS = 36
CONFIG = {
    "in_channels": 128,
    "cond_in_channels": 128,
    "num_layers": 1,
    "num_single_layers": 2,
    "attention_head_dim": 16,
    "num_attention_heads": 2,
    "joint_attention_dim": 8 * TEXT_WIDTH,
    "timestep_channels": 32,
    "mlp_ratio": 3.0,
    "axes_dims_rope": (4, 4, 4, 4),
}
# diffusers' name -> BFL's, the inverse of diffusers' convert_flux3_transformer_checkpoint_to_diffusers.
_EXACT = {
    "timestep_embedder.linear_1.weight": "time_in.in_layer.weight",
    "timestep_embedder.linear_2.weight": "time_in.out_layer.weight",
    "target_timestep_embedder.linear_1.weight": "ref_time_in.in_layer.weight",
    "target_timestep_embedder.linear_2.weight": "ref_time_in.out_layer.weight",
    "proj_out.weight": "final_layer.image.linear.weight",
    "norm_out.linear.weight": "final_layer.image.adaLN_modulation.1.weight",
}
_PREFIXES = {
    "x_embedders.": "emb_in.",
    "context_embedder.": "txt_in.",
    "mode_blocks.": "content_mode_blocks.",
    "single_transformer_blocks.": "single_blocks.",
}
_SUFFIXES = {
    "attn.to_q.weight": "q_proj.weight",
    "attn.to_k.weight": "k_proj.weight",
    "attn.to_v.weight": "v_proj.weight",
    "attn.to_out.0.weight": "attn_out.weight",
    "attn.norm_q.weight": "norm.query_norm.scale",
    "attn.norm_k.weight": "norm.key_norm.scale",
    "ff.linear_in.weight": "mlp_in.weight",
    "ff.linear_out.weight": "mlp_out.weight",
    ".linear.weight": ".lin.weight",
}


def to_published(sd: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Flux3Transformer2DModel tensors -> the published file's; nodes.models.flux3 must map them back."""
    out = {}
    for key, value in sd.items():
        if key in _EXACT:
            if key == "norm_out.linear.weight":  # diffusers keeps [scale, shift], BFL's file [shift, scale]
                scale, shift = value.chunk(2, dim=0)
                value = torch.cat([shift, scale])
            out[_EXACT[key]] = value.contiguous()
            continue
        new = next((new + key[len(old) :] for old, new in _PREFIXES.items() if key.startswith(old)), key)
        new = next((new[: -len(old)] + repl for old, repl in _SUFFIXES.items() if new.endswith(old)), new)
        out[new] = value.contiguous()
    back = to_diffusers_layout(dict(out))
    if back.keys() != sd.keys() or any(not torch.equal(back[k], sd[k]) for k in sd):
        raise AssertionError("the FLUX 3 layout does not convert back")
    return out


def tiny_transformer(flow_map: bool = False) -> Flux3Transformer2DModel:
    seed = SEED + 2 if flow_map else SEED
    gen = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    model = Flux3Transformer2DModel(**CONFIG, flow_map=flow_map)
    randomize_constants(model, gen)  # norm scales of one value would hide a swapped name
    return model.eval()


def tiny_text_encoder() -> torch.nn.Module:
    """Qwen3-VL with the 4B's depth and proportions shrunk (grouped-query heads, the real vocabulary size)."""
    from transformers import Qwen3VLConfig, Qwen3VLForConditionalGeneration

    cfg = Qwen3VLConfig(
        text_config={
            "vocab_size": 151_936,
            "hidden_size": TEXT_WIDTH,
            "intermediate_size": 32,
            "num_hidden_layers": TEXT_LAYERS,
            "num_attention_heads": 2,
            "num_key_value_heads": 1,
            "head_dim": 8,
            "rope_parameters": {"rope_type": "default", "rope_theta": 5_000_000.0},
        },
        vision_config={
            "depth": 1,
            "hidden_size": 16,
            "intermediate_size": 32,
            "num_heads": 2,
            "out_hidden_size": TEXT_WIDTH,
            "deepstack_visual_indexes": [0],
            "num_position_embeddings": 64,
        },
    )
    gen = torch.Generator().manual_seed(SEED + 1)
    torch.manual_seed(SEED + 1)
    model = Qwen3VLForConditionalGeneration(cfg)
    randomize_constants(model, gen)
    return model.eval()


def build_demo_flux3(models_dir: str | Path) -> list[Path]:
    """Write the tiny FLUX 3 transformers (base, step-distilled) and the text encoder under models_dir; returns
    the paths written."""
    with torch.random.fork_rng(devices=[]):
        sds = {
            FILE: to_published({k: v.detach() for k, v in tiny_transformer().state_dict().items()}),
            DISTILLED_FILE: to_published({k: v.detach() for k, v in tiny_transformer(True).state_dict().items()}),
            TEXT_FILE: {
                k: v.detach().contiguous() for k, v in tiny_text_encoder().state_dict().items() if k != "lm_head.weight"
            },
        }  # the 4B ties its head to the embedding; no encoder reads it
    written = []
    for name, sd in sds.items():
        path = Path(models_dir) / name
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, lambda tmp, sd=sd: save_file(sd, str(tmp), metadata={"format": "pt"}))
        written.append(path)
    return written + build_demo_qwen35(models_dir)  # the edit templates' prompt upsampler
