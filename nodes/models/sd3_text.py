"""SD3's text encoder, ComfyUI's SD3ClipModel: CLIP-L and CLIP-G (penultimate layer, as SDXL runs them) side
by side in the features, zero-padded to 4096, followed along the tokens by T5-XXL's states; the pooled vector
is CLIP-L's (unprojected) and CLIP-G's (projected) pooled outputs joined. Any of the three may be missing:
ComfyUI fills a missing CLIP with zeros of the real model's width and leaves out a missing T5.

Loaded from a checkpoint (`text_encoders.clip_l|clip_g|t5xxl.transformer.*`) or from text-encoder files
(TripleCLIPLoader, DualCLIPLoader/CLIPLoader with type sd3) in HF or OpenCLIP layout.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from cluster.refs import ModelRef
from nodes.models import clip as clip_mod
from nodes.models.components import TextEncoder
from nodes.models.errors import ModelLoadError
from nodes.models.flux_configs import config_for_sources
from nodes.models.flux_tokenize import ChunkRules, encode_weighted, tokenize_weighted
from nodes.models.t5 import T5_MARKER, build_t5, t5_hidden_states, tokenizer_from_vocab
from nodes.models.t5_tokenizer import find_t5_tokenizer
from nodes.models.tokenizer import SDTokenizer, TokenWeights

CONTEXT_WIDTH = 4096  # ComfyUI pads the CLIP features to T5-XXL's width
MISSING_WIDTH = {"l": 768, "g": 1280}  # ComfyUI's zero pooled vectors for a missing CLIP
# ComfyUI's T5-XXL tokenizer for SD3: no start token, </s>=1 at the end, pad 0 up to at least 77 tokens.
T5_RULES = ChunkRules(start=None, end=1, pad=0, max_length=99_999_999, pad_to_max_length=False, min_length=77)
_CLIP_PREFIXES = {"l": "text_encoders.clip_l.transformer.", "g": "text_encoders.clip_g.transformer."}


@dataclass
class SD3TextEncoder(TextEncoder):
    sides: dict[str, clip_mod.ClipSide] = field(default_factory=dict)
    t5_tokenize: Callable[[str], list[int]] | None = None

    def tokenize(self, text: str) -> dict[str, TokenWeights]:
        out: dict[str, TokenWeights] = {"g": [], "l": []}
        for name in out:
            # A missing CLIP's tokens are never encoded; the other CLIP's tokenizer gives them the same chunks.
            side = self.sides.get(name) or next(iter(self.sides.values()), None)
            if side is not None:
                out[name] = side.tokenize(text)
        out["t5xxl"] = tokenize_weighted(text, self.t5_tokenize, T5_RULES) if self.t5_tokenize else []
        return out

    @torch.no_grad()
    def encode(self, tokens: dict[str, TokenWeights]) -> tuple[torch.Tensor, torch.Tensor | None]:
        out = lg = pooled = None
        if tokens.get("l") or tokens.get("g"):
            encoded = {name: side.encode(tokens[name], self.layer) for name, side in self.sides.items()}
            zl, pl = encoded.get("l", (None, torch.zeros(1, MISSING_WIDTH["l"])))
            zg, pg = encoded.get("g", (None, torch.zeros(1, MISSING_WIDTH["g"])))
            if zl is not None and zg is not None:
                cut = min(zl.shape[1], zg.shape[1])
                lg = torch.cat([zl[:, :cut], zg[:, :cut]], dim=-1)
            elif zg is not None:
                lg = F.pad(zg, (MISSING_WIDTH["l"], 0))
            else:
                lg = zl
            if lg is not None:
                lg = out = F.pad(lg, (0, CONTEXT_WIDTH - lg.shape[-1]))
            pooled = torch.cat([pl, pg], dim=-1)
        t5 = self.modules.get("t5xxl")
        if t5 is not None:
            # CLIPSetLastLayer reaches T5 too; past its depth ComfyUI takes the last layer.
            layer = -1 if self.layer is None or abs(self.layer) > t5.config.num_layers else self.layer

            def run_t5(ids: torch.Tensor) -> tuple[torch.Tensor, None]:
                return t5_hidden_states(t5, ids.to(t5.device), layer).float(), None

            # No T5 windows (CLIPTextEncodeSD3's empty t5xxl): ComfyUI encodes the bare end token.
            t5_out, _ = encode_weighted(tokens.get("t5xxl") or [[(T5_RULES.end, 1.0)]], T5_RULES, run_t5)
            out = t5_out if lg is None else torch.cat([lg, t5_out], dim=-2)
        if out is None:
            out = torch.zeros(1, 77, CONTEXT_WIDTH)
        if pooled is None:
            pooled = torch.zeros(1, sum(self.pooled_width(name) for name in ("l", "g")))
        return out, pooled

    def pooled_width(self, name: str) -> int:
        """The width of a CLIP's pooled output. With no CLIP tokens ComfyUI's pooled vector is zeros of the real
        CLIPs' widths (768 + 1280); a model's own widths say the same for real models and fit tiny ones."""
        side = self.sides.get(name)
        if side is None:
            return MISSING_WIDTH[name]
        cfg = side.module.config
        return (
            cfg.projection_dim
            if side.spec.projected_pooled and hasattr(side.module, "text_projection")
            else cfg.hidden_size
        )


def _clip_towers(sd: Mapping[str, torch.Tensor]) -> list[dict[str, torch.Tensor]]:
    """The flattened-HF CLIP towers of one state dict: a checkpoint's clip_l/clip_g, or one bare CLIP file."""
    if clip_mod.is_open_clip_layout(sd.keys()):
        prefix = next(k for k in sd if k.endswith("transformer.resblocks.0.attn.in_proj_weight"))
        return [clip_mod.open_clip_to_hf(sd, prefix[: -len("transformer.resblocks.0.attn.in_proj_weight")])]
    if any(k.endswith("encoder.layers.0.self_attn.q_proj.weight") for k in sd):
        return [clip_mod.hf_keys(sd)]
    return []


def split_text_encoders(
    ref: ModelRef, state_dicts: Sequence[Mapping[str, torch.Tensor]]
) -> dict[str, tuple[dict[str, torch.Tensor], str | None]]:
    """{"l"/"g": (flattened HF CLIP, path), "t5xxl": (unprefixed T5, path)} found in the state dicts. A
    checkpoint names its towers; of bare CLIP files the wider is CLIP-G (a lone one: G if it is G-sized)."""
    found: dict[str, tuple[dict[str, torch.Tensor], str | None]] = {}
    bare: list[tuple[dict[str, torch.Tensor], str | None]] = []
    for i, sd in enumerate(state_dicts):
        path = ref.sources[i] if i < len(ref.sources) else None
        named = {n: p for n, p in _CLIP_PREFIXES.items() if any(k.startswith(p) for k in sd)}
        for name, prefix in named.items():
            found[name] = (clip_mod.hf_keys(sd, prefix), path)
        t5_key = next((k for k in sd if k.endswith(T5_MARKER)), None)
        if t5_key is not None:
            prefix = t5_key[: -len(T5_MARKER)]
            found["t5xxl"] = ({k[len(prefix) :]: v for k, v in sd.items() if k.startswith(prefix)}, path)
        elif not named:
            bare += [(tower, path) for tower in _clip_towers(sd)]
    width = [t.get("embeddings.token_embedding.weight", torch.empty(0, 0)).shape[1] for t, _ in bare]
    if len(bare) == 1:
        found["g" if width[0] >= MISSING_WIDTH["g"] else "l"] = bare[0]
    elif len(bare) == 2:
        small, wide = (bare[1], bare[0]) if width[0] > width[1] else (bare[0], bare[1])
        found.update({"l": small, "g": wide})
    elif len(bare) > 2:
        raise ModelLoadError(ref.sources[0], f"{len(bare)} CLIP text encoders given; SD3 takes CLIP-L and CLIP-G")
    return found


def load_text_encoder(
    ref: ModelRef, state_dicts: Sequence[Mapping[str, torch.Tensor]] | Mapping[str, torch.Tensor]
) -> SD3TextEncoder:
    """SD3's CLIP object from a checkpoint's state dict or one to three text-encoder files."""
    from nodes.models.loader import clip_bpe, model_config  # the SD-family CLIP helpers (loader imports us lazily)

    if ref.patches:
        raise ModelLoadError(ref.sources[0], "LoRAs on SD3 text encoders are not supported yet")
    if isinstance(state_dicts, Mapping):
        state_dicts = [state_dicts]
    found = split_text_encoders(ref, state_dicts)
    if not found:
        raise ModelLoadError(ref.sources[0] if ref.sources else None, "no CLIP-L, CLIP-G or T5-XXL weights found")
    # SD3 runs its CLIPs exactly as SDXL does (penultimate layer, G's pooled projected, G padded with 0).
    specs = {e["name"]: clip_mod.ClipSpec(**e) for e in model_config("sdxl")["text_encoders"]}
    sides, modules = {}, {}
    for name in ("l", "g"):
        if name in found:
            sd, path = found[name]
            module = clip_mod.build_clip(sd, specs[name].hidden_act, path, f"CLIP-{name.upper()}")
            vocab = sd["embeddings.token_embedding.weight"].shape[0]
            tokenizer = SDTokenizer(clip_bpe(vocab, path), pad_with_end=specs[name].pad_with_end)
            sides[name] = clip_mod.ClipSide(module, tokenizer, specs[name])
            modules[f"clip_{name}"] = module
    t5_tokenize = None
    if "t5xxl" in found:
        sd, path = found["t5xxl"]
        modules["t5xxl"] = build_t5(sd, path)
        folder, config = config_for_sources(ref.sources)
        vocab_file = config.get("t5", {}).get("vocab")
        t5_tokenize = (
            tokenizer_from_vocab(folder / vocab_file)
            if folder is not None and vocab_file
            else find_t5_tokenizer(path, modules["t5xxl"].config.vocab_size)
        )
    return SD3TextEncoder(arch="sd3", modules=modules, layer=ref.option("layer"), sides=sides, t5_tokenize=t5_tokenize)
