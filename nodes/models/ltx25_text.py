"""LTX-2.5's text encoder as ComfyUI's CLIPLoader (type ltxv) reads it from one file
(text_encoders/gemma4-12b-with-proj-ltx-2.5-comfy-int8-convrot.safetensors, Lightricks/LTX-2.5): Gemma 4 12B's
language model under `model.` (nodes/models/gemma4_text.py, int8 ConvRot layers dequantized at load), the
tokenizer as the `tokenizer_json` byte tensor (a `tokenizers` JSON: Gemma 4 ships no SentencePiece model) and the
dual projection `text_embedding_projection.{video,audio}_aggregate_embed.{weight,bias}` (ComfyUI's lt.sd_detect
takes the audio bias as the sign of this "dual_linear" projection, LTX-2.3's and 2.5's).

ComfyUI's rules (comfy/text_encoders/lt.py DualLinearProjection and gemma4.py's tokenizer): the prompt as one
segment (prompt weights are off for Gemma: `(a:1.2)` stays text), tokenized without special tokens behind
Gemma's <bos> (2); every hidden state of the network stacked (the embeddings and each layer's output, the last
after the final norm); each layer's state RMS-normalised per token over the channels (eps 1e-6), flattened per
token (channels then layers), and projected twice, the features scaled by sqrt(out / hidden) for each projection:
the video features (4096 wide in the published file) then the audio features (2048) joined on the channel axis.
ComfyUI pads the prompt on the left to 1024 tokens and cuts the padding off after the network; the kept tokens
see the same relative positions and no padded key, so the result equals the unpadded run's up to float rounding.

These are the *unprocessed* LTX-AV embeddings: the embeddings connectors that turn them into the transformer's
context live in LTX-2.5's transformer file (ComfyUI runs them in the model, flagged by `unprocessed_ltxav_embeds`),
so the conditioning carries that flag."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import torch

from cluster.refs import ModelRef
from nodes.models import gemma4_text
from nodes.models.comfy_quant import dequantize
from nodes.models.components import TextEncoder
from nodes.models.errors import ModelLoadError
from nodes.models.tokenizer import escape_parens, unescape_parens

TOKENIZER_KEY = "tokenizer_json"
PROJECTION = "text_embedding_projection.{}_aggregate_embed."
DUAL_MARKER = "text_embedding_projection.audio_aggregate_embed.bias"  # ComfyUI's lt.sd_detect: dual_linear
BOS = 2
KEY = "gemma4"  # the token dict's key, ComfyUI's embedding_key
EPS = 1e-6
UNPROCESSED = "unprocessed_ltxav_embeds"  # ComfyUI's conditioning key for embeddings before the connectors


def is_ltx25_text(keys) -> bool:
    return DUAL_MARKER in keys and gemma4_text.is_gemma4(keys)


def json_tokenizer(raw: bytes) -> Callable[[str], list[int]]:
    """The file's `tokenizers` tokenizer: one text to ids, no special tokens (ComfyUI's _Gemma4Tokenizer)."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_str(raw.decode("utf-8"))
    return lambda text: tokenizer.encode(text, add_special_tokens=False).ids


@dataclass
class LTX25TextEncoder(TextEncoder):
    tokenizer: Callable[[str], list[int]] | None = None

    def tokenize(self, text: str) -> dict[str, list[list[tuple[int, float]]]]:
        # Weights are off for Gemma in ComfyUI, but its escaped parentheses (\( \)) still come out plain.
        text = unescape_parens(escape_parens(text))
        return {KEY: [[(BOS, 1.0)] + [(t, 1.0) for t in self.tokenizer(text)]]}

    @torch.no_grad()
    def encode(self, tokens: dict[str, list[list[tuple[int, float]]]]) -> tuple[torch.Tensor, torch.Tensor | None]:
        ids = torch.tensor([[t for chunk in tokens[KEY] for t, _ in chunk]], dtype=torch.long)
        states = self.modules[KEY](input_ids=ids, output_hidden_states=True).hidden_states
        return project(torch.stack([s.float() for s in states], dim=-1), self.modules), None

    def extras(self, tokens: dict[str, list[list[tuple[int, float]]]]) -> dict[str, torch.Tensor]:
        """The conditioning's mark that its embeddings still need the transformer's connectors."""
        return {UNPROCESSED: torch.ones(1)}


def project(states: torch.Tensor, modules: Mapping[str, torch.nn.Module]) -> torch.Tensor:
    """Stacked hidden states [B, T, hidden, layers] -> the video then audio features [B, T, video + audio]."""
    hidden = states.shape[2]
    normed = states * torch.rsqrt(states.pow(2).mean(dim=2, keepdim=True) + EPS)
    flat = normed.flatten(2)
    out = []
    for name in ("video", "audio"):
        linear: torch.nn.Linear = modules[name]
        out.append(linear(flat * math.sqrt(linear.out_features / hidden)))
    return torch.cat(out, dim=-1)


def _projection(sd: Mapping[str, torch.Tensor], name: str, width: int, path: str | None) -> torch.nn.Linear:
    prefix = PROJECTION.format(name)
    weight, bias = sd.get(prefix + "weight"), sd.get(prefix + "bias")
    if weight is None or bias is None:
        raise ModelLoadError(path, f"LTX-2.5's text encoder file holds no {prefix}weight and bias")
    if weight.shape[1] != width:
        raise ModelLoadError(
            path,
            f"{prefix}weight takes {weight.shape[1]} features; this Gemma 4 gives {width} "
            "(its hidden width times its layers plus one)",
        )
    linear = torch.nn.Linear(weight.shape[1], weight.shape[0])
    linear.weight.data, linear.bias.data = weight.float(), bias.float()
    return linear


def load_text_encoder(ref: ModelRef, sd: Mapping[str, torch.Tensor]) -> LTX25TextEncoder:
    """CLIPLoader(type ltxv)'s CLIP from LTX-2.5's Gemma 4 file with its dual projection."""
    path = ref.sources[0] if ref.sources else None
    raw = sd.get(TOKENIZER_KEY)
    if raw is None:
        raise ModelLoadError(path, f"the Gemma 4 file holds no tokenizer ({TOKENIZER_KEY}), as ComfyUI's do")
    lm = gemma4_text.load_language_model(sd, path)
    width = lm.config.hidden_size * (lm.config.num_hidden_layers + 1)
    heads = dequantize({k: v for k, v in sd.items() if k.startswith("text_embedding_projection.")}, path, torch.float32)
    modules = {KEY: lm, **{name: _projection(heads, name, width, path) for name in ("video", "audio")}}
    return LTX25TextEncoder(arch="ltx2", modules=modules, layer=None, tokenizer=json_tokenizer(raw.numpy().tobytes()))
