"""SAM 3's text encoder: the CLIP text tower inside the SAM 3 / 3.1 checkpoint, as today's ComfyUI runs it for
CLIPTextEncode on a SAM 3 CLIP.

Facts read from Comfy-Org/ComfyUI's comfy/text_encoders/sam3_clip.py and comfy/supported_models.py (SAM3.
process_clip_state_dict) at upstream commit a439dcae07d6 (2026-06-16); the code is our own:
- the tower is OpenCLIP's layout under `detector.backbone.language_backbone.encoder.` (1024 wide, 24 layers, 16
  heads, QuickGELU, 32 positions in the released files); the `resizer` beside it belongs to the detector;
- OpenAI's CLIP vocabulary (the shipped one), 32 tokens per chunk: start, the prompt, end, then token 0 as padding;
  the last layer's final-normed states, with an attention mask that stops at the first end token, returned with
  the conditioning as `attention_mask`;
- prompts separated by commas are encoded one by one, a trailing `:N` (rounded, at least 1) giving how many
  detections that prompt keeps (parentheses are dropped first); the first prompt is the conditioning and all of
  them ride along as `sam3_multi_cond` (one prompt without `:N` is encoded whole, weights and all)."""

from __future__ import annotations

import re
from dataclasses import dataclass

import torch

from cluster.refs import ModelRef

from .clip import ClipSide, ClipSpec, build_clip, open_clip_to_hf
from .components import TextEncoder
from .tokenizer import SDTokenizer, TokenWeights, bpe_for_vocab_size

TEXT_PREFIX = "detector.backbone.language_backbone.encoder."
MAX_TOKENS = 32
SPEC = ClipSpec(name="l", hidden_act="quick_gelu", pad_with_end=False, mask_after_end=True)
# The TextEncode ModelFn's outputs beyond cond: the first prompt's mask and, for several prompts, all of them
MULTI_KEYS = ("sam3_multi_cond", "sam3_multi_mask", "sam3_max_detections")


def parse_prompts(text: str) -> list[tuple[str, int]]:
    """Comma-separated prompts, each with the detections it keeps (`name:N`, else 1)."""
    text = text.replace("(", "").replace(")", "")
    out = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        m = re.match(r"^(.+?)\s*:\s*([\d.]+)\s*$", part)
        out.append((m.group(1).strip(), max(1, round(float(m.group(2))))) if m else (part, 1))
    return out


@dataclass
class Sam3TextEncoder(TextEncoder):
    side: ClipSide | None = None

    def tokenize(self, text: str) -> dict:
        prompts = parse_prompts(text)
        if len(prompts) <= 1 and (not prompts or prompts[0][1] == 1):
            return {"l": self.side.tokenize(text)}
        per_prompt = [(self.side.tokenize(p), n) for p, n in prompts]
        return {"l": per_prompt[0][0], "per_prompt": per_prompt}

    def _encode(self, chunks: TokenWeights) -> tuple[torch.Tensor, torch.Tensor]:
        cond, _ = self.side.encode(chunks, self.layer)
        ids = torch.tensor([[t for t, _ in c] for c in chunks], dtype=torch.long)
        ends = (ids == self.side.tokenizer.end).int()
        mask = ((ends.cumsum(-1) - ends) == 0).long().reshape(1, -1)
        return cond, mask

    def encode(self, tokens: dict) -> tuple[torch.Tensor, torch.Tensor | None]:
        return self._encode(tokens["l"])[0], None

    def extras(self, tokens: dict) -> dict[str, torch.Tensor]:
        """The first prompt's attention mask; with several prompts their states [P, T, D] (shorter ones padded
        with masked rows), masks [P, T] and detection counts [P]."""
        out = {"attention_mask": self._encode(tokens["l"])[1]}
        per_prompt = tokens.get("per_prompt")
        if per_prompt:
            encoded = [self._encode(chunks) for chunks, _ in per_prompt]
            longest = max(c.shape[1] for c, _ in encoded)
            conds = [torch.nn.functional.pad(c, (0, 0, 0, longest - c.shape[1])) for c, _ in encoded]
            masks = [torch.nn.functional.pad(m, (0, longest - m.shape[1])) for _, m in encoded]
            out["sam3_multi_cond"] = torch.cat(conds)
            out["sam3_multi_mask"] = torch.cat(masks)
            out["sam3_max_detections"] = torch.tensor([n for _, n in per_prompt], dtype=torch.int64)
        return out


def multi_cond(out: dict[str, torch.Tensor]) -> list[dict]:
    """ComfyUI's `sam3_multi_cond` conditioning entry from the TextEncode outputs: one dict per prompt."""
    conds, masks, counts = out["sam3_multi_cond"], out["sam3_multi_mask"], out["sam3_max_detections"]
    return [
        {"cond": conds[i : i + 1], "attention_mask": masks[i : i + 1], "max_detections": int(counts[i])}
        for i in range(conds.shape[0])
    ]


def load_text_encoder(ref: ModelRef, sd: dict[str, torch.Tensor]) -> Sam3TextEncoder:
    path = ref.sources[0]
    hf = open_clip_to_hf(sd, TEXT_PREFIX)
    module = build_clip(hf, SPEC.hidden_act, path, "SAM 3 text encoder")
    vocab = hf["embeddings.token_embedding.weight"].shape[0]
    tokenizer = SDTokenizer(bpe_for_vocab_size(vocab, model_path=path), MAX_TOKENS, pad_with_end=False)
    return Sam3TextEncoder(
        arch=ref.arch, modules={"l": module}, layer=ref.option("layer"), side=ClipSide(module, tokenizer, SPEC)
    )
