"""LTX-2's audio-video transformer from the checkpoint ComfyUI's users download (ltx-2-19b-*.safetensors: the
original Lightricks key names under `model.diffusion_model.`, its sizes in the metadata `config` JSON).

ComfyUI (0.10.0's model_detection) tells it by `adaln_single.emb.timestep_embedder.linear_1.bias` beside
`audio_adaln_single.linear.weight`, counts the blocks, reads the text width from `attn2.to_k` and takes everything
else from the metadata's "transformer" section (LTXAVModel's argument names), its own defaults where absent. The
network is diffusers' LTX2VideoTransformer3DModel, converted with diffusers' own LTX-2 key mapping; ComfyUI's
positions are passed to it as coordinates (pixel positions of each latent patch, causally shifted on the frame
axis and divided by the frame rate; audio latent times in seconds), which is what its rotary tables are computed
from. `apply` takes ComfyUI's view of a step: the video and audio latents packed side by side in one [B,1,N]
tensor (comfy.utils.pack_latents) with `latent_shapes` in the cond, the timestep sigma, the text context (video
and audio halves joined on the last axis, as LTXAVTextEncoderLoader's encoder gives them) and the frame rate; a
noise mask gives per-token timesteps (0 where a frame is kept, ComfyUI's LTXAV.process_timestep: step_timesteps).

Settings diffusers cannot express are refused by name rather than computed differently: positions not at the
middle of each patch, non-causal frame positions, video and audio head counts that differ."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from diffusers import LTX2VideoTransformer3DModel
from diffusers.loaders.single_file_utils import convert_ltx2_transformer_to_diffusers
from safetensors import safe_open

from cluster.refs import ModelRef
from nodes.arch import latent_format, sampling_config
from nodes.models.components import DiffusionModel
from nodes.models.errors import ModelLoadError
from nodes.models.flux_keys import count_blocks, find_prefix, strip_prefix
from nodes.models.lora import LoraTargets, merge_loras
from nodes.models.safetensors_io import build_module

MARKER = "audio_adaln_single.linear.weight"
TIME_MARKER = "adaln_single.emb.timestep_embedder.linear_1.bias"
# What the text encoder side of the checkpoint holds (ComfyUI's LTXAVTEModel reads them from it), not the network.
TEXT_SIDE = ("video_embeddings_connector.", "audio_embeddings_connector.")
VAE_SCALE = (8, 32, 32)  # pixel frames, height, width per latent patch
AUDIO_CHANNELS, AUDIO_BINS = 8, 16  # ComfyUI's LTXAVModel: the audio latent's channels x frequency bins
# LTXAVModel's defaults for what the metadata does not say.
DEFAULTS: dict[str, Any] = {
    "num_attention_heads": 32,
    "audio_num_attention_heads": 32,
    "audio_attention_head_dim": 64,
    "audio_cross_attention_dim": 2048,
    "caption_channels": 3840,
    "positional_embedding_theta": 10000.0,
    "positional_embedding_max_pos": [20, 2048, 2048],
    "audio_positional_embedding_max_pos": [20],
    "rope_type": "interleaved",
    "frequencies_precision": "float32",
    "causal_temporal_positioning": False,
    "use_middle_indices_grid": False,
    "timestep_scale_multiplier": 1000.0,
    "av_ca_timestep_scale_multiplier": 1.0,
}


def is_ltx2(keys: Any, prefix: str = "") -> bool:
    return prefix + MARKER in keys and prefix + TIME_MARKER in keys


def file_metadata(path: str | None) -> dict[str, str]:
    if path is None or not str(path).endswith(".safetensors"):
        return {}
    with safe_open(str(path), "pt") as f:
        return f.metadata() or {}


def transformer_config(sd: Mapping[str, torch.Tensor], metadata: Mapping[str, str]) -> dict[str, Any]:
    """ComfyUI's dit_config for the file: counted and measured from the tensors, then the metadata's."""
    config = dict(DEFAULTS)
    config["num_layers"] = count_blocks(sd, "transformer_blocks")
    to_k = sd["transformer_blocks.0.attn2.to_k.weight"]
    config["attention_head_dim"] = to_k.shape[0] // 32
    config["cross_attention_dim"] = to_k.shape[1]
    if "config" in metadata:
        try:
            config.update(json.loads(metadata["config"]).get("transformer", {}))
        except json.JSONDecodeError as e:
            raise ValueError(f"its metadata 'config' is not JSON ({e})") from None
    return config


def diffusers_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """LTX2VideoTransformer3DModel's arguments for ComfyUI's LTXAVModel settings."""
    for key, wanted in (("use_middle_indices_grid", True), ("causal_temporal_positioning", True)):
        if bool(config[key]) is not wanted:
            raise ValueError(f"transformer setting {key}={config[key]!r} is not supported (only {wanted})")
    if config["num_attention_heads"] != config["audio_num_attention_heads"]:
        raise ValueError("video and audio attention head counts differ; only equal counts are supported")
    max_pos = config["positional_embedding_max_pos"]
    return {
        "in_channels": 128,
        "out_channels": 128,
        "audio_in_channels": AUDIO_CHANNELS * AUDIO_BINS,
        "audio_out_channels": AUDIO_CHANNELS * AUDIO_BINS,
        "num_attention_heads": config["num_attention_heads"],
        "attention_head_dim": config["attention_head_dim"],
        "cross_attention_dim": config["cross_attention_dim"],
        "audio_num_attention_heads": config["audio_num_attention_heads"],
        "audio_attention_head_dim": config["audio_attention_head_dim"],
        "audio_cross_attention_dim": config["audio_cross_attention_dim"],
        "caption_channels": config["caption_channels"],
        "num_layers": config["num_layers"],
        "rope_theta": config["positional_embedding_theta"],
        "rope_type": str(config["rope_type"]),
        "rope_double_precision": config["frequencies_precision"] == "float64",
        "pos_embed_max_pos": max_pos[0],
        "base_height": max_pos[1],
        "base_width": max_pos[2],
        "audio_pos_embed_max_pos": config["audio_positional_embedding_max_pos"][0],
        "timestep_scale_multiplier": config["timestep_scale_multiplier"],
        "cross_attn_timestep_scale_multiplier": config["av_ca_timestep_scale_multiplier"],
    }


def unpack(x: torch.Tensor, shapes: list) -> list[torch.Tensor]:
    """comfy.utils.unpack_latents: the [B,1,N] packed tensor cut back into the latents of `shapes`."""
    out, start = [], 0
    for shape in shapes:
        n = math.prod(shape[1:])
        out.append(x[:, :, start : start + n].reshape(x.shape[0], *shape[1:]))
        start += n
    return out


def pack(latents: list[torch.Tensor]) -> torch.Tensor:
    return torch.cat([t.reshape(t.shape[0], 1, -1) for t in latents], dim=-1)


@dataclass
class LTX2DiffusionModel(DiffusionModel):
    # whether the network runs the text connectors itself (LTX-2.5's), so that it takes the LTX-2.5 text encoder's
    # unprocessed embeddings
    reads_unprocessed_embeds: ClassVar[bool] = False

    def inpaint_latent(
        self, ms: Any, sigma: torch.Tensor, noise: torch.Tensor, latent_image: torch.Tensor
    ) -> torch.Tensor:
        """Kept frames stay as they are, un-noised (ComfyUI's LTXAV.scale_latent_inpaint)."""
        return latent_image

    def step_timesteps(self, t: torch.Tensor, denoise_mask: torch.Tensor | None) -> torch.Tensor:
        """ComfyUI's LTXAV.process_timestep: under a noise mask (packed like x, video then audio) each element's
        timestep is t times its mask, so a kept frame's tokens see t = 0."""
        if denoise_mask is None:
            return t
        return denoise_mask * t.reshape(-1, *[1] * (denoise_mask.dim() - 1)).to(denoise_mask)

    def apply(self, x: torch.Tensor, timestep: torch.Tensor, cond: dict[str, Any]) -> torch.Tensor:
        if cond.get("control"):
            raise NotImplementedError("ControlNets are not supported for LTX-2 models")
        if cond.get("unprocessed_ltxav_embeds") and not self.reads_unprocessed_embeds:
            raise ValueError(
                "the conditioning comes from LTX-2.5's text encoder (a Gemma 4 file with its projection), whose "
                "embeddings need the connectors of LTX-2.5's transformer; this LTX-2.0 model cannot read them: encode "
                "with this model's own text encoder (LTXAVTextEncoderLoader with a Gemma 3 file), or sample with an "
                "LTX-2.5 transformer"
            )
        shapes = cond.get("latent_shapes")
        if shapes is None or len(shapes) != 2:
            raise ValueError("LTX-2 steps take the video and audio latents packed together, with their latent_shapes")
        video, audio = unpack(x, shapes)
        t = torch.as_tensor(timestep, dtype=torch.float32, device=x.device)
        if t.dim() == 3:  # one timestep per element (step_timesteps): each token takes its first channel's
            t_video, t_audio = unpack(t.expand(x.shape[0], -1, -1), shapes)
            t_video, t_audio = t_video[:, 0].flatten(1), t_audio[:, 0, :, 0]
        else:
            t_video = t_audio = t.reshape(-1).expand(x.shape[0])
        v_out, a_out = self.forward_av(
            video,
            audio,
            t_video,
            t_audio,
            cond["context"],
            float(cond.get("frame_rate", 25.0)),
            cond.get("keyframe_idxs"),
            **({"unprocessed": True} if cond.get("unprocessed_ltxav_embeds") else {}),
            **({"ref_audio": cond["ref_audio"]} if cond.get("ref_audio") is not None else {}),
        )
        return pack([v_out, a_out])

    def forward_av(
        self,
        video: torch.Tensor,
        audio: torch.Tensor,
        t_video: torch.Tensor,
        t_audio: torch.Tensor,
        context: torch.Tensor,
        frame_rate: float,
        keyframe_idxs: torch.Tensor | None = None,
        ref_audio: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The network's raw (velocity) outputs for a video latent [B,128,F,H,W] and an audio latent
        [B,8,T,16] at timesteps in sigma units ([B], or one per video / audio token). `keyframe_idxs`
        (LTXVAddGuide's, pixel positions [B,3,K,2]) are the positions of the last K video tokens, the guide
        frames appended to the latent (ComfyUI's LTXVModel._process_input). `ref_audio` (LTXVReferenceAudio's
        tokens [1 or B, L, 128]) is run as the newest ComfyUI runs it (reference_forward)."""
        module: LTX2VideoTransformer3DModel = self.module
        b, c, frames, h, w = video.shape
        device, dtype = video.device, self.dtype
        scale = module.config.timestep_scale_multiplier
        half = context.shape[-1] // 2
        context = context.to(device, dtype)
        coords = video_coords(module.rope, video.shape, frame_rate, keyframe_idxs, device)
        if ref_audio is not None:
            out, audio_out = reference_forward(
                module, video, audio, t_video, t_audio, context, coords, ref_audio.to(device, dtype)
            )
        else:
            out, audio_out = module(
                hidden_states=video.to(dtype).flatten(2).transpose(1, 2),
                audio_hidden_states=audio.to(dtype).transpose(1, 2).flatten(2),
                encoder_hidden_states=context[..., :half],
                audio_encoder_hidden_states=context[..., half:],
                timestep=t_video.to(device, torch.float32) * scale,
                audio_timestep=t_audio.to(device, torch.float32) * scale,
                video_coords=coords,
                audio_coords=module.audio_rope.prepare_audio_coords(b, audio.shape[2], device),
                return_dict=False,
            )
        v = out.transpose(1, 2).reshape(b, c, frames, h, w)
        a = audio_out.reshape(b, audio.shape[2], AUDIO_CHANNELS, AUDIO_BINS).transpose(1, 2)
        return v.float(), a.float()


def reference_forward(
    module: LTX2VideoTransformer3DModel,
    video: torch.Tensor,
    audio: torch.Tensor,
    t_video: torch.Tensor,
    t_audio: torch.Tensor,
    context: torch.Tensor,
    coords: torch.Tensor,
    ref_audio: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """An LTX-2.0 step with LTXVReferenceAudio's tokens (the ID-LoRA's), as the newest ComfyUI runs it. diffusers'
    forward cannot take them: its cross-modal gates follow each token's own timestep, ComfyUI's (newer than 0.10.0)
    the other modality's largest, so the reference tokens at timestep 0 would be gated shut. The checkpoint's layers
    run in ComfyUI's order instead (ltx25_transformer.run_network), after its caption projections. Returns diffusers'
    token outputs."""
    from nodes.models import ltx25_transformer

    b = video.shape[0]
    dtype = context.dtype
    half = context.shape[-1] // 2
    v_ctx = module.caption_projection(context[..., :half])
    a_ctx = module.audio_caption_projection(context[..., half:])
    return ltx25_transformer.run_network(
        module,
        video.to(dtype).flatten(2).transpose(1, 2),
        audio.to(dtype).transpose(1, 2).flatten(2),
        t_video.to(video.device, torch.float32),
        t_audio.to(video.device, torch.float32),
        (v_ctx, a_ctx),
        coords,
        module.audio_rope.prepare_audio_coords(b, audio.shape[2], video.device),
        0,
        ref_audio,
        ltx25_transformer.block_forward,
    )


def video_coords(
    rope: Any, shape: torch.Size, frame_rate: float, keyframe_idxs: torch.Tensor | None, device: torch.device
) -> torch.Tensor:
    """diffusers' [B,3,N,2] patch bounds of a [B,C,F,H,W] latent (the frame axis in seconds), the last K tokens
    placed at LTXVAddGuide's guide positions (`keyframe_idxs`, pixel positions [B,3,K,2]) as ComfyUI's
    LTXVModel._process_input places them."""
    b, _, frames, h, w = shape
    coords = rope.prepare_video_coords(b, frames, h, w, device, fps=frame_rate)
    if keyframe_idxs is not None:
        guides = keyframe_idxs.to(device, torch.float32).expand(b, -1, -1, -1).clone()
        if guides.shape[2] > coords.shape[2]:
            raise ValueError(f"keyframe_idxs: {guides.shape[2]} guide tokens, but the video has {coords.shape[2]}")
        guides[:, 0] = guides[:, 0] / frame_rate  # the frame axis in seconds, as the other tokens'
        coords[:, :, -guides.shape[2] :] = guides
    return coords


def lora_targets(sd: Mapping[str, torch.Tensor]) -> LoraTargets:
    """The names an LTX-2 LoRA may give a layer, as ComfyUI reads them: the checkpoint's own under
    `diffusion_model.` (Lightricks' and ComfyUI's LoRAs), kohya's `lora_unet_` with underscores, and diffusers'
    under `transformer.`."""
    ours = convert_ltx2_transformer_to_diffusers({k: k for k in sd})  # diffusers name -> the checkpoint's
    targets = LoraTargets(("diffusion_model.", "lora_unet_", "transformer."), {})
    for dif, name in ours.items():
        if dif.endswith(".weight"):
            d, n = dif[: -len(".weight")], name[: -len(".weight")]
            targets.add(dif, "diffusion_model." + n, "lora_unet_" + n.replace(".", "_"), "transformer." + d)
    return targets


def load_diffusion_model(ref: ModelRef, state_dict: Mapping[str, torch.Tensor]) -> LTX2DiffusionModel:
    """The LTX-2 audio-video DiffusionModel of a checkpoint (or a bare transformer file); float32 compute, as
    ComfyUI runs it on a CPU."""
    path = ref.sources[0] if ref.sources else None
    try:
        prefix = find_prefix(state_dict.keys(), MARKER)
        if prefix is None:
            raise ValueError(f"no {MARKER}")
        sd = strip_prefix(state_dict, prefix)
        config = transformer_config(sd, file_metadata(path))
        from nodes.models import ltx25_transformer

        if ltx25_transformer.is_ltx25(config):  # LTX-2.3 / 2.5's layout, its text connectors in the file
            return ltx25_transformer.load_diffusion_model(ref, sd, config)
        sd = {k: v for k, v in sd.items() if not k.startswith(TEXT_SIDE)}
        kwargs = diffusers_config(config)
    except (KeyError, ValueError) as e:
        raise ModelLoadError(path, f"not a usable LTX-2 audio-video model: {e}") from None
    converted = convert_ltx2_transformer_to_diffusers({k: v.float() for k, v in sd.items()})
    if ref.patches:
        converted, _ = merge_loras(ref.patches, lora_targets(sd), converted)
    module = build_module(lambda: LTX2VideoTransformer3DModel(**kwargs), converted, path, "LTX-2 transformer")
    for m in module.modules():  # ComfyUI's q/k norms: eps 1e-5 (diffusers builds them with 1e-6)
        if hasattr(m, "norm_q") and hasattr(m, "norm_k"):
            m.norm_q.eps = m.norm_k.eps = 1e-5
    return LTX2DiffusionModel(
        arch="ltx2",
        module=module,
        latent_format=latent_format("ltx2"),
        sampling=dict(sampling_config("ltx2")),
        config=config,
    )
