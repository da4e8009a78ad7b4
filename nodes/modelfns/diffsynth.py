"""A DiffSynth ControlNet inside a denoise step (the step side of nodes.diffsynth): for one forward pass of a
Qwen-Image transformer, each block's output image tokens get `controlnet_blocks[i](tokens, img_in(control
latent)) * strength` added, after the block and in the order the patches were applied, as ComfyUI's
double_block patches run. Installed as forward hooks for that call only; the cached transformer is unchanged."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import ExitStack

import torch
from torch import nn

Control = tuple[nn.Module, torch.Tensor, float]  # (BlockWiseControlNet, patched control latent, strength)


def _block_hook(index: int, controls: Sequence[tuple[nn.Module, torch.Tensor, float]], calls: list[int]) -> Callable:
    def hook(_module: nn.Module, _args: tuple, output: tuple[torch.Tensor, torch.Tensor]) -> tuple:
        txt, img = output  # diffusers' Qwen-Image block returns (text, image)
        calls[0] += 1
        for net, control, strength in controls:
            n = control.shape[1]  # the control covers the image's tokens; reference tokens follow them
            delta = net.controlnet_blocks[index](img[:, :n], control.to(img.dtype)) * strength
            img = torch.cat([img[:, :n] + delta, img[:, n:]], dim=1)
        return txt, img

    return hook


def with_controls(forward: Callable[[torch.Tensor], torch.Tensor], transformer: nn.Module, controls: Sequence[Control]):
    """`forward` with the DiffSynth ControlNets (or Z-Image Fun ControlNets: nodes.modelfns.zimage_fun) acting in
    `transformer`'s blocks during each call."""
    from nodes.models.zimage_fun_control import ZImageFunControl

    fun = [isinstance(net, ZImageFunControl) for net, _, _ in controls]
    if any(fun):
        if not all(fun):
            raise ValueError("model_patch: a DiffSynth ControlNet and a Z-Image Fun ControlNet on one model")
        from nodes.modelfns import zimage_fun

        return zimage_fun.with_controls(forward, transformer, controls)
    blocks = getattr(transformer, "transformer_blocks", None)
    if blocks is None:
        raise ValueError("model_patch: a DiffSynth ControlNet patches Qwen-Image models only")
    for net, _, _ in controls:
        if len(net.controlnet_blocks) < len(blocks):
            raise ValueError(
                f"model_patch: the DiffSynth ControlNet has {len(net.controlnet_blocks)} blocks, the Qwen-Image model "
                f"{len(blocks)}"
            )

    def run(x: torch.Tensor) -> torch.Tensor:
        device = x.device
        embedded = []
        for net, latent, strength in controls:
            net.to(device)  # loaded beside the layer cache, like a ControlNet: it follows the step
            embedded.append((net, net.img_in(latent.to(device, net.img_in.weight.dtype)), strength))
        calls = [0]
        with ExitStack() as stack:
            for i, block in enumerate(blocks):
                stack.callback(block.register_forward_hook(_block_hook(i, embedded, calls)).remove)
            out = forward(x)
        if calls[0] == 0:  # e.g. a forward that runs the blocks' parts itself (Qwen-Image-Edit 2511's references)
            raise NotImplementedError(
                "model_patch: a DiffSynth ControlNet cannot act in this Qwen-Image forward pass "
                "(reference latents with the index_timestep_zero method)"
            )
        return out

    return run
