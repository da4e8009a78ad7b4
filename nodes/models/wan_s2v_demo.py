"""wan-s2v-tiny: deterministic tiny files of Wan 2.2 sound-to-video in the layouts of ComfyUI's downloads:
- audio_encoders/wav2vec2_large_english_tiny.safetensors: a wav2vec 2.0 encoder in the large layout (layer norms in
  the feature convolutions, the pre-norm encoder) with its 24 layers, so that it gives the 25 hidden states the S2V
  model weighs, 64 wide (one head), the feature convolutions at wav2vec 2.0's fixed 512 channels; float16 as the
  released file;
- diffusion_models/wan2.2_s2v_14B_tiny.safetensors: Wan 2.2 S2V (nodes.models.wan_s2v), Wan's key names, one
  128-wide head, 5 blocks (so audio is injected after blocks 0 and 4), umT5-tiny's 32-wide text states, the audio
  encoder's 64-wide features, all 12 audio injectors of the released file; bfloat16;
- loras/wan2.2_t2v_lightx2v_4steps_lora_tiny_high_noise.safetensors: a rank-4 LoRA on its blocks in lightx2v's
  names (the S2V template loads lightx2v's Wan 2.2 text-to-video LoRA onto the S2V model).
Same seed -> byte-identical files."""

from __future__ import annotations

import math
from pathlib import Path

import torch
from diffusers import WanTransformer3DModel
from safetensors.torch import save_file
from transformers import Wav2Vec2Config, Wav2Vec2Model

from nodes.models.flux_demo import randomize_constants
from nodes.models.wan import HEAD_DIM
from nodes.models.wan_demo import TEXT_WIDTH, transformer_to_wan
from nodes.models.wan_s2v import INJECT_AFTER, S2VParts
from nodes.output_claims import write_atomic

SEED = 12
AUDIO_WIDTH = 64
AUDIO_LAYERS = 24
S2V_BLOCKS = 5
FILES = {
    "audio_encoder": "audio_encoders/wav2vec2_large_english_tiny.safetensors",
    "s2v": "diffusion_models/wan2.2_s2v_14B_tiny.safetensors",
    "lora": "loras/wan2.2_t2v_lightx2v_4steps_lora_tiny_high_noise.safetensors",
}
LORA_RANK = 4


def audio_encoder(seed: int = SEED) -> dict[str, torch.Tensor]:
    """The tiny wav2vec 2.0 encoder's tensors (transformers' names, which are ComfyUI's), float16."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        config = Wav2Vec2Config(
            hidden_size=AUDIO_WIDTH,
            num_hidden_layers=AUDIO_LAYERS,
            num_attention_heads=AUDIO_WIDTH // 64,
            intermediate_size=4 * AUDIO_WIDTH,  # ComfyUI's feed-forward ratio
            conv_bias=True,
            feat_extract_norm="layer",
            do_stable_layer_norm=True,
        )
        model = Wav2Vec2Model(config)
        randomize_constants(model, torch.Generator().manual_seed(seed))
    return {k: v.to(torch.float16).contiguous() for k, v in model.state_dict().items()}


def _fill(module: torch.nn.Module, gen: torch.Generator) -> None:
    """Seeded weights for S2VParts (built with empty tensors): matrices and kernels at 1 / sqrt(fan-in), biases and
    the learned vectors small, RMS norm scales around 1."""
    with torch.no_grad():
        for name, p in module.named_parameters():
            if name.endswith(("norm_q.weight", "norm_k.weight")):
                p.copy_(1 + 0.1 * torch.randn(p.shape, generator=gen))
            elif p.dim() >= 2 and "weight" in name.rsplit(".", 1)[-1] and "trainable_cond_mask" not in name:
                p.copy_(torch.randn(p.shape, generator=gen) / math.sqrt(math.prod(p.shape[1:])))
            else:
                p.copy_(0.3 * torch.randn(p.shape, generator=gen))


def s2v_model(seed: int = SEED) -> dict[str, torch.Tensor]:
    """The tiny S2V model's tensors in Wan's layout, bfloat16."""
    gen = torch.Generator().manual_seed(seed + 1)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed + 1)
        trunk = WanTransformer3DModel(
            patch_size=(1, 2, 2),
            num_attention_heads=1,
            attention_head_dim=HEAD_DIM,
            in_channels=16,
            out_channels=16,
            text_dim=TEXT_WIDTH,
            freq_dim=256,
            ffn_dim=256,
            num_layers=S2V_BLOCKS,
        )
        randomize_constants(trunk, gen)
        parts = S2VParts(HEAD_DIM, 1, AUDIO_LAYERS + 1, AUDIO_WIDTH, 4, len(INJECT_AFTER))
        _fill(parts, gen)
    sd = transformer_to_wan(trunk.state_dict())
    sd.update(parts.state_dict())
    return {k: v.to(torch.bfloat16).contiguous() for k, v in sorted(sd.items())}


def lightx2v_lora(model: dict[str, torch.Tensor], seed: int = SEED) -> dict[str, torch.Tensor]:
    """A rank-4 LoRA on the S2V model's attention and feed-forward matrices in lightx2v's names
    (`diffusion_model.blocks.N.self_attn.q.lora_down.weight`, `.alpha`): the S2V template applies lightx2v's Wan 2.2
    text-to-video LoRA to the S2V model's Wan blocks. bfloat16."""
    gen = torch.Generator().manual_seed(seed + 2)
    out = {}
    for key, weight in sorted(model.items()):
        parts = key.split(".")
        if (
            parts[0] == "blocks"
            and key.endswith(".weight")
            and weight.dim() == 2
            and parts[3] in ("q", "k", "v", "o", "0", "2")
        ):
            name = "diffusion_model." + key[: -len(".weight")]
            out[f"{name}.lora_down.weight"] = torch.randn(LORA_RANK, weight.shape[1], generator=gen) * 0.1
            out[f"{name}.lora_up.weight"] = torch.randn(weight.shape[0], LORA_RANK, generator=gen) * 0.1
            out[f"{name}.alpha"] = torch.tensor(float(LORA_RANK))
    return {k: v.to(torch.bfloat16).contiguous() for k, v in out.items()}


def build_demo_wan_s2v(models_dir: Path, seed: int = SEED) -> list[Path]:
    """Write wan-s2v-tiny under a ComfyUI models folder; returns the paths written."""
    written = []
    model = s2v_model(seed)
    for name, sd in (("audio_encoder", audio_encoder(seed)), ("s2v", model), ("lora", lightx2v_lora(model, seed))):
        path = Path(models_dir) / FILES[name]
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, lambda tmp, sd=sd: save_file(sd, tmp, metadata={"format": "pt"}))
        written.append(path)
    return written
