"""Qwen-Image 2.1's text encoder: Qwen3-VL-8B (CLIPLoader type qwen_image, ComfyUI's file qwen3vl_8b*.safetensors,
transformers' Qwen3VLForConditionalGeneration names: `model.language_model.*`, `model.visual.*`, `lm_head.*`).

As the newest ComfyUI source encodes a prompt for it (comfy/text_encoders/qwen_image21.py, qwen3vl.py): the prompt
(a space if empty) goes into Qwen-Image 2.1's chat template with a system turn and no weighting syntax (a prompt
that starts with <|im_start|> is chat text already), is tokenized with Qwen2's tokenizer, and the conditioning is
the last decoder layer's output before the final norm, without the system turn (every token before the second
<|im_start|>); no pooled vector. The sizes come from the shapes; the rope theta and the rotary sections, which no
shape carries, are Qwen3-VL's (5,000,000; 24/20/20 frequencies for frame, row and column, interleaved).

With reference images (TextEncodeQwenImage21) the template announces them before the prompt, "<imageN>" and a
vision block each, joined by spaces; the vision tower (nodes.models.qwen3vl_vision) reads each picture, its tokens
replace the block's <|image_pad|>, take Qwen-VL's 3-axis positions and receive the tower's DeepStack features
after the first decoder layers. Without `keep_vision` the image tokens are then dropped from the conditioning and
their `image_slots` (where each image's tokens stood in what is kept) are returned: the diffusion model splices the
reference latents in there."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from cluster.refs import ModelRef
from nodes.models.components import TextEncoder
from nodes.models.errors import ModelLoadError
from nodes.models.flux_keys import find_prefix, strip_prefix
from nodes.models.qwen3_text import count_layers
from nodes.models.qwen3vl_vision import (
    IMAGE_PAD_ID,
    VisionEmbeddings,
    build_vision_model,
    encode_image,
    has_vision_model,
    mrope_positions,
)
from nodes.models.qwen_tokenizer import QwenTokenizer, qwen_tokenizer
from nodes.models.safetensors_io import build_module
from nodes.models.text_encoder_dtype import text_encoder_compute_dtype
from nodes.models.tokenizer import escape_parens, unescape_parens
from nodes.models.zimage_text import tokenizer_dirs

SYSTEM = "<|im_start|>system\nComprehend and analyze the provided prompt.<|im_end|>\n"
TEMPLATE = SYSTEM + "<|im_start|>user\n{}<|im_end|>\n<|im_start|>assistant\n"
VISION_BLOCK = "<|vision_start|><|image_pad|><|vision_end|>"
IM_START = 151644
SUB = "qwen3vl_8b"  # ComfyUI's name for the sub-encoder (its token dict key)
VISION = "visual"  # the vision tower's key in the encoder's modules
LM = "model.language_model."
LM_MARKER = LM + "layers.0.self_attn.q_norm.weight"
ROPE_THETA = 5_000_000.0
MROPE_SECTION = [24, 20, 20]  # ComfyUI's Qwen3VL rope_dims (and the published config's mrope_section)
RMS_NORM_EPS = 1e-6


def language_model_config(sd: Mapping[str, torch.Tensor]) -> dict[str, Any]:
    """Qwen3VLTextConfig arguments from the language model's (unprefixed, `layers.N...`) shapes."""
    vocab, hidden = sd["embed_tokens.weight"].shape
    head_dim = sd["layers.0.self_attn.q_norm.weight"].shape[0]
    q_out = sd["layers.0.self_attn.q_proj.weight"].shape[0]
    kv_out = sd["layers.0.self_attn.k_proj.weight"].shape[0]
    if q_out % head_dim or kv_out % head_dim:
        raise ValueError(f"attention widths {q_out}/{kv_out} are not multiples of the head dim {head_dim}")
    return {
        "vocab_size": int(vocab),
        "hidden_size": int(hidden),
        "intermediate_size": int(sd["layers.0.mlp.gate_proj.weight"].shape[0]),
        "num_hidden_layers": count_layers(sd, "layers."),
        "num_attention_heads": int(q_out // head_dim),
        "num_key_value_heads": int(kv_out // head_dim),
        "head_dim": int(head_dim),
        "rope_parameters": {"rope_type": "default", "rope_theta": ROPE_THETA, "mrope_section": MROPE_SECTION},
        "rms_norm_eps": RMS_NORM_EPS,
    }


def build_language_model(state_dict: Mapping[str, torch.Tensor], path: str | None):
    """transformers' Qwen3VLTextModel from a Qwen3-VL file's `model.language_model.` weights (bare, or under a
    checkpoint prefix); the dtype is the file's."""
    from transformers.models.qwen3_vl.configuration_qwen3_vl import Qwen3VLTextConfig
    from transformers.models.qwen3_vl.modeling_qwen3_vl import Qwen3VLTextModel

    prefix = find_prefix(state_dict.keys(), LM_MARKER)
    if prefix is None:
        raise ModelLoadError(path, f"no Qwen3-VL language model weights ({LM_MARKER})")
    sd = strip_prefix(state_dict, prefix + LM)  # the vision tower and the LM head are not read here
    try:
        config = Qwen3VLTextConfig(**language_model_config(sd))
    except (KeyError, ValueError) as e:
        raise ModelLoadError(path, f"not a usable Qwen3-VL text encoder: {e}") from None

    def skeleton():
        model = Qwen3VLTextModel(config)
        with torch.device("cpu"):  # rotary frequencies are computed, not stored
            model.rotary_emb = type(model.rotary_emb)(config=config)
        return model

    return build_module(
        skeleton, sd, path, "Qwen3-VL text encoder", dtype=text_encoder_compute_dtype(sd["embed_tokens.weight"].dtype)
    )


def chat_text(text: str, images: int = 0) -> str:
    """The prompt as ComfyUI's QwenImage21Tokenizer hands it to the tokenizer: in the chat template, each of
    `images` announced before it as "<imageN>" and a vision block, joined by spaces."""
    if text.startswith("<|im_start|>"):
        return text
    refs = " ".join(f"<image{i + 1}>{VISION_BLOCK}" for i in range(images))
    return TEMPLATE.format(refs + (text or " "))


@dataclass
class QwenImage21TextEncoder(TextEncoder):
    tokenizer: QwenTokenizer | None = None

    def tokenize(
        self, text: str, images: int = 0, template: str | None = None
    ) -> dict[str, list[list[tuple[int, float]]]]:
        """`images`: how many pictures encode() will be given. Weights are disabled ("\\(" still becomes "(")."""
        if template is not None:
            raise ValueError("Qwen-Image 2.1's text encoder builds its own chat template; none can be given")
        plain = unescape_parens(escape_parens(chat_text(text, images)))
        return {SUB: [[(t, 1.0) for t in self.tokenizer.encode(plain)]]}

    @torch.no_grad()
    def encode(
        self,
        tokens: dict[str, list[list[tuple[int, float]]]],
        images: Sequence[torch.Tensor] = (),
        keep_vision: bool = True,
    ) -> tuple[torch.Tensor, None]:
        """The conditioning; each IMAGE of `images` replaces the next <|image_pad|> (extra pads stay text)."""
        cond, _ = self.encode_with_slots(tokens, images, keep_vision)
        return cond, None

    @torch.no_grad()
    def encode_with_slots(
        self,
        tokens: dict[str, list[list[tuple[int, float]]]],
        images: Sequence[torch.Tensor] = (),
        keep_vision: bool = True,
    ) -> tuple[torch.Tensor, list[int]]:
        """(conditioning [1, T, D], image slots): without `keep_vision` the images' tokens are left out and the
        slots say where each image's tokens stood in the conditioning; with it there are no slots."""
        ids = [t for chunk in tokens[SUB] for t, _ in chunk]
        states, placed = self.read_with_images(ids, images)
        # The system turn: every token before the second <|im_start|>, counted after the images' expansion.
        starts = [expanded_index(i, placed) for i, t in enumerate(ids) if t == IM_START]
        keep = torch.ones(states.shape[1], dtype=torch.bool)
        keep[: starts[1] if len(starts) > 1 else 0] = False
        slots = []
        if not keep_vision:
            for at, n, _ in placed:
                keep[at : at + n] = False
                slots.append(int(keep[:at].sum()))
        return states[:, keep.to(states.device)].float(), slots

    def read_with_images(
        self, ids: list[int], images: Sequence[torch.Tensor]
    ) -> tuple[torch.Tensor, list[tuple[int, int, tuple[int, int, int]]]]:
        """The last decoder layer's states for token `ids` with each of `images` read by the vision tower into
        the next <|image_pad|> (extra pads stay text), and where each image's tokens were placed (start, count,
        grid) in the expanded sequence."""
        embeds, placed, seen = embed_with_images(self.modules, SUB, ids, images)
        return self._last_layer(self.modules[SUB], embeds, placed, seen), placed

    @staticmethod
    def _last_layer(model, embeds: torch.Tensor, placed, seen: Sequence[VisionEmbeddings]) -> torch.Tensor:
        """The last decoder layer's output (before the final norm), DeepStack features added as ComfyUI does."""
        kwargs, mask, deepstack = vision_inputs(embeds, placed, seen)
        captured: list[torch.Tensor] = []
        handle = model.layers[-1].register_forward_hook(
            lambda module, args, output: captured.append(output[0] if isinstance(output, tuple) else output)
        )
        try:
            model(**kwargs)
        finally:
            handle.remove()
        states = captured[0]
        last = len(model.layers) - 1
        if last < len(deepstack):  # a model no deeper than its DeepStack: ComfyUI reads the layer after the add
            states = states.clone()
            states[mask] = states[mask] + deepstack[last]
        return states


Placed = list[tuple[int, int, tuple[int, int, int]]]


def embed_with_images(
    modules: Mapping[str, torch.nn.Module], sub: str, ids: list[int], images: Sequence[torch.Tensor]
) -> tuple[torch.Tensor, Placed, list[VisionEmbeddings]]:
    """The input embeddings of token `ids` with each of `images` read by the vision tower (modules[VISION]) into
    the next <|image_pad|> (extra pads stay text); where each image's tokens were placed (start, count, grid)
    in the expanded sequence; the vision outputs (their DeepStack features)."""
    model = modules[sub]
    embeds = model.embed_tokens(torch.tensor([ids], device=model.embed_tokens.weight.device))
    pads = [i for i, t in enumerate(ids) if t == IMAGE_PAD_ID][: len(images)]
    if pads and VISION not in modules:
        raise ValueError(
            "clip: this Qwen3-VL text encoder file has no vision tower (model.visual.* tensors), so it "
            "cannot read reference images; use a Qwen3-VL file that has one"
        )
    placed: Placed = []
    seen: list[VisionEmbeddings] = []
    shift = 0
    for pad, image in zip(pads, images):
        vision = encode_image(modules[VISION], image)
        at = pad + shift
        embeds = torch.cat([embeds[:, :at], vision.embeds[None].to(embeds), embeds[:, at + 1 :]], dim=1)
        placed.append((at, vision.tokens, vision.grid))
        seen.append(vision)
        shift += vision.tokens - 1
    return embeds, placed, seen


def vision_inputs(
    embeds: torch.Tensor, placed: Placed, seen: Sequence[VisionEmbeddings]
) -> tuple[dict[str, Any], torch.Tensor | None, list[torch.Tensor]]:
    """The language model's keyword arguments for `embeds` with the placed images (Qwen-VL's rotary positions,
    the images' token mask and DeepStack features), that mask, and the DeepStack features."""
    kwargs: dict[str, Any] = {"inputs_embeds": embeds, "use_cache": False}
    deepstack: list[torch.Tensor] = []
    mask = None
    if placed:
        kwargs["position_ids"] = mrope_positions(embeds.shape[1], placed).to(embeds.device)
        mask = torch.zeros(1, embeds.shape[1], dtype=torch.bool, device=embeds.device)
        for at, n, _ in placed:
            mask[0, at : at + n] = True
        deepstack = [torch.cat([v.deepstack[i] for v in seen]).to(embeds) for i in range(len(seen[0].deepstack))]
        kwargs.update(visual_pos_masks=mask, deepstack_visual_embeds=deepstack or None)
    return kwargs, mask, deepstack


def expanded_index(i: int, placed: Sequence[tuple[int, int, tuple[int, int, int]]]) -> int:
    """Where token `i` of the unexpanded ids sits once each placed image's one pad became its tokens."""
    shift = 0
    for at, n, _ in placed:  # `at` is in the expanded sequence: its pad stood at at - shift
        if at - shift >= i:
            break
        shift += n - 1
    return i + shift


def load_text_encoder(
    ref: ModelRef, state_dicts: Sequence[Mapping[str, torch.Tensor]] | Mapping[str, torch.Tensor]
) -> QwenImage21TextEncoder:
    """Qwen-Image 2.1's CLIP object from CLIPLoader's Qwen3-VL file (its vision tower too, where it has one)."""
    if isinstance(state_dicts, Mapping):
        state_dicts = [state_dicts]
    path = ref.sources[0] if ref.sources else None
    sd = next((s for s in state_dicts if find_prefix(s.keys(), LM_MARKER) is not None), None)
    if sd is None:
        raise ModelLoadError(path, "Qwen-Image 2.1 needs a Qwen3-VL text encoder (qwen3vl_8b.safetensors); none found")
    modules = {SUB: build_language_model(sd, path)}
    if has_vision_model(sd):
        modules[VISION] = build_vision_model(sd, path)
    return QwenImage21TextEncoder(
        arch="qwen_image21", modules=modules, layer=None, tokenizer=qwen_tokenizer(tokenizer_dirs(), path)
    )
