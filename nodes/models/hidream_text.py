"""HiDream's text encoder: CLIP-L, CLIP-G, T5-XXL and Llama 3.1 8B Instruct (QuadrupleCLIPLoader), encoded as
ComfyUI's comfy/text_encoders/hidream.py does (0.3.64 and the newest source).

- The CLIPs give only the pooled vector: CLIP-L's and CLIP-G's projected pooled outputs joined (768 + 1280);
  zeros of those widths for a missing one. A long CLIP-L (HiDream's clip_l_hidream, 248 positions) takes
  windows as long as its position table, as ComfyUI's long_clipl rule does.
- T5-XXL's first 128-token window (at least 128 tokens: </s> then pad 0), attention masked after the first </s>,
  is the conditioning; zeros [1, 128, 4096] without T5.
- The Llama takes <|begin_of_text|> and the prompt, padded with <|eot_id|> (128009) to at least 128 tokens and
  masked from the first pad on, and gives all 32 of its hidden states after the embedding (layer k's output for
  k < 31, then the final-normed output) stacked as [1, 32, T, 4096]: ComfyUI's `conditioning_llama3`, which
  travels beside the conditioning; zeros [1, 32, 1, 4096] without the Llama. A token weight w != 1 moves the
  whole state of *layer* j (j the token's index; entry 0 is the embedding, dropped afterwards) away from the
  empty prompt's, as ComfyUI's weight loop does over the [1, 33, T, D] stack; kept so, to give its numbers.

The Llama runs on transformers' LlamaModel (sizes from the shapes; ComfyUI's fixed 128-wide heads, rope theta
500000 without Llama 3.1's frequency scaling, norm eps 1e-5). Its tokenizer is Llama 3's BPE from the quicktok-v1
package (MIT code; the vocabulary it bundles is Meta's, under the Llama 3 Community License: no permissively
licensed Llama 3 vocabulary exists, and ComfyUI ships Meta's tokenizer.json under that license)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

import torch

from cluster.refs import ModelRef
from nodes.models import clip as clip_mod
from nodes.models.components import TextEncoder
from nodes.models.errors import ModelLoadError
from nodes.models.flux_configs import config_for_sources
from nodes.models.flux_tokenize import ChunkRules, empty_tokens, tokenize_weighted
from nodes.models.fp8 import dequantize_scaled_fp8
from nodes.models.qwen3_text import with_real_rotary
from nodes.models.safetensors_io import build_module
from nodes.models.sd3_text import MISSING_WIDTH, split_text_encoders
from nodes.models.t5 import build_t5, tokenizer_from_vocab
from nodes.models.t5_tokenizer import find_t5_tokenizer
from nodes.models.text_encoder_dtype import text_encoder_compute_dtype
from nodes.models.tokenizer import SDTokenizer, TokenWeights

LLAMA_MARKER = "model.layers.0.post_attention_layernorm.weight"  # ComfyUI's detect_te_model: LLAMA3_8
BEGIN, EOT = 128000, 128009  # <|begin_of_text|>, <|eot_id|> (ComfyUI's pad token for HiDream)
LLAMA_RULES = ChunkRules(start=BEGIN, end=None, pad=EOT, max_length=99_999_999, pad_to_max_length=False, min_length=128)
T5_RULES = ChunkRules(start=None, end=1, pad=0, max_length=128, pad_to_max_length=False, min_length=128)
T5_WIDTH, LLAMA_WIDTH, LLAMA_STATES = 4096, 4096, 32  # ComfyUI's zero outputs for a missing T5 / Llama
HEAD_DIM = 128
ROPE_THETA = 500000.0
RMS_EPS = 1e-5


def is_llama(sd: Mapping[str, torch.Tensor]) -> bool:
    return LLAMA_MARKER in sd and "model.embed_tokens.weight" in sd


def llama_tokenizer() -> Callable[[str], list[int]]:
    """Llama 3's BPE (ids without special tokens), from the quicktok-v1 package."""
    try:
        import quicktok
    except ImportError as e:  # a dependency of ours; the GPU machine's image lacks it and no GPU check encodes HiDream
        raise ValueError(
            f"HiDream's Llama 3 tokenizer needs the quicktok-v1 package, not installed here ({e})"
        ) from None

    return quicktok.get_encoding("llama3").encode_ordinary


def llama_config(sd: Mapping[str, torch.Tensor]) -> dict:
    """LlamaConfig arguments from the shapes. No shape tells heads apart: ComfyUI's 128-wide heads wherever the
    width is whole heads of 128, else (the demo's tiny file) two query heads."""
    vocab, hidden = sd["model.embed_tokens.weight"].shape
    q_out = int(sd["model.layers.0.self_attn.q_proj.weight"].shape[0])
    kv_out = int(sd["model.layers.0.self_attn.k_proj.weight"].shape[0])
    head = HEAD_DIM if q_out % HEAD_DIM == 0 and kv_out % HEAD_DIM == 0 else q_out // 2
    layers = len({k.split(".")[2] for k in sd if k.startswith("model.layers.")})
    return {
        "vocab_size": int(vocab),
        "hidden_size": int(hidden),
        "intermediate_size": int(sd["model.layers.0.mlp.gate_proj.weight"].shape[0]),
        "num_hidden_layers": layers,
        "num_attention_heads": q_out // head,
        "num_key_value_heads": kv_out // head,
        "head_dim": head,
        "rope_theta": ROPE_THETA,
        "rms_norm_eps": RMS_EPS,
        "max_position_embeddings": 131072,
        "tie_word_embeddings": False,
    }


def build_llama(sd: Mapping[str, torch.Tensor], path: str | None) -> torch.nn.Module:
    from transformers import LlamaConfig, LlamaModel

    try:
        config = LlamaConfig(**llama_config(sd))
    except KeyError as e:
        raise ModelLoadError(path, f"not a usable Llama text encoder: missing {e}") from None
    weights = {k[len("model.") :]: v for k, v in sd.items() if k.startswith("model.")}
    dtype = text_encoder_compute_dtype(weights["embed_tokens.weight"].dtype)
    model = build_module(lambda: with_real_rotary(LlamaModel(config)), weights, path, "Llama text encoder", dtype=dtype)
    return model.eval()


def pad_mask(ids: Sequence[int], pad: int) -> list[int]:
    """1 up to the first pad token, 0 from it on (ComfyUI's rule for an encoder with no end token)."""
    return [1] * ids.index(pad) + [0] * (len(ids) - ids.index(pad)) if pad in ids else [1] * len(ids)


def end_mask(ids: Sequence[int], end: int) -> list[int]:
    """1 up to and with the first end token, 0 after it (ComfyUI's rule for T5)."""
    return [1] * (ids.index(end) + 1) + [0] * (len(ids) - ids.index(end) - 1) if end in ids else [1] * len(ids)


@torch.no_grad()
def llama_states(model: torch.nn.Module, rows: list[list[int]]) -> torch.Tensor:
    """[N, 33, T, D]: each row's embedding and hidden states, the last one final-normed (ComfyUI's layer "all")."""
    device = model.embed_tokens.weight.device
    ids = torch.tensor(rows, dtype=torch.long, device=device)
    mask = torch.tensor([pad_mask(r, EOT) for r in rows], dtype=torch.long, device=device)
    out = model(input_ids=ids, attention_mask=mask, output_hidden_states=True, use_cache=False)
    return torch.stack(out.hidden_states, dim=1).float()


@dataclass
class HiDreamTextEncoder(TextEncoder):
    sides: dict[str, clip_mod.ClipSide] = field(default_factory=dict)
    t5_tokenize: Callable[[str], list[int]] | None = None
    llama_tokenize: Callable[[str], list[int]] | None = None

    def tokenize(self, text: str) -> dict[str, TokenWeights]:
        out: dict[str, TokenWeights] = {"g": [], "l": []}
        for name in out:  # a missing CLIP's tokens are never encoded; the other's tokenizer stands in
            side = self.sides.get(name) or next(iter(self.sides.values()), None)
            if side is not None:
                out[name] = side.tokenize(text)
        out["t5xxl"] = tokenize_weighted(text, self.t5_tokenize, T5_RULES)[:1] if self.t5_tokenize else []
        out["llama"] = tokenize_weighted(text, self.llama_tokenize, LLAMA_RULES) if self.llama_tokenize else []
        return out

    @torch.no_grad()
    def encode(self, tokens: dict[str, TokenWeights]) -> tuple[torch.Tensor, torch.Tensor]:
        pooled = None
        if tokens.get("l") or tokens.get("g"):
            parts = []
            for name in ("l", "g"):
                side = self.sides.get(name)
                parts.append(side.encode(tokens[name])[1] if side is not None else torch.zeros(1, MISSING_WIDTH[name]))
            pooled = torch.cat(parts, dim=-1)
        t5 = self.modules.get("t5xxl")
        if t5 is not None and tokens.get("t5xxl"):
            cond = self._t5(t5, tokens["t5xxl"])
        else:
            cond = torch.zeros(1, 128, T5_WIDTH)
        if pooled is None:
            pooled = torch.zeros(1, MISSING_WIDTH["l"] + MISSING_WIDTH["g"])
        return cond, pooled

    def extras(self, tokens: dict[str, TokenWeights]) -> dict[str, torch.Tensor]:
        """ComfyUI's `conditioning_llama3`, put beside the conditioning."""
        llama = self.modules.get("llama")
        if llama is None or not tokens.get("llama"):
            return {"conditioning_llama3": torch.zeros(1, LLAMA_STATES, 1, LLAMA_WIDTH)}
        return {"conditioning_llama3": self._llama(llama, tokens["llama"])}

    @staticmethod
    def _t5(t5: torch.nn.Module, windows: TokenWeights) -> torch.Tensor:
        rows = [[t for t, _ in w] for w in windows]
        weighted = any(wt != 1.0 for w in windows for _, wt in w)
        if weighted:
            rows.append(empty_tokens(T5_RULES, max(len(r) for r in rows)))
        device = next(t5.parameters()).device
        ids = torch.tensor(rows, dtype=torch.long, device=device)
        mask = torch.tensor([end_mask(r, T5_RULES.end) for r in rows], dtype=torch.long, device=device)
        states = t5(input_ids=ids, attention_mask=mask).last_hidden_state.float()
        out = []
        for k, window in enumerate(windows):
            z = states[k : k + 1].clone()
            for j, (_, w) in enumerate(window):
                if w != 1.0:
                    z[0, j] = (z[0, j] - states[-1, j]) * w + states[-1, j]
            out.append(z)
        return torch.cat(out, dim=1)

    @staticmethod
    def _llama(model: torch.nn.Module, windows: TokenWeights) -> torch.Tensor:
        rows = [[t for t, _ in w] for w in windows]
        weighted = any(wt != 1.0 for w in windows for _, wt in w)
        if weighted:
            rows.append(empty_tokens(LLAMA_RULES, max(len(r) for r in rows)))
        states = llama_states(model, rows)  # [N, 33, T, D]
        out = []
        for k, window in enumerate(windows):
            z = states[k : k + 1].clone()
            if weighted:  # ComfyUI's loop indexes the second axis, here the layer axis, by token position
                for j in range(min(z.shape[1], len(window))):
                    w = window[j][1]
                    if w != 1.0:
                        z[0, j] = (z[0, j] - states[-1, j]) * w + states[-1, j]
            out.append(z)
        return torch.cat(out, dim=-2)[:, 1:]  # ComfyUI's HiDream encoder drops the embedding


def load_text_encoder(
    ref: ModelRef, state_dicts: Sequence[Mapping[str, torch.Tensor]] | Mapping[str, torch.Tensor]
) -> HiDreamTextEncoder:
    """HiDream's CLIP object from up to four text-encoder files (any order: each is told by its weights)."""
    from nodes.models.loader import clip_bpe, model_config  # the SD-family CLIP helpers

    if ref.patches:
        raise ModelLoadError(ref.sources[0], "LoRAs on HiDream text encoders are not supported yet")
    if isinstance(state_dicts, Mapping):
        state_dicts = [state_dicts]
    # the templates' llama_3.1_8b_instruct_fp8_scaled and t5xxl_fp8_e4m3fn_scaled: ComfyUI's scaled fp8, multiplied out
    state_dicts = [dequantize_scaled_fp8(sd) for sd in state_dicts]
    paths = list(ref.sources) + [None] * (len(state_dicts) - len(ref.sources))
    llamas = [(sd, p) for sd, p in zip(state_dicts, paths) if is_llama(sd)]
    others = [(sd, p) for sd, p in zip(state_dicts, paths) if not is_llama(sd)]
    if len(llamas) > 1:
        raise ModelLoadError(llamas[1][1], "two Llama text encoders given; HiDream takes one")
    # split_text_encoders reads a file's path by its position among the state dicts it is given
    found = split_text_encoders(replace(ref, sources=tuple(p or "" for _, p in others)), [sd for sd, _ in others])
    if not found and not llamas:
        raise ModelLoadError(ref.sources[0] if ref.sources else None, "no CLIP-L, CLIP-G, T5-XXL or Llama found")
    specs = {e["name"]: clip_mod.ClipSpec(**e) for e in model_config("sdxl")["text_encoders"]}
    specs["l"] = replace(specs["l"], projected_pooled=True)  # HiDream's CLIP-L: its projected pooled output
    sides, modules = {}, {}
    for name in ("l", "g"):
        if name in found:
            sd, path = found[name]
            module = clip_mod.build_clip(sd, specs[name].hidden_act, path, f"CLIP-{name.upper()}")
            vocab = sd["embeddings.token_embedding.weight"].shape[0]
            positions = int(sd["embeddings.position_embedding.weight"].shape[0])  # long CLIP: 248
            tokenizer = SDTokenizer(clip_bpe(vocab, path), max_length=positions, pad_with_end=specs[name].pad_with_end)
            sides[name] = clip_mod.ClipSide(module, tokenizer, specs[name])
            modules[f"clip_{name}"] = module
    t5_tokenize = llama_tokenize = None
    if "t5xxl" in found:
        sd, path = found["t5xxl"]
        modules["t5xxl"] = build_t5(sd, path)
        folder, config = config_for_sources((path,) if path else ())  # a tiny T5 names its own vocabulary
        vocab_file = config.get("t5", {}).get("vocab")
        t5_tokenize = (
            tokenizer_from_vocab(folder / vocab_file)
            if folder is not None and vocab_file
            else find_t5_tokenizer(path, modules["t5xxl"].config.vocab_size)
        )
    if llamas:
        sd, path = llamas[0]
        modules["llama"] = build_llama(sd, path)
        llama_tokenize = llama_tokenizer()
    return HiDreamTextEncoder(
        arch="hidream", modules=modules, sides=sides, t5_tokenize=t5_tokenize, llama_tokenize=llama_tokenize
    )
