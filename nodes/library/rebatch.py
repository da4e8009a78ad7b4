"""ComfyUI's comfy_extras.nodes_rebatch: RebatchLatents (RebatchImages lives with the core image nodes).

LATENT is {"samples": [B,C,H,W], optional "noise_mask", "batch_index"}. Regrouping keeps each latent's
mask and batch indices with it, so a later sampler draws the same noise per item as before.
"""

from __future__ import annotations

import torch

MODULE = "comfy_extras.nodes_rebatch"

Group = tuple[torch.Tensor, torch.Tensor, list[int]]  # samples, noise masks, batch indices


def _group_of(latent: dict, offset: int) -> Group:
    """A latent's samples, its mask (all ones at pixel size when absent, repeated to the batch when
    shorter) and its batch indices (offset.. when absent)."""
    samples = latent["samples"]
    b, _, h, w = samples.shape
    mask = latent["noise_mask"] if "noise_mask" in latent else torch.ones((b, 1, h * 8, w * 8), device="cpu")
    # ComfyUI resizes a mask of another size but discards the result; masks keep their own size.
    if mask.shape[0] < b:
        mask = mask.repeat((b - 1) // mask.shape[0] + 1, 1, 1, 1)[:b]
    indices = latent["batch_index"] if "batch_index" in latent else [offset + i for i in range(b)]
    return samples, mask, indices


def _join(a: Group, b: Group) -> Group:
    return torch.cat((a[0], b[0])), torch.cat((a[1], b[1])), a[2] + b[2]


def _as_latent(group: Group, start: int, size: int) -> dict:
    return {
        "samples": group[0][start : start + size],
        "noise_mask": group[1][start : start + size],
        "batch_index": group[2][start : start + size],
    }


class RebatchLatents:
    RELATIVE_PYTHON_MODULE = MODULE

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"latents": ("LATENT", {}), "batch_size": ("INT", {"default": 1, "min": 1, "max": 4096})}}

    RETURN_TYPES = ("LATENT",)
    INPUT_IS_LIST = True
    OUTPUT_IS_LIST = (True,)
    FUNCTION = "rebatch"
    CATEGORY = "latent/batch"
    DESCRIPTION = (
        "Regroups a list of latent batches into batches of batch_size; a change of latent size "
        "starts a new batch. Masks and batch indices travel with their latents."
    )

    def rebatch(self, latents: list[dict], batch_size: list[int]):
        size = batch_size[0]
        out: list[dict] = []
        current: Group | None = None
        processed = 0
        for latent in latents:
            group = _group_of(latent, processed)
            processed += len(group[2])
            if current is None:
                current = group
            elif group[0].shape[-2:] != current[0].shape[-2:]:
                # A different size cannot join: the pending batch goes out (its first batch_size items).
                out.append(_as_latent(current, 0, size))
                current = group
            else:
                current = _join(current, group)
            if current[0].shape[0] > size:
                full = current[0].shape[0] // size
                out.extend(_as_latent(current, i * size, size) for i in range(full))
                rest = full * size
                current = (current[0][rest:], current[1][rest:], current[2][rest:]) if rest < len(current[2]) else None
        if current is not None:
            out.append(_as_latent(current, 0, size))
        for latent in out:
            # An all-ones mask is no mask.
            if latent["noise_mask"].mean() == 1.0:
                del latent["noise_mask"]
        return (out,)


NODE_CLASS_MAPPINGS = {"RebatchLatents": RebatchLatents}
NODE_DISPLAY_NAME_MAPPINGS = {"RebatchLatents": "Rebatch Latents"}
