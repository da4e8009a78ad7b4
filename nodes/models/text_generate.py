"""Text generation with the language models the image families load as text encoders (today's ComfyUI
`TextGenerate`): Z-Image's Qwen3 (CLIPLoader type lumina2), FLUX.2 Klein's Qwen3 (type flux2), Qwen-Image's
Qwen2.5-VL language model, Krea 2's Qwen3-VL and LTX-2's Gemma 3 (LTXAVTextEncoderLoader; its ids and stop token
in nodes.models.ltx2_text: BOS, SentencePiece per word, `<end_of_turn>` ends the text; tied head). Qwen3.5 (FLUX 3's
prompt upsampler, which also reads images) generates with nodes.models.qwen35_text, sampling as below; LTX-2.5's
Gemma 4 prompt enhancer with nodes.models.gemma4_chat's ids, stop tokens, soft-capped logits and decoding.

As ComfyUI generates with them:
- the prompt goes into the model's chat template as its tokenizer builds it for generation (below, per
  family), and is tokenized as for encoding (no weighting syntax, `\\(` read as `(`);
- one token at a time up to `max_length` new tokens, stopping after Qwen's end-of-text or end-of-turn token;
  the logits are the last position's final-normed state times the file's `lm_head` when it has one (Qwen3-8B),
  else times the token embeddings (Qwen3-4B ties them). ComfyUI ties Qwen2.5-VL's head even when its file has
  an `lm_head`; here the file's head is used, as transformers does with those weights;
- greedy (argmax) without sampling; with sampling: repetition and presence penalties on the tokens generated
  so far, temperature, then top-k, min-p and top-p filters, and one multinomial draw per token from a
  torch.Generator seeded once with `seed`, so a seed gives the same text every time;
- the decoded text leaves out the special tokens (<|im_end|>, ...)."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from nodes.models.components import TextEncoder
from nodes.models.qwen_tokenizer import ENDOFTEXT_ID, IM_END_ID, QwenTokenizer, qwen_tokenizer
from nodes.models.tokenizer import escape_parens, unescape_parens

STOP_TOKENS = (ENDOFTEXT_ID, IM_END_ID)
CHAT = "<|im_start|>user\n{}<|im_end|>\n<|im_start|>assistant\n"
RAW_PREFIXES = ("<|im_start|>", "<|start_header_id|>")  # Qwen-Image takes a prompt so begun as it is
LANGUAGE_MODELS = {
    "zimage": "qwen3_4b",
    "flux2": "qwen3_4b",
    "qwen_image": "qwen25_7b",
    "krea2": "qwen3vl_4b",
    "ltx2": "gemma3_12b",  # LTX-2's Gemma 3 (LTXAVTextEncoderLoader's CLIP): its embeddings are its head
    "qwen35": "qwen35",  # Qwen3.5 (FLUX 3's prompt upsampler): generates with nodes.models.qwen35_text
    "gemma4": "gemma4",  # LTX-2.5's prompt enhancer (nodes.models.gemma4_chat): its embeddings are its head
}  # arch -> module key
# Gemma 3's chat around a prompt, as ComfyUI's Gemma 3 tokenizer wraps one (a text already begun with a turn is
# taken as it is).
GEMMA_CHAT = (
    "<start_of_turn>system\nYou are a helpful assistant.<end_of_turn>\n<start_of_turn>user\n{}<end_of_turn>\n"
    "<start_of_turn>model\n"
)
GEMMA_TURN = "<start_of_turn>"
CLOSED_THINKING = "<think>\n\n</think>\n\n"  # Qwen3's empty reasoning block: answer without thinking
# Qwen3's added tokens after Qwen2.5's last (151664), none of them special (so ComfyUI's decode keeps them).
QWEN3_TOKENS = {151665: "<tool_response>", 151666: "</tool_response>", 151667: "<think>", 151668: "</think>"}
HEAD = "lm_head"  # the encoder's module key of a head read from the file (untied models)


@dataclass(frozen=True)
class Sampling:
    """TextGenerate's sampling options; `do_sample` False is greedy decoding (the others are then unused)."""

    do_sample: bool = False
    temperature: float = 1.0
    top_k: int = 50
    top_p: float = 1.0
    min_p: float = 0.0
    repetition_penalty: float = 1.0
    presence_penalty: float = 0.0
    seed: int = 0

    @classmethod
    def from_params(cls, params: Any) -> Sampling:
        """The sampling fields of a text_generate call's params (nodes.modelfns.text_generate)."""
        return cls(**{k: getattr(params, k) for k in cls.__dataclass_fields__})


def _system(system_prompt: str) -> str:
    return f"<|im_start|>system\n{system_prompt}<|im_end|>\n" if system_prompt else ""


def generation_text(
    arch: str, prompt: str, use_template: bool = True, system_prompt: str = "", thinking: bool = False
) -> str:
    """The text a family's tokenizer builds from TextGenerate's prompt. Z-Image's always puts the prompt into
    the user turn (ComfyUI's Z-Image tokenizer has no raw mode), a system prompt before it. Qwen-Image's uses
    the plain chat template (not its image-description one), takes the prompt as it is without the template
    or when it already begins with a chat header, and ignores the system prompt then. Krea 2's Qwen3-VL (ComfyUI's
    Qwen3VL tokenizer) does the same with the plain chat template and closes the reasoning block unless
    `thinking`."""
    if arch == "zimage":
        return _system(system_prompt) + CHAT.format(prompt)
    if arch == "flux2":  # Klein's template, thinking closed; like Z-Image's, it has no raw mode
        from nodes.models.flux2_text import KLEIN_TEMPLATE

        return _system(system_prompt) + KLEIN_TEMPLATE.format(prompt)
    if arch == "krea2":
        if not use_template or prompt.startswith("<|im_start|>"):
            return prompt
        return _system(system_prompt) + CHAT.format(prompt) + ("" if thinking else CLOSED_THINKING)
    if arch == "qwen_image":
        if not use_template or prompt.startswith(RAW_PREFIXES):
            return prompt
        return _system(system_prompt) + CHAT.format(prompt)
    if arch == "ltx2":  # ComfyUI's Gemma 3 template has no system-prompt slot: system_prompt is unused
        return prompt if not use_template or prompt.startswith(GEMMA_TURN) else GEMMA_CHAT.format(prompt)
    if arch == "gemma4":  # nor has Gemma 4's (a system turn only holds the thinking switch)
        from nodes.models.gemma4_chat import chat_text

        return chat_text(prompt, use_template, thinking)
    raise ValueError(
        f"clip: TextGenerate needs a language-model text encoder (Z-Image's or FLUX.2 Klein's Qwen3, "
        f"Qwen-Image's Qwen2.5-VL, Krea 2's Qwen3-VL, LTX-2's Gemma 3, Qwen3.5); this CLIP is a {arch} text encoder"
    )


def prompt_ids(
    encoder: TextEncoder, prompt: str, use_template: bool = True, system_prompt: str = "", thinking: bool = False
) -> list[int]:
    """The token ids TextGenerate generates after, tokenized as the family's encoder tokenizes its prompts."""
    text = unescape_parens(escape_parens(generation_text(encoder.arch, prompt, use_template, system_prompt, thinking)))
    if encoder.arch == "ltx2":
        from nodes.models.ltx2_text import generation_ids

        return generation_ids(encoder, text)
    if encoder.arch == "gemma4":
        from nodes.models.gemma4_chat import prompt_ids as gemma4_ids

        return gemma4_ids(encoder, text)
    if encoder.arch == "qwen_image":  # its encoder tokenizes the pieces from each "embedding:" on apart
        from nodes.models.qwen_image_text import EMBEDDING, EMBEDDING_SPLIT

        first, *rest = EMBEDDING_SPLIT.split(text)
        ids = [t for word in [first] + [EMBEDDING + p for p in rest] if word for t in encoder.tokenizer.encode(word)]
    else:
        ids = tokenizer(encoder).encode(text)
    return ids or [ENDOFTEXT_ID]  # ComfyUI pads an empty prompt to one token


def stop_tokens(arch: str) -> tuple[int, ...]:
    """The ids that end generation: Gemma 3's end of turn (ComfyUI stops LTX-2's Gemma only there), else Qwen's."""
    if arch == "ltx2":
        from nodes.models.ltx2_text import END_OF_TURN_ID

        return (END_OF_TURN_ID,)
    if arch == "gemma4":
        from nodes.models.gemma4_chat import STOP_IDS

        return STOP_IDS
    return STOP_TOKENS


def logit_cap(arch: str) -> Callable[[torch.Tensor], torch.Tensor] | None:
    """Gemma 4's final soft cap on the logits (ComfyUI's Gemma4Base.logits); the other families have none."""
    if arch == "gemma4":
        from nodes.models.gemma4_chat import softcap

        return softcap
    return None


def tokenizer(encoder: TextEncoder) -> QwenTokenizer:
    """The encoder's Qwen tokenizer (Klein's encoder keeps only its encode function: the same cached one)."""
    found = getattr(encoder, "tokenizer", None)
    if found is not None:
        return found
    from nodes.models.zimage_text import tokenizer_dirs

    return qwen_tokenizer(tokenizer_dirs())


def decode(encoder: TextEncoder, ids: list[int]) -> str:
    """The generated text, the special tokens (<|im_end|>, ...) left out, as ComfyUI decodes it. Qwen3's four
    tokens past Qwen2.5's vocabulary (<think>, </think>, ...) are written out where the tokenizer (Qwen2.5's,
    shipped here) lacks them: a Qwen3 that reasons first must keep its `</think>` for the thinking output."""
    if encoder.arch == "ltx2":
        from nodes.models.ltx2_text import decode_ids

        return decode_ids(encoder, ids)
    if encoder.arch == "gemma4":
        from nodes.models.gemma4_chat import decode as decode_gemma4

        return decode_gemma4(encoder, ids)
    if encoder.arch == "qwen35":
        from nodes.models.qwen35_text import decode as decode_qwen35

        return decode_qwen35(ids)
    tok = tokenizer(encoder)
    extra = (
        {}
        if encoder.arch == "qwen_image"
        else {i: text for i, text in QWEN3_TOKENS.items() if tok.token_id(text) is None}
    )
    pieces, run = [], []
    for i in ids:
        if i in extra:
            pieces += [tok.decode(run, skip_special_tokens=True), extra[i]]
            run = []
        else:
            run.append(i)
    return "".join(pieces + [tok.decode(run, skip_special_tokens=True)])


def attach_head(encoder: TextEncoder, path: str) -> None:
    """Read the file's `lm_head` (untied models: Qwen3-8B, Qwen2.5-VL-7B) into `encoder.modules`, if it has one;
    the encoder loaders leave it out, as encoding never uses it."""
    from safetensors import safe_open

    if HEAD in encoder.modules or not path.endswith(".safetensors"):  # Qwen3.5's loader reads (dequantizes) its own
        return
    with safe_open(path, "pt") as f:
        key = next((k for k in f.keys() if k == "lm_head.weight" or k.endswith(".lm_head.weight")), None)
        if key is None:
            return
        weight = f.get_tensor(key)
        scale_key = key[: -len("weight")] + "scale_weight"
        if scale_key in f.keys():  # a scaled fp8 file (ComfyUI's *_fp8_scaled): weight x its scale
            weight = weight.float() * f.get_tensor(scale_key).float()
    embed = language_model(encoder).embed_tokens.weight
    head = torch.nn.Linear(weight.shape[1], weight.shape[0], bias=False, dtype=embed.dtype)
    with torch.no_grad():
        head.weight.copy_(weight.to(embed.dtype))
    encoder.modules[HEAD] = head.eval()


def check_media(arch: str, media: list[str] | tuple[str, ...]) -> None:
    """Z-Image's and Klein's tokenizers drop images, video and audio (as ComfyUI's do); Qwen-Image's would read
    an image with its vision tower, which generation here does not do yet (ComfyUI refuses its video and audio).
    Qwen3.5 reads images (nodes.models.qwen35_text), not video or audio."""
    if arch == "qwen35" and set(media) - {"image"}:
        other = next(m for m in media if m != "image")
        raise ValueError(
            f"{other}: TextGenerate reads images only with Qwen3.5 here (video and audio are not supported yet); "
            f"leave the {other} input unconnected"
        )
    if arch in ("qwen_image", "krea2", "ltx2", "gemma4") and media:  # Qwen3-VL's, Gemma 3's and 4's vision towers
        family = {"krea2": "Krea 2", "ltx2": "LTX-2 (Gemma 3)", "gemma4": "LTX-2.5 (Gemma 4)"}.get(arch, "Qwen-Image")
        raise ValueError(
            f"{media[0]}: TextGenerate reads text only here (images, video and audio are not "
            f"supported yet for {family}'s encoder); leave the {', '.join(media)} input unconnected"
        )


def language_model(encoder: TextEncoder) -> torch.nn.Module:
    """The transformers Qwen2Model / Qwen3Model inside a text encoder that can generate."""
    if encoder.arch not in LANGUAGE_MODELS:
        generation_text(encoder.arch, "")  # raises the error that names the family
    return encoder.modules[LANGUAGE_MODELS[encoder.arch]]


def _penalize(logits: torch.Tensor, history: list[int], s: Sampling) -> torch.Tensor:
    if not history or (s.repetition_penalty == 1.0 and s.presence_penalty == 0.0):
        return logits
    seen = torch.tensor(sorted(set(history)), device=logits.device)
    picked = logits[:, seen]
    if s.repetition_penalty != 1.0:  # shrink a seen token's logit towards "less likely" whatever its sign
        picked = torch.where(picked < 0, picked * s.repetition_penalty, picked / s.repetition_penalty)
    logits = logits.clone()
    logits[:, seen] = picked - s.presence_penalty
    return logits


def _min_p(logits: torch.Tensor, min_p: float) -> torch.Tensor:
    probs = logits.softmax(-1)
    return logits.masked_fill(probs < min_p * probs.max(-1, keepdim=True).values, torch.finfo(logits.dtype).min)


def _top_p(logits: torch.Tensor, top_p: float) -> torch.Tensor:
    ordered, order = logits.sort(-1, descending=True)
    beyond = ordered.softmax(-1).cumsum(-1) > top_p
    beyond[..., 0] = False  # the likeliest token always stays
    drop = torch.zeros_like(beyond).scatter(-1, order, beyond)
    return logits.masked_fill(drop, torch.finfo(logits.dtype).min)


def next_token(logits: torch.Tensor, history: list[int], s: Sampling, generator: torch.Generator | None) -> int:
    """The next token id from one position's logits [1, vocab]."""
    if not s.do_sample or s.temperature == 0.0:
        return int(logits.argmax(-1))
    logits = _penalize(logits, history, s)
    if s.temperature != 1.0:
        logits = logits / s.temperature
    index = None
    if s.top_k > 0:  # the filters below then work on the k best, in order
        logits, index = logits.topk(min(s.top_k, logits.shape[-1]))
    if s.min_p > 0.0:
        logits = _min_p(logits, s.min_p)
    if s.top_p < 1.0:
        logits = _top_p(logits, s.top_p)
    pick = torch.multinomial(logits.softmax(-1), 1, generator=generator)
    return int(pick if index is None else index.gather(-1, pick))


@torch.no_grad()
def generate(
    model: torch.nn.Module,
    prompt_ids: list[int],
    max_length: int,
    sampling: Sampling,
    stop_tokens: tuple[int, ...] = STOP_TOKENS,
    head: torch.nn.Module | None = None,
    cap: Callable[[torch.Tensor], torch.Tensor] | None = None,
) -> list[int]:
    """New token ids after `prompt_ids` (the stop token included when one ended the text), with a KV cache;
    the logits from `head` (a Linear) or, without one, from the token embeddings, then through `cap` (Gemma 4's
    soft cap) where given."""
    from transformers import DynamicCache

    if not prompt_ids:
        raise ValueError("prompt: nothing to generate from (no tokens)")
    device = model.embed_tokens.weight.device
    generator = torch.Generator(device=device).manual_seed(int(sampling.seed)) if sampling.do_sample else None
    cache = DynamicCache()
    # transformers 5.x names the cache argument `cache`; earlier versions (pyproject allows >=4.50) `past_key_values`
    cache_arg = "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"
    step_ids = torch.tensor([prompt_ids], dtype=torch.long, device=device)
    out: list[int] = []
    for _ in range(max_length):
        hidden = model(input_ids=step_ids, use_cache=True, **{cache_arg: cache}).last_hidden_state[:, -1]
        # read the weight at each step: the executor's layer cache may rebind the parameter
        logits = F.linear(hidden, (model.embed_tokens if head is None else head).weight).float()
        if cap is not None:
            logits = cap(logits)
        token = next_token(logits, out, sampling, generator)
        out.append(token)
        if token in stop_tokens:
            break
        step_ids = torch.tensor([[token]], dtype=torch.long, device=device)
    return out


def split_thinking(text: str) -> tuple[str, str]:
    """(answer, reasoning) of generated text, as ComfyUI splits them: the reasoning ends at `</think>`; with no
    `</think>` there is reasoning only when the text opens with `<think>` (max_length cut it short)."""
    reasoning, close, answer = text.partition("</think>")
    if not close and not reasoning.lstrip().startswith("<think>"):
        reasoning, answer = "", reasoning
    return answer.strip(), reasoning.replace("<think>", "", 1).strip()
