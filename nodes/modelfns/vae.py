"""VAE encode and decode as ModelFns (tiled encode and decode included: the same weights, another schedule)."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import torch

from cluster.call import Params
from cluster.modelfn import ModelFn, register
from cluster.refs import ModelRef
from nodes.arch import has_frame_axis
from nodes.models.components import VAEModel


class VAEParams(Params):
    tile: int | None = None  # tiled decode/encode with tiles of this many pixels
    overlap: int = 64  # and this overlap, pixels
    temporal_size: int = 64  # tiled decode of a video VAE that compresses time: frames per tile
    temporal_overlap: int = 8  # and their overlap, frames
    video: bool = False  # encode: the batch as the frames of one video (Wan's image-to-video conditioning)


class _VAEFn(ModelFn):
    Params = VAEParams

    @classmethod
    def warm_up(cls) -> None:
        from nodes.models.loader import import_model_code

        import_model_code()

    def load_model(self, ref: ModelRef) -> VAEModel:
        from nodes.models.loader import load_vae

        return load_vae(ref)


@register
class VAEDecodeFn(_VAEFn):
    name = "vae_decode"

    def setup_io(self) -> None:
        self.add_input("latent")
        self.add_output("image")

    def execute(self, model: VAEModel, inputs: dict[str, Any], params: VAEParams) -> dict[str, torch.Tensor]:
        latent = inputs["latent"]
        tile = params.tile
        if tile and hasattr(model, "decode_tiled"):  # a VAE that tiles itself (SeedVR2's: in space only)
            return {"image": model.decode_tiled(latent, tile, params.overlap)}
        if tile and latent.dim() == 5 and hasattr(model, "decode_raw"):
            return {"image": model.to_image(tiled_video(model, latent, params))}
        if tile:
            if latent.dim() == 5:  # frames tile as images of the batch: [B,C,T,H,W] -> [B*T,C,H,W]
                latent = latent.movedim(2, 1).reshape(-1, latent.shape[1], *latent.shape[3:])
            return {
                "image": tiled(
                    model.decode,
                    latent,
                    tile // model.downscale,
                    params.overlap // model.downscale,
                    model.downscale,
                )
            }
        return {"image": model.decode(latent)}


@register
class VAEEncodeFn(_VAEFn):
    name = "vae_encode"

    def setup_io(self) -> None:
        self.add_input("pixels")
        self.add_output("latent")

    def execute(self, model: VAEModel, inputs: dict[str, Any], params: VAEParams) -> dict[str, torch.Tensor]:
        tile = params.tile
        if params.video:  # the batch as the frames of one video (Wan's image-to-video conditioning)
            if not hasattr(model, "encode_video"):
                raise ValueError(f"the {model.arch} VAE does not encode videos")
            return {"latent": model.encode_video(inputs["pixels"])}
        if tile and hasattr(model, "encode_tiled"):  # a VAE that tiles itself (SeedVR2's: in space only)
            return {"latent": model.encode_tiled(inputs["pixels"], tile, params.overlap)}
        if tile:
            latent = tiled_encode(
                model.encode, inputs["pixels"], tile, params.overlap, model.downscale, model.latent_channels
            )
        else:
            latent = model.encode(inputs["pixels"])
        # Qwen-Image's VAE gives ComfyUI's [B,C,1,H,W]: each image one frame.
        return {"latent": latent.unsqueeze(2) if has_frame_axis(model.arch) else latent}


@register
class VAELatentStatisticsFn(_VAEFn):
    """The per-channel latent statistics a VAE normalises its latents with (LTX-2's video VAE), for nodes that
    work on latents in the VAE's raw space (LTXVLatentUpsampler)."""

    name = "vae_latent_statistics"

    def setup_io(self) -> None:
        self.add_output("mean")
        self.add_output("std")

    def execute(self, model: VAEModel, inputs: dict[str, Any], params: VAEParams) -> dict[str, torch.Tensor]:
        statistics = getattr(model, "latent_statistics", None)
        if statistics is None:
            raise ValueError(f"the {model.arch} VAE has no per-channel latent statistics (LTX-2's video VAE has)")
        mean, std = statistics()
        return {"mean": mean, "std": std}


def tiled_video(model: Any, latent: torch.Tensor, params: VAEParams) -> torch.Tensor:
    """A video VAE's decoder output for `latent` [B,C,T,H,W], decoded in (time, height, width) tiles that overlap
    and are blended with linear feathers, as ComfyUI's VAEDecodeTiled decodes video (tiled_scale_multidim): the
    tile sizes in latent units from the node's pixels and frames, a latent that fits one tile decoded whole."""
    tc, down = model.temporal_compression, model.downscale
    t_size = max(2, params.temporal_size // tc)
    t_overlap = max(1, min(t_size // 2, params.temporal_overlap // tc))
    tile = (t_size, params.tile // down, params.tile // down)
    overlap = (t_overlap, params.overlap // down, params.overlap // down)
    outs = []
    for b in range(latent.shape[0]):
        sample = latent[b : b + 1]
        extents = sample.shape[2:]
        if all(n <= t for n, t in zip(extents, tile)):
            outs.append(model.decode_raw(sample))
            continue
        sizes = [model.decoded_size(d, n) for d, n in enumerate(extents)]
        out = div = None
        starts = [range(0, n - o, t - o) if n > t else [0] for n, t, o in zip(extents, tile, overlap)]
        for corner in itertools.product(*starts):
            piece_in, at = sample, []
            for d, (n, t, o, c) in enumerate(zip(extents, tile, overlap, corner)):
                start = max(0, min(n - o, c))
                piece_in = piece_in.narrow(d + 2, start, min(t, n - start))
                at.append(model.decoded_position(d, start))
            piece = model.decode_raw(piece_in)
            if out is None:
                out = piece.new_zeros(1, piece.shape[1], *sizes)
                div = torch.zeros_like(out)
            mask = torch.ones_like(piece)
            for d, o in enumerate(overlap):
                feather, length = model.decoded_size(d, o), mask.shape[d + 2]
                if feather >= length:
                    continue
                for i in range(feather):
                    mask.narrow(d + 2, i, 1).mul_((i + 1) / feather)
                    mask.narrow(d + 2, length - 1 - i, 1).mul_((i + 1) / feather)
            o_view, d_view = out, div
            for d, start in enumerate(at):
                o_view = o_view.narrow(d + 2, start, mask.shape[d + 2])
                d_view = d_view.narrow(d + 2, start, mask.shape[d + 2])
            o_view.add_(piece * mask)
            d_view.add_(mask)
        outs.append(out / div)
    return torch.cat(outs)


def tiled_encode(
    encode: Callable[[torch.Tensor], torch.Tensor],
    pixels: torch.Tensor,
    tile: int,
    overlap: int,
    scale: int,
    channels: int,
) -> torch.Tensor:
    """ComfyUI's tiled VAE encode: the mean of three tilings (tile x tile, twice as wide and half as tall, half
    as wide and twice as tall), so that no tile seam falls in the same place in all three. IMAGE [B,H,W,C]
    (sides multiples of `scale`) -> latent [B,channels,H/scale,W/scale]."""
    out = _tiling(encode, pixels, (tile, tile), overlap, scale, channels)
    out += _tiling(encode, pixels, (tile // 2, tile * 2), overlap, scale, channels)
    out += _tiling(encode, pixels, (tile * 2, tile // 2), overlap, scale, channels)
    out /= 3.0
    return out


def _tiling(
    encode: Callable[[torch.Tensor], torch.Tensor],
    pixels: torch.Tensor,
    tile: tuple[int, int],
    overlap: int,
    scale: int,
    channels: int,
) -> torch.Tensor:
    """One tiling, image by image: tiles of tile=(height, width) pixels every tile - overlap pixels (the last
    moved back to end at the border), each encoded alone; a tile's latent is weighted by a ramp over the
    overlap's latent cells at each of its edges, and every cell is divided by the weights it received."""
    b, h, w, _ = pixels.shape
    out = torch.empty(b, channels, h // scale, w // scale, device=pixels.device)
    ramp = round(overlap / scale)
    for i in range(b):
        image = pixels[i : i + 1]
        if h <= tile[0] and w <= tile[1]:
            out[i : i + 1] = encode(image)
            continue
        total = torch.zeros(1, channels, h // scale, w // scale, device=pixels.device)
        weight = torch.zeros_like(total)
        rows = range(0, h - overlap, tile[0] - overlap) if h > tile[0] else [0]
        cols = range(0, w - overlap, tile[1] - overlap) if w > tile[1] else [0]
        for y in rows:
            for x in cols:
                y0, x0 = max(0, min(h - overlap, y)), max(0, min(w - overlap, x))
                piece = encode(image[:, y0 : y0 + min(tile[0], h - y0), x0 : x0 + min(tile[1], w - x0)])
                mask = torch.ones_like(piece)
                for d in (2, 3):
                    if ramp >= mask.shape[d]:
                        continue
                    for t in range(ramp):
                        mask.narrow(d, t, 1).mul_((t + 1) / ramp)
                        mask.narrow(d, mask.shape[d] - 1 - t, 1).mul_((t + 1) / ramp)
                ly, lx = round(y0 / scale), round(x0 / scale)
                total[:, :, ly : ly + piece.shape[2], lx : lx + piece.shape[3]] += piece * mask
                weight[:, :, ly : ly + piece.shape[2], lx : lx + piece.shape[3]] += mask
        out[i : i + 1] = total / weight
    return out


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
            piece = decode(latent[:, :, y0 : y0 + tile, x0 : x0 + tile])
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
            out[:, y0 * scale : y0 * scale + th, x0 * scale : x0 * scale + tw] += piece * mask
            weight[:, y0 * scale : y0 * scale + th, x0 * scale : x0 * scale + tw] += mask
    return out / weight
