"""VAE encode and decode as ModelFns (tiled decode included: it is the same weights, another schedule)."""
from __future__ import annotations

from typing import Any

import torch

from cluster.modelfn import ModelFn, register
from cluster.refs import ModelRef
from nodes.models.components import VAE


class _VAEFn(ModelFn):
    def load_model(self, ref: ModelRef) -> VAE:
        from nodes.models.loader import load_vae
        return load_vae(ref)


@register
class VAEDecodeFn(_VAEFn):
    name = "vae_decode"

    def setup_io(self) -> None:
        self.add_input("latent")
        self.add_output("image")

    def execute(self, model: VAE, inputs: dict[str, Any], params: dict[str, Any]) -> dict[str, torch.Tensor]:
        latent = inputs["latent"]
        tile = params.get("tile")
        if tile:
            return {"image": tiled(model.decode, latent, tile // model.downscale,
                                   params.get("overlap", 64) // model.downscale, model.downscale)}
        return {"image": model.decode(latent)}


@register
class VAEEncodeFn(_VAEFn):
    name = "vae_encode"

    def setup_io(self) -> None:
        self.add_input("pixels")
        self.add_output("latent")

    def execute(self, model: VAE, inputs: dict[str, Any], params: dict[str, Any]) -> dict[str, torch.Tensor]:
        return {"latent": model.encode(inputs["pixels"])}


def tiled(decode, latent: torch.Tensor, tile: int, overlap: int, scale: int) -> torch.Tensor:
    """Decode latent tiles and blend them with linear feathering over the overlaps.

    Written here (not taken from a library) because the blend must match the tile grid of the
    latent; the result approaches the untiled decode as overlap grows."""
    b, _, h, w = latent.shape
    tile = max(8, min(tile, max(h, w)))
    overlap = max(0, min(overlap, tile // 2))
    stride = tile - overlap
    out = torch.zeros(b, h * scale, w * scale, 3, device=latent.device)
    weight = torch.zeros(1, h * scale, w * scale, 1, device=latent.device)
    ys = list(range(0, max(h - overlap, 1), stride))
    xs = list(range(0, max(w - overlap, 1), stride))
    for y in ys:
        for x in xs:
            y0, x0 = min(y, max(h - tile, 0)), min(x, max(w - tile, 0))
            piece = decode(latent[:, :, y0:y0 + tile, x0:x0 + tile])
            th, tw = piece.shape[1], piece.shape[2]
            ramp = overlap * scale
            mask = torch.ones(1, th, tw, 1, device=latent.device)
            for i in range(ramp):
                f = (i + 1) / (ramp + 1)
                if y0 > 0:
                    mask[:, i, :, :] *= f
                if y0 + tile < h:
                    mask[:, th - 1 - i, :, :] *= f
                if x0 > 0:
                    mask[:, :, i, :] *= f
                if x0 + tile < w:
                    mask[:, :, tw - 1 - i, :] *= f
            out[:, y0 * scale:y0 * scale + th, x0 * scale:x0 * scale + tw] += piece * mask
            weight[:, y0 * scale:y0 * scale + th, x0 * scale:x0 * scale + tw] += mask
    return out / weight
