"""What the head must know about an architecture without loading its weights:
its latent format and how its sigmas map to timesteps (the model-sampling config)."""

from __future__ import annotations

from typing import Any

from nodes.models.components import (
    FLUX2_LATENT,
    FLUX_LATENT,
    QWEN_IMAGE21_LATENT,
    SD1_LATENT,
    SD3_LATENT,
    SDXL_LATENT,
    WAN21_LATENT,
    WAN22_LATENT,
    LatentFormat,
    NormalizedLatentFormat,
)

# MiniMax H3's video latents: the VAE itself normalises them (ComfyUI's MiniMaxH3AV format scales by 1).
MINIMAX_H3_LATENT = LatentFormat(24, 1.0)
# Chroma Radiance's "latents" are the pixels (ComfyUI's latent_formats.ChromaRadiance: process_in/out the identity).
CHROMA_RADIANCE_LATENT = LatentFormat(3, 1.0)
# LTX-2's 128-channel video latents: its VAE normalises them itself (ComfyUI's LTXV/LTXAV formats scale by 1).
LTX2_LATENT = LatentFormat(128, 1.0)
# Hunyuan Image 2.1 (ComfyUI 0.3.64's latent_formats.HunyuanImage21): 64 channels at 1/32, scaled by 0.75289.
HUNYUAN_IMAGE_LATENT = LatentFormat(64, 0.75289)
# Stable Cascade (ComfyUI's latent_formats.SC_Prior and SC_B): stage C's 16 channels unscaled, stage B's 4 by 1/0.43.
STABLE_CASCADE_C_LATENT = LatentFormat(16, 1.0)
STABLE_CASCADE_B_LATENT = LatentFormat(4, 1.0 / 0.43)

_EPS = {
    "kind": "discrete",
    "prediction": "eps",
    "beta_schedule": "scaled_linear",
    "linear_start": 0.00085,
    "linear_end": 0.012,
    "timesteps": 1000,
}

LATENT_FORMATS: dict[str, LatentFormat] = {
    "sd1": SD1_LATENT,
    "sd2": SD1_LATENT,
    "sd2v": SD1_LATENT,
    "lotus": SD1_LATENT,
    "sdxl": SDXL_LATENT,
    "sd3": SD3_LATENT,
    "flux": FLUX_LATENT,
    "flux-schnell": FLUX_LATENT,
    "flux2": FLUX2_LATENT,
    "zimage": FLUX_LATENT,
    "lumina2": FLUX_LATENT,
    "qwen_image": WAN21_LATENT,
    "qwen_image21": QWEN_IMAGE21_LATENT,
    "chroma": FLUX_LATENT,  # ComfyUI's supported_models.Chroma: latent format Flux
    "chroma_radiance": CHROMA_RADIANCE_LATENT,
    "pixeldit": CHROMA_RADIANCE_LATENT,  # pixel space (the newest ComfyUI's supported_models.PixelDiT)
    "hidream": FLUX_LATENT,  # ComfyUI's supported_models.HiDream: latent format Flux (Flux's VAE)
    "anima": WAN21_LATENT,  # ComfyUI's supported_models.Anima: latent format Wan21 (Qwen-Image's VAE)
    "cosmos_predict2": WAN21_LATENT,  # ComfyUI 0.3.64's supported_models.CosmosT2IPredict2: latent format Wan21
    "mage_flow": FLUX2_LATENT,  # ComfyUI's supported_models.MageFlow: latent_formats.Flux2, used raw
    "krea2": WAN21_LATENT,  # Qwen-Image's VAE, normalised by its latents_mean/std (diffusers' Krea2Pipeline)
    "flux3": FLUX2_LATENT,  # the template loads flux2-vae: FLUX.2's standardised 128-channel latents
    "moss_image": FLUX2_LATENT,  # FLUX.2's VAE (small decoder): the pipeline de-normalises by its batch norm
    "wan21": WAN21_LATENT,
    "wan22_5b": WAN22_LATENT,
    "minimax_h3": MINIMAX_H3_LATENT,
    "ltx2": LTX2_LATENT,
    "ltxv": LTX2_LATENT,  # ComfyUI 0.3.64's latent_formats.LTXV: 128 channels, unscaled (LTX-2 kept it)
    "stable_cascade_c": STABLE_CASCADE_C_LATENT,
    "stable_cascade_b": STABLE_CASCADE_B_LATENT,
    "hunyuan_image": HUNYUAN_IMAGE_LATENT,
    # ComfyUI 0.10.0's latent_formats.HunyuanVideo15: 32 channels at scale 1.03682, no shift
    "hunyuan_video15": LatentFormat(32, 1.03682),
    # ComfyUI 0.10.0's supported_models.Kandinsky5: latent_formats.HunyuanVideo (16 channels at 0.476986, no shift)
    "kandinsky5": LatentFormat(16, 0.476986),
    # ComfyUI 0.3.64's supported_models.HunyuanVideo: latent_formats.HunyuanVideo (16 channels at 0.476986)
    "hunyuan_video": LatentFormat(16, 0.476986),
    # ComfyUI 0.3.64's supported_models.GenmoMochi: latent_formats.Mochi (12 channels, per-channel mean and std)
    "mochi": NormalizedLatentFormat(
        12,
        1.0,
        latents_mean=(
            -0.06730895953510081,
            -0.038011381506090416,
            -0.07477820912866141,
            -0.05565264470995561,
            0.012767231469026969,
            -0.04703542746246419,
            0.043896967884726704,
            -0.09346305707025976,
            -0.09918314763016893,
            -0.008729793427399178,
            -0.011931556316503654,
            -0.0321993391887285,
        ),
        latents_std=(
            0.9263795028493863,
            0.9248894543193766,
            0.9393059390890617,
            0.959253732819592,
            0.8244560132752793,
            0.917259975397747,
            0.9294154431013696,
            1.3720942357788521,
            0.881393668867029,
            0.9168315692124348,
            0.9185249279345552,
            0.9274757570805041,
        ),
    ),
    # the newest ComfyUI's latent_formats.CogVideoX1_5 (the 5B class, VOID's); a model below 48 heads takes the 2B
    # format (1.15258426) from its own DiffusionModel (nodes/models/cogvideox.py)
    "cogvideox": LatentFormat(16, 0.7),
    "kandinsky5_image": FLUX_LATENT,  # ComfyUI 0.10.0's supported_models.Kandinsky5Image: latent format Flux
    "pixart_alpha": SD1_LATENT,  # ComfyUI's supported_models.PixArtAlpha: latent format SD15
    "svd": SD1_LATENT,  # ComfyUI 0.3.64's supported_models.SVD_img2vid: latent format SD15
    "pixart_sigma": SDXL_LATENT,  # ComfyUI's supported_models.PixArtSigma: latent format SDXL
    # ComfyUI 0.3.64's supported_models.HunyuanDiT (v1.1 / v1.2) and HunyuanDiT1 (v1.0): latent format SDXL
    "hunyuan_dit": SDXL_LATENT,
    "hunyuan_dit1": SDXL_LATENT,
    # ComfyUI's latent_formats.SeedVR2: the causal VAE's 16 channels, already scaled by the VAE (its 0.9152)
    "seedvr2": LatentFormat(16, 1.0),
}

SAMPLING_CONFIGS: dict[str, dict[str, Any]] = {
    "sd1": _EPS,
    "sd2": _EPS,
    "sd2v": {**_EPS, "prediction": "v"},
    # Lotus-D (ComfyUI's supported_models.LotusD): SD2's schedule, ModelType.IMG_TO_IMG (x0 from the unscaled input)
    "lotus": {**_EPS, "prediction": "img_to_img"},
    "sdxl": _EPS,
    "sd3": {"kind": "flow", "shift": 3.0, "multiplier": 1000},
    "flux": {"kind": "flux", "shift": 1.15},
    "flux-schnell": {"kind": "flux", "shift": 1.0},
    "flux2": {"kind": "flux", "shift": 2.02},  # ComfyUI's supported_models.Flux2 (ModelSamplingFlux)
    # Z-Image: ComfyUI's ZImage model sampling (AuraFlow's: sigma is the timestep), shift 3.
    "zimage": {"kind": "flow", "shift": 3.0, "multiplier": 1.0},
    # Lumina 2: ComfyUI's supported_models.Lumina2 (model type FLOW: ModelSamplingDiscreteFlow, multiplier 1, shift 6).
    "lumina2": {"kind": "flow", "shift": 6.0, "multiplier": 1.0},
    # ComfyUI's Qwen-Image: ModelSamplingFlux at shift 1.15 (its workflows set ModelSamplingAuraFlow over it).
    "qwen_image": {"kind": "flux", "shift": 1.15},
    # Qwen-Image 2.1: ModelSamplingFlux (model_base.QwenImage21's FLUX model type), multiplier 1, shift 0.69 (the
    # scheduler's mu at 1024x1024: 0.5 at 256 tokens to 0.9 at 8192), fixed for every size, as the newest
    # ComfyUI's supported_models.QwenImage21 sets it (read from upstream's source).
    "qwen_image21": {"kind": "flux", "shift": 0.69},
    # Chroma: ComfyUI's supported_models.Chroma (model type FLUX: ModelSamplingFlux, multiplier 1, shift 1.15).
    "chroma": {"kind": "flux", "shift": 1.15},
    "chroma_radiance": {"kind": "flux", "shift": 1.15},  # supported_models.ChromaRadiance inherits Chroma's
    # PixelDiT: the newest ComfyUI's model type FLOW (ModelSamplingDiscreteFlow, multiplier 1000) at shift 4
    "pixeldit": {"kind": "flow", "shift": 4.0, "multiplier": 1000.0},
    # Anima: ComfyUI's supported_models.Anima (model type FLOW: ModelSamplingDiscreteFlow, multiplier 1, shift 3).
    "anima": {"kind": "flow", "shift": 3.0, "multiplier": 1.0},
    # Cosmos Predict2: ComfyUI 0.3.64's model type FLOW_COSMOS (ModelSamplingContinuousEDM with COSMOS_RFLOW) at
    # supported_models.CosmosT2IPredict2's sigma_min 0.002, sigma_max 80, sigma_data 1.
    "cosmos_predict2": {
        "kind": "cosmos_rflow",
        "prediction": "cosmos_rflow",
        "sigma_min": 0.002,
        "sigma_max": 80.0,
        "sigma_data": 1.0,
    },
    # HiDream: ComfyUI's supported_models.HiDream (model type FLOW; its sampling_settings are reassigned empty, so
    # shift 1 and multiplier 1000 until ModelSamplingSD3 sets the shift, as the templates do).
    "hidream": {"kind": "flow", "shift": 1.0, "multiplier": 1000},
    # Mage-Flow: ComfyUI's supported_models.MageFlow (model type FLOW: ModelSamplingDiscreteFlow, multiplier 1,
    # shift 6), read from the newest source.
    "mage_flow": {"kind": "flow", "shift": 6.0, "multiplier": 1.0},
    # Krea 2: the exponential time shift at mu 1.15 (diffusers' Krea2Pipeline for the turbo model; the style
    # reference template sets ModelSamplingFlux to 1.15 at 1024x1024, the same value).
    "krea2": {"kind": "flux", "shift": 1.15},
    # FLUX 3: a constant flow shift of 6.93 with sigma as the timestep (diffusers 0.42's Flux3SetTimestepsStep:
    # FlowMatchEulerDiscreteScheduler(shift=6.93) over linspace(1, 1/n, n), which 'simple' reproduces).
    "flux3": {"kind": "flow", "shift": 6.93, "multiplier": 1.0},
    # MOSS-Image: flow matching with sigma x 1000 as the timestep and a flow shift of 5 (the official scheduler,
    # as moss-image-mlx's scheduler.py mirrors it; ComfyUI's own MOSS settings were not readable here).
    "moss_image": {"kind": "flow", "shift": 5.0, "multiplier": 1000},
    # ComfyUI's Wan models (WAN21_T2V and the others): ModelSamplingDiscreteFlow at shift 8, multiplier 1000.
    "wan21": {"kind": "flow", "shift": 8.0, "multiplier": 1000},
    "wan22_5b": {"kind": "flow", "shift": 8.0, "multiplier": 1000},
    # ComfyUI's supported_models.MiniMaxH3: ModelSamplingDiscreteFlow at the video stream's shift 12 (multiplier
    # left at 1000); the audio stream's shift 3 is applied inside the model.
    "minimax_h3": {"kind": "flow", "shift": 12.0, "multiplier": 1000},
    # ComfyUI's supported_models.LTXAV (LTXV's sampling settings): ModelSamplingFlux at shift 2.37.
    "ltx2": {"kind": "flux", "shift": 2.37},
    "ltxv": {"kind": "flux", "shift": 2.37},  # ComfyUI 0.3.64's supported_models.LTXV
    # ComfyUI's supported_models.Stable_Cascade_C / _B: ModelType.STABLE_CASCADE (the shifted cosine schedule, eps)
    # at shift 2 for stage C and 1 for stage B.
    "stable_cascade_c": {"kind": "stable_cascade", "shift": 2.0},
    "stable_cascade_b": {"kind": "stable_cascade", "shift": 1.0},
    # ComfyUI 0.3.64's supported_models.HunyuanImage21: model type FLOW (ModelSamplingDiscreteFlow) at shift 5
    "hunyuan_image": {"kind": "flow", "shift": 5.0, "multiplier": 1000},
    # ComfyUI 0.10.0's supported_models.HunyuanVideo15: model type FLOW (ModelSamplingDiscreteFlow) at shift 7
    "hunyuan_video15": {"kind": "flow", "shift": 7.0, "multiplier": 1000},
    # ComfyUI 0.10.0's supported_models.Kandinsky5: model type FLOW (ModelSamplingDiscreteFlow, multiplier 1000)
    # at shift 10.
    "kandinsky5": {"kind": "flow", "shift": 10.0, "multiplier": 1000},
    # ComfyUI 0.3.64's supported_models.HunyuanVideo (and its I2V variants): FLOW at shift 7
    "hunyuan_video": {"kind": "flow", "shift": 7.0, "multiplier": 1000},
    # ComfyUI 0.3.64's supported_models.GenmoMochi: FLOW at shift 6, multiplier 1 (the timestep is sigma)
    "mochi": {"kind": "flow", "shift": 6.0, "multiplier": 1.0},
    # the newest ComfyUI's supported_models.CogVideoX_T2V: V_PREDICTION_DDPM on linear betas 0.00085..0.012 rescaled
    # to zero terminal SNR
    "cogvideox": {
        "kind": "discrete",
        "prediction": "v_ddpm",
        "linear_start": 0.00085,
        "linear_end": 0.012,
        "zsnr": True,
    },
    "kandinsky5_image": {"kind": "flow", "shift": 3.0, "multiplier": 1000},  # supported_models.Kandinsky5Image
    # ComfyUI's supported_models.PixArtAlpha (and Sigma): discrete eps, betas linear in beta (its "sqrt_linear")
    "pixart_alpha": {**_EPS, "beta_schedule": "sqrt_linear", "linear_start": 0.0001, "linear_end": 0.02},
    "pixart_sigma": {**_EPS, "beta_schedule": "sqrt_linear", "linear_start": 0.0001, "linear_end": 0.02},
    # ComfyUI 0.3.64's supported_models.HunyuanDiT / HunyuanDiT1: V_PREDICTION on ComfyUI's default (scaled linear)
    # betas from 0.00085 to 0.018 (v1.1 / v1.2) or 0.03 (v1.0)
    "hunyuan_dit": {**_EPS, "prediction": "v", "linear_end": 0.018},
    "hunyuan_dit1": {**_EPS, "prediction": "v", "linear_end": 0.03},
    # the newest ComfyUI's supported_models.SeedVR2: model type FLOW (ModelSamplingDiscreteFlow) at shift 1
    "seedvr2": {"kind": "flow", "shift": 1.0, "multiplier": 1000},
    # ComfyUI 0.3.64's supported_models.SVD_img2vid: V_PREDICTION_EDM, i.e. v-prediction on
    # ModelSamplingContinuousEDM (sigma_data 1) between its sampling_settings' sigma_min 0.002 and sigma_max 700
    "svd": {"kind": "continuous_edm", "prediction": "v", "sigma_min": 0.002, "sigma_max": 700.0, "sigma_data": 1.0},
}


# Families whose ComfyUI latents carry a frame axis, [B,C,T,H,W] (ComfyUI's latent_dimensions = 3): their
# samplers add it to a 4-D latent and their VAEs encode to it. Every other family's latents are [B,C,H,W].
FRAME_AXIS_ARCHS = frozenset({"qwen_image", "anima", "cosmos_predict2", "kandinsky5", "wan21", "wan22_5b"})
# The video families: their samplers denoise every frame at once (Qwen-Image's take one frame); MiniMax H3's
# latents are always [B,C,T,H,W], so it needs no frame axis added.
VIDEO_ARCHS = frozenset(
    {
        "cosmos_predict2",
        "kandinsky5",
        "wan21",
        "wan22_5b",
        "minimax_h3",
        "seedvr2",
        "ltxv",
        "hunyuan_video15",
        "hunyuan_video",
        "mochi",
        "cogvideox",
    }
)


def has_frame_axis(arch: str) -> bool:
    return arch in FRAME_AXIS_ARCHS


def is_video(arch: str) -> bool:
    return arch in VIDEO_ARCHS


def latent_format(arch: str) -> LatentFormat:
    try:
        return LATENT_FORMATS[arch]
    except KeyError:
        raise ValueError(f"no latent format known for architecture {arch!r}") from None


def sampling_config(arch: str) -> dict[str, Any]:
    try:
        return SAMPLING_CONFIGS[arch]
    except KeyError:
        raise ValueError(f"no model sampling known for architecture {arch!r}") from None
