"""cosmos-predict2-tiny: deterministic tiny Cosmos Predict2 DiTs in the layout NVIDIA and Comfy-Org publish
(ComfyUI's names under `net.`: `x_embedder.proj.1`, `blocks.N.self_attn.q_proj`, `blocks.N.adaln_modulation_mlp.1`,
`final_layer.linear`, ...) as diffusion_models/cosmos_predict2_2B_t2i_tiny.safetensors (text-to-image: 16 latent
channels) and cosmos_predict2_2B_video2world_tiny.safetensors (image-to-video: 17, the inverted noise mask joined),
and their text encoder as text_encoders/oldt5_xxl_tiny.safetensors: a T5 1.0 (ungated ReLU feed-forward, what
ComfyUI calls the old T5-XXL) at the real 1024 width, 2 blocks of 4 heads 8 wide, over flux-tiny's T5 vocabulary
(named in its metadata, as flux-tiny's T5 is).

Their sizes are those ComfyUI 0.3.64 builds for a width other than 2048 / 5120, so that its loader reads the files
whole: MiniTrainDIT's default 10 blocks and 16 heads (here 12 wide, the narrowest whose rotary split works), the
1024-wide cross-attention (the old T5-XXL's) and adaLN-LoRA 256 that its model_detection fixes. The VAE is the Wan
2.1 VAE's tiny file. Same seed -> byte-identical files."""

from __future__ import annotations

from pathlib import Path

import torch
from safetensors.torch import save_file

from nodes.models.anima_demo import comfy_names
from nodes.models.cosmos_predict2 import build_network, rope_scale, to_module_layout
from nodes.models.flux_configs import METADATA_KEY
from nodes.models.flux_demo import randomize_constants
from nodes.output_claims import write_atomic

SEED = 11
T2I_FILE = "diffusion_models/cosmos_predict2_2B_t2i_tiny.safetensors"
I2V_FILE = "diffusion_models/cosmos_predict2_2B_video2world_tiny.safetensors"
TEXT_FILE = "text_encoders/oldt5_xxl_tiny.safetensors"
WIDTH, HEADS, BLOCKS = 192, 16, 10


def tiny_config(image_to_video: bool) -> dict:
    return {
        "in_channels": 18 if image_to_video else 17,  # with the padding-mask channel
        "out_channels": 16,
        "num_attention_heads": HEADS,
        "attention_head_dim": WIDTH // HEADS,
        "num_layers": BLOCKS,
        "mlp_ratio": 4.0,
        "text_embed_dim": 1024,
        "adaln_lora_dim": 256,
        "max_size": (128, 1 << 14, 1 << 14),
        "patch_size": (1, 2, 2),
        "rope_scale": rope_scale(WIDTH, image_to_video),
        "concat_padding_mask": False,
        "extra_pos_embed_type": None,
    }


def tiny_state_dict(image_to_video: bool, seed: int = SEED) -> dict[str, torch.Tensor]:
    """The tiny DiT under the published names (`net.` prefix)."""
    torch.manual_seed(seed + int(image_to_video))
    network = build_network(**tiny_config(image_to_video))
    randomize_constants(network, torch.Generator().manual_seed(seed + 2))
    return {"net." + k: v for k, v in _comfy_names(network.state_dict()).items()}


def _comfy_names(module_sd: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """diffusers' names -> ComfyUI's, checked by converting back (anima_demo's table, under its `dit.` scope)."""
    out = comfy_names({"dit." + k: v for k, v in module_sd.items()})
    if set(to_module_layout(out)) != set(module_sd):
        raise AssertionError("the tiny Cosmos Predict2's names do not convert back to the module's")
    return out


def tiny_old_t5(seed: int = SEED) -> dict[str, torch.Tensor]:
    """The tiny old T5-XXL's weights in the published (Hugging Face) names."""
    import json

    from transformers import T5Config, T5EncoderModel

    from nodes.models.flux_configs import config_dir

    vocab = len(json.loads((config_dir("flux-tiny") / "t5_vocab.json").read_text()))
    config = T5Config(
        vocab_size=vocab,
        d_model=1024,
        d_kv=8,
        d_ff=64,
        num_layers=2,
        num_heads=4,
        relative_attention_num_buckets=32,
        feed_forward_proj="relu",
        dropout_rate=0.0,
        is_encoder_decoder=False,
        use_cache=False,
    )
    torch.manual_seed(seed + 3)
    model = T5EncoderModel(config)
    randomize_constants(model, torch.Generator().manual_seed(seed + 4))
    return {k: v.contiguous() for k, v in model.state_dict().items() if k != "encoder.embed_tokens.weight"}


def build_demo_cosmos_predict2(models_dir: Path, seed: int = SEED) -> list[Path]:
    """Write cosmos-predict2-tiny's files under a ComfyUI models folder; returns the paths written."""
    written = []
    for name, image_to_video in ((T2I_FILE, False), (I2V_FILE, True)):
        with torch.random.fork_rng(devices=[]):  # the builder seeds torch's global generator
            sd = tiny_state_dict(image_to_video, seed)
        path = Path(models_dir) / name
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, lambda tmp, sd=sd: save_file(sd, tmp))
        written.append(path)
    with torch.random.fork_rng(devices=[]):
        te = tiny_old_t5(seed)
    path = Path(models_dir) / TEXT_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, lambda tmp: save_file(te, tmp, metadata={METADATA_KEY: "flux-tiny"}))
    return [*written, path]
