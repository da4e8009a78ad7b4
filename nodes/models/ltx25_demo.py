"""ltx2.5-tiny VAE: a deterministic tiny vae/ltx-2.5-video-vae-bf16.safetensors in the published layout
(nodes/models/ltx25_vae.py): LTX-2's convolutional encoder in the original (Lightricks) names with LTX-2.5's block
kinds (one res block per stage, ComfyUI's fixed 128 base and latent channels, no channel growth), the diffusion
decoder at small widths (128/64/32/32/16 channels, heads of 16, one block per stage, two diffusion blocks, the
published kernels' shapes shrunk), the checkpoint-only `decoder.type_emb`, the per-channel statistics, and the
sizes in the metadata `config` JSON's "vae" section as ComfyUI reads it. bfloat16 like the released file.

And LTX-2.5's text encoder file (nodes/models/ltx25_text.py) in its published layout: a tiny Gemma 4 shaped as
ComfyUI's Gemma4_12B config (five sliding layers of six, global layers reusing K as V, no per-layer inputs) under
`model.`, the dual projection of its seven stacked hidden states to the video and audio widths of the tiny LTX-2
transformer (nodes/models/ltx2_demo.py), and a `tokenizer_json`: a character-level `tokenizers` BPE over printable
ASCII standing in for Gemma 4's 262,144-token one (Gemma's <pad> 0, <eos> 1, <bos> 2, <unk> 3 first). Same seed ->
byte-identical files."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import save_file

from nodes.models.ltx2_demo import TRANSFORMER_CONFIG, vae_key_name
from nodes.models.ltx25_vae import DiffusionVAEModule, decoder_kwargs, encoder_kwargs
from nodes.output_claims import write_atomic

SEED = 25
VAE_FILE = "vae/ltx-2.5-video-vae_tiny.safetensors"
TEXT_FILE = "text_encoders/gemma4-12b-with-proj-ltx-2.5_tiny.safetensors"
ENHANCER_FILE = "text_encoders/gemma4_e2b_it_tiny.safetensors"  # the templates' prompt enhancer
# ComfyUI's Gemma4_12B config at tiny sizes (as tests/models/test_gemma4_text.py's G12B).
GEMMA4 = {
    "vocab_size": 128,
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_hidden_layers": 6,
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
    "head_dim": 16,
    "global_head_dim": 32,
    "num_global_key_value_heads": 1,
    "attention_k_eq_v": True,
    "layer_types": ["sliding_attention"] * 5 + ["full_attention"],
    "sliding_window": 1024,
    "hidden_size_per_layer_input": 0,
    "num_kv_shared_layers": 0,
}
# ComfyUI's Gemma4_E2B config at tiny sizes: sliding windows of 512 on four layers of five, per-layer inputs, the
# last layers KV-shared with double-wide MLPs, one K/V head.
GEMMA4_E2B = {
    **GEMMA4,
    "intermediate_size": 32,
    "num_hidden_layers": 10,
    "num_key_value_heads": 1,
    "layer_types": (["sliding_attention"] * 4 + ["full_attention"]) * 2,
    "sliding_window": 512,
    "hidden_size_per_layer_input": 8,
    "vocab_size_per_layer_input": 128,
    "num_kv_shared_layers": 4,
    "use_double_wide_mlp": True,
    "attention_k_eq_v": False,
}
del GEMMA4_E2B["num_global_key_value_heads"]
GEMMA4_ROPE = {
    "sliding_attention": {"rope_type": "default", "rope_theta": 10_000.0},
    "full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.25, "rope_theta": 1_000_000.0},
}
# The tiny transformer's video and audio widths (heads x head width), as the published 4096 and 2048.
VIDEO_WIDTH = TRANSFORMER_CONFIG["num_attention_heads"] * TRANSFORMER_CONFIG["attention_head_dim"]
AUDIO_WIDTH = TRANSFORMER_CONFIG["audio_num_attention_heads"] * TRANSFORMER_CONFIG["audio_attention_head_dim"]
# Gemma 4's special tokens at their ids, and the chat markers of ComfyUI's Gemma 4 templates (ids past the characters).
SPECIAL_TOKENS = {
    0: "<pad>",
    1: "<eos>",
    2: "<bos>",
    3: "<unk>",
    50: "<unused50>",
    100: "<|channel>",
    101: "<channel|>",
    102: "<|think|>",
    103: "<|image>",
    104: "<|image|>",
    105: "<|turn>",
    106: "<turn|>",
    107: "<image|>",
}
ENCODER = {
    "dims": 3,
    "in_channels": 3,
    "out_channels": 128,
    "blocks": [
        ["res_x", {"num_layers": 1}],
        ["compress_space_res", {"multiplier": 1}],
        ["res_x", {"num_layers": 1}],
        ["compress_time_res", {"multiplier": 1}],
        ["res_x", {"num_layers": 1}],
        ["compress_all_res", {"multiplier": 1}],
        ["res_x", {"num_layers": 1}],
        ["compress_all_res", {"multiplier": 1}],
        ["res_x", {"num_layers": 1}],
    ],
    "patch_size": 4,
    "latent_log_var": "constant",
    "norm_layer": "pixel_norm",
    "base_channels": 128,
    "spatial_padding_mode": "zeros",
}
DECODER = {
    "in_channels": 128,
    "out_channels": 3,
    "patch_size": 4,
    "head_dim": 16,
    "stage_channels": [128, 64, 32, 32, 16],
    "stage_depths": [1, 1, 1, 1, 2],
    "stage_kernels": [[3, 3, 3], [3, 3, 3], [3, 3, 3], [3, 3, 3], [5, 5, 5]],
    "upsamples": [[[1, 2, 2], 2], [[2, 1, 1], 2], [[2, 2, 2], 1], [[2, 2, 2], 2]],
    "stage5_kernel": [5, 5, 5],
    "t_emb_dim": 32,
    "timestep_scale_multiplier": 1000.0,
    "default_num_inference_steps": 1,
}
CONFIG = {
    "vae": {
        "_class_name": "CausalDiffusionVAE",
        "dims": 3,
        "model_output_type": "x0",
        "encoder": ENCODER,
        "decoder": DECODER,
    }
}


def tiny_vae_state_dict(seed: int = SEED) -> dict[str, torch.Tensor]:
    """The tiny file's tensors in the published names, bfloat16."""
    with torch.random.fork_rng(devices=[]):
        gen = torch.Generator().manual_seed(seed)
        module = DiffusionVAEModule(encoder_kwargs(ENCODER), decoder_kwargs(DECODER), ENCODER["out_channels"])
        sd = {}
        for name, value in sorted(module.state_dict().items()):
            noise = torch.randn(value.shape, generator=gen)
            if name == "latents_std":
                sd[name] = torch.rand(value.shape, generator=gen) + 0.5
            elif name == "latents_mean":
                sd[name] = 0.1 * noise
            elif name.startswith("decoder.") and "norm" in name:
                sd[name] = 1 + 0.1 * noise
            else:  # small weights: the stacked convolutions and blocks stay in range
                sd[name] = 0.05 * noise
    out = {}
    for name, value in sd.items():
        if name.startswith("decoder."):
            out[name] = value
        else:  # the encoder and statistics in LTX-2's original names, without the checkpoint's `vae.`
            out[vae_key_name(name)[len("vae.") :]] = value
    for name in ("mean-of-stds", "mean-of-stds_over_std-of-means", "channel"):  # in the file, read by nobody
        out[f"per_channel_statistics.{name}"] = torch.rand(128, generator=gen) + 0.5
    out["decoder.type_emb"] = torch.randn(128, generator=gen)
    return {k: v.to(torch.bfloat16).contiguous() for k, v in out.items()}


def build_demo_ltx25(models_dir: Path, seed: int = SEED) -> list[Path]:
    """Write the tiny LTX-2.5 video VAE, text encoder, transformer (nodes/models/ltx25_transformer_demo.py) and
    audio VAE (nodes/models/ltx25_audio_demo.py) under a ComfyUI models folder; returns the paths written."""
    from nodes.models import ltx25_audio_demo, ltx25_transformer_demo

    path = Path(models_dir) / VAE_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    sd = tiny_vae_state_dict(seed)
    meta = {"config": json.dumps(CONFIG)}
    write_atomic(path, lambda tmp: save_file(sd, tmp, metadata=meta))
    return [
        path,
        *build_demo_ltx25_text(models_dir, seed),
        ltx25_transformer_demo.build(models_dir),
        ltx25_audio_demo.build(models_dir),
    ]


def tiny_tokenizer_json() -> bytes:
    """A `tokenizers` JSON standing in for Gemma 4's: its special tokens at Gemma's ids (<pad> 0, <eos> 1, <bos> 2,
    <unk> 3, the chat turn's <|turn> 105 and <turn|> 106; 50, another of ComfyUI's stop ids, kept special) and
    the chat markers ComfyUI's templates use, then a newline and the printable ASCII characters one id each, the
    rest unused tokens."""
    from tokenizers import Tokenizer, decoders
    from tokenizers.models import BPE

    chars = iter(["\n", *map(chr, range(32, 127))])
    special = dict(SPECIAL_TOKENS)
    vocab = {}
    for i in range(GEMMA4["vocab_size"]):
        if i not in special:
            c = next(chars, None)
            if c is None:  # past the characters: Gemma's unused tokens, so that every id decodes
                special[i] = f"<unused{i}>"
            else:
                vocab[c] = i
    vocab.update({t: i for i, t in special.items()})
    tokenizer = Tokenizer(BPE(vocab=vocab, merges=[], unk_token="<unk>"))
    tokenizer.decoder = decoders.Fuse()  # pieces joined as they are, as Gemma's decoder joins its byte pieces
    tokenizer.add_special_tokens([special[i] for i in sorted(special)])
    return tokenizer.to_str().encode("utf-8")


def _gemma4_tensors(config: dict, gen: torch.Generator) -> dict[str, torch.Tensor]:
    """A seeded Gemma 4 language model in ComfyUI's layout under `model.`: norm scales near 1, layer scalars in
    0.3..1, other weights small; the KV-shared layers keep the K/V projections ComfyUI's files hold unused."""
    from transformers import Gemma4TextConfig
    from transformers.models.gemma4.modeling_gemma4 import Gemma4TextModel

    with torch.device("meta"):
        lm = Gemma4TextModel(Gemma4TextConfig(**config, rope_parameters=GEMMA4_ROPE, rms_norm_eps=1e-6))
    out: dict[str, torch.Tensor] = {}
    for name, p in sorted(lm.named_parameters()):
        noise = torch.randn(p.shape, generator=gen)
        out["model." + name] = 1 + 0.1 * noise if name.endswith("norm.weight") else 0.1 * noise
    layers = config["num_hidden_layers"]
    for i in range(layers):
        out[f"model.layers.{i}.layer_scalar"] = 0.3 + 0.7 * torch.rand(1, generator=gen)
    for i in range(layers - config["num_kv_shared_layers"], layers):
        attn = f"model.layers.{i}.self_attn."
        width = out[attn + "q_norm.weight"].shape[0]
        for proj in ("k_proj", "v_proj"):
            out[attn + proj + ".weight"] = 0.1 * torch.randn(width, config["hidden_size"], generator=gen)
        out[attn + "k_norm.weight"] = torch.ones(width)
    return out


def tiny_text_encoder_state_dict(
    seed: int = SEED, video_width: int = VIDEO_WIDTH, audio_width: int = AUDIO_WIDTH
) -> dict[str, torch.Tensor]:
    """The tiny LTX-2.5 text encoder file's tensors (float32): Gemma 4 under `model.`, the dual projection and
    the tokenizer."""
    gen = torch.Generator().manual_seed(seed)
    out = _gemma4_tensors(GEMMA4, gen)
    features = GEMMA4["hidden_size"] * (GEMMA4["num_hidden_layers"] + 1)
    for name, width in (("video", video_width), ("audio", audio_width)):
        prefix = f"text_embedding_projection.{name}_aggregate_embed."
        out[prefix + "weight"] = torch.randn(width, features, generator=gen) / features**0.5
        out[prefix + "bias"] = 0.1 * torch.randn(width, generator=gen)
    out["tokenizer_json"] = torch.tensor(list(tiny_tokenizer_json()), dtype=torch.uint8)
    return out


def tiny_prompt_enhancer_state_dict(seed: int = SEED) -> dict[str, torch.Tensor]:
    """The tiny prompt enhancer file's tensors (float32): a Gemma 4 E2B-shaped language model and the tokenizer."""
    out = _gemma4_tensors(GEMMA4_E2B, torch.Generator().manual_seed(seed + 1))
    out["tokenizer_json"] = torch.tensor(list(tiny_tokenizer_json()), dtype=torch.uint8)
    return out


def build_demo_ltx25_text(models_dir: Path, seed: int = SEED) -> list[Path]:
    """Write the tiny LTX-2.5 text encoder and prompt enhancer under a ComfyUI models folder (bfloat16 as
    published, the tokenizer's bytes as they are); returns the paths written."""
    written = []
    for name, sd in (
        (TEXT_FILE, tiny_text_encoder_state_dict(seed)),
        (ENHANCER_FILE, tiny_prompt_enhancer_state_dict(seed)),
    ):
        path = Path(models_dir) / name
        path.parent.mkdir(parents=True, exist_ok=True)
        sd = {k: (v if v.dtype == torch.uint8 else v.to(torch.bfloat16)).contiguous() for k, v in sd.items()}
        write_atomic(path, lambda tmp, sd=sd: save_file(sd, tmp))
        written.append(path)
    return written
