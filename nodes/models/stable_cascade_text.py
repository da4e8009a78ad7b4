"""Stable Cascade's text encoder: CLIP-G alone, run as ComfyUI's sdxl_clip.StableCascadeClipG runs it (the
prompt padded with the end token, the pads after the first end token masked from attention, the last layer's
states without the final norm as the conditioning, the projected pooled output beside them).

It comes from the stage C checkpoint (`text_encoder.clip_g.transformer.` in HF names, ComfyUI's
supported_models.Stable_Cascade_C prefix; a `clip_g.text_projection` given as OpenCLIP's transposed matrix is
taken too) or from a bare CLIP-G file through CLIPLoader with type stable_cascade."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch

from cluster.refs import ModelRef
from nodes.models import clip as clip_mod
from nodes.models.errors import ModelLoadError

CHECKPOINT_PREFIX = "text_encoder.clip_g."
SPEC = clip_mod.ClipSpec(
    name="g",
    hidden_act="gelu",
    pad_with_end=True,
    default_layer=-1,
    layer_norm_hidden=False,
    projected_pooled=True,
    mask_after_end=True,
)


def clip_g_weights(sd: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The CLIP-G tower in flattened HF names, from a stage C checkpoint or a bare file (HF or OpenCLIP layout)."""
    if any(k.startswith(CHECKPOINT_PREFIX) for k in sd):
        sd = {k[len(CHECKPOINT_PREFIX) :]: v for k, v in sd.items() if k.startswith(CHECKPOINT_PREFIX)}
        projection = sd.pop("text_projection", None)
        out = clip_mod.hf_keys(sd, "transformer.")
        if projection is not None:  # OpenCLIP's [in, out] matrix
            out["text_projection.weight"] = projection.transpose(0, 1)
        return out
    sd = dict(sd)
    if clip_mod.is_open_clip_layout(sd.keys()):
        return clip_mod.open_clip_to_hf(sd)
    return clip_mod.hf_keys(sd)


def load_text_encoder(ref: ModelRef, state_dict) -> clip_mod.ClipTextEncoder:
    from nodes.models.loader import clip_bpe
    from nodes.models.tokenizer import SDTokenizer

    path = ref.sources[0] if ref.sources else None
    if isinstance(state_dict, Sequence):
        if len(state_dict) != 1:
            raise ModelLoadError(path, f"Stable Cascade takes one text encoder (CLIP-G), {len(state_dict)} given")
        state_dict = state_dict[0]
    if ref.patches:
        raise ModelLoadError(path, "LoRAs on Stable Cascade's text encoder are not supported yet")
    sd = clip_g_weights(state_dict)
    if "embeddings.token_embedding.weight" not in sd:
        raise ModelLoadError(path, "holds no CLIP-G text encoder for Stable Cascade")
    sd = {k: v.float() for k, v in sd.items()}
    module = clip_mod.build_clip(sd, SPEC.hidden_act, path, "Stable Cascade CLIP-G")
    vocab = sd["embeddings.token_embedding.weight"].shape[0]
    side = clip_mod.ClipSide(module, SDTokenizer(clip_bpe(vocab, path), pad_with_end=SPEC.pad_with_end), SPEC)
    return clip_mod.ClipTextEncoder(
        arch="stable_cascade", modules={"g": module}, layer=ref.option("layer"), sides={"g": side}
    )
