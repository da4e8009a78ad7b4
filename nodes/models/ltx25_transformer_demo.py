"""ltx2.5-tiny transformer: a deterministic tiny diffusion_models/ltx-2.5-22b-distilled-transformer file in the
published layout (nodes/models/ltx25_transformer.py): the original Lightricks names under `model.diffusion_model.`,
the LTX-2.5 settings in the metadata `config` JSON's "transformer" section (gated attention in the blocks and the
connectors, the prompt modulation with its timestep embedders, captions projected by the text encoder before the
connectors, feed-forwards without biases on the video side, split rotary tables in float64) at the tiny LTX-2
widths (nodes/models/ltx2_demo.py: 2 heads of 8 for video and audio, 2 blocks), two connector layers of 2 heads
of 8, and the first-frame marker. bfloat16 like the released file; same seed -> byte-identical file."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import save_file

from nodes.models.flux_demo import randomize_constants
from nodes.models.ltx2_demo import NUM_LAYERS, PREFIX, TRANSFORMER_CONFIG, transformer_to_original
from nodes.models.ltx25_transformer import DEFAULTS, LTX25Network
from nodes.output_claims import write_atomic

SEED = 251
FILE = "diffusion_models/ltx-2.5-22b-distilled-transformer_tiny.safetensors"
# The published LTX-2.5 transformer section's settings (ComfyUI's LTXAVModel names) at the tiny widths.
CONFIG = {
    **TRANSFORMER_CONFIG,
    "model_version": "2.5.0",
    "apply_gated_attention": True,
    "cross_attention_adaln": True,
    "caption_proj_before_connector": True,
    "caption_projection_first_linear": False,
    "ff_bias": False,
    "audio_ff_bias": True,
    "use_prompt_adaln_single": True,
    "use_keyframes_abs_pos_embedding": True,
    "connector_apply_gated_attention": True,
    "connector_num_layers": 2,
    "connector_num_attention_heads": 2,
    "connector_attention_head_dim": 8,
    "audio_connector_num_attention_heads": 2,
    "audio_connector_attention_head_dim": 8,
}
_CONNECTOR_NAMES = (
    (".norm_q.", ".q_norm."),
    (".norm_k.", ".k_norm."),
    ("transformer_blocks.", "transformer_1d_blocks."),
)


def to_original(sd: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """LTX25Network's tensor names -> the published file's (under `model.diffusion_model.`)."""
    network, out = {}, {}
    for key, value in sd.items():
        if key.startswith("network."):
            network[key[len("network.") :].replace("prompt_adaln.", "prompt_adaln_single.")] = value
            continue
        side, name = key.split(".", 1)
        for ours, theirs in _CONNECTOR_NAMES:
            name = name.replace(ours, theirs)
        out[f"{PREFIX}{side.replace('_connector', '_embeddings_connector')}.{name}"] = value
    # ltx2_demo's renaming (diffusers -> original) checks itself against diffusers' converter, which knows no
    # prompt_adaln_single: those keys are renamed here only
    prompt = {k: v for k, v in network.items() if "prompt_adaln_single." in k}
    out.update(transformer_to_original({k: v for k, v in network.items() if k not in prompt}))
    out.update({PREFIX + k: v for k, v in prompt.items()})
    return out


def tiny_state_dict(seed: int = SEED) -> dict[str, torch.Tensor]:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        gen = torch.Generator().manual_seed(seed)
        model = LTX25Network({**DEFAULTS, **CONFIG, "num_layers": NUM_LAYERS})
        randomize_constants(model, gen)
        with torch.no_grad():  # zero-initialised in the reference: drawn here so that a missed marker shows
            marker = model.network.keyframes_abs_pos_embedding
            marker.copy_(torch.randn(marker.shape, generator=gen))
        sd = to_original(model.state_dict())
    return {k: v.to(torch.bfloat16).contiguous() for k, v in sd.items()}


def build(models_dir: Path, seed: int = SEED) -> Path:
    path = Path(models_dir) / FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    sd = tiny_state_dict(seed)
    meta = {"config": json.dumps({"transformer": CONFIG})}
    write_atomic(path, lambda tmp: save_file(sd, tmp, metadata=meta))
    return path


# The layers the tiny LoRA adapts (the file's names): attention with its gates, the prompt modulation's embedder, the
# bias-free feed-forward, the audio-to-video attention and a text connector's attention.
LORA_LAYERS = [
    "transformer_blocks.0.attn1.to_q",
    "transformer_blocks.0.attn1.to_gate_logits",
    "transformer_blocks.1.attn2.to_k",
    "transformer_blocks.0.audio_attn2.to_v",
    "transformer_blocks.1.ff.net.0.proj",
    "transformer_blocks.0.audio_to_video_attn.to_out.0",
    "prompt_adaln_single.linear",
    "video_embeddings_connector.transformer_1d_blocks.0.attn1.to_q",
]


def tiny_lora_state_dict(seed: int = SEED, rank: int = 4) -> dict[str, torch.Tensor]:
    """A rank-4 LoRA on LORA_LAYERS in ComfyUI's layout (`diffusion_model.<layer>.lora_A / lora_B / alpha`)."""
    shapes = {k: v.shape for k, v in tiny_state_dict(seed).items()}
    gen = torch.Generator().manual_seed(seed + 1)
    sd = {}
    for layer in LORA_LAYERS:
        out_features, in_features = shapes[f"{PREFIX}{layer}.weight"]
        sd[f"diffusion_model.{layer}.lora_A.weight"] = torch.randn(rank, in_features, generator=gen) / in_features**0.5
        sd[f"diffusion_model.{layer}.lora_B.weight"] = torch.randn(out_features, rank, generator=gen) / rank**0.5
        sd[f"diffusion_model.{layer}.alpha"] = torch.tensor(float(rank))
    return {k: v.to(torch.bfloat16).contiguous() for k, v in sd.items()}
