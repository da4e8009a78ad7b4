"""alibaba-pai's Qwen-Image(-2512) Fun ControlNet Union, run as the newest ComfyUI runs it (comfy/controlnet.py's
load_controlnet_qwen_fun and QwenFunControlNet, comfy/ldm/qwen_image/controlnet.py's QwenImageFunControlNetModel,
read at Comfy-Org/ComfyUI 03b1ca67):

- the file holds `control_img_in` (the hint's 2x2 patches, 33 latent channels: the control latent, a mask and an
  inpaint latent, 132 features) and five `control_blocks.N`: Qwen-Image transformer blocks (diffusers' names, as
  the main model's) with an `after_proj` each and a `before_proj` on the first. ComfyUI tells it by
  `control_blocks.0.after_proj.weight` with `control_img_in.weight`; widths come from the tensors;
- the hint IMAGE is resized to the latent size * 8 (nearest-exact, centre crop), encoded by the apply node's VAE and
  normalised as Qwen-Image latents (Wan 2.1's format), as for the other Qwen-Image ControlNets; the apply nodes
  give no inpaint input, so zeros stand in for the mask and the inpaint latent;
- it reads the MAIN model at run time: the main model's img_in on the noisy latent, txt_norm + txt_in on the
  prompt, its timestep embedding and its rotary positions feed the control blocks (the first adds before_proj of
  the hint tokens to the image states; the text states run through the control blocks in turn, unmasked);
- control block i's after_proj output is added to the image tokens after main block 0, 12, 24, 36, 48 (of the
  released 60-block model, whatever the sampled model's depth), times the square root of the strength (ComfyUI's
  softer curve for these files)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import torch
import torch.nn.functional as F
from diffusers.models.transformers.transformer_qwenimage import QwenImageTransformerBlock

from cluster.refs import ModelRef
from nodes.models.errors import ModelLoadError
from nodes.models.flux import pack, patched
from nodes.models.qwen_image_controlnet import MAIN_BLOCKS, QwenControlOutput, QwenImageControlNet
from nodes.models.safetensors_io import build_module

MARKERS = ("control_blocks.0.after_proj.weight", "control_img_in.weight")
CONTROL_BLOCKS = 5  # ComfyUI builds five, whatever the file
INJECTION_LAYERS = (0, 12, 24, 36, 48)  # the main blocks each control block's output follows
HINT_CHANNELS = 33  # control latent (16), mask (1), inpaint latent (16), before 2x2 packing


class FunControlBlock(QwenImageTransformerBlock):
    """A Qwen-Image transformer block with the Fun ControlNet's output projection (and input one on the first)."""

    def __init__(self, dim: int, heads: int, head_dim: int, first: bool) -> None:
        super().__init__(dim=dim, num_attention_heads=heads, attention_head_dim=head_dim)
        if first:
            self.before_proj = torch.nn.Linear(dim, dim)
        self.after_proj = torch.nn.Linear(dim, dim)


class FunControlNetModel(torch.nn.Module):
    def __init__(self, in_features: int, inner: int, heads: int, head_dim: int) -> None:
        super().__init__()
        self.control_img_in = torch.nn.Linear(in_features, inner)
        self.control_blocks = torch.nn.ModuleList(
            FunControlBlock(inner, heads, head_dim, first=i == 0) for i in range(CONTROL_BLOCKS)
        )

    def hint_tokens(self, latent: torch.Tensor) -> torch.Tensor:
        """[B,16,h,w] control latent -> [B, tokens, in_features]: zeros for the mask and inpaint channels, padded to
        even sizes with zeros, packed per 2x2 patch (channel, row, column), cut or zero-padded to the input width."""
        width = self.control_img_in.in_features
        if latent.shape[1] == 16 and width // 4 == HINT_CHANNELS:
            latent = torch.cat([latent, torch.zeros_like(latent[:, :1]), torch.zeros_like(latent)], dim=1)
        h, w = latent.shape[-2:]
        tokens = pack(F.pad(latent, (0, w % 2, 0, h % 2)))
        if tokens.shape[-1] < width:
            tokens = F.pad(tokens, (0, width - tokens.shape[-1]))
        return tokens[..., :width]


class QwenImageFunControlNet(QwenImageControlNet):
    reads_base_model = True  # the sampling step hands it the main model's module (nodes/modelfns/denoise.py)

    @torch.no_grad()
    def apply(
        self,
        x: torch.Tensor,
        timestep: torch.Tensor,
        cond: dict[str, Any],
        hint: torch.Tensor,
        strength: float = 1.0,
        extra: torch.Tensor | None = None,
        base: torch.nn.Module | None = None,
    ) -> QwenControlOutput:
        """Residuals for model input `x` ([B,16,H,W] or [B,16,1,H,W]) at `timestep` (sigma) for the hint IMAGE,
        computed with the main model's module `base` (diffusers' QwenImageTransformer2DModel); `cond` holds
        "context". They are already multiplied by the square root of `strength`."""
        if base is None:
            raise ValueError("a Qwen-Image Fun ControlNet runs with its Qwen-Image model, which was not given")
        if extra is not None:
            raise ValueError("this Qwen-Image Fun ControlNet takes no mask: apply it with Apply ControlNet")
        module: FunControlNetModel = self.module
        x = x[:, :, 0] if x.dim() == 5 else x
        b, _, h, w = x.shape
        latent = self.latent_hint(hint, h, w).to(x.device)
        if latent.shape[0] != b:
            if b % latent.shape[0]:
                raise ValueError(f"a batch of {latent.shape[0]} hints cannot match a latent batch of {b}")
            latent = latent.repeat(b // latent.shape[0], 1, 1, 1)
        x = patched(x)
        h_len, w_len = x.shape[-2] // 2, x.shape[-1] // 2
        image = base.img_in(pack(x.to(self.dtype)))
        hint_tokens = module.hint_tokens(latent.to(self.dtype))
        context = cond["context"]
        context = (context.expand(b, *context.shape[1:]) if context.shape[0] == 1 else context).to(x.device, self.dtype)
        txt = base.txt_in(base.txt_norm(context))
        t = torch.as_tensor(timestep, dtype=torch.float32, device=x.device).reshape(-1)
        temb = base.time_text_embed((t.expand(b) if t.numel() == 1 else t).to(image.dtype), image)
        rotary = base.pos_embed([[(0, h_len, w_len, 0, 0)]] * b, max_txt_seq_len=txt.shape[1], device=x.device)
        c = module.control_img_in(hint_tokens)
        c = module.control_blocks[0].before_proj(c) + image
        scale = math.sqrt(max(float(strength), 0.0))
        hints = []
        for block in module.control_blocks:
            txt, c = block(
                hidden_states=c,
                encoder_hidden_states=txt,
                encoder_hidden_states_mask=None,
                temb=temb,
                image_rotary_emb=rotary,
            )
            hints.append(block.after_proj(c).float() * scale)
        blocks: list[torch.Tensor | None] = [None] * MAIN_BLOCKS
        for hint_out, layer in zip(hints, INJECTION_LAYERS):
            blocks[layer] = hint_out
        return QwenControlOutput(tuple(blocks))


def is_fun(shapes: Mapping[str, Any]) -> bool:
    return all(k in shapes for k in MARKERS)


def infer_config(sd: Mapping[str, torch.Tensor]) -> dict[str, Any]:
    """The model's widths from the file's shapes (ComfyUI's load_controlnet_qwen_fun rules)."""
    inner, in_features = sd["control_img_in.weight"].shape
    head_dim = int(sd["control_blocks.0.attn.norm_q.weight"].shape[0])
    heads = max(1, int(sd["control_blocks.0.attn.to_q.weight"].shape[0]) // max(1, head_dim))
    blocks = {int(k.split(".")[1]) for k in sd if k.startswith("control_blocks.")}
    if blocks != set(range(CONTROL_BLOCKS)):
        raise ValueError(f"it has control blocks {sorted(blocks)}; ComfyUI's model has {CONTROL_BLOCKS}")
    return {"in_features": int(in_features), "inner": int(inner), "heads": heads, "head_dim": head_dim}


def load_controlnet(ref: ModelRef, state_dict: Mapping[str, torch.Tensor]) -> QwenImageFunControlNet:
    """A Qwen-Image Fun ControlNet Union; the VAE that encodes its hints comes as the ref's "vae" option (the apply
    node's vae input), which ComfyUI also requires of it."""
    from nodes.models.loader import load_vae

    path = ref.sources[0] if ref.sources else None
    vae_ref = ref.option("vae")
    if vae_ref is None:
        raise ModelLoadError(
            path, "this Qwen-Image ControlNet needs a VAE: apply it with a node that has a vae input (Apply ControlNet)"
        )
    try:
        config = infer_config(state_dict)
    except (KeyError, ValueError) as e:
        raise ModelLoadError(path, f"not a usable Qwen-Image Fun ControlNet: {e}") from None
    module = build_module(
        lambda: FunControlNetModel(**config), dict(state_dict), path, "Qwen-Image Fun ControlNet", dtype=torch.float32
    )
    return QwenImageFunControlNet(
        arch="qwen_image", module=module, vae=load_vae(vae_ref), config=config | {"extra_condition_channels": 0}
    )
