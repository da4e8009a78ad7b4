"""HunyuanDiT's text encoders as ComfyUI 0.3.64 runs them (comfy/text_encoders/hydit.py): a bilingual BERT
(hfl/chinese-roberta-wwm-ext-large's architecture, 1024 wide, 24 layers; ComfyUI's "hydit_clip") and mT5-XL's
encoder ("mt5xl"), from a HunyuanDiT checkpoint (`text_encoders.hydit_clip.transformer.bert.` and
`text_encoders.mt5xl.transformer.`) or two files (DualCLIPLoader type hunyuan_dit).

Tokenizers. mT5's SentencePiece model is read from the file (`text_encoders.mt5xl.spiece_model`, a byte tensor:
ComfyUI's checkpoint holds it and ComfyUI reads it from there). BERT's WordPiece vocabulary is not in any file:
ComfyUI ships Tencent's (its comfy/text_encoders/hydit_clip_tokenizer/vocab.txt, 47,020 entries: bert-base-chinese's
21,128 and Tencent's additions), which is Tencent-Hunyuan/HunyuanDiT's t2i/tokenizer/vocab.txt, licensed under the
Tencent Hunyuan Community License only; no permissively licensed package ships it. So it is not shipped here: the
user's copy is read from `hydit_clip_tokenizer/vocab.txt` beside the weights file or in the models folder's
text_encoders/ or configs/, and a missing one is refused naming where to put it. WordPiece itself is transformers' BertTokenizer, as
ComfyUI's (lower-casing, Chinese characters split).

ComfyUI's rules: BERT's prompt between [CLS] (101) and [SEP] (102), padded with 0 to at least 77 tokens, windows
of 512; mT5's with </s> (1) after it, padded with 0 to at least 256; both masked after their end token (the masks
go beside the conditioning, as `attention_mask` and `attention_mask_mt5xl`, with mT5's last states as
`conditioning_mt5xl`); weights against the empty prompt's states, no pooled output."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import torch

from cluster.refs import ModelRef
from nodes.models.components import TextEncoder
from nodes.models.errors import ModelLoadError
from nodes.models.flux_keys import find_prefix, strip_prefix
from nodes.models.flux_tokenize import ChunkRules, encode_weighted, tokenize_weighted, with_tokenizer_options
from nodes.models.safetensors_io import build_module

BERT = "hydit_clip"  # ComfyUI's names of the two sub-encoders (token keys)
MT5 = "mt5xl"
BERT_MARKER = "bert.encoder.layer.0.attention.self.query.weight"
MT5_MARKER = "encoder.final_layer_norm.weight"
SPIECE_KEY = "spiece_model"
VOCAB = Path("hydit_clip_tokenizer") / "vocab.txt"
BERT_RULES = ChunkRules(start=101, end=102, pad=0, max_length=512, pad_to_max_length=False, min_length=77)
MT5_RULES = ChunkRules(start=None, end=1, pad=0, max_length=99_999_999, pad_to_max_length=False, min_length=256)
MASK_KEY, MT5_STATES, MT5_MASK_KEY = "attention_mask", "conditioning_mt5xl", "attention_mask_mt5xl"


def vocab_candidates(weights_path: str | None) -> list[Path]:
    """Where the BERT vocabulary is looked for: beside the weights file, then the workspace's text_encoders and
    configs folders."""
    from nodes.models.loader import vocab_dirs

    here = [Path(weights_path).resolve().parent] if weights_path is not None else []
    return [d / VOCAB for d in here + list(vocab_dirs())]


@lru_cache(maxsize=4)
def _bert_tokenizer(path: str) -> Callable[[str], list[int]]:
    from transformers import BertTokenizer

    # from the folder, as ComfyUI loads it (transformers 5's constructor does not read a vocab_file)
    tok = BertTokenizer.from_pretrained(str(Path(path).parent), do_lower_case=True, tokenize_chinese_chars=True)

    def encode(text: str) -> list[int]:
        return tok(text, add_special_tokens=False)["input_ids"]

    return encode


def vocab_problem(weights_path: str | None) -> str | None:
    """Why the BERT vocabulary of the file at `weights_path` cannot be found, or None."""
    candidates = vocab_candidates(weights_path)
    if any(c.is_file() for c in candidates):
        return None
    return (
        "HunyuanDiT's BERT tokenizer vocabulary is not shipped (Tencent's vocab.txt, 47,020 entries, is licensed "
        "under the Tencent Hunyuan Community License only): put the vocab.txt of HunyuanDiT's t2i/tokenizer "
        "(ComfyUI has the same file as comfy/text_encoders/hydit_clip_tokenizer/vocab.txt) at "
        + (" or ".join(str(c) for c in candidates) or "hydit_clip_tokenizer/vocab.txt beside the weights")
    )


def bert_tokenizer(weights_path: str | None) -> Callable[[str], list[int]]:
    for candidate in vocab_candidates(weights_path):
        if candidate.is_file():
            return _bert_tokenizer(str(candidate))
    raise ModelLoadError(weights_path, vocab_problem(weights_path))


def spiece_tokenizer(proto: bytes) -> Callable[[str], list[int]]:
    """mT5's SentencePiece ids of a text segment, no </s> (ComfyUI's SPieceTokenizer, its end token cut)."""
    import sentencepiece

    sp = sentencepiece.SentencePieceProcessor(model_proto=proto)
    return lambda text: sp.encode(text)


def _mask(ids: torch.Tensor, end: int) -> torch.Tensor:
    """1 up to and including each row's first end token, 0 after it (ComfyUI's SDClipModel mask)."""
    ended = (ids == end).long().cumsum(dim=1)
    return ((ended == 0) | ((ended == 1) & (ids == end))).long()


@dataclass
class HunyuanDiTTextEncoder(TextEncoder):
    bert_tokenizer: Callable[[str], list[int]] | None = None
    mt5_tokenizer: Callable[[str], list[int]] | None = None
    mt5_rules: ChunkRules = MT5_RULES
    bert_rules: ChunkRules = BERT_RULES

    def tokenize(self, text: str) -> dict[str, list[list[tuple[int, float]]]]:
        return {
            BERT: tokenize_weighted(text, self.bert_tokenizer, self.bert_rules),
            MT5: tokenize_weighted(text, self.mt5_tokenizer, self.mt5_rules),
        }

    def _run(self, name: str, end: int) -> Callable[[torch.Tensor], tuple[torch.Tensor, None]]:
        module = self.modules[name]

        def run(ids: torch.Tensor) -> tuple[torch.Tensor, None]:
            device = next(module.parameters()).device
            mask = _mask(ids, end)
            out = module(input_ids=ids.to(device), attention_mask=mask.to(device)).last_hidden_state
            return out.float(), None

        return run

    @staticmethod
    def _masks(chunks: list[list[tuple[int, float]]], end: int) -> torch.Tensor:
        return torch.cat([_mask(torch.tensor([[t for t, _ in c]]), end) for c in chunks], dim=1)

    @torch.no_grad()
    def encode(self, tokens: dict[str, list[list[tuple[int, float]]]]) -> tuple[torch.Tensor, None]:
        cond, _ = encode_weighted(tokens[BERT], self.bert_rules, self._run(BERT, self.bert_rules.end))
        return cond, None

    @torch.no_grad()
    def extras(self, tokens: dict[str, list[list[tuple[int, float]]]]) -> dict[str, torch.Tensor]:
        """BERT's mask, mT5's states and mask (ComfyUI's keys beside the conditioning)."""
        states, _ = encode_weighted(tokens[MT5], self.mt5_rules, self._run(MT5, self.mt5_rules.end))
        return {
            MASK_KEY: self._masks(tokens[BERT], self.bert_rules.end).float(),
            MT5_STATES: states,
            MT5_MASK_KEY: self._masks(tokens[MT5], self.mt5_rules.end).float(),
        }


def _bert_module(sd: Mapping[str, torch.Tensor], path: str | None) -> torch.nn.Module:
    from transformers import BertConfig, BertModel

    emb = sd["embeddings.word_embeddings.weight"]
    layers = len({k.split(".")[2] for k in sd if k.startswith("encoder.layer.")})
    width = int(emb.shape[1])
    config = BertConfig(
        vocab_size=int(emb.shape[0]),
        hidden_size=width,
        num_hidden_layers=layers,
        # 64-wide heads as chinese-roberta-wwm-ext-large's 16 at 1024 (ComfyUI's hydit_clip.json); the heads of a
        # narrower file are its builder's: 16-wide at most 2 (the tiny demo's)
        num_attention_heads=max(1, width // 64) if width >= 64 else 2,
        intermediate_size=int(sd["encoder.layer.0.intermediate.dense.weight"].shape[0]),
        max_position_embeddings=int(sd["embeddings.position_embeddings.weight"].shape[0]),
        type_vocab_size=int(sd["embeddings.token_type_embeddings.weight"].shape[0]),
        layer_norm_eps=1e-12,
        hidden_act="gelu",
        attn_implementation="eager",
    )
    return build_module(lambda: BertModel(config, add_pooling_layer=False), sd, path, "HunyuanDiT BERT text encoder")


def _mt5_module(sd: dict[str, torch.Tensor], path: str | None) -> torch.nn.Module:
    from nodes.models.t5 import build_t5

    return build_t5(sd, path)


def load_text_encoder(
    ref: ModelRef, state_dicts: Sequence[Mapping[str, torch.Tensor]] | Mapping[str, torch.Tensor]
) -> HunyuanDiTTextEncoder:
    """HunyuanDiT's CLIP object from its checkpoint's text encoders, or from a BERT file and an mT5 file."""
    sds = [state_dicts] if isinstance(state_dicts, Mapping) else list(state_dicts)
    path = ref.sources[0] if ref.sources else None
    bert = mt5 = None
    for i, sd in enumerate(sds):
        source = ref.sources[i] if i < len(ref.sources) else path
        prefix = find_prefix(sd.keys(), BERT_MARKER)
        if prefix is not None and bert is None:
            bert = (strip_prefix(sd, prefix + "bert."), source)
        prefix = find_prefix(sd.keys(), MT5_MARKER)
        if prefix is not None and mt5 is None:
            part = strip_prefix(sd, prefix)
            proto = next((sd[k] for k in sd if k.endswith(SPIECE_KEY)), None)
            mt5 = (part, proto, source)
    if bert is None or mt5 is None:
        raise ModelLoadError(
            path, "HunyuanDiT needs its BERT and mT5-XL text encoders (a HunyuanDiT checkpoint holds both)"
        )
    if ref.patches:
        raise ModelLoadError(path, "LoRAs on HunyuanDiT's text encoders are not supported yet")
    mt5_sd, proto, mt5_path = mt5
    if proto is None:
        raise ModelLoadError(
            mt5_path, "the mT5-XL weights hold no tokenizer (spiece_model), as ComfyUI's HunyuanDiT checkpoint does"
        )
    mt5_sd = {k: v for k, v in mt5_sd.items() if not k.endswith(SPIECE_KEY)}
    try:
        modules = {BERT: _bert_module(bert[0], bert[1]).float(), MT5: _mt5_module(mt5_sd, mt5_path).float()}
    except KeyError as e:
        raise ModelLoadError(path, f"not a usable HunyuanDiT text encoder: no {e}") from None
    options = dict(ref.option("tokenizer_options", ()))
    return HunyuanDiTTextEncoder(
        arch="hunyuan_dit",
        modules=modules,
        layer=None,
        bert_tokenizer=bert_tokenizer(bert[1]),
        mt5_tokenizer=spiece_tokenizer(proto.numpy().tobytes()),
        bert_rules=with_tokenizer_options(BERT_RULES, options, "chinese_roberta"),
        mt5_rules=with_tokenizer_options(MT5_RULES, options, MT5),
    )
