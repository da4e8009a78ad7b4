"""wan-humo-tiny: deterministic tiny files of Wan HuMo in the layouts of ComfyUI's downloads (Comfy-Org/HuMo_ComfyUI):
- audio_encoders/whisper_large_v3_tiny.safetensors: a Whisper encoder in transformers' WhisperModel names
  (`model.encoder.*`) with large-v3's 128 mel bins, 1500 positions and 32 layers (HuMo reads all 33 hidden states),
  32 wide (one head), float16 as the released file; the decoder half of the released file is left out (nothing
  reads it);
- diffusion_models/humo_17B_tiny.safetensors: HuMo 17B's layout (nodes.models.wan_humo): Wan 2.1 text-to-video with
  36 input channels, one 128-wide head, 2 blocks, umT5-tiny's 32-wide text states, the audio projection from the
  tiny encoder's 32-wide features to 16 tokens 32 wide, an audio cross-attention per block; float16;
- diffusion_models/humo_1.7B_tiny.safetensors: the 1.7B layout (16 input channels), otherwise the same sizes;
- loras/humo_lightx2v_lora_tiny.safetensors: a rank-4 LoRA on the 17B file's blocks in lightx2v's names (the HuMo
  template loads lightx2v's I2V 14B distill LoRA onto the HuMo model).
Same seed -> byte-identical files."""

from __future__ import annotations

import math
from pathlib import Path

import torch
from safetensors.torch import save_file
from transformers import WhisperConfig
from transformers.models.whisper.modeling_whisper import WhisperEncoder

from nodes.models.flux_demo import randomize_constants
from nodes.models.wan import HEAD_DIM
from nodes.models.wan_demo import TEXT_WIDTH, tiny_wan_transformer
from nodes.models.wan_humo import HumoParts
from nodes.models.wan_s2v_demo import lightx2v_lora
from nodes.output_claims import write_atomic

SEED = 13
WHISPER_WIDTH, WHISPER_LAYERS, WHISPER_MELS, WHISPER_POSITIONS = 32, 32, 128, 1500
AUDIO_HIDDEN, AUDIO_TOKEN_WIDTH = 16, 32
FILES = {
    "whisper": "audio_encoders/whisper_large_v3_tiny.safetensors",
    "humo": "diffusion_models/humo_17B_tiny.safetensors",
    "humo_1_7b": "diffusion_models/humo_1.7B_tiny.safetensors",
    "lora": "loras/humo_lightx2v_lora_tiny.safetensors",
}


def whisper_encoder(seed: int = SEED) -> dict[str, torch.Tensor]:
    """The tiny Whisper encoder's tensors under `model.encoder.`, float16."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        config = WhisperConfig(
            d_model=WHISPER_WIDTH,
            num_mel_bins=WHISPER_MELS,
            encoder_layers=WHISPER_LAYERS,
            encoder_attention_heads=1,
            encoder_ffn_dim=4 * WHISPER_WIDTH,  # ComfyUI's feed-forward ratio
            max_source_positions=WHISPER_POSITIONS,
        )
        model = WhisperEncoder(config)
        randomize_constants(model, torch.Generator().manual_seed(seed))
        with torch.no_grad():  # the released file's positions are sinusoids around unit size; random ones here
            model.embed_positions.weight.copy_(0.5 * torch.randn(model.embed_positions.weight.shape))
    return {"model.encoder." + k: v.to(torch.float16).contiguous() for k, v in model.state_dict().items()}


def _fill(module: torch.nn.Module, gen: torch.Generator) -> None:
    """Seeded weights: matrices at 1 / sqrt(fan-in), biases and norm shifts small, norm scales around 1."""
    with torch.no_grad():
        for name, p in module.named_parameters():
            if p.dim() >= 2:
                p.copy_(torch.randn(p.shape, generator=gen) / math.sqrt(p.shape[1]))
            elif "norm" in name and name.endswith("weight"):
                p.copy_(1 + 0.1 * torch.randn(p.shape, generator=gen))
            else:
                p.copy_(0.3 * torch.randn(p.shape, generator=gen))


def humo_model(in_channels: int, seed: int = SEED) -> dict[str, torch.Tensor]:
    """A tiny HuMo model's tensors in Wan's layout, float16."""
    gen = torch.Generator().manual_seed(seed + in_channels)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed + in_channels)
        sd = tiny_wan_transformer(in_channels, 16, gen)
        parts = HumoParts(HEAD_DIM, WHISPER_WIDTH, AUDIO_HIDDEN, AUDIO_TOKEN_WIDTH, 2)
        _fill(parts, gen)
    sd.update(parts.state_dict())
    return {k: v.to(torch.float16).contiguous() for k, v in sorted(sd.items())}


def build_demo_wan_humo(models_dir: Path, seed: int = SEED) -> list[Path]:
    """Write wan-humo-tiny under a ComfyUI models folder; returns the paths written."""
    written = []
    model = humo_model(36, seed)
    files = {
        "whisper": whisper_encoder(seed),
        "humo": model,
        "humo_1_7b": humo_model(16, seed),
        "lora": lightx2v_lora(model, seed),
    }
    for name, sd in files.items():
        path = Path(models_dir) / FILES[name]
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, lambda tmp, sd=sd: save_file(sd, tmp, metadata={"format": "pt"}))
        written.append(path)
    return written


__all__ = ["FILES", "TEXT_WIDTH", "build_demo_wan_humo", "humo_model", "whisper_encoder"]
