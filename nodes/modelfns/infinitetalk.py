"""WanInfiniteTalkToVideo's patch inside a denoise step (the step side of nodes.infinitetalk): for one forward pass
of a Wan 2.1 transformer, every block's tokens get the MultiTalk audio cross-attention added after the text
cross-attention (ComfyUI's attn2_patch), and with two speakers the block's self-attention queries and keys give
the speaker maps that attention reads first (its attn1_patch). Installed as hooks for that call only; the cached
transformer is unchanged. Each sample of a batched pass is patched on its own (ComfyUI's patch reads one)."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import ExitStack

import torch
from torch import nn

from nodes.models import wan_multitalk as mt


def _turn(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Wan's rotary turn on interleaved pairs (the diffusers processor's, which equals ComfyUI's apply_rope1)."""
    x1, x2 = x.unflatten(-1, (-1, 2)).unbind(-1)
    c, s = cos[..., 0::2], sin[..., 1::2]
    out = torch.empty_like(x)
    out[..., 0::2] = x1 * c - x2 * s
    out[..., 1::2] = x1 * s + x2 * c
    return out.type_as(x)


def _self_attention_qk(attn: nn.Module, hidden: torch.Tensor, rotary: tuple) -> tuple[torch.Tensor, torch.Tensor]:
    q = attn.norm_q(attn.to_q(hidden)).unflatten(2, (attn.heads, -1))
    k = attn.norm_k(attn.to_k(hidden)).unflatten(2, (attn.heads, -1))
    return _turn(q, *rotary), _turn(k, *rotary)


def with_audio(
    forward: Callable[[torch.Tensor], torch.Tensor],
    transformer: nn.Module,
    patch: mt.MultiTalkPatch,
    tokens: torch.Tensor,
    scale: float,
    masks: torch.Tensor | None,
) -> Callable[[torch.Tensor], torch.Tensor]:
    """`forward` with the audio patch acting in `transformer`'s blocks: tokens [frames, A, width] (the projected
    audio of the latent's frames), masks [2, first-frame tokens] for two speakers or None."""
    blocks = transformer.blocks
    if len(patch.blocks) < len(blocks):
        raise ValueError(
            f"model_patch: the MultiTalk patch has {len(patch.blocks)} blocks, the Wan model {len(blocks)}"
        )

    def run(x: torch.Tensor) -> torch.Tensor:
        patch.to(x.device)
        grid = (x.shape[2], (x.shape[3] + 1) // 2, (x.shape[4] + 1) // 2)
        if tokens.shape[0] != grid[0]:
            raise ValueError(f"the audio covers {tokens.shape[0]} latent frames, the latent has {grid[0]}")
        audio = tokens.to(x.device)
        state: dict = {}

        def before_attn1(_m: nn.Module, args: tuple) -> None:
            hidden, rotary = args[0], args[3]
            q, k = _self_attention_qk(_m, hidden, rotary)
            state["maps"] = [
                mt.speaker_maps(q[b : b + 1], k[b : b + 1], grid[1] * grid[2], masks.to(x.device))
                for b in range(q.shape[0])
            ]

        def before_norm2(_m: nn.Module, args: tuple) -> None:
            state["residual"] = args[0]

        def after_attn2(index: int) -> Callable:
            block = patch.blocks[index]

            def hook(_m: nn.Module, _args: tuple, out: torch.Tensor) -> torch.Tensor:
                hidden = (state.pop("residual") + out).type_as(out)
                maps = state.pop("maps", None)
                normed = block.norm_x(hidden)
                added = torch.cat(
                    [
                        mt.audio_attention(
                            block.audio_cross_attn,
                            normed[b : b + 1],
                            audio.to(normed.dtype),
                            grid,
                            None if maps is None else maps[b],
                        )
                        for b in range(hidden.shape[0])
                    ]
                )
                # ComfyUI adds it to the tokens after the text cross-attention's; here to that attention's output
                # (the block adds it to the same tokens: the sum is ordered otherwise, within float32 rounding)
                return out + added * scale

            return hook

        with ExitStack() as stack:
            for i, block in enumerate(blocks):
                if masks is not None:
                    stack.callback(block.attn1.register_forward_pre_hook(before_attn1).remove)
                stack.callback(block.norm2.register_forward_pre_hook(before_norm2).remove)
                stack.callback(block.attn2.register_forward_hook(after_attn2(i)).remove)
            return forward(x)

    return run
