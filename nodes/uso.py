"""USOStyleReference's patch as the head carries it: a MODEL option naming USO's style projector (a MODEL_PATCH ref)
with the reference image's SigLIP states. ComfyUI (comfy_extras/nodes_model_patch.py, 0.3.64) stacks the 20th and
11th states from last and the penultimate one, and in every forward pass of its FLUX.1 model, right after the
text-input layer, projects them to style tokens that go before the text tokens, with zero position ids. Here the
sampling loop hands the stacked states to every denoise step as the input `uso.<k>`; the step runs the projector
and the Flux network puts its tokens first (nodes.models.flux). The option is sampling-only
(model_options.weights_ref drops it), so the transformer's weight cache is shared."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import torch

from cluster.refs import ModelRef
from nodes.modelfns.model_options import USO

OPTION = USO  # a tuple of UsoStylePatch in the order the nodes applied them
INPUT = "uso"  # the steps' inputs uso.0, uso.1, ...
LAYERS = (-20, -11)  # the all_hidden_states USO reads besides the penultimate one


@dataclass(frozen=True)
class UsoStylePatch:
    """One applied USO style reference; equal, hashed and keyed by a digest of its states."""

    patch: ModelRef
    digest: str
    encoded: torch.Tensor = field(repr=False, compare=False, hash=False)  # [3, B, tokens, width]

    @classmethod
    def of(cls, patch: ModelRef, encoded: torch.Tensor) -> UsoStylePatch:
        t = encoded.detach().cpu().contiguous().float()
        h = hashlib.sha256(repr(tuple(t.shape)).encode())
        h.update(t.numpy().tobytes())
        return cls(patch, h.hexdigest(), encoded)


def encoded_states(all_hidden_states: torch.Tensor | None, penultimate: torch.Tensor) -> torch.Tensor:
    """The states USO projects, [3, B, tokens, width]: layers -20 and -11 of all_hidden_states [B, L, N, D] and the
    penultimate layer's."""
    if all_hidden_states is None:
        raise ValueError(
            "clip_vision_output: USO needs every layer's states (all_hidden_states), which only a SigLIP vision "
            "model gives (CLIPVisionLoader with sigclip_vision_patch14_384)"
        )
    if all_hidden_states.shape[1] < -min(LAYERS):
        raise ValueError(
            f"clip_vision_output: USO reads the 20th layer from last; this vision model has "
            f"{all_hidden_states.shape[1]} layers"
        )
    return torch.stack([all_hidden_states[:, i] for i in LAYERS] + [penultimate])


def with_uso(model: ModelRef, entry: UsoStylePatch) -> ModelRef:
    """ComfyUI's set_model_post_input_patch: patches append and run in that order."""
    return model.with_option(OPTION, tuple(model.option(OPTION, ())) + (entry,))


def step_inputs(model: ModelRef) -> tuple[dict[str, torch.Tensor], tuple | None]:
    """The steps' inputs and their `uso` param (the projector ref per input, in order); ({}, None) without the
    patch."""
    entries = model.option(OPTION, ())
    tensors = {f"{INPUT}.{k}": entry.encoded for k, entry in enumerate(entries)}
    return tensors, tuple(e.patch for e in entries) or None
