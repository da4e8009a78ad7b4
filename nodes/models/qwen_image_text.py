"""Qwen-Image's text encoder (CLIPLoader type qwen_image): the language model of Qwen2.5-VL-7B, text only,
from ComfyUI's text_encoders/qwen_2.5_vl_7b*.safetensors (`model.layers.N.*`; the `visual.*` tower and an
`lm_head` are not used for text and are skipped).

With text alone, Qwen2.5-VL's multimodal rotary positions are equal on their three axes and reduce to
Qwen2's plain ones, so the network is transformers' Qwen2Model, which also takes ComfyUI's fixed 128-wide heads
at any model width (the tiny demo encoder is narrower than its heads). Sizes come from the tensors.

ComfyUI's QwenImageTokenizer/QwenImageTEModel (0.3.64), as they treat a prompt:
- the prompt goes into Qwen-Image's chat template (unless it starts with `<|im_start|>` or
  `<|start_header_id|>`); no weighting syntax is parsed, a backslash before a parenthesis is dropped, and
  the text is cut before each ` embedding:` or newline-`embedding:` and the pieces tokenized apart (the
  space or newline dropped; this tokenizer has no embeddings folder, so the words stay);
- the last layer's states (after the final norm) are kept from the second `<|im_start|>` on, past its
  `user` and newline tokens: the system prompt is dropped, the user text and the closing tokens stay;
- tokens from a first `<|endoftext|>` (the pad token) on are masked from attention.
CLIPSetLastLayer picks an earlier block's output (before the final norm), as ComfyUI's hidden-layer option.

Images (TextEncodeQwenImageEdit / TextEncodeQwenImageEditPlus): a file with the `visual.*` tower reads them
(nodes.models.qwen_vl); each of the first <|image_pad|> tokens is replaced by one image's tokens, which take
Qwen2.5-VL's 3-axis rotary positions (so the rotary embedding is Qwen2.5-VL's sectioned one; on text alone it
equals Qwen2's). Given images and no template of its own, a prompt takes the edit template with one image slot.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import torch
from transformers import Qwen2Config, Qwen2Model
from transformers.models.qwen2_5_vl.modeling_qwen2_5_vl import Qwen2_5_VLRotaryEmbedding

from cluster.refs import ModelRef
from nodes.models.components import TextEncoder
from nodes.models.errors import ModelLoadError
from nodes.models.flux_keys import count_blocks, find_prefix, strip_prefix
from nodes.models.fp8 import MARKER as FP8_MARKER
from nodes.models.fp8 import dequantize_scaled_fp8
from nodes.models.lora import TE_FAMILY, lora_modules
from nodes.models.qwen_tokenizer import ENDOFTEXT_ID, IM_START_ID, QwenTokenizer, qwen_tokenizer
from nodes.models.qwen_vl import IMAGE_PAD_ID, build_vision_tower, has_vision_tower, image_embeddings, mrope_positions
from nodes.models.safetensors_io import build_module, load_state_dict
from nodes.models.text_encoder_dtype import text_encoder_compute_dtype

NAME = "qwen25_7b"  # ComfyUI's key for this encoder's tokens
MARKER = "layers.0.self_attn.q_proj.weight"
HEAD_DIM = 128  # ComfyUI's Qwen2.5-VL-7B config fixes the head width
ROPE_THETA = 1_000_000.0
VISION = "visual"  # the vision tower's key in the encoder's modules
RMS_EPS = 1e-6
USER_ID, NEWLINE_ID = 872, 198  # "user" and "\n" after the template's second <|im_start|>
# Qwen-Image's prompt template (as Qwen publishes it; diffusers' QwenImagePipeline uses the same text).
TEMPLATE = (
    "<|im_start|>system\nDescribe the image by detailing the color, shape, size, texture, quantity, text, "
    "spatial relationships of the objects and background:<|im_end|>\n<|im_start|>user\n{}<|im_end|>\n"
    "<|im_start|>assistant\n"
)
# With images and no template of the caller's: Qwen's edit prompt, one image slot before the text.
EDIT_SYSTEM = (
    "<|im_start|>system\nDescribe the key features of the input image (color, shape, size, texture, "
    "objects, background), then explain how the user's text instruction should alter or modify the "
    "image. Generate a new image that meets the user's requirements while maintaining consistency with "
    "the original input where appropriate.<|im_end|>\n<|im_start|>user\n"
)
TEMPLATE_IMAGES = EDIT_SYSTEM + "<|vision_start|><|image_pad|><|vision_end|>{}<|im_end|>\n<|im_start|>assistant\n"
TEMPLATE_EDIT = EDIT_SYSTEM + "{}<|im_end|>\n<|im_start|>assistant\n"  # TextEncodeQwenImageEditPlus's own
RAW_PREFIXES = ("<|im_start|>", "<|start_header_id|>")
EMBEDDING = "embedding:"
EMBEDDING_SPLIT = re.compile(r" embedding:|\nembedding:")

TokenWeights = list[list[tuple[int, float]]]


def template_text(text: str) -> str:
    return text if text.startswith(RAW_PREFIXES) else TEMPLATE.format(text)


def tokenize_prompt(text: str, encode) -> list[int]:
    """ComfyUI's token ids of a prompt (template applied), given the plain Qwen tokenizer's `encode`."""
    text = template_text(text).replace("\\(", "(").replace("\\)", ")")
    pieces = EMBEDDING_SPLIT.split(text)
    words = pieces[:1] + [EMBEDDING + p for p in pieces[1:]]
    ids = [t for word in words if word for t in encode(word)]
    return ids or [ENDOFTEXT_ID]  # ComfyUI pads to at least one token


def template_end(ids: Sequence[int], length: int) -> int:
    """Where ComfyUI's kept states start: at the second <|im_start|> (the first if there is one; the last
    token if there is none), moved past a following `user` and newline."""
    end, seen = -1, 0
    for i, t in enumerate(ids):
        if t == IM_START_ID and seen < 2:
            end, seen = i, seen + 1
    if length > end + 3 and ids[end + 1] == USER_ID and ids[end + 2] == NEWLINE_ID:
        end += 3
    return end


def attention_mask(ids: Sequence[int]) -> torch.Tensor:
    """1 up to the first <|endoftext|>, 0 from it on (ComfyUI's pad-token rule)."""
    mask = torch.ones(1, len(ids), dtype=torch.long)
    if ENDOFTEXT_ID in ids:
        mask[0, list(ids).index(ENDOFTEXT_ID) :] = 0
    return mask


@dataclass
class QwenImageTextEncoder(TextEncoder):
    tokenizer: QwenTokenizer | None = None
    num_layers: int = field(default=0)

    def tokenize(self, text: str, images: int = 0, template: str | None = None) -> dict[str, TokenWeights]:
        """`images`: how many images encode() will be given; `template`: a chat template of the caller's (a
        prompt that is chat text already keeps none)."""
        if (images or template) and not text.startswith(RAW_PREFIXES):
            text = (template or TEMPLATE_IMAGES).format(text)  # chat text now: not templated again
        return {NAME: [[(t, 1.0) for t in tokenize_prompt(text, self.tokenizer.encode)]]}

    @torch.no_grad()
    def encode(self, tokens: dict[str, TokenWeights], images: Sequence[torch.Tensor] = ()) -> tuple[torch.Tensor, None]:
        """The kept states; each IMAGE of `images` replaces the next <|image_pad|> token (extra pads stay text)."""
        chunks = tokens.get(NAME) or [[(ENDOFTEXT_ID, 1.0)]]
        ids = [int(t) for chunk in chunks for t, _ in chunk]
        module: Qwen2Model = self.modules[NAME]
        embeds = module.embed_tokens(torch.tensor([ids], device=next(module.parameters()).device)).float()
        mask = attention_mask(ids)
        slots = [i for i, t in enumerate(ids) if t == IMAGE_PAD_ID][: len(images)]
        if slots and VISION not in self.modules:
            raise ValueError(
                "clip: this Qwen2.5-VL text encoder file has no vision tower (visual.* tensors), "
                "so it cannot read images; use a qwen_2.5_vl_7b file that has one"
            )
        placed, shift = [], 0
        for slot, image in zip(slots, images):
            vision, grid = image_embeddings(self.modules[VISION], image)
            at = slot + shift
            embeds = torch.cat([embeds[:, :at], vision[None].to(embeds), embeds[:, at + 1 :]], dim=1)
            mask = torch.cat([mask[:, :at], torch.ones(1, len(vision), dtype=mask.dtype), mask[:, at + 1 :]], dim=1)
            placed.append((at, len(vision), grid))
            shift += len(vision) - 1
        positions = mrope_positions(embeds.shape[1], placed) if placed else None
        states = self.hidden_states(embeds, mask, positions)
        return states[:, template_end([t for t, _ in chunks[0]], states.shape[1]) :], None

    def hidden_states(self, embeds: torch.Tensor, mask: torch.Tensor, positions: torch.Tensor | None) -> torch.Tensor:
        """The last layer's normed states, or with a CLIPSetLastLayer option the output of that block."""
        module: Qwen2Model = self.modules[NAME]
        device = embeds.device
        kwargs = {"inputs_embeds": embeds, "attention_mask": None if bool(mask.all()) else mask.to(device)}
        if positions is not None:  # transformers' mask builder reads 1-axis positions: give it the mask made
            n = embeds.shape[1]
            causal = torch.ones(n, n, dtype=torch.bool, device=device).tril()
            kwargs.update(
                position_ids=positions.to(device),
                attention_mask={"full_attention": (causal & mask.to(device).bool()[:, None, None, :])},
            )
        layer = self.layer
        if layer is None or abs(layer) > self.num_layers:
            return module(**kwargs).last_hidden_state.float()
        captured: list[torch.Tensor] = []
        hook = module.layers[self.num_layers + layer].register_forward_hook(
            lambda _m, _a, out: captured.append(out[0] if isinstance(out, tuple) else out)
        )
        try:
            module(**kwargs)
        finally:
            hook.remove()
        return captured[0].float()


def qwen_config(sd: Mapping[str, torch.Tensor]) -> Qwen2Config:
    """Qwen2Config from an unprefixed (`embed_tokens`, `layers.N`) Qwen2.5 language model's shapes."""
    vocab, hidden = sd["embed_tokens.weight"].shape
    q, k = sd["layers.0.self_attn.q_proj.weight"].shape[0], sd["layers.0.self_attn.k_proj.weight"].shape[0]
    if q % HEAD_DIM or k % HEAD_DIM:
        raise ValueError(f"attention widths {q}/{k} are not whole 128-wide heads")
    return Qwen2Config(
        vocab_size=vocab,
        hidden_size=hidden,
        intermediate_size=sd["layers.0.mlp.gate_proj.weight"].shape[0],
        num_hidden_layers=count_blocks(sd, "layers"),
        num_attention_heads=q // HEAD_DIM,
        num_key_value_heads=k // HEAD_DIM,
        head_dim=HEAD_DIM,
        rope_theta=ROPE_THETA,
        rms_norm_eps=RMS_EPS,
        max_position_embeddings=128_000,
        tie_word_embeddings=False,
        use_cache=False,
        attn_implementation="sdpa",
    )


def language_model(state_dict: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The language model's tensors, unprefixed: `model.*` of a text-encoder file, or of a checkpoint's
    `text_encoders.qwen25_7b.transformer.model.*`; the vision tower and lm_head are left out. Scaled fp8 files
    (ComfyUI's qwen_2.5_vl_7b_fp8_scaled) are dequantized."""
    prefix = find_prefix(state_dict.keys(), MARKER)
    if prefix is None:
        raise ValueError("no Qwen2.5 language model (layers.0.self_attn.q_proj) in the file")
    # Only the language model (and the fp8 marker) is dequantized: the vision tower is not read.
    mine = {k: v for k, v in state_dict.items() if k.startswith(prefix) or k.endswith(FP8_MARKER)}
    return strip_prefix(dequantize_scaled_fp8(mine), prefix)


def vision_part(state_dict: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The `visual.*` tensors (dequantized in a scaled fp8 file)."""
    return dequantize_scaled_fp8(
        {k: v for k, v in state_dict.items() if k.startswith("visual.") or ".visual." in k or k.endswith(FP8_MARKER)}
    )


def build_qwen25(sd: Mapping[str, torch.Tensor], path: str | None) -> Qwen2Model:
    config = qwen_config(sd)

    def factory() -> Qwen2Model:
        model = Qwen2Model(config)
        with torch.device("cpu"):  # the rotary frequencies are computed, not stored: build them for real
            # Qwen2.5-VL's: 3-axis positions for images, its default sections (16, 24, 24) of the frequencies
            model.rotary_emb = Qwen2_5_VLRotaryEmbedding(config=config)
        return model

    return build_module(factory, dict(sd), path, "Qwen2.5-VL language model", dtype=text_encoder_compute_dtype())


def load_text_encoder(
    ref: ModelRef, state_dicts: Sequence[Mapping[str, torch.Tensor]] | Mapping[str, torch.Tensor]
) -> QwenImageTextEncoder:
    """Qwen-Image's CLIP object from a qwen_2.5_vl_7b text-encoder file (CLIPLoader, type qwen_image)."""
    from nodes.models.loader import vocab_dirs  # the workspace's tokenizer folders (loader imports us lazily)

    path = ref.sources[0] if ref.sources else None
    _refuse_text_encoder_loras(ref)
    if not isinstance(state_dicts, Mapping):
        if len(state_dicts) != 1:
            raise ModelLoadError(path, f"Qwen-Image takes one text encoder, {len(state_dicts)} were given")
        state_dicts = state_dicts[0]
    try:
        modules = {NAME: build_qwen25(language_model(state_dicts), path)}
        if has_vision_tower(state_dicts):
            modules[VISION] = build_vision_tower(vision_part(state_dicts), path)
    except (KeyError, ValueError) as e:
        raise ModelLoadError(path, f"not a usable Qwen2.5-VL text encoder: {e}") from None
    module = modules[NAME]
    tokenizer = qwen_tokenizer(vocab_dirs(), path)
    return QwenImageTextEncoder(
        arch="qwen_image",
        modules=modules,
        layer=ref.option("layer"),
        tokenizer=tokenizer,
        num_layers=module.config.num_hidden_layers,
    )


def _refuse_text_encoder_loras(ref: ModelRef) -> None:
    """LoraLoader hands its LoRA to the text encoder too. A Qwen-Image LoRA made for the transformer alone has
    no weight for it, and ComfyUI then leaves the encoder as it is; one with text-encoder weights is refused."""
    for patch in ref.patches:
        names = lora_modules(load_state_dict(patch.path, patch.digest), patch.path)
        if any(n.startswith(TE_FAMILY) or n.startswith(("lora_te", "text_encoders.", "model.layers.")) for n in names):
            raise ModelLoadError(patch.path, "LoRAs on the Qwen-Image text encoder are not supported yet")


__all__ = ["QwenImageTextEncoder", "build_qwen25", "load_text_encoder", "template_end", "tokenize_prompt"]
