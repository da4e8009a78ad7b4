"""qwen3.5-tiny: FLUX 3's prompt upsampler (qwen3.5_9b_flux3_prompt_upsampler_w4a8.safetensors) shrunk, as
text_encoders/qwen3.5_9b_flux3_prompt_upsampler_w4a8_tiny.safetensors: transformers' Qwen3_5ForConditionalGeneration
in its published names (`model.language_model.*`, `model.visual.*`, `lm_head.weight`), Qwen3.5's 248,320-row
vocabulary 16 wide, three Gated DeltaNet layers and one gated full-attention layer (the 9B's pattern, x1), an untied
head as the 9B has, and a one-block vision tower 64 wide in ComfyUI's 16 heads. Every decoder-layer linear weight
is stored W4A8 as ComfyUI's asym_w4a8_int8 (comfy-kitchen's quantizer: 4-bit codebook codes, fp8 group scales of
16 columns; ConvRot over 16 columns, the tiny width, instead of the published 256) with its `comfy_quant` JSON.
Same seed -> byte-identical file."""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file

from nodes.models.flux_demo import randomize_constants
from nodes.models.qwen35_text import MROPE_SECTION, PARTIAL_ROTARY, RMS_NORM_EPS, ROPE_THETA, W4A8
from nodes.output_claims import write_atomic

log = logging.getLogger(__name__)

SEED = 35
FILE = "text_encoders/qwen3.5_9b_flux3_prompt_upsampler_w4a8_tiny.safetensors"
GROUP, CONVROT = 16, 16
TEXT: dict[str, Any] = {
    "vocab_size": 248_320,
    "hidden_size": 16,
    "intermediate_size": 32,
    "num_hidden_layers": 4,
    "layer_types": ["linear_attention"] * 3 + ["full_attention"],
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
    "head_dim": 32,
    "linear_num_key_heads": 1,
    "linear_key_head_dim": 16,
    "linear_num_value_heads": 2,
    "linear_value_head_dim": 16,
    "linear_conv_kernel_dim": 4,
    "rms_norm_eps": RMS_NORM_EPS,
    "tie_word_embeddings": False,
    "rope_parameters": {
        "rope_type": "default",
        "rope_theta": ROPE_THETA,
        "partial_rotary_factor": PARTIAL_ROTARY,
        "mrope_section": MROPE_SECTION,
        "mrope_interleaved": True,
    },
}
VISION: dict[str, Any] = {
    "depth": 1,
    "hidden_size": 64,
    "intermediate_size": 64,
    "num_heads": 16,
    "out_hidden_size": 16,
    "num_position_embeddings": 64,
}
# the decoder layers' linear weights (attention, DeltaNet projections, MLP): what the w4a8 file quantizes
QUANTIZED = re.compile(r"^model\.language_model\.layers\.\d+\.(self_attn|linear_attn|mlp)\.\w+_proj(_\w+)?\.weight$")


def config():
    from transformers import Qwen3_5Config

    return Qwen3_5Config(text_config=TEXT, vision_config=VISION, tie_word_embeddings=False)


def tiny_model() -> torch.nn.Module:
    from transformers import Qwen3_5ForConditionalGeneration

    gen = torch.Generator().manual_seed(SEED)
    torch.manual_seed(SEED)
    model = Qwen3_5ForConditionalGeneration(config())
    randomize_constants(model, gen)  # norm scales of one value would hide a swapped name
    return model.eval()


def quantize(sd: dict[str, torch.Tensor], ck: Any) -> dict[str, torch.Tensor]:
    """The decoder layers' linear weights in ComfyUI's asym_w4a8_int8 tensors (comfy-kitchen's quantizer `ck`)."""
    out = {}
    meta = json.dumps({"format": W4A8, "group_size": GROUP, "convrot_groupsize": CONVROT}).encode("utf-8")
    for key, value in sd.items():
        if not QUANTIZED.match(key):
            out[key] = value
            continue
        qdata, s_rel, s_channel, correction, codebook = ck.quantize_w4a8_int8_weight(
            value, group_size=GROUP, convrot_groupsize=CONVROT, codebook=True
        )
        layer = key[: -len("weight")]
        out[key] = qdata
        out[layer + "weight_s_rel"] = s_rel.view(torch.uint8)
        out[layer + "weight_s_channel"] = s_channel
        out[layer + "weight_codebook"] = codebook
        if correction is not None:
            out[layer + "weight_correction"] = correction
        out[layer + "comfy_quant"] = torch.tensor(list(meta), dtype=torch.uint8)
    return {k: v.contiguous() for k, v in out.items()}


def build_demo_qwen35(models_dir: str | Path) -> list[Path]:
    """Write the tiny Qwen3.5 prompt upsampler under models_dir; returns the path written (none where
    comfy-kitchen, a dependency, is missing: the GPU machine's image lacks it and no GPU check reads this file)."""
    try:
        import comfy_kitchen as ck
    except ImportError:
        log.warning("comfy-kitchen is not installed: the tiny Qwen3.5 prompt upsampler (%s) is not written", FILE)
        return []
    with torch.random.fork_rng(devices=[]):
        sd = quantize({k: v.detach() for k, v in tiny_model().state_dict().items()}, ck)
    path = Path(models_dir) / FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, lambda tmp: save_file(sd, str(tmp), metadata={"format": "pt"}))
    return [path]
