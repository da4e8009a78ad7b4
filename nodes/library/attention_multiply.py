"""ComfyUI's comfy_extras.nodes_attention_multiply: scale the attention projections' weights and biases of the
UNet (self-attention, cross-attention, or the output projections split into spatial and temporal layers) or of
the CLIP text encoder.

ComfyUI adds a weight patch with strength_model = factor and no difference to each matching key, i.e.
w * factor after the patches before it. Here that is a merge step on the ref (nodes/models/merge.py) whose
rules match key suffixes, so the scaled weights are loaded, cached and dispatched like any merged model."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cluster.refs import ModelRef
from nodes.inputs import require_model, require_ref
from nodes.models.merge import OPTION, MergeStep, merges

MODULE = "comfy_extras.nodes_attention_multiply"
CATEGORY = "_for_testing/attention_experiments"
SD_FAMILY = ("sd1", "sd2", "sdxl")
FACTOR = ("FLOAT", {"default": 1.0, "min": 0.0, "max": 10.0, "step": 0.01})
TEMPORAL = ".time_stack."


@dataclass(frozen=True)
class ScaleStep(MergeStep):
    """A merge step that multiplies weights by a factor. `rules` are (key suffix, factor, temporal): a key
    ending with the suffix is scaled, when `temporal` is None or says whether the key is in a temporal
    (".time_stack.") layer; the first matching rule wins. `other` is only read for its key names."""

    def strengths(self, name: str) -> tuple[float, float] | None:
        for suffix, factor, temporal in self.rules:
            if name.endswith(suffix) and (temporal is None or (TEMPORAL in name) == temporal):
                return (factor, 0.0)
        return None


def scaled(ref: ModelRef, rules: tuple[tuple[str, float, bool | None], ...]) -> ModelRef:
    """`ref` with the weights matching `rules` multiplied (ComfyUI's add_patches({key: (None,)}, 0.0, factor))."""
    rules = tuple(r for r in rules if r[1] != 1.0)
    if not rules:
        return ref  # a factor of 1 leaves the weight as it is
    return ref.with_option(OPTION, merges(ref) + (ScaleStep(ref, len(ref.patches), rules),))


def _projections(
    prefix: str, names: tuple[str, str, str, str], q: float, k: float, v: float, out: float
) -> tuple[tuple[str, float, None], ...]:
    return tuple(
        (f"{prefix}{name}.{kind}", factor, None)
        for name, factor in zip(names, (q, k, v, out))
        for kind in ("weight", "bias")
    )


def _unet(model: ModelRef, rules: tuple) -> ModelRef:
    # The DiT families have no keys with these names: ComfyUI's patch matches nothing there.
    return scaled(model, rules) if model.arch in SD_FAMILY else model


UNET_PROJECTIONS = ("to_q", "to_k", "to_v", "to_out.0")


class _AttentionMultiply:
    RELATIVE_PYTHON_MODULE = MODULE
    RETURN_TYPES = ("MODEL",)
    FUNCTION = "patch"
    CATEGORY = CATEGORY
    EXPERIMENTAL = True
    ATTENTION = "attn1"

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"model": ("MODEL", {}), "q": FACTOR, "k": FACTOR, "v": FACTOR, "out": FACTOR}}

    def patch(self, model: Any, q: float, k: float, v: float, out: float) -> tuple[ModelRef]:
        rules = _projections(f"{self.ATTENTION}.", UNET_PROJECTIONS, float(q), float(k), float(v), float(out))
        return (_unet(require_model(model), rules),)


class UNetSelfAttentionMultiply(_AttentionMultiply):
    DESCRIPTION = "Multiplies the weights of the UNet's self-attention query, key, value and output projections."


class UNetCrossAttentionMultiply(_AttentionMultiply):
    DESCRIPTION = "Multiplies the weights of the UNet's cross-attention query, key, value and output projections."
    ATTENTION = "attn2"


class UNetTemporalAttentionMultiply:
    RELATIVE_PYTHON_MODULE = MODULE
    RETURN_TYPES = ("MODEL",)
    FUNCTION = "patch"
    CATEGORY = CATEGORY
    EXPERIMENTAL = True
    DESCRIPTION = (
        "Multiplies the output projections of the UNet's self- and cross-attention, separately for the "
        "spatial (structural) and the temporal layers of video UNets."
    )

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "model": ("MODEL", {}),
                "self_structural": FACTOR,
                "self_temporal": FACTOR,
                "cross_structural": FACTOR,
                "cross_temporal": FACTOR,
            }
        }

    def patch(
        self, model: Any, self_structural: float, self_temporal: float, cross_structural: float, cross_temporal: float
    ) -> tuple[ModelRef]:
        rules = tuple(
            (f"{attn}.to_out.0.{kind}", float(factor), temporal)
            for attn, temporal, factor in (
                ("attn1", True, self_temporal),
                ("attn1", False, self_structural),
                ("attn2", True, cross_temporal),
                ("attn2", False, cross_structural),
            )
            for kind in ("weight", "bias")
        )
        return (_unet(require_model(model), rules),)


class CLIPAttentionMultiply:
    RELATIVE_PYTHON_MODULE = MODULE
    RETURN_TYPES = ("CLIP",)
    FUNCTION = "patch"
    CATEGORY = CATEGORY
    EXPERIMENTAL = True
    DESCRIPTION = "Multiplies the weights of the CLIP text encoder's self-attention projections."

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"clip": ("CLIP", {}), "q": FACTOR, "k": FACTOR, "v": FACTOR, "out": FACTOR}}

    def patch(self, clip: Any, q: float, k: float, v: float, out: float) -> tuple[ModelRef]:
        require_ref(clip, "text_encoder", "clip", "CLIP")
        if clip.arch not in SD_FAMILY:
            raise ValueError(
                f"CLIPAttentionMultiply supports the SD1/SD2/SDXL text encoders; this CLIP is {clip.arch!r}"
            )
        rules = _projections(
            "self_attn.", ("q_proj", "k_proj", "v_proj", "out_proj"), float(q), float(k), float(v), float(out)
        )
        return (scaled(clip, rules),)


NODE_CLASS_MAPPINGS = {
    "UNetSelfAttentionMultiply": UNetSelfAttentionMultiply,
    "UNetCrossAttentionMultiply": UNetCrossAttentionMultiply,
    "CLIPAttentionMultiply": CLIPAttentionMultiply,
    "UNetTemporalAttentionMultiply": UNetTemporalAttentionMultiply,
}
NODE_DISPLAY_NAME_MAPPINGS: dict[str, str] = {}
