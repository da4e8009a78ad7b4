"""CONDITIONING as ComfyUI shapes it, and its flattening into ModelFn inputs.

A CONDITIONING value is `[[tensor, options], ...]`; options may hold "pooled_output",
"start_percent"/"end_percent", "strength", "guidance", "control" (a `ControlSpec` chain), "area" / "mask" /
"mask_strength" / "set_area_to_bounds" (nodes.conditioning_areas), SDXL's sizes (SIZE_KEYS), "concat_latent_image"
(InstructPix2Pix, inpainting), "reference_latents" / "reference_latents_method" (Flux Kontext) and MiniMax H3's
"minimax_keyframes" / "minimax_refs" / "minimax_token_tags", Anima's "t5xxl_ids" / "t5xxl_weights" and unCLIP's
"unclip_conditioning" (image embeddings with their strength and noise augmentation), GLIGEN's "gligen" (text boxes)
and SVD's "fps" / "motion_bucket_id" / "augmentation_level".
A denoising-step invocation receives the tensors by name and the rest as plain params.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from cluster.refs import ModelRef
from nodes.modelfns.hooks import schedule
from nodes.models.components import ANIMA_KEYS, BYT5_KEYS, HIDREAM_KEYS, TEXT_MASK_KEYS
from nodes.models.svd import DEFAULT_ADM as SVD_DEFAULT_ADM

# Stable Video Diffusion's ADM values on a cond (ComfyUI's option names), in the order its model embeds them
SVD_ADM_KEYS = ("fps", "motion_bucket_id", "augmentation_level")
# WanSoundImageToVideo's values for the Wan S2V model: audio features, raw motion and control latents
S2V_KEYS = ("audio_embed", "reference_motion", "control_video")

# SDXL's size conditioning (CLIPTextEncodeSDXL and the refiner's encoder); unset values default to the
# latent's size in pixels, no crop, as ComfyUI's SDXL model does.
SIZE_KEYS = ("width", "height", "crop_w", "crop_h", "target_width", "target_height")


@dataclass(frozen=True, eq=False)
class ControlSpec:
    """One applied ControlNet (ControlNetApply*). `previous` chains several ControlNets on one cond."""

    ref: ModelRef
    hint: torch.Tensor  # IMAGE [B,H,W,3]
    strength: float
    start_percent: float = 0.0
    end_percent: float = 1.0
    previous: ControlSpec | None = None
    # ComfyUI's extra_concat: what joins the encoded hint (the InstantX Inpainting ControlNet's kept area, [B,1,H,W])
    extra: torch.Tensor | None = None

    def chain(self) -> list[ControlSpec]:
        out, node = [], self
        while node is not None:
            out.append(node)
            node = node.previous
        return out[::-1]


def flatten(name: str, conditioning: list, percent_to_sigma) -> tuple[dict[str, torch.Tensor], list[dict[str, Any]]]:
    """Split one CONDITIONING into named tensors and per-entry metadata for a denoise-step call."""
    tensors: dict[str, torch.Tensor] = {}
    entries: list[dict[str, Any]] = []
    for j, (cond, opts) in enumerate(conditioning):
        key = f"{name}.{j}"
        tensors[f"{key}.context"] = cond
        if opts.get("pooled_output") is not None:
            tensors[f"{key}.pooled"] = opts["pooled_output"]
        controls = []
        spec = opts.get("control")
        for k, c in enumerate(spec.chain() if spec is not None else []):
            tensors[f"{key}.control.{k}.hint"] = c.hint
            if c.extra is not None:
                tensors[f"{key}.control.{k}.extra"] = c.extra
            controls.append(
                {
                    "ref": c.ref,
                    "strength": c.strength,
                    "hint_id": id(c.hint),
                    "sigma_start": percent_to_sigma(c.start_percent),
                    "sigma_end": percent_to_sigma(c.end_percent),
                }
            )
        entry = {
            "key": key,
            "strength": float(opts.get("strength", 1.0)),
            # A scheduled CLIP's encodings hold for their own part of sampling too (clip_*_percent).
            "sigma_start": percent_to_sigma(max(opts.get("clip_start_percent", 0.0), opts.get("start_percent", 0.0))),
            "sigma_end": percent_to_sigma(min(opts.get("clip_end_percent", 1.0), opts.get("end_percent", 1.0))),
            "guidance": opts.get("guidance"),
            "controls": controls,
        }
        # Area and mask conditioning (nodes.conditioning_areas has resolved them to latent cells) and
        # SDXL's size conditioning: only where set, so plain conds keep their layout.
        if opts.get("area") is not None:
            entry["area"] = tuple(int(v) for v in opts["area"])
        if opts.get("mask") is not None:
            tensors[f"{key}.mask"] = opts["mask"]
            entry["mask_strength"] = float(opts.get("mask_strength", 1.0))
        if "guidance" in opts and opts["guidance"] is None:  # FluxDisableGuidance, not merely unset
            entry["guidance_disabled"] = True
        if opts.get("cross_attn_controlnet") is not None:  # CLIPTextEncodeControlnet: the ControlNets' prompt
            tensors[f"{key}.controlnet_context"] = opts["cross_attn_controlnet"]
        size = {k: int(opts[k]) for k in SIZE_KEYS if opts.get(k) is not None}
        if size:
            entry["size"] = size
        if opts.get("aesthetic_score") is not None:  # CLIPTextEncodeSDXLRefiner: the refiner's size conditioning
            entry["aesthetic_score"] = float(opts["aesthetic_score"])
        if opts.get("hooks") is not None:  # weight hooks (nodes.modelfns.hooks), keyframes as sigmas
            entry["hooks"] = schedule(opts["hooks"], percent_to_sigma)
        if opts.get("default"):  # ConditioningSetDefaultCombine: weighs what the other entries leave
            entry["default"] = True
        if opts.get("concat_latent_image") is not None:  # InstructPix2Pix / inpainting: a raw latent
            tensors[f"{key}.concat_latent_image"] = opts["concat_latent_image"]
        if opts.get("concat_mask") is not None:  # Wan image-to-video: which latent frames the image fixes
            tensors[f"{key}.concat_mask"] = opts["concat_mask"]
        if opts.get("concat_mask_index"):  # Wan 2.2 Fun Control: the mask sits after the control latent
            entry["concat_mask_index"] = int(opts["concat_mask_index"])
        if opts.get("time_dim_concat") is not None:  # WanPhantomSubjectToVideo: raw latent frames after the video's
            tensors[f"{key}.time_dim_concat"] = opts["time_dim_concat"]
        tensors.update({f"{key}.{k}": opts[k] for k in S2V_KEYS if opts.get(k) is not None})
        if opts.get("guiding_frame_index") is not None:  # HunyuanImageToVideo v2 (replace): first-frame tokens
            entry["guiding_frame_index"] = float(opts["guiding_frame_index"])
        if opts.get("ref_latent") is not None:  # HunyuanImageToVideo custom: a raw reference latent
            tensors[f"{key}.ref_latent"] = opts["ref_latent"]
        if opts.get("time_dim_replace") is not None:  # Kandinsky5ImageToVideo: raw start latent frames
            tensors[f"{key}.time_dim_replace"] = opts["time_dim_replace"]
        if opts.get("camera_conditions") is not None:  # WanCameraImageToVideo: the Fun Camera model's ray maps
            tensors[f"{key}.camera_conditions"] = opts["camera_conditions"]
        if opts.get("vace_frames"):  # WanVaceToVideo (a list: each chained node appends its own)
            for i, (frames, mask) in enumerate(zip(opts["vace_frames"], opts["vace_mask"], strict=True)):
                tensors[f"{key}.vace.{i}.frames"], tensors[f"{key}.vace.{i}.mask"] = frames, mask
            entry["vace_strength"] = [float(v) for v in opts["vace_strength"]]
        vision = opts.get("clip_vision_output")
        if vision is not None:  # Wan 2.1 image-to-video: the image's CLIP vision states join the text
            tensors[f"{key}.clip_fea"] = vision.penultimate_hidden_states
            tensors[f"{key}.clip_fea_last"] = vision.last_hidden_state  # HunyuanVideo 1.5 reads the last layer's
        if opts.get("condition") is not None:  # SeedVR2Conditioning: the latent to upscale and its ones mask
            tensors[f"{key}.seedvr2_condition"] = opts["condition"]
        if opts.get("stable_cascade_prior") is not None:  # StableCascade_StageB_Conditioning: stage B's effnet
            tensors[f"{key}.stable_cascade_prior"] = opts["stable_cascade_prior"]
        _animate2(opts, key, tensors, entry)
        _scail(opts, key, tensors, entry)
        if opts.get("context_latents"):  # BerniniConditioning: raw latents whose tokens follow the video's
            tensors.update({f"{key}.context_latent.{i}": c for i, c in enumerate(opts["context_latents"])})
            entry["context_latents"] = len(opts["context_latents"])
        if any(opts.get(k) is not None for k in SVD_ADM_KEYS):  # SVD_img2vid_Conditioning: the model's ADM values
            entry["svd_adm"] = [float(opts.get(k, d)) for k, d in zip(SVD_ADM_KEYS, SVD_DEFAULT_ADM, strict=True)]
        if opts.get("frame_rate") is not None:  # LTXVConditioning: the frame rate LTX-2's positions are timed by
            entry["frame_rate"] = float(opts["frame_rate"])
        if opts.get("unprocessed_ltxav_embeds"):  # LTX-2.5's text encoder: the transformer's connectors still to run
            entry["unprocessed_ltxav_embeds"] = True
        if opts.get("keyframe_idxs") is not None:  # LTXVAddGuide: the guide tokens' positions (LTX-2)
            tensors[f"{key}.keyframe_idxs"] = opts["keyframe_idxs"]
        if opts.get("ref_audio") is not None:  # LTXVReferenceAudio: the ID-LoRA's reference voice tokens (LTX-2)
            tensors[f"{key}.ref_audio"] = opts["ref_audio"]["tokens"]
            entry["ref_audio"] = True
        for i, kf in enumerate(opts.get("minimax_keyframes") or ()):  # MiniMax H3 first/last frames
            if kf.get("latent") is None or kf.get("audio_latent") is not None:
                raise ValueError(
                    "a MiniMax H3 keyframe must be one encoded frame (audio keyframes are not supported yet)"
                )
            tensors[f"{key}.keyframe.{i}"] = kf["latent"]
            entry.setdefault("keyframe_frames", []).append(int(kf["resolved_frame_index"]))
        for i, ref in enumerate(opts.get("minimax_refs") or ()):  # MiniMax H3 reference images (ref2va)
            if ref.get("kind") != "image":
                raise ValueError(f"MiniMax H3 {ref.get('kind')} references are not supported yet (only images)")
            tensors[f"{key}.minimax_ref.{i}"] = ref["latent"]
            entry["minimax_refs"] = i + 1
        for anima_key in ANIMA_KEYS:  # not `name`: that is the conditioning's, every next entry's key uses it
            if opts.get(anima_key) is not None:  # 1-D as ComfyUI keeps them; a row per entry here
                tensors[f"{key}.{anima_key}"] = opts[anima_key].reshape(1, -1)
        for hidream_key in HIDREAM_KEYS + TEXT_MASK_KEYS + BYT5_KEYS:  # HiDream's Llama, a text mask, ByT5: batched
            if opts.get(hidream_key) is not None:
                tensors[f"{key}.{hidream_key}"] = opts[hidream_key]
        if opts.get("minimax_token_tags") is not None:  # MiniMax H3: which prompt rows are an image's (0) or text (1)
            tensors[f"{key}.token_tags"] = opts["minimax_token_tags"].reshape(1, -1)  # ComfyUI's is 1-D
        refs = opts.get("reference_latents")
        if refs:  # ReferenceLatent (Flux Kontext): raw latents, put in model space by the step
            tensors.update({f"{key}.ref.{i}": r for i, r in enumerate(refs)})
            entry["ref_latents"] = len(refs)
            if opts.get("reference_latents_method") is not None:
                entry["ref_latents_method"] = str(opts["reference_latents_method"])
        for i, item in enumerate(opts.get("unclip_conditioning") or ()):  # unCLIPConditioning: image embeddings
            tensors[f"{key}.unclip.{i}"] = item["clip_vision_output"].image_embeds
            entry.setdefault("unclip", []).append([float(item["strength"]), float(item["noise_augmentation"])])
        text_boxes = opts.get("gligen")
        if text_boxes:  # GLIGENTextBoxApply: the boxes' pooled texts travel as tensors (nodes/modelfns/gligen.py)
            tensors.update({f"{key}.gligen.{i}": t for i, t in enumerate(text_boxes["pooled"])})
            entry["gligen"] = {"ref": text_boxes["ref"], "boxes": [list(b) for b in text_boxes["boxes"]], "source": key}
        if opts.get("image_slots"):  # Qwen-Image 2.1: where each reference latent joins the prompt's states
            entry["image_slots"] = [int(s) for s in opts["image_slots"]]
        entries.append(entry)
    return tensors, entries


def _animate2(opts: dict, key: str, tensors: dict[str, torch.Tensor], entry: dict[str, Any]) -> None:
    """WanAnimate2ToVideo's pose branch inputs (raw pose latents, its prompt and CLIP states) and strengths."""
    if opts.get("pose_video_latent") is not None:
        tensors[f"{key}.pose_video_latent"] = opts["pose_video_latent"]
    if opts.get("cross_attn_pose") is not None:
        tensors[f"{key}.context_pose"] = opts["cross_attn_pose"]
    if opts.get("clip_vision_output_pose") is not None:
        tensors[f"{key}.clip_fea_pose"] = opts["clip_vision_output_pose"].penultimate_hidden_states
    for name in ("pose_strength", "reference_strength"):
        if opts.get(name) is not None:
            entry[name] = float(opts[name])


def _scail(opts: dict, key: str, tensors: dict[str, torch.Tensor], entry: dict[str, Any]) -> None:
    """WanSCAILToVideo's SCAIL-2 identity masks (28 channels per latent frame) and its animation / replacement flag."""
    for name in ("driving_mask_28ch", "ref_mask_28ch"):
        if opts.get(name) is not None:
            tensors[f"{key}.{name}"] = opts[name]
    if opts.get("ref_mask_flag") is not None:
        entry["ref_mask_flag"] = bool(opts["ref_mask_flag"])


def require(conditioning: Any, input_name: str) -> list:
    """A CONDITIONING input, or a clear error naming the input."""
    if not isinstance(conditioning, list) or not all(
        isinstance(e, (list, tuple)) and len(e) == 2 and isinstance(e[0], torch.Tensor) for e in conditioning
    ):
        raise ValueError(
            f"{input_name}: expected CONDITIONING ([[tensor, dict], ...]), got {type(conditioning).__name__}"
        )
    return conditioning
