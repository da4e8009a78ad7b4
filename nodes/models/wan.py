"""Wan 2.1 / 2.2 video diffusion models from the single files ComfyUI users download (diffusion_models/
wan2.1_*.safetensors, wan2.2_*.safetensors: Wan's own key names, bare or under `model.diffusion_model.`).

ComfyUI tells them by `head.modulation` and reads the sizes from the tensors: the width from the head's
modulation, 128-wide heads, the input channels from the patch embedding (16 text-to-video; 36 image-to-video
and Fun InP: mask and image latent joined to the noise; 48 Wan 2.1 Fun Control: control and start latents;
52 Wan 2.2 Fun Control: control latent, mask, start latent), the output channels from the head (48: Wan 2.2 5B,
whose latents come from the Wan 2.2 VAE). The network is diffusers' WanTransformer3DModel, converted with
diffusers' own Wan key mapping; `apply` takes ComfyUI's view of the model: a [B,C,T,H,W] latent in model space,
the timestep sigma x 1000, the umt5 states as context, an image-to-video model's concat tensor, and, for
Wan 2.2 5B, one timestep per latent frame (ComfyUI's from a denoise mask). Two things follow ComfyUI rather
than diffusers: the time embedding's sinusoid is computed in float64 (diffusers: float32), and inputs of odd
size are padded circularly to the 2x2 patch (diffusers refuses them).

Wan 2.1 VACE files (ComfyUI's VaceWanModel: `vace_patch_embedding` and `vace_blocks.N`) load as diffusers'
WanVACETransformer3DModel, its VACE blocks after every (blocks // VACE blocks)-th block as ComfyUI places them;
WanVaceToVideo's latents and masks reach it as `vace_context` (nodes.models.wan_vace, chained nodes included).
"""

from __future__ import annotations

import functools
import math
import os
from collections.abc import Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import torch
from diffusers import WanTransformer3DModel, WanVACETransformer3DModel
from diffusers.loaders.single_file_utils import convert_wan_transformer_to_diffusers
from diffusers.models.transformers.transformer_wan import WanRotaryPosEmbed

from cluster.refs import ModelRef
from nodes.arch import latent_format, sampling_config
from nodes.models import comfy_quant, wan_vace
from nodes.models.components import DiffusionModel
from nodes.models.errors import ModelLoadError
from nodes.models.flux_keys import count_blocks, find_prefix, strip_prefix
from nodes.models.fp8 import dequantize_scaled_fp8
from nodes.models.lora import LoraTargets, merge_loras
from nodes.models.safetensors_io import build_module, shapes_of
from nodes.models.unet import resize_to_batch_size
from nodes.upscale import common_upscale

WAN_MARKER = "head.modulation"
REF_CONV = "ref_conv."  # Wan 2.2 Fun Control (ComfyUI's in_dim_ref_conv)
CAMERA = "control_adapter."  # Wan Fun Camera: camera conditions added to the patch embedding
ANIMATE = "pose_patch_embedding.weight"  # Wan 2.2 Animate (WanAnimateToVideo's model): refused by name for now
VACE = "vace_patch_embedding.weight"  # Wan 2.1 VACE: control video, masks and reference through vace_blocks
_camera_features: ContextVar[torch.Tensor | None] = ContextVar("wan_camera_features", default=None)
# Wan 2.2 Fun Control's reference latent of this call ([B,16,H,W] in model space) and its token count
_reference: ContextVar[dict | None] = ContextVar("wan_reference", default=None)
HEAD_DIM = 128  # ComfyUI: num_heads = dim // 128
FREQ_DIM = 256
PATCH = (1, 2, 2)
TEXT_TOKENS = 512  # umT5's padded length, which diffusers' image-to-video attention assumes


def wan_arch(sd: Mapping[str, torch.Tensor]) -> str:
    """ "wan22_5b" for the 48-channel Wan 2.2 5B, "wan21" for the others (Wan 2.1 and Wan 2.2 14B share the
    Wan 2.1 latent)."""
    return "wan22_5b" if sd["head.head.weight"].shape[0] // math.prod(PATCH) == 48 else "wan21"


def infer_config(sd: Mapping[str, torch.Tensor]) -> dict[str, Any]:
    """WanTransformer3DModel's config from a Wan-layout (unprefixed) state dict's shapes, as ComfyUI reads them."""
    dim = int(sd["head.modulation"].shape[-1])
    if dim % HEAD_DIM:
        raise ValueError(f"width {dim} is not a multiple of Wan's 128-wide heads")
    config: dict[str, Any] = {
        "patch_size": PATCH,
        "num_attention_heads": dim // HEAD_DIM,
        "attention_head_dim": HEAD_DIM,
        "in_channels": int(sd["patch_embedding.weight"].shape[1]),
        "out_channels": int(sd["head.head.weight"].shape[0] // math.prod(PATCH)),
        "text_dim": int(sd["text_embedding.0.weight"].shape[1]),
        "freq_dim": FREQ_DIM,
        "ffn_dim": int(sd["blocks.0.ffn.0.weight"].shape[0]),
        "num_layers": count_blocks(sd, "blocks"),
        "cross_attn_norm": True,
        "qk_norm": "rms_norm_across_heads",
        "eps": 1e-6,
    }
    if VACE in sd:  # ComfyUI's VaceWanModel: a VACE block after every (layers // vace layers)-th block
        vace = count_blocks(sd, "vace_blocks")
        config["vace_layers"] = list(range(0, config["num_layers"], config["num_layers"] // vace))
        config["vace_in_channels"] = int(sd[VACE].shape[1])
        if len(config["vace_layers"]) != vace:
            raise ValueError(f"{vace} VACE blocks do not divide the {config['num_layers']} blocks evenly")
    if "img_emb.proj.0.weight" in sd:  # Wan 2.1 image-to-video: CLIP vision states join the text
        config["image_dim"] = int(sd["img_emb.proj.0.weight"].shape[0])
        config["added_kv_proj_dim"] = dim
        if "img_emb.emb_pos" in sd:  # first-last-frame models
            config["pos_embed_seq_len"] = int(sd["img_emb.emb_pos"].shape[1])
    return config


class ComfyTimesteps(torch.nn.Module):
    """The time embedding's sinusoid as ComfyUI computes it: in float64, cosines first."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, t: torch.Tensor) -> torch.Tensor:
        half = self.dim // 2
        pos = t.to(torch.float64)
        freqs = torch.pow(10000.0, -torch.arange(half, dtype=torch.float64, device=t.device) / half)
        angle = torch.outer(pos, freqs)
        return torch.cat([torch.cos(angle), torch.sin(angle)], dim=1).to(torch.float32)


def _upscale_frames(t: torch.Tensor, size: torch.Size) -> torch.Tensor:
    return common_upscale(t, size[1], size[0], "bilinear", "center")


def _to_batch(t: torch.Tensor, b: int) -> torch.Tensor:
    return resize_to_batch_size(t, b)


def pad_to_patch(x: torch.Tensor) -> torch.Tensor:
    """x padded circularly on the right and bottom to whole patches, as ComfyUI pads Wan's input."""
    pads = [(-x.shape[-i]) % PATCH[-i] for i in (1, 2)]
    if not any(pads):
        return x
    return torch.nn.functional.pad(x, (0, pads[0], 0, pads[1], 0, 0), mode="circular")


class CameraAdapter(torch.nn.Module):
    """Wan Fun Camera's control adapter (ComfyUI's WanCamAdapter): per frame, the 24-channel camera map folded
    8x8 into channels, a 2x2 patch convolution to the model width, residual 3x3 blocks; [B,dim,F,H/16,W/16]."""

    def __init__(self, in_channels: int, dim: int, blocks: int) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(in_channels * 64, dim, kernel_size=2, stride=2)
        self.residual_blocks = torch.nn.Sequential(*[_CameraResidual(dim) for _ in range(blocks)])

    def forward(self, cam: torch.Tensor) -> torch.Tensor:
        b, c, f, h, w = cam.shape
        x = torch.nn.functional.pixel_unshuffle(cam.transpose(1, 2).reshape(b * f, c, h, w), 8)
        out = self.residual_blocks(self.conv(x))
        return out.view(b, f, *out.shape[1:]).transpose(1, 2)


class _CameraResidual(torch.nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.conv1 = torch.nn.Conv2d(dim, dim, 3, padding=1)
        self.conv2 = torch.nn.Conv2d(dim, dim, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv2(torch.relu(self.conv1(x))) + x


def _add_camera(_module: torch.nn.Module, _inputs: Any, out: torch.Tensor) -> torch.Tensor:
    """The patch embedding's forward hook: this call's camera features (set by apply, per thread) added."""
    features = _camera_features.get()
    return out if features is None else out + features.to(out.dtype)


class ReferenceRope(WanRotaryPosEmbed):
    """Wan's rotary tables; with a reference latent one frame longer, the reference taking frame 0 (ComfyUI's
    t_len + 1 for reference_latent): the tables need only the shape, so a meta tensor stands in."""

    def forward(self, hidden_states: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if _reference.get() is not None:
            b, c, f, h, w = hidden_states.shape
            hidden_states = torch.empty(b, c, f + PATCH[0], h, w, device="meta")
        return super().forward(hidden_states)


def _add_reference(
    ref_conv: torch.nn.Module, _module: torch.nn.Module, _inputs: Any, out: torch.Tensor
) -> torch.Tensor:
    """The patch embedding's forward hook: the reference latent's ref_conv tokens before the video's (as
    ComfyUI concatenates them), as one more frame of the [B,dim,F,H,W] grid so the flattened order matches."""
    ref = _reference.get()
    if ref is None:
        return out
    tokens = ref_conv(ref["latent"].to(out.dtype))
    ref["tokens"] = tokens.shape[-2] * tokens.shape[-1]
    return torch.cat([tokens.unsqueeze(2), out], dim=2)


def _drop_reference(_module: torch.nn.Module, _inputs: Any, out: torch.Tensor) -> torch.Tensor:
    """The output projection's forward hook: the reference's tokens left out before unpatchifying (ComfyUI
    drops them after the head, which works token by token)."""
    ref = _reference.get()
    return out if ref is None else out[:, ref["tokens"] :]


@dataclass
class WanDiffusionModel(DiffusionModel):
    def concat_image(
        self, image: torch.Tensor | None, x: torch.Tensor, mask: torch.Tensor | None = None, mask_index: int = 0
    ) -> torch.Tensor | None:
        """An image-to-video model's extra input channels, as ComfyUI's WAN21.concat_cond: four channels of
        1 - concat_mask (1 where the image fixes a frame) then the image latent in model space (the mask after
        the first `mask_index` image channels instead: Wan 2.2 Fun Control's concat_mask_index); zeros for a
        cond without an image. None for a model whose input is the latent alone. A model that takes exactly
        the image's channels (Wan 2.1 Fun Control: control and start latents) gets them without a mask."""
        extra = self.module.config.in_channels - x.shape[1]
        if extra <= 0:
            return None
        if image is None:
            return torch.zeros(x.shape[0], extra, *x.shape[2:], dtype=x.dtype, device=x.device)
        image = image.to(x.device, x.dtype)
        if image.shape[-2:] != x.shape[-2:]:
            image = _upscale_frames(image, x.shape[-2:])
        channels = self.latent_format.channels
        image = torch.cat(
            [self.latent_format.process_in(image[:, i : i + channels]) for i in range(0, image.shape[1], channels)],
            dim=1,
        )
        image = _to_batch(image, x.shape[0])
        if extra != image.shape[1] + 4:
            if extra == image.shape[1]:
                return image
            raise ValueError(
                f"this Wan model takes {extra} conditioning channels; the image latent has {image.shape[1]}"
            )
        if mask is None:
            mask = torch.zeros(x.shape[0], 4, *x.shape[2:], dtype=x.dtype, device=x.device)
        else:
            mask = mask.to(x.device, x.dtype)
            if mask.shape[1] != 4:
                mask = mask.mean(dim=1, keepdim=True)
            mask = _upscale_frames(1.0 - mask, x.shape[-2:])
            if mask.shape[2] < x.shape[2]:
                mask = torch.nn.functional.pad(mask, (0, 0, 0, 0, 0, x.shape[2] - mask.shape[2]))
            mask = _to_batch(mask.expand(-1, 4, -1, -1, -1) if mask.shape[1] == 1 else mask, x.shape[0])
        return torch.cat([image[:, :mask_index], mask, image[:, mask_index:]], dim=1)

    def inpaint_latent(
        self, ms: Any, sigma: torch.Tensor, noise: torch.Tensor, latent_image: torch.Tensor
    ) -> torch.Tensor:
        """Wan 2.2 5B keeps its start frames as they are (ComfyUI's WAN22.scale_latent_inpaint): no noise."""
        return latent_image if self.arch == "wan22_5b" else super().inpaint_latent(ms, sigma, noise, latent_image)

    @property
    def is_vace(self) -> bool:
        return isinstance(self.module, WanVACETransformer3DModel)

    def vace_context(
        self, frames: list[torch.Tensor] | None, masks: list[torch.Tensor] | None, x: torch.Tensor
    ) -> torch.Tensor | None:
        """A VACE model's control input [B, contexts, 96, T, H, W] from WanVaceToVideo's latents and masks (or
        its default without them); None for a model without VACE blocks (ComfyUI's other Wan models ignore
        these conditions)."""
        return wan_vace.build_context(self.latent_format, frames, masks, x) if self.is_vace else None

    def step_timesteps(self, t: torch.Tensor, denoise_mask: torch.Tensor | None) -> torch.Tensor:
        """Wan 2.2 5B: each latent frame's timestep is t times its mean noise mask (0 on a kept start frame)."""
        if self.arch != "wan22_5b" or denoise_mask is None or denoise_mask.dim() != 5:
            return t
        return denoise_mask.mean(dim=(1, 3, 4)) * t.reshape(-1, 1).to(denoise_mask)

    def apply(self, x: torch.Tensor, timestep: torch.Tensor, cond: dict[str, Any]) -> torch.Tensor:
        if cond.get("control"):
            raise NotImplementedError("ControlNets are not supported for Wan models")
        module: WanTransformer3DModel = self.module
        if x.dim() != 5:
            raise ValueError(f"Wan models take [B,C,T,H,W] video latents, got {tuple(x.shape)}")
        if cond.get("context_latents"):  # BerniniConditioning: more tokens after the video's (nodes.models.wan_bernini)
            from nodes.models import wan_bernini  # it builds on this module

            return wan_bernini.apply(self, x, timestep, cond)
        b, _, frames, h, w = x.shape
        device, dtype = x.device, self.dtype
        inp = x if cond.get("concat") is None else torch.cat([x, cond["concat"].to(x)], dim=1)
        if inp.shape[1] != module.config.in_channels:
            raise ValueError(
                f"this Wan model takes {module.config.in_channels} input channels (latent and "
                f"image conditioning), got {inp.shape[1]}; an image-to-video model needs "
                "WanImageToVideo's conditioning"
            )
        inp = pad_to_patch(inp)
        subjects = cond.get("time_dim_concat")
        if subjects is not None:  # Wan Phantom: more frames after the video's (cut off the output below)
            if subjects.shape[1] != inp.shape[1]:
                raise ValueError(
                    f"time_dim_concat: WanPhantomSubjectToVideo's {subjects.shape[1]}-channel subject frames need a "
                    f"text-to-video Wan model; this one takes {inp.shape[1]} input channels"
                )
            inp = torch.cat([inp, pad_to_patch(subjects.to(inp))], dim=2)
        t = torch.as_tensor(timestep, dtype=torch.float32, device=device)
        t = t.reshape(-1).expand(b) if t.numel() in (1, b) and t.dim() < 2 else t
        if t.dim() == 2:  # one timestep per latent frame (Wan 2.2 5B): one per token, as the model takes them
            tokens = (inp.shape[-2] // PATCH[1]) * (inp.shape[-1] // PATCH[2])
            t = t.repeat_interleave(tokens, dim=1)
        context = cond["context"].to(device, dtype)
        image = cond.get("clip_fea")
        if module.condition_embedder.image_embedder is None:
            image = None  # as ComfyUI: CLIP vision features are read only by a model with an image embedder
        elif image is None and context.shape[1] == TEXT_TOKENS:
            # an image-to-video 2.1 model without CLIP vision features: ComfyUI's image attention then reads the
            # whole text context (its context_img_len is None); diffusers' processor takes what precedes the last
            # 512 states as the image's, so the text goes in twice
            context = torch.cat([context, context], dim=1)
        camera = cond.get("camera_conditions")
        adapter = getattr(module, "control_adapter", None)
        if camera is not None and adapter is None:
            raise ValueError(
                "camera_conditions: this Wan model has no camera control adapter (a Wan Fun Camera model reads them)"
            )
        features = None if camera is None else adapter(camera.to(device, dtype))
        vace, chain = self._vace_kwargs(cond, x, device, dtype)
        reference = self._reference(cond, device, dtype)
        token = _camera_features.set(features)
        ref_token = _reference.set(reference)
        try:
            out = wan_vace.run_with(
                chain,
                lambda: module(
                    hidden_states=inp.to(dtype),
                    timestep=t,
                    encoder_hidden_states=context,
                    encoder_hidden_states_image=None if image is None else image.to(device, dtype),
                    return_dict=False,
                    **vace,
                )[0],
            )
        finally:
            _camera_features.reset(token)
            _reference.reset(ref_token)
        return out[:, :, :frames, :h, :w].float()

    def _reference(self, cond: dict[str, Any], device: torch.device, dtype: torch.dtype) -> dict | None:
        """Wan 2.2 Fun Control's reference: the last reference latent's first frame, as ComfyUI's WAN21
        extra_conds; ignored by a model without ref_conv (ComfyUI's other Wan models do not read it)."""
        refs = cond.get("ref_latents")
        if not refs or getattr(self.module, "ref_conv", None) is None:
            return None
        latent = refs[-1]
        if latent.dim() == 5:
            latent = latent[:, :, 0]
        return {"latent": latent.to(device, dtype), "tokens": 0}

    def _vace_kwargs(self, cond: dict[str, Any], x: torch.Tensor, device: torch.device, dtype: torch.dtype):
        """The VACE transformer's first control input and strengths, and the chain of the others (nothing for
        other Wan models)."""
        if not self.is_vace:
            return {}, None
        context = cond.get("vace_context")
        if context is None:
            context = self.vace_context(None, None, x)
        strengths = cond.get("vace_strength") or [1.0] * context.shape[1]
        return wan_vace.forward_kwargs(self.module, context.to(device, dtype), strengths, pad_to_patch)


def lora_targets(sd: Mapping[str, torch.Tensor]) -> LoraTargets:
    """The names a Wan LoRA may give a layer, as ComfyUI accepts them: Wan's own under `diffusion_model.`
    (lightx2v's and most trainers'), kohya's `lora_unet_` with underscores, and diffusers' under `transformer.`."""
    ours = convert_wan_transformer_to_diffusers({k: k for k in sd})  # diffusers name -> Wan name
    targets = LoraTargets(("diffusion_model.", "lora_unet_", "transformer."), {})
    for dif, wan in ours.items():
        if dif.endswith(".weight"):
            d, w = dif[: -len(".weight")], wan[: -len(".weight")]
            targets.add(dif, "diffusion_model." + w, "lora_unet_" + w.replace(".", "_"), "transformer." + d)
    return targets


def _with_rope(module: torch.nn.Module) -> torch.nn.Module:
    """The rotary tables are computed, not stored: built on the CPU while the rest waits on the meta device."""
    with torch.device("cpu"):
        module.rope = WanRotaryPosEmbed(HEAD_DIM, PATCH, module.rope.max_seq_len)
    return module


def to_wan_layout(state_dict: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    prefix = find_prefix(state_dict.keys(), WAN_MARKER)
    if prefix is None:
        raise ValueError("not a Wan state dict (no head.modulation)")
    # Wan's scaled fp8 files (wan2.2_*_fp8_scaled) as the newest ComfyUI computes them: biases kept as stored
    return strip_prefix(dequantize_scaled_fp8(state_dict, round_bias=False), prefix)


def flf_image_embedding(embedder: torch.nn.Module, states: torch.Tensor) -> torch.Tensor:
    """A first-last-frame model's CLIP image states as ComfyUI's MLPProj reads them: cut to emb_pos's length (the
    two frames' tokens side by side, or one frame's) plus as much of emb_pos, then the projection. diffusers' own
    forward folds pairs of batch rows into one instead, which ComfyUI's WanFirstLastFrameToVideo never feeds."""
    pos = embedder.pos_embed
    states = states[:, : pos.shape[1]] + pos[:, : states.shape[1]].to(states)
    return embedder.norm2(embedder.ff(embedder.norm1(states)))


def load_diffusion_model(ref: ModelRef, state_dict: Mapping[str, torch.Tensor]) -> WanDiffusionModel:
    """A Wan DiffusionModel from a bare or `model.diffusion_model.`-prefixed file; float32 compute, as ComfyUI
    runs Wan on a CPU."""
    path = ref.sources[0] if ref.sources else None
    if comfy_quant.is_quantized(state_dict):  # ComfyUI's int8 ConvRot files (wan2.1_14B_SCAIL_2_int8_convrot)
        state_dict = comfy_quant.dequantize(state_dict, path, torch.float32)
    try:
        sd = to_wan_layout(state_dict)
        config = infer_config(sd)
    except (KeyError, ValueError) as e:
        raise ModelLoadError(path, f"not a usable Wan diffusion model: {e}") from None
    if ANIMATE in sd:  # ComfyUI's WAN22_Animate: pose embedding, face encoder and adapter beside the blocks
        raise ModelLoadError(path, "Wan 2.2 Animate models (pose_patch_embedding, face_adapter) are not supported yet")
    arch = wan_arch(sd)
    # Wan 2.2 Fun Control's reference-image patch embedding (ComfyUI's in_dim_ref_conv): a 2x2 patch conv
    ref_conv = {k[len(REF_CONV) :]: sd.pop(k) for k in [k for k in sd if k.startswith(REF_CONV)]}
    camera = {k[len(CAMERA) :]: sd.pop(k) for k in [k for k in sd if k.startswith(CAMERA)]}
    emb_pos = sd.pop("img_emb.emb_pos", None)  # first-last-frame models; diffusers' converter has no name for it
    from nodes.models import wan_scail  # it builds on this module

    scail = wan_scail.variant(sd)  # SCAIL / SCAIL-2: pose (and identity mask) patch embeddings
    scail_embeddings = wan_scail.pop_embeddings(sd)
    converted = convert_wan_transformer_to_diffusers(dict(sd))
    if emb_pos is not None:
        converted["condition_embedder.image_embedder.pos_embed"] = emb_pos
    if ref.patches:
        converted, _ = merge_loras(ref.patches, lora_targets(sd), converted)
    from nodes.models import wan_animate2  # it builds on this module

    cls = WanVACETransformer3DModel if "vace_layers" in config else WanTransformer3DModel
    module = build_module(lambda: _with_rope(cls(**config)), converted, path, "Wan transformer")
    module.condition_embedder.timesteps_proj = ComfyTimesteps(FREQ_DIM)
    embedder = module.condition_embedder.image_embedder
    if embedder is not None and embedder.pos_embed is not None:  # Wan 2.1 first-last-frame: ComfyUI's MLPProj
        embedder.forward = functools.partial(flf_image_embedding, embedder)
    if cls is WanVACETransformer3DModel:
        wan_vace.install_hooks(module)
    if camera:  # Wan Fun Camera (ComfyUI's camera / camera_2.2 model types)
        size = (
            camera["conv.weight"].shape[1] // 64,
            config["num_attention_heads"] * HEAD_DIM,
            count_blocks(camera, "residual_blocks"),
        )
        module.control_adapter = build_module(lambda: CameraAdapter(*size), camera, path, "Wan camera adapter")
        module.patch_embedding.register_forward_hook(_add_camera)
    if ref_conv:  # Wan 2.2 Fun Control: Wan22FunControlToVideo's ref_image as tokens before the video's
        weight = ref_conv["weight"]
        module.ref_conv = build_module(
            lambda: torch.nn.Conv2d(weight.shape[1], weight.shape[0], PATCH[1:], stride=PATCH[1:]),
            ref_conv,
            path,
            "Wan ref_conv",
        )
        module.rope = ReferenceRope(HEAD_DIM, PATCH, module.rope.max_seq_len)
        module.patch_embedding.register_forward_hook(functools.partial(_add_reference, module.ref_conv))
        module.proj_out.register_forward_hook(_drop_reference)
    model_cls, extra = WanDiffusionModel, {}
    if scail is not None:
        for name, weights in scail_embeddings.items():
            setattr(module, name, build_module(lambda w=weights: wan_scail.embedding_for(w), weights, path, name))
        model_cls, extra = wan_scail.WanScailDiffusionModel, {"scail2": scail == "scail2"}
    if path is not None and os.path.isfile(path) and wan_animate2.is_animate2(shapes_of(path)[1]):
        if config["in_channels"] != 36 or "image_dim" not in config:
            raise ModelLoadError(path, "metadata says Wan Animate 2, but the weights are not Wan 2.1 image-to-video's")
        model_cls = wan_animate2.WanAnimate2DiffusionModel
    return model_cls(
        arch=arch,
        module=module,
        latent_format=latent_format(arch),
        sampling=dict(sampling_config(arch)),
        config=config,
        **extra,
    )


# The loader (nodes.models.loader) finds every Wan entry point on this module.
from nodes.models.wan_text import load_text_encoder

__all__ = ["infer_config", "load_diffusion_model", "load_text_encoder", "load_vae", "lora_targets", "wan_arch"]


def load_vae(ref: ModelRef, state_dict: Mapping[str, torch.Tensor]):
    """The Wan 2.2 VAE (48 channels) or the Wan 2.1 VAE, by the file's layout."""
    from nodes.models import qwen_image_vae, wan22_vae
    from nodes.models.detect import WAN22_VAE_MARKER

    is_22 = any(k.endswith(WAN22_VAE_MARKER) for k in state_dict)
    return (wan22_vae if is_22 else qwen_image_vae).load_vae(ref, state_dict)
