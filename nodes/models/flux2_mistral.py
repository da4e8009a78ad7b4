"""FLUX.2 dev's text conditioning: Mistral Small 3 (mistral_3_small_flux2_*.safetensors, CLIPLoader type flux2), as
ComfyUI's Flux2Tokenizer / Mistral3_24BModel / Flux2TEModel (comfy/text_encoders/flux.py) read it.

The file carries its own Tekken tokenizer as the uint8 tensor `tekken_model` (tekken.json's bytes), which
transformers' MistralConverter turns into a byte-level BPE with mistral-common's ids (special tokens first). The
prompt goes into Mistral's system / instruction turns with BFL's FLUX.2 system message (taken from diffusers),
tokenized whole with no weight syntax after the BOS token. The language model (a llama with 128-wide heads and
rope theta 1e9) runs unmasked on that single prompt, and the states entering layers 10, 20 and 30 are joined per
token: [1, T, 3 x hidden] (15360 wide for the 24B). A file pruned to 30 layers has no final norm, so its
third state is the last layer's output. No pooled output."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from diffusers.pipelines.flux2.system_messages import SYSTEM_MESSAGE

from cluster.refs import ModelRef
from nodes.models.components import TextEncoder
from nodes.models.errors import ModelLoadError
from nodes.models.qwen3_text import with_real_rotary
from nodes.models.safetensors_io import build_module
from nodes.models.tokenizer import escape_parens, unescape_parens

TEKKEN_KEY = "tekken_model"
LAYERS = (10, 20, 30)  # Mistral3_24BModel's taps: the states entering these layers
TEMPLATE = "[SYSTEM_PROMPT]" + SYSTEM_MESSAGE + "[/SYSTEM_PROMPT][INST]{}[/INST]"
BOS_ID = 1
HEAD_DIM = 128  # Mistral Small 3's (ComfyUI's Mistral3Small24BConfig; not in the weights' shapes)
ROPE_THETA = 1e9
RMS_EPS = 1e-5
SUB = "mistral3_24b"  # ComfyUI's name for the sub-encoder (the token dict's key)
PREFIX = "model."


def is_mistral3(keys: Sequence[str]) -> bool:
    """ComfyUI reads a llama-layout file with a Tekken tokenizer inside as Mistral 3 (FLUX.2 dev's encoder)."""
    return TEKKEN_KEY in keys and f"{PREFIX}layers.0.self_attn.k_proj.weight" in keys


def tekken_tokenizer(data: torch.Tensor | bytes, path: str | None = None):
    """A `tokenizers.Tokenizer` from tekken.json's bytes (the file's `tekken_model` tensor)."""
    from transformers.integrations.mistral import MistralConverter

    raw = data.numpy().tobytes() if isinstance(data, torch.Tensor) else bytes(data)
    try:
        json.loads(raw)
    except ValueError:
        raise ModelLoadError(path, f"the {TEKKEN_KEY} tensor is not a Tekken tokenizer (tekken.json)") from None
    with tempfile.NamedTemporaryFile(suffix=".json") as f:  # the converter reads a file
        f.write(raw)
        f.flush()
        return MistralConverter(vocab_file=f.name).converted()


def token_ids(tokenizer, text: str) -> list[int]:
    """BOS and the prompt in FLUX.2's template; no weight syntax, "\\(" / "\\)" read as plain parentheses."""
    return [BOS_ID] + tokenizer.encode(
        TEMPLATE.format(unescape_parens(escape_parens(text))), add_special_tokens=False
    ).ids


def mistral_config(sd: Mapping[str, torch.Tensor]) -> dict[str, Any]:
    """transformers' MistralConfig from the weights' shapes (ComfyUI's fixed 128-wide heads)."""
    vocab, hidden = sd[f"{PREFIX}embed_tokens.weight"].shape
    layers = 0
    while f"{PREFIX}layers.{layers}.self_attn.q_proj.weight" in sd:
        layers += 1
    return {
        "vocab_size": int(vocab),
        "hidden_size": int(hidden),
        "intermediate_size": int(sd[f"{PREFIX}layers.0.mlp.gate_proj.weight"].shape[0]),
        "num_hidden_layers": layers,
        "num_attention_heads": int(sd[f"{PREFIX}layers.0.self_attn.q_proj.weight"].shape[0]) // HEAD_DIM,
        "num_key_value_heads": int(sd[f"{PREFIX}layers.0.self_attn.k_proj.weight"].shape[0]) // HEAD_DIM,
        "head_dim": HEAD_DIM,
        "rope_theta": ROPE_THETA,
        "rms_norm_eps": RMS_EPS,
        "max_position_embeddings": 131072,
        "sliding_window": None,
    }


def build_mistral(sd: Mapping[str, torch.Tensor], path: str | None) -> torch.nn.Module:
    from transformers import MistralConfig, MistralModel

    config = mistral_config(sd)
    if config["num_hidden_layers"] < max(LAYERS):
        raise ModelLoadError(
            path, f"FLUX.2 reads the states entering layers {LAYERS}; this Mistral has {config['num_hidden_layers']}"
        )
    weights = {k[len(PREFIX) :]: v for k, v in sd.items() if k.startswith(PREFIX)}
    dtype = weights["embed_tokens.weight"].dtype
    model = build_module(
        lambda: with_real_rotary(MistralModel(MistralConfig(**config))),
        weights,
        path,
        "Mistral 3 text encoder",
        dtype=dtype,
    )
    return model.eval()


def tapped_states(model: torch.nn.Module, ids: torch.Tensor) -> torch.Tensor:
    """[B, T, 3 x hidden]: the states entering LAYERS, each token's side by side. Taken from the decoder layers'
    own outputs (the state entering layer k is layer k-1's output), so no final norm is applied to any of them."""
    outputs: dict[int, torch.Tensor] = {}
    hooks = [
        model.layers[k - 1].register_forward_hook(
            lambda _m, _a, out, k=k: outputs.__setitem__(k, out[0] if isinstance(out, tuple) else out)
        )
        for k in LAYERS
    ]
    try:
        model(input_ids=ids.to(model.embed_tokens.weight.device), use_cache=False)
    finally:
        for h in hooks:
            h.remove()
    out = torch.stack([outputs[k] for k in LAYERS], dim=2)
    return out.reshape(out.shape[0], out.shape[1], -1)


@dataclass
class Mistral3TextEncoder(TextEncoder):
    """ComfyUI's CLIP object for FLUX.2 dev over one Mistral model (`modules["mistral3_24b"]`)."""

    tokenizer: Any = None

    def tokenize(self, text: str) -> dict[str, list[list[tuple[int, float]]]]:
        return {SUB: [[(i, 1.0) for i in token_ids(self.tokenizer, text)]]}

    @torch.no_grad()
    def encode(self, tokens: dict[str, list[list[tuple[int, float]]]]) -> tuple[torch.Tensor, None]:
        ids = torch.tensor([[i for chunk in tokens[SUB] for i, _ in chunk]], dtype=torch.long)
        return tapped_states(self.modules[SUB], ids).float(), None


def load_text_encoder(
    ref: ModelRef, state_dicts: Sequence[Mapping[str, torch.Tensor]] | Mapping[str, torch.Tensor]
) -> Mistral3TextEncoder:
    """FLUX.2 dev's CLIP object from CLIPLoader's Mistral 3 file."""
    if not isinstance(state_dicts, Mapping):
        if len(state_dicts) != 1:
            raise ModelLoadError(ref.sources[0], "FLUX.2 dev takes one text encoder file (Mistral 3)")
        state_dicts = state_dicts[0]
    path = ref.sources[0] if ref.sources else None
    if TEKKEN_KEY not in state_dicts:
        raise ModelLoadError(
            path, f"a Mistral 3 text encoder file carries its tokenizer as {TEKKEN_KEY}; this has none"
        )
    tokenizer = tekken_tokenizer(state_dicts[TEKKEN_KEY], path)
    model = build_mistral({k: v for k, v in state_dicts.items() if k != TEKKEN_KEY}, path)
    return Mistral3TextEncoder(arch="flux2", modules={SUB: model}, tokenizer=tokenizer)
