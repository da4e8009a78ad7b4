"""WanInfiniteTalkToVideo's patch as the head carries it: a MODEL option naming the MultiTalk / InfiniteTalk patch
(a MODEL_PATCH ref) with the audio windows of the clip's frames, the audio scale, the two speakers' token masks
and the motion latent. The sampling loop hands the tensors to every denoise step as inputs `infinitetalk.*`; the
step projects the audio (ComfyUI projects it once in the node: the same numbers), puts the motion latent over the
first latent frames of the model's input (ComfyUI's apply-model wrapper) and runs the patch in the Wan blocks
(nodes.modelfns.infinitetalk). When extending, the sampled latent's first frames are the motion latent again
(ComfyUI's outer-sample wrapper). The option is sampling-only, so the transformer's weight cache is shared."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import torch

from cluster.refs import ModelRef
from nodes.modelfns.model_options import INFINITETALK

OPTION = INFINITETALK
INPUT = "infinitetalk"


@dataclass(frozen=True)
class InfiniteTalkPatch:
    """One applied InfiniteTalk patch; equal, hashed and keyed by a digest of its tensors. `motion` is the raw
    (VAE) latent of the motion frames, [1,16,n,h,w]; `masks` [2, first-frame tokens] or None."""

    patch: ModelRef
    scale: float
    extend: bool
    digest: str
    first: torch.Tensor = field(repr=False, compare=False, hash=False)
    later: torch.Tensor = field(repr=False, compare=False, hash=False)
    motion: torch.Tensor = field(repr=False, compare=False, hash=False)
    masks: torch.Tensor | None = field(repr=False, compare=False, hash=False)

    @classmethod
    def of(cls, patch: ModelRef, scale: float, extend: bool, first, later, motion, masks) -> InfiniteTalkPatch:
        h = hashlib.sha256()
        for t in (first, later, motion, masks):
            if t is not None:
                t = t.detach().cpu().contiguous().float()
                h.update(repr(tuple(t.shape)).encode())
                h.update(t.numpy().tobytes())
        return cls(patch, float(scale), bool(extend), h.hexdigest(), first, later, motion, masks)


def step_inputs(model: ModelRef, process_in) -> tuple[dict[str, torch.Tensor], tuple | None]:
    """The steps' inputs and their `infinitetalk` param (patch ref, scale, masked); ({}, None) without the patch.
    The motion latent goes in model space (`process_in`)."""
    entry: InfiniteTalkPatch | None = model.option(OPTION)
    if entry is None:
        return {}, None
    tensors = {
        f"{INPUT}.first": entry.first,
        f"{INPUT}.later": entry.later,
        f"{INPUT}.motion": process_in(entry.motion),
    }
    if entry.masks is not None:
        tensors[f"{INPUT}.masks"] = entry.masks.float()
    return tensors, (entry.patch, entry.scale, entry.masks is not None)


def finish(model: ModelRef, samples: torch.Tensor) -> torch.Tensor:
    """The sampled raw latent with, when extending, its first frames the motion latent again."""
    entry: InfiniteTalkPatch | None = model.option(OPTION)
    if entry is None or not entry.extend:
        return samples
    n = entry.motion.shape[2]
    return torch.cat([entry.motion.to(samples), samples[:, :, n:]], dim=2)
