"""HiDream-I1 (full, dev, fast) and HiDream-E1 / E1.1 (edit) diffusion models.

Read from ComfyUI's source (0.3.64 and the newest: comfy/ldm/hidream/model.py, model_base.HiDream,
supported_models.HiDream, model_detection.py): the published files (Comfy-Org/HiDream-I1_ComfyUI's
hidream_i1_*.safetensors, hidream_e1_*.safetensors) keep HiDream's own names (`double_stream_blocks.N.block.*`,
`single_stream_blocks.N.block.*`, `caption_projection.N.linear`, `x_embedder.proj`, ...), bare or under
`model.diffusion_model.`; ComfyUI detects them by `caption_projection.0.linear.weight` and fixes every size (16
double and 32 single MoE blocks, 20 heads of 128, 4 routed experts of which 2 are active). The model is a flow
model (ModelSamplingDiscreteFlow: timestep = sigma * 1000, shift 1 until ModelSamplingSD3 sets one) on Flux's
16-channel latents, and its output is negated.

It runs on diffusers' HiDreamImageTransformer2DModel, whose parameter names are HiDream's own (no renaming).
Sizes come from the shapes here, so tiny files load as the real ones; ComfyUI's one rule that no shape carries,
which Llama layer feeds which block (`llama_layers`: 0..31, then 31 for the remaining blocks), is kept as a rule
over the block count. diffusers' own patchify pads a non-square image to its maximum sequence; ComfyUI never
pads, so the tokens are made here as ComfyUI makes them and handed in with an all-ones mask (a no-op).
E1's edit image (InstructPixToPixConditioning's concat_latent_image) is joined along the width and the output
cropped back, as ComfyUI's model does."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from cluster.refs import ModelRef
from nodes.arch import latent_format, sampling_config
from nodes.models.components import DiffusionModel
from nodes.models.detect import HIDREAM_MARKER, UNET_PREFIXES
from nodes.models.flux_keys import count_blocks, strip_prefix
from nodes.models.fp8 import dequantize_scaled_fp8
from nodes.models.lora import LoraTargets
from nodes.models.single_file import load_single_file_transformer
from nodes.models.unet import resize_to_batch_size
from nodes.upscale import common_upscale

LLAMA_STATES = 32  # ComfyUI's llama_layers index the Llama 3.1 8B's 32 hidden states (its layers after the 1st)
ROPE_AXES = (64, 32, 32)  # ComfyUI's axes_dims_rope for 128-wide heads; a narrower head scales them


def find_hidream_prefix(keys) -> str | None:
    keys = set(keys)
    return next((p for p in UNET_PREFIXES if p + HIDREAM_MARKER in keys), None)


def hidream_layout(state_dict: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The file's tensors under HiDream's unprefixed names (diffusers' too)."""
    prefix = find_hidream_prefix(state_dict.keys())
    if prefix is None:
        raise ValueError(f"not a HiDream state dict (no {HIDREAM_MARKER})")
    return strip_prefix(dequantize_scaled_fp8(state_dict), prefix)  # a scaled-fp8 file multiplied out


def lora_targets(sd: Mapping[str, torch.Tensor]) -> LoraTargets:
    """The names a HiDream LoRA gives a layer: bare, under `diffusion_model.`, or kohya's `lora_unet_`."""
    targets = LoraTargets(("lora_unet_", "diffusion_model.") + tuple(sorted({k.split(".")[0] + "." for k in sd})), {})
    for key, value in sd.items():
        if key.endswith(".weight") and value.dim() == 2:
            name = key[: -len(".weight")]
            targets.add(key, name, "diffusion_model." + name, "lora_unet_" + name.replace(".", "_"))
    return targets


def llama_layers(blocks: int) -> list[int]:
    """Which Llama hidden state feeds each block (ComfyUI's list for 48 blocks: 0..31, then 31 sixteen times)."""
    return [min(i, LLAMA_STATES - 1) for i in range(blocks)]


def infer_config(sd: Mapping[str, torch.Tensor]) -> dict[str, Any]:
    """HiDreamImageTransformer2DModel's config from the shapes."""
    inner, patch_in = sd["x_embedder.proj.weight"].shape
    out_features = int(sd["final_layer.linear.weight"].shape[0])
    patch = 2  # ComfyUI's patch_size; in_channels follow from the patch embedding
    in_channels = int(patch_in) // (patch * patch)
    double = count_blocks(sd, "double_stream_blocks")
    single = count_blocks(sd, "single_stream_blocks")
    projections = count_blocks(sd, "caption_projection")
    if projections != double + single + 1:
        raise ValueError(f"{projections} caption projections for {double + single} blocks (HiDream has one more)")
    head_dim = head_width(sd, int(inner))
    return {
        "patch_size": patch,
        "in_channels": in_channels,
        "out_channels": out_features // (patch * patch),
        "num_layers": double,
        "num_single_layers": single,
        "attention_head_dim": head_dim,
        "num_attention_heads": int(inner) // head_dim,
        "caption_channels": [
            int(sd[f"caption_projection.{double + single}.linear.weight"].shape[1]),  # T5's width
            int(sd["caption_projection.0.linear.weight"].shape[1]),  # the Llama's
        ],
        "text_emb_dim": int(sd["p_embedder.pooled_embedder.linear_1.weight"].shape[1]),
        "num_routed_experts": count_blocks(sd, "double_stream_blocks.0.block.ff_i.experts"),
        "num_activated_experts": 2,  # ComfyUI's (and HiDream's) top-2 routing; no shape carries it
        "axes_dims_rope": rope_axes(head_dim),
        "max_resolution": (128, 128),
        "llama_layers": llama_layers(double + single),
    }


def head_width(sd: Mapping[str, torch.Tensor], inner: int) -> int:
    """ComfyUI's attention_head_dim 128 wherever the width is whole heads of it. No shape tells heads apart
    (the q/k norms span all heads), so a narrower width (the demo's tiny file) is taken as two heads."""
    return 128 if inner % 128 == 0 else inner // 2


def rope_axes(head_dim: int) -> tuple[int, int, int]:
    """ComfyUI's (64, 32, 32) rotary split of a 128-wide head, scaled to the head's width."""
    quarter = head_dim // 4
    return (head_dim - 2 * quarter, quarter, quarter)


def tokens(x: torch.Tensor, patch: int) -> tuple[torch.Tensor, torch.Tensor, tuple[int, int]]:
    """(tokens [B, H*W, p*p*C] in ComfyUI's order, their position ids [B, H*W, 3], the patch grid)."""
    b, c, h, w = x.shape
    ph, pw = h // patch, w // patch
    seq = x.reshape(b, c, ph, patch, pw, patch).permute(0, 2, 4, 3, 5, 1).reshape(b, ph * pw, patch * patch * c)
    ids = torch.zeros(ph, pw, 3, device=x.device)
    ids[..., 1] += torch.arange(ph, device=x.device)[:, None]
    ids[..., 2] += torch.arange(pw, device=x.device)[None, :]
    return seq, ids.reshape(1, ph * pw, 3).expand(b, -1, -1), (ph, pw)


@dataclass
class HiDreamDiffusionModel(DiffusionModel):
    def apply(self, x: torch.Tensor, timestep: torch.Tensor, cond: dict[str, Any]) -> torch.Tensor:
        if cond.get("control"):
            raise NotImplementedError("ControlNets are not supported for HiDream models")
        if cond.get("ref_latents"):
            raise NotImplementedError("reference latents are not supported for HiDream models (E1 edits by concat)")
        llama = cond.get("conditioning_llama3")
        if llama is None:
            raise ValueError(
                "HiDream needs its Llama 3.1 text encoder's states beside the conditioning: encode the prompt with "
                "QuadrupleCLIPLoader's CLIP (CLIP-L, CLIP-G, T5-XXL and Llama 3.1 8B)"
            )
        net = self.module
        device, dtype = x.device, self.dtype
        b, _, h, w = x.shape
        image = cond.get("concat")  # E1: the edit image's latent, joined along the width
        if image is not None:
            x = torch.cat([x, image.to(x)], dim=-1)
        patch = net.config.patch_size
        # ComfyUI pads odd sizes to whole patches (circularly) and crops the output back.
        x = F.pad(x, (0, (-x.shape[-1]) % patch, 0, (-x.shape[-2]) % patch), mode="circular")
        seq, ids, grid = tokens(x.to(dtype), patch)
        t = torch.as_tensor(timestep, dtype=torch.float32, device=device).reshape(-1)
        t = t.expand(b) if t.numel() == 1 else t
        pooled = cond["pooled"].to(device, dtype)
        context = cond["context"].to(device, dtype)
        llama = llama.to(device, dtype)
        if pooled.shape[0] == 1 and b > 1:
            pooled, context, llama = (v.expand(b, *v.shape[1:]) for v in (pooled, context, llama))
        out = net(
            hidden_states=seq,
            timesteps=t,
            encoder_hidden_states_t5=context,
            encoder_hidden_states_llama3=llama.movedim(1, 0),  # diffusers indexes the layer axis first
            pooled_embeds=pooled,
            img_ids=ids,
            img_sizes=[grid] * b,
            hidden_states_masks=torch.ones(b, seq.shape[1], device=device, dtype=dtype),
            return_dict=False,
        )[0]
        return -out[:, :, :h, :w].float()

    def concat_image(
        self, image: torch.Tensor | None, x: torch.Tensor, mask: torch.Tensor | None = None, mask_index: int = 0
    ) -> torch.Tensor | None:
        """E1's edit latent (ComfyUI's image_cond): the raw latent in the model's units, no mask."""
        if image is None:
            return None
        # ComfyUI's CONDNoiseShape: resized to the latent (bilinear, centre crop) and its batch
        image = common_upscale(image.to(x.device, x.dtype), x.shape[-1], x.shape[-2], "bilinear", "center")
        return self.latent_format.process_in(resize_to_batch_size(image, x.shape[0]))


def load_diffusion_model(ref: ModelRef, state_dict: Mapping[str, torch.Tensor]) -> HiDreamDiffusionModel:
    """A HiDream DiffusionModel from its single file, LoRAs merged."""
    from diffusers import HiDreamImageTransformer2DModel

    module, config = load_single_file_transformer(
        ref,
        state_dict,
        what="HiDream transformer",
        layout=hidream_layout,
        lora_targets=lora_targets,
        convert=dict,
        infer_config=infer_config,
        model_class=HiDreamImageTransformer2DModel,
    )
    return HiDreamDiffusionModel(
        arch="hidream",
        module=module,
        latent_format=latent_format("hidream"),
        sampling=dict(sampling_config("hidream")),
        config=config,
        dtype=next(module.parameters()).dtype,
    )


# The loader (nodes.models.loader) finds every HiDream entry point on this module; its VAE is Flux's.
from nodes.models.flux import load_vae  # noqa: E402
from nodes.models.hidream_text import load_text_encoder  # noqa: E402

__all__ = ["hidream_layout", "infer_config", "load_diffusion_model", "load_text_encoder", "load_vae"]
