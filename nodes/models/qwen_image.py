"""Qwen-Image diffusion models (MMDiT, 60 dual-stream blocks) from the single files ComfyUI users download
(diffusion_models/qwen_image*.safetensors: diffusers' key names, bare or under `model.diffusion_model.`).

The network is diffusers' QwenImageTransformer2DModel with a config read from the tensor shapes (head width
from the q-norm, heads from the width, text width from txt_in). `apply` takes ComfyUI's view of the model: a
[B,16,H,W] (or [B,16,1,H,W]) latent in model space, sigma as the timestep (multiplier 1), the text states
as context; it packs 2x2 patches as ComfyUI's model does and gives the blocks ComfyUI's rotary positions
(image centred on the origin, text after it), which diffusers' own positions equal only for even sizes;
ReferenceLatent's latents join the image tokens as ComfyUI places them. With the `index_timestep_zero` method
(Qwen-Image-Edit 2511: its file carries an empty `__index_timestep_zero__` marker, which makes it the default, as
in today's ComfyUI) the reference tokens are modulated as at timestep 0. LoRAs merge under the names ComfyUI
accepts. Qwen-Image samples as ComfyUI's ModelSamplingFlux with shift 1.15 unless a ModelSampling node says
otherwise.

Qwen-Image-Layered (its file carries `time_text_embed.addition_t_embedding.weight`, which ComfyUI 0.10.0's
model_detection reads as use_additional_t_cond with the `negative_index` reference method) denoises several
frames at once, [B,16,T,H,W] from EmptyQwenImageLayeredLatentImage: the composite then one frame per layer.
Each frame's tokens follow the previous one's at frame index 0..T-1; the input image's reference latent sits
at index -1; the timestep embedding gains the learned row 0 of addition_t_embedding (ComfyUI passes no
other).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from diffusers import QwenImageTransformer2DModel

from cluster.refs import ModelRef
from nodes.arch import sampling_config
from nodes.models import comfy_quant
from nodes.models.components import WAN21_LATENT, DiffusionModel
from nodes.models.detect import QWEN_IMAGE_LAYERED_MARKER, QWEN_IMAGE_MARKER
from nodes.models.errors import ModelLoadError
from nodes.models.flux import pack, patched, reference_placements, unpack
from nodes.models.flux_keys import count_blocks, find_prefix, strip_prefix
from nodes.models.fp8 import dequantize_scaled_fp8
from nodes.models.lora import LoraTargets, merge_loras
from nodes.models.safetensors_io import build_module

PATCH = 2
TIMESTEP_ZERO = "index_timestep_zero"
TIMESTEP_ZERO_MARKER = "__index_timestep_zero__"  # Qwen-Image-Edit 2511's files (today's ComfyUI saves it)
NEGATIVE_INDEX = "negative_index"  # Qwen-Image-Layered's default: references at frame index -1, -2, ...
ROPE_AXES = (16, 56, 56)  # ComfyUI's (and Qwen's) split of the 128-wide heads: frame, row, column
ROPE_THETA = 10000


def to_diffusers_layout(state_dict: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """ComfyUI's Qwen-Image files use diffusers' names; only a `model.diffusion_model.` prefix may differ.
    Scaled fp8 files are dequantized (plain fp8 ones are cast exactly when loaded)."""
    prefix = find_prefix(state_dict.keys(), QWEN_IMAGE_MARKER)
    if prefix is None:
        raise ValueError("not a Qwen-Image state dict (no txt_norm)")
    sd = strip_prefix(dequantize_scaled_fp8(state_dict), prefix)
    sd.pop(TIMESTEP_ZERO_MARKER, None)  # a marker, no weight (default_ref_method reads it)
    return sd


def default_ref_method(state_dict: Mapping[str, torch.Tensor]) -> str:
    if any(k.endswith(QWEN_IMAGE_LAYERED_MARKER) for k in state_dict):
        return NEGATIVE_INDEX
    return TIMESTEP_ZERO if any(k.endswith(TIMESTEP_ZERO_MARKER) for k in state_dict) else "index"


def infer_config(sd: Mapping[str, torch.Tensor]) -> dict[str, Any]:
    """QwenImageTransformer2DModel's config from a diffusers-layout state dict's shapes."""
    inner, in_channels = sd["img_in.weight"].shape
    head_dim = int(sd["transformer_blocks.0.attn.norm_q.weight"].shape[0])
    if inner % head_dim:
        raise ValueError(f"width {inner} is not a multiple of the head width {head_dim}")
    if head_dim != sum(ROPE_AXES):
        raise ValueError(f"head width {head_dim}: Qwen-Image's rotary positions need 128-wide heads")
    out = sd["proj_out.weight"].shape[0]
    if out % (PATCH * PATCH):
        raise ValueError(f"proj_out gives {out} features, not a whole number of 2x2 patches")
    return {
        "patch_size": PATCH,
        "in_channels": int(in_channels),
        "out_channels": int(out // (PATCH * PATCH)),
        "num_layers": count_blocks(sd, "transformer_blocks"),
        "attention_head_dim": head_dim,
        "num_attention_heads": int(inner // head_dim),
        "joint_attention_dim": int(sd["txt_in.weight"].shape[1]),
        "axes_dims_rope": ROPE_AXES,
        "use_additional_t_cond": QWEN_IMAGE_LAYERED_MARKER in sd,
    }


def _axis_freqs(pos: torch.Tensor, dim: int) -> torch.Tensor:
    # ComfyUI's rope(): frequencies in float64, angles of float32 positions, rounded once to float32.
    omega = 1.0 / ROPE_THETA ** torch.linspace(0, (dim - 2) / dim, steps=dim // 2, dtype=torch.float64)
    angle = pos.to(torch.float32).to(torch.float64)[:, None] * omega[None, :]
    return torch.polar(torch.ones_like(angle), angle).to(torch.complex64)


Segment = tuple[int, int, int, int, int]  # (frame index, rows, columns, row offset, column offset) in tokens


class ComfyRotaryPositions(torch.nn.Module):
    """Stands in for diffusers' QwenEmbedRope with ComfyUI's positions. The model passes one list of segments
    per batch entry as `video_fhw`: the image first, then any reference latents. A segment's token (row r,
    column c) of an h x w grid sits at (index, r + row offset - h//2, c + column offset - w//2); text token i
    at s + i on all three axes, s = max(h//2, w//2) of the image. Returns diffusers' (image, text) complex
    frequencies."""

    def __init__(self, axes: Sequence[int] = ROPE_AXES) -> None:
        super().__init__()
        self.axes = tuple(axes)

    def positions_freqs(self, pos: torch.Tensor) -> torch.Tensor:
        return torch.cat([_axis_freqs(pos[:, i], d) for i, d in enumerate(self.axes)], dim=-1)

    def forward(
        self, video_fhw: list[list[Segment]], max_txt_seq_len: int | torch.Tensor, device: torch.device | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        segments = video_fhw[0]
        image = torch.cat([_segment_positions(*seg) for seg in segments])
        _, h, w, _, _ = segments[0]
        start = max(h // 2, w // 2)
        txt = (start + torch.arange(int(max_txt_seq_len), dtype=torch.float32))[:, None].expand(-1, 3)
        return self.positions_freqs(image).to(device), self.positions_freqs(txt).to(device)


def _segment_positions(index: int, h: int, w: int, h_off: int, w_off: int) -> torch.Tensor:
    rows = torch.arange(h, dtype=torch.float32) + h_off - h // 2
    cols = torch.arange(w, dtype=torch.float32) + w_off - w // 2
    grid = torch.stack(
        [torch.full((h, w), float(index)), rows[:, None].expand(h, w), cols[None, :].expand(h, w)], dim=-1
    )
    return grid.reshape(-1, 3)


def _one_frame(x: torch.Tensor, what: str) -> torch.Tensor:
    if x.dim() != 5:
        return x
    if x.shape[2] != 1:
        raise ValueError(f"Qwen-Image takes single images; this {what} has {x.shape[2]} frames")
    return x[:, :, 0]


def reference_segments(
    refs: Sequence[torch.Tensor], method: str | None, dtype: torch.dtype
) -> tuple[list[torch.Tensor], list[Segment]]:
    """ReferenceLatent's latents (model space) as extra tokens and their position segments, as ComfyUI's
    Qwen-Image places them: method "index" (the default) gives the n-th reference frame index n; any other
    gives all frame index 1 ("negative_index": -1, -2, ...), each beside or below the ones before it, whichever keeps the canvas squarer
    (offsets in latent cells, rounded half up to tokens)."""
    tokens, segments = [], []
    refs = [_one_frame(ref, "reference latent") for ref in refs]
    placement = "index" if (method or "index") in ("index", TIMESTEP_ZERO, NEGATIVE_INDEX) else "offset"
    for ref, (index, h_off, w_off) in zip(refs, reference_placements(refs, placement)):
        index = -index if method == NEGATIVE_INDEX else index
        padded = patched(ref.to(dtype))
        tokens.append(pack(padded))
        segments.append(
            (
                index,
                padded.shape[-2] // PATCH,
                padded.shape[-1] // PATCH,
                (h_off + PATCH // 2) // PATCH,
                (w_off + PATCH // 2) // PATCH,
            )
        )
    return tokens, segments


@dataclass
class QwenImageDiffusionModel(DiffusionModel):
    default_ref_method: str = "index"

    def apply(self, x: torch.Tensor, timestep: torch.Tensor, cond: dict[str, Any]) -> torch.Tensor:
        control = cond.get("control")
        if control is not None and not hasattr(control, "residuals"):
            raise ValueError("this ControlNet is not a Qwen-Image ControlNet")
        module: QwenImageTransformer2DModel = self.module
        frames = x.dim() == 5  # ComfyUI's Qwen-Image latents: [B,16,T,H,W], one frame except Layered's
        layered = module.config.use_additional_t_cond
        if frames and not layered:
            x = _one_frame(x, "latent")
        device, dtype = x.device, self.dtype
        video = x if x.dim() == 5 else x[:, :, None]
        b, _, n_frames, h, w = video.shape
        frame_tokens = [pack(patched(video[:, :, f]).to(dtype)) for f in range(n_frames)]
        h_len, w_len = (h + PATCH - 1) // PATCH, (w + PATCH - 1) // PATCH
        # frame f at index f: ComfyUI numbers a multi-frame latent's frames 0..T-1 (a single frame is 0)
        tokens, segments = frame_tokens, [(f, h_len, w_len, 0, 0) for f in range(n_frames)]
        n_image = n_frames * h_len * w_len
        method = cond.get("ref_latents_method") or self.default_ref_method
        if cond.get("ref_latents"):  # ReferenceLatent: references join the image tokens; only the image's are read
            ref_tokens, ref_segments = reference_segments(cond["ref_latents"], method, dtype)
            tokens += [t.to(device) for t in ref_tokens]
            segments += ref_segments
        context = cond["context"].to(device, dtype)
        t = torch.as_tensor(timestep, dtype=torch.float32, device=device).reshape(-1)
        t = t.expand(b) if t.numel() == 1 else t  # sigma: multiplier 1, as ComfyUI's
        hidden = torch.cat(tokens, dim=1)
        if method == TIMESTEP_ZERO and len(segments) > n_frames:
            if control is not None:
                raise ValueError("ControlNets on a Qwen-Image-Edit 2511 model with reference images are not supported")
            out = timestep_zero_forward(module, hidden, context, t, [segments] * b, n_image)
        else:
            out = module(
                hidden_states=hidden,
                encoder_hidden_states=context,
                timestep=t,
                img_shapes=[segments] * b,
                # ControlNet residuals, one per block: diffusers adds block i's after block i, as ComfyUI does
                controlnet_block_samples=None
                if control is None
                else control.residuals(len(module.transformer_blocks), hidden.shape[1], dtype),
                # ComfyUI passes no additional_t_cond: row 0 of the learned embedding
                additional_t_cond=torch.zeros(b, dtype=torch.long, device=device) if layered else None,
                return_dict=False,
            )[0]
        per_frame = out[:, :n_image].reshape(b * n_frames, h_len * w_len, -1)
        out = unpack(per_frame, h_len, w_len)[:, :, :h, :w].float().reshape(b, n_frames, -1, h, w).transpose(1, 2)
        return out if frames else out[:, :, 0]


def timestep_zero_forward(
    module: QwenImageTransformer2DModel,
    hidden: torch.Tensor,
    context: torch.Tensor,
    t: torch.Tensor,
    img_shapes: list[list[Segment]],
    n_image: int,
) -> torch.Tensor:
    """The transformer's forward with the reference tokens (those past the first `n_image`) modulated by the
    embedding of timestep 0 and the image's and the text's by the step's, as today's ComfyUI computes the
    `index_timestep_zero` method. diffusers' own switch (zero_cond_t) is a fixed module setting and finds the
    image's token count from its own shape format, so the same layers are driven here per call."""
    b = hidden.shape[0]
    x = module.img_in(hidden)
    t = t.to(x.dtype)
    temb = module.time_text_embed(torch.cat([t, t * 0]), x)  # rows: the step's, then timestep 0's
    txt = module.txt_in(module.txt_norm(context))
    rotary = module.pos_embed(img_shapes, max_txt_seq_len=txt.shape[1], device=x.device)
    index = torch.zeros(b, x.shape[1], dtype=torch.int, device=x.device)
    index[:, n_image:] = 1
    for block in module.transformer_blocks:
        img_mod1, img_mod2 = block.img_mod(temb).chunk(2, dim=-1)
        txt_mod1, txt_mod2 = block.txt_mod(temb[:b]).chunk(2, dim=-1)
        img_in, img_gate1 = block._modulate(block.img_norm1(x), img_mod1, index)
        txt_in, txt_gate1 = block._modulate(block.txt_norm1(txt), txt_mod1)
        img_attn, txt_attn = block.attn(
            hidden_states=img_in, encoder_hidden_states=txt_in, encoder_hidden_states_mask=None, image_rotary_emb=rotary
        )
        x = x + img_gate1 * img_attn
        txt = txt + txt_gate1 * txt_attn
        img_in2, img_gate2 = block._modulate(block.img_norm2(x), img_mod2, index)
        x = x + img_gate2 * block.img_mlp(img_in2)
        txt_in2, txt_gate2 = block._modulate(block.txt_norm2(txt), txt_mod2)
        txt = txt + txt_gate2 * block.txt_mlp(txt_in2)
    return module.proj_out(module.norm_out(x, temb[:b]))


def lora_targets(sd: Mapping[str, torch.Tensor]) -> LoraTargets:
    """The names ComfyUI 0.3.64 accepts for a Qwen-Image LoRA's layers: diffusers' own (bare, or under
    `diffusion_model.` / `transformer.`), kohya's `lora_unet_` and SimpleTuner's `lycoris_` with underscores."""
    tops = tuple(sorted({k.split(".")[0] + "." for k in sd}))
    targets = LoraTargets(("lora_unet_", "diffusion_model.", "transformer.", "lycoris_") + tops, {})
    for key in sd:
        if key.endswith(".weight"):
            name = key[: -len(".weight")]
            flat = name.replace(".", "_")
            targets.add(
                key, name, "diffusion_model." + name, "transformer." + name, "lora_unet_" + flat, "lycoris_" + flat
            )
    return targets


# UNETLoader's weight_dtype choices that store the weights in 8 bits (the Qwen-Image-Layered Control template asks
# fp8_e4m3fn); "_fast" differs only in the matmul kernels ComfyUI picks on GPUs.
STORED_DTYPES = {
    "fp8_e4m3fn": torch.float8_e4m3fn,
    "fp8_e4m3fn_fast": torch.float8_e4m3fn,
    "fp8_e5m2": torch.float8_e5m2,
}


def stored_as(sd: dict[str, torch.Tensor], weight_dtype: str) -> dict[str, torch.Tensor]:
    """The weights as ComfyUI holds them for UNETLoader's `weight_dtype`: every tensor of its model's layers in
    that 8-bit type (rounded to nearest) and cast back up when computing, in float32 on a CPU."""
    dtype = STORED_DTYPES.get(weight_dtype)
    if dtype is None:
        return sd
    return {k: v.to(dtype).to(v.dtype) if v.is_floating_point() else v for k, v in sd.items()}


def load_diffusion_model(ref: ModelRef, state_dict: Mapping[str, torch.Tensor]) -> QwenImageDiffusionModel:
    """A Qwen-Image DiffusionModel from a bare or `model.diffusion_model.`-prefixed transformer file, LoRAs
    merged. It computes in float32 whatever the file's dtype, as ComfyUI 0.3.64 runs Qwen-Image on a CPU."""
    path = ref.sources[0] if ref.sources else None
    if comfy_quant.is_quantized(state_dict):  # ComfyUI's int8 files (Marigold V2's qwen_image_edit_2509_int8_convrot)
        state_dict = comfy_quant.dequantize(state_dict, path, torch.float32)
    try:
        method = default_ref_method(state_dict)
        sd = to_diffusers_layout(state_dict)
        config = infer_config(sd)
    except (KeyError, ValueError) as e:
        raise ModelLoadError(path, f"not a usable Qwen-Image transformer: {e}") from None
    sd = stored_as(sd, ref.option("weight_dtype", "default"))
    if ref.patches:
        sd, _ = merge_loras(ref.patches, lora_targets(sd), sd)
    module = build_module(lambda: QwenImageTransformer2DModel(**config), sd, path, "Qwen-Image transformer")
    module.pos_embed = ComfyRotaryPositions(config["axes_dims_rope"])
    return QwenImageDiffusionModel(
        arch="qwen_image",
        module=module,
        latent_format=WAN21_LATENT,
        sampling=dict(sampling_config("qwen_image")),
        config=config,
        default_ref_method=method,
    )


# The loader (nodes.models.loader) finds every Qwen-Image entry point on this module.
from nodes.models.qwen_image_controlnet import load_controlnet  # noqa: E402
from nodes.models.qwen_image_text import load_text_encoder  # noqa: E402
from nodes.models.qwen_image_vae import load_vae  # noqa: E402

__all__ = ["infer_config", "load_controlnet", "load_diffusion_model", "load_text_encoder", "load_vae", "lora_targets"]
