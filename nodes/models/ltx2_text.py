"""LTX-2's text encoder as ComfyUI 0.10.0's LTXAVTextEncoderLoader builds it from two files: Gemma 3 (12B) from the
text encoder file (transformers' key names under `model.`, its SentencePiece model as the byte tensor
`spiece_model`, as ComfyUI's repackaged gemma_3_12B_it files hold it) and, from the LTX-2 checkpoint, the
projection of Gemma's stacked hidden states (`text_embedding_projection.aggregate_embed.weight`) and the video and
audio embeddings connectors (`model.diffusion_model.{video,audio}_embeddings_connector.`).

ComfyUI's rules: the prompt tokenized word by word with Gemma's <bos> (2) in front, no end token and no padding,
in one window; every hidden state of the network (the embeddings and each layer's output, the last after the final
norm) stacked, each layer's states scaled to 8 x (x - mean) / (max - min) over tokens and channels, flattened per
token (channels then layers) and projected to the caption width; each connector then appends its learnable
registers up to a multiple of 128 tokens (at least 1024), runs its blocks with 1-D split RoPE and RMS-normalises;
the video and audio results are joined on the channel axis. Gemma 3 is transformers' Gemma3TextModel (global layers
every sixth with linear RoPE scaling 8, sliding windows of 1024 elsewhere, as ComfyUI's Gemma3_12B_Config); the
connectors are diffusers' LTX2ConnectorTransformer1d. Prompt weights are off, as in the newest ComfyUI (its Gemma 3
tokenizer is built with disable_weights; 0.10.0 still weighted them): the templates' parentheses are read as text."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from diffusers.pipelines.ltx2.connectors import LTX2ConnectorTransformer1d
from transformers import Gemma3TextConfig, Gemma3TextModel

from cluster.refs import ModelRef
from nodes.models.components import TextEncoder
from nodes.models.errors import ModelLoadError
from nodes.models.ltx2 import file_metadata
from nodes.models.safetensors_io import build_module
from nodes.models.tokenizer import escape_parens, unescape_parens
from nodes.models.wan_text import spiece_tokenizer

GEMMA_PREFIX = "model."
GEMMA_MARKER = "model.layers.0.self_attn.q_norm.weight"
SPIECE_KEY = "spiece_model"
PROJECTION = "text_embedding_projection.aggregate_embed.weight"
CONNECTOR_PREFIX = "model.diffusion_model.{}_embeddings_connector."
BOS = 2
CONNECTOR_HEAD_DIM = 128
SLIDING_WINDOW, GLOBAL_EVERY = 1024, 6  # ComfyUI's Gemma3_12B_Config: sliding_attention = [1024] * 5 + [False]
# ComfyUI's connector names <- diffusers'
_CONNECTOR_NAMES = [
    ("transformer_blocks.", "transformer_1d_blocks."),
    (".norm_q.", ".q_norm."),
    (".norm_k.", ".k_norm."),
]


def gemma_config(vocab: int, sizes: Mapping[str, int]) -> Gemma3TextConfig:
    """Gemma 3's text config at the given sizes with ComfyUI's Gemma3_12B settings."""
    layers = sizes["layers"]
    return Gemma3TextConfig(
        vocab_size=vocab,
        hidden_size=sizes["hidden"],
        intermediate_size=sizes["intermediate"],
        num_hidden_layers=layers,
        num_attention_heads=sizes["heads"],
        num_key_value_heads=sizes["kv_heads"],
        head_dim=sizes["head_dim"],
        query_pre_attn_scalar=sizes["head_dim"],
        sliding_window=SLIDING_WINDOW,
        layer_types=["full_attention" if (i + 1) % GLOBAL_EVERY == 0 else "sliding_attention" for i in range(layers)],
        rope_parameters={
            "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
            "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1_000_000.0},
        },
        rms_norm_eps=1e-6,
        max_position_embeddings=131072,
        use_cache=False,
    )


def gemma_sizes(sd: Mapping[str, torch.Tensor]) -> dict[str, int]:
    """Gemma's sizes from its (unprefixed) tensors."""
    head_dim = sd["layers.0.self_attn.q_norm.weight"].shape[0]
    return {
        "hidden": sd["embed_tokens.weight"].shape[1],
        "intermediate": sd["layers.0.mlp.gate_proj.weight"].shape[0],
        "layers": len({int(m.group(1)) for k in sd if (m := re.match(r"layers\.(\d+)\.", k))}),
        "heads": sd["layers.0.self_attn.q_proj.weight"].shape[0] // head_dim,
        "kv_heads": sd["layers.0.self_attn.k_proj.weight"].shape[0] // head_dim,
        "head_dim": head_dim,
    }


def connector_to_original(sd: Mapping[str, torch.Tensor], prefix: str) -> dict[str, torch.Tensor]:
    out = {}
    for key, value in sd.items():
        for ours, theirs in _CONNECTOR_NAMES:
            key = key.replace(ours, theirs)
        out[prefix + key] = value
    return out


def connector_from_original(sd: Mapping[str, torch.Tensor], prefix: str) -> dict[str, torch.Tensor]:
    out = {}
    for key, value in sd.items():
        if key.startswith(prefix):
            key = key[len(prefix) :]
            for ours, theirs in _CONNECTOR_NAMES:
                key = key.replace(theirs, ours)
            out[key] = value.float()
    return out


def _connector(
    sd: Mapping[str, torch.Tensor], path: str | None, name: str, head_dim: int
) -> LTX2ConnectorTransformer1d:
    weights = connector_from_original(sd, CONNECTOR_PREFIX.format(name))
    if not weights:
        raise ModelLoadError(path, f"the LTX-2 checkpoint holds no {name} embeddings connector")
    width = weights["transformer_blocks.0.attn1.to_q.weight"].shape[0]
    if width % head_dim:
        raise ModelLoadError(path, f"the {name} connector's width {width} is not a multiple of its heads' {head_dim}")
    blocks = len({int(m.group(1)) for k in weights if (m := re.match(r"transformer_blocks\.(\d+)\.", k))})
    registers = weights["learnable_registers"].shape[0] if "learnable_registers" in weights else None
    return build_module(
        lambda: LTX2ConnectorTransformer1d(
            num_attention_heads=width // head_dim,
            attention_head_dim=head_dim,
            num_layers=blocks,
            num_learnable_registers=registers,
            rope_type="split",
        ),
        weights,
        path,
        f"LTX-2 {name} embeddings connector",
    )


def _as_comfyui_computes(key: str, value: torch.Tensor) -> torch.Tensor:
    """A Gemma weight in float32. ComfyUI keeps the file's dtype and adds Gemma's 1 to each RMSNorm scale in it
    (bfloat16 for the released files), so a norm scale is rounded as that sum is; transformers adds the 1 in
    float32, so the scale it is given is that rounded sum less 1 (exact in float32)."""
    if key.endswith("norm.weight") and value.dtype in (torch.bfloat16, torch.float16):
        return (value + 1.0).float() - 1.0
    return value.float()


def _with_real_buffers(model: Gemma3TextModel) -> Gemma3TextModel:
    """The rotary frequencies and the embedding scale are computed, not stored: built on the CPU while the rest
    waits on the meta device."""
    with torch.device("cpu"):
        model.rotary_emb = type(model.rotary_emb)(config=model.config)
        model.embed_tokens.register_buffer("embed_scale", torch.tensor(model.config.hidden_size**0.5), persistent=False)
    return model


@dataclass
class LTX2TextEncoder(TextEncoder):
    tokenizer: Callable[[str], list[int]] | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def tokenize(self, text: str) -> dict[str, list[list[tuple[int, float]]]]:
        """Weights off, as the newest ComfyUI's Gemma 3 tokenizer has them (disable_weights; 0.10.0 still parsed
        them): `(red:1.3)` is text, only the escaped `\\(` `\\)` come out as plain parentheses."""
        literal = unescape_parens(escape_parens(text))
        return {"gemma3_12b": [[(BOS, 1.0)] + [(t, 1.0) for t in self.tokenizer(literal)]]}

    @torch.no_grad()
    def encode(self, tokens: dict[str, list[list[tuple[int, float]]]]) -> tuple[torch.Tensor, torch.Tensor | None]:
        chunks = tokens["gemma3_12b"]
        ids = torch.tensor([[t for chunk in chunks for t, _ in chunk]], dtype=torch.long)
        gemma: Gemma3TextModel = self.modules["gemma3_12b"]
        states = gemma(input_ids=ids, output_hidden_states=True).hidden_states  # embeddings + each layer
        out = torch.stack([s.float() for s in states], dim=-1)  # [1, T, D, layers + 1]
        low, high = out.amin(dim=(1, 2), keepdim=True), out.amax(dim=(1, 2), keepdim=True)
        out = 8.0 * (out - out.mean(dim=(1, 2), keepdim=True)) / (high - low + 1e-6)
        out = self.modules["projection"](out.reshape(out.shape[0], out.shape[1], -1))
        joined = []
        for name in ("video", "audio"):
            connector: LTX2ConnectorTransformer1d = self.modules[name]
            joined.append(_connect(connector, out))
        return torch.cat(joined, dim=-1), None


END_OF_TURN, END_OF_TURN_ID = "<end_of_turn>", 106  # the Gemma 3 chat turn's end, a special token id


def generation_ids(encoder: LTX2TextEncoder, text: str) -> list[int]:
    """Gemma's ids of a chat text as ComfyUI tokenizes one for generation: BOS, then each space-separated word
    by the SentencePiece model, `<end_of_turn>` taken as its special id wherever it stands in a word."""
    ids = [BOS]
    for word in text.split(" "):
        for i, piece in enumerate(word.split(END_OF_TURN)):
            if i:
                ids.append(END_OF_TURN_ID)
            if piece:
                ids += encoder.tokenizer(piece)
    return ids


def decode_ids(encoder: LTX2TextEncoder, ids: list[int]) -> str:
    """Generated ids as text: SentencePiece's decoding, which leaves out its control tokens (BOS, EOS, pad);
    a final `<end_of_turn>` (the stop token) is dropped."""
    import sentencepiece

    if ids and ids[-1] == END_OF_TURN_ID:
        ids = ids[:-1]
    processor = sentencepiece.SentencePieceProcessor(model_proto=encoder.extra["spiece_model"])
    return processor.decode(ids)


def _connect(connector: LTX2ConnectorTransformer1d, states: torch.Tensor) -> torch.Tensor:
    """ComfyUI's Embeddings1DConnector: registers after the text up to a multiple of their count (>= 1024)."""
    tokens = states.shape[1]
    registers = connector.num_learnable_registers
    length = tokens if not registers else -(-max(1024, tokens) // registers) * registers
    padded = torch.nn.functional.pad(states, (0, 0, 0, length - tokens))
    mask = torch.zeros(states.shape[0], length)
    mask[:, tokens:] = -10000.0  # where the registers go
    return connector(padded, mask)[0]


def load_text_encoder(ref: ModelRef, state_dicts: Sequence[Mapping[str, torch.Tensor]]) -> LTX2TextEncoder:
    """LTXAVTextEncoderLoader's CLIP from the Gemma file and the LTX-2 checkpoint (either order)."""
    paths = list(ref.sources)
    if len(state_dicts) != 2:
        raise ModelLoadError(
            paths[0] if paths else None, "LTX-2's text encoder needs the Gemma 3 file and the checkpoint"
        )
    gemma_i = next((i for i, sd in enumerate(state_dicts) if GEMMA_MARKER in sd), None)
    if gemma_i is None:
        raise ModelLoadError(paths[0] if paths else None, f"no Gemma 3 weights ({GEMMA_MARKER}) in either file")
    gemma_sd, ckpt = state_dicts[gemma_i], state_dicts[1 - gemma_i]
    gemma_path, ckpt_path = (paths[gemma_i], paths[1 - gemma_i]) if len(paths) == 2 else (None, None)
    spiece = gemma_sd.get(SPIECE_KEY)
    if spiece is None:
        raise ModelLoadError(gemma_path, "the Gemma 3 file holds no tokenizer (spiece_model), as ComfyUI's do")
    if PROJECTION not in ckpt:
        raise ModelLoadError(ckpt_path, f"not an LTX-2 checkpoint: no {PROJECTION}")
    sd = {
        k[len(GEMMA_PREFIX) :]: _as_comfyui_computes(k, v)
        for k, v in gemma_sd.items()
        if k.startswith(GEMMA_PREFIX) and k[len(GEMMA_PREFIX) :].split(".", 1)[0] in ("embed_tokens", "layers", "norm")
    }
    try:
        sizes = gemma_sizes(sd)
    except KeyError as e:
        raise ModelLoadError(gemma_path, f"not a usable Gemma 3 text encoder: no {e}") from None
    vocab = sd["embed_tokens.weight"].shape[0]
    gemma = build_module(
        lambda: _with_real_buffers(Gemma3TextModel(gemma_config(vocab, sizes))), sd, gemma_path, "Gemma 3"
    )
    weight = ckpt[PROJECTION].float()
    if weight.shape[1] != sizes["hidden"] * (sizes["layers"] + 1):
        raise ModelLoadError(
            ckpt_path,
            f"{PROJECTION} takes {weight.shape[1]} features; this Gemma gives "
            f"{sizes['hidden']} x {sizes['layers'] + 1} hidden states (the checkpoint is for another text encoder)",
        )
    projection = torch.nn.Linear(weight.shape[1], weight.shape[0], bias=False)
    projection.weight.data = weight
    # The connectors' head width: ComfyUI's Embeddings1DConnector fixes 128 (the norms span all heads, so the
    # tensors cannot tell); a file whose metadata says otherwise (the tiny demo's) is taken at its word.
    try:
        config = json.loads(file_metadata(ckpt_path).get("config", "{}")).get("transformer", {})
    except json.JSONDecodeError as e:
        raise ModelLoadError(ckpt_path, f"its metadata 'config' is not JSON ({e})") from None
    head_dim = int(config.get("connector_attention_head_dim", CONNECTOR_HEAD_DIM))
    modules = {
        "gemma3_12b": gemma,
        "projection": projection,
        "video": _connector(ckpt, ckpt_path, "video", head_dim),
        "audio": _connector(ckpt, ckpt_path, "audio", head_dim),
    }
    proto = spiece.numpy().tobytes()
    return LTX2TextEncoder(
        arch="ltx2", modules=modules, layer=None, tokenizer=spiece_tokenizer(proto), extra={"spiece_model": proto}
    )
