"""A Z-Image Fun ControlNet inside a denoise step (the step side of nodes.diffsynth for Z-Image), as ComfyUI's
ZImageControlPatch acts for the first release's layout: when the transformer's first main block starts, the
control latent is embedded and refined, then control layer k runs on the previous layer's tokens (layer 0 adds the
block's input image tokens) with the image tokens' RoPE and the block's timestep embedding; its hint, times the
strength, is added to the image tokens after main block k * every. Installed as hooks for that call only; the
cached transformer is unchanged."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import ExitStack

import torch
from torch import nn

Control = tuple[nn.Module, torch.Tensor, float]  # (ZImageFunControl, model-space control latent, strength)


def with_controls(forward: Callable[[torch.Tensor], torch.Tensor], transformer: nn.Module, controls: Sequence[Control]):
    """`forward` with the Fun ControlNets acting in `transformer`'s (diffusers' ZImageTransformer2DModel) blocks."""
    blocks = getattr(transformer, "layers", None)
    if blocks is None or not hasattr(transformer, "noise_refiner"):
        raise ValueError("model_patch: a Z-Image Fun ControlNet patches Z-Image models only")
    for net, _, _ in controls:
        if net.control_all_x_embedder["2-1"].out_features != transformer.dim:
            raise ValueError(
                f"model_patch: the Fun ControlNet is {net.control_all_x_embedder['2-1'].out_features} wide, the "
                f"Z-Image model {transformer.dim}"
            )

    def run(x: torch.Tensor) -> torch.Tensor:
        hints: list[tuple[dict[int, torch.Tensor], int, float]] = []

        def start(_module: nn.Module, args: tuple) -> None:
            # diffusers' main blocks take (tokens, mask, freqs, adaln, ...): image tokens first, then the caption's
            image, freqs, adaln = args[0], args[2], args[3]
            for net, latent, strength in controls:
                latent = latent.to(image.device, image.dtype)
                if latent.shape[0] not in (1, image.shape[0]):
                    raise ValueError(
                        f"image: a batch of {latent.shape[0]} control images for {image.shape[0]} latents evaluated"
                    )
                tokens = net.embed(latent, freqs, adaln)
                hints.append((net.hints(tokens, image, freqs, adaln, len(blocks)), tokens.shape[1], strength))

        def after(index: int) -> Callable:
            def hook(_module: nn.Module, _args: tuple, out: torch.Tensor) -> torch.Tensor:
                for by_block, n, strength in hints:
                    if index in by_block:
                        out = torch.cat([out[:, :n] + by_block[index] * strength, out[:, n:]], dim=1)
                return out

            return hook

        device = x.device
        for net, _, _ in controls:
            net.to(device)  # loaded beside the layer cache, like a ControlNet: it follows the step
        with ExitStack() as stack:
            stack.callback(blocks[0].register_forward_pre_hook(start).remove)
            for i, block in enumerate(blocks):
                stack.callback(block.register_forward_hook(after(i)).remove)
            out = forward(x)
        if not hints:
            raise NotImplementedError("model_patch: a Z-Image Fun ControlNet cannot act in this Z-Image forward pass")
        return out

    return run
