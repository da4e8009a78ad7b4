"""Tiny random-weight SD models written in the formats users have (ldm single files, kohya LoRA, ldm
ControlNet, separate VAE / text-encoder files), so that everything runs offline on a CPU.

Seeded and byte-identical across builds. Sizes follow nodes/models conventions (heads, GroupNorm groups,
SDXL's 256-wide size embedding), so the loaders infer exactly the configs built here."""

from __future__ import annotations

import importlib
from pathlib import Path

import torch

# Imported up front: importing them can draw random numbers, which must not happen after seeding.
from diffusers import AutoencoderKL, ControlNetModel, UNet2DConditionModel
from safetensors.torch import save_file
from transformers import CLIPTextConfig, CLIPTextModel, CLIPTextModelWithProjection

from . import clip as clip_mod
from . import controlnet as cn_mod
from . import unet as unet_mod
from . import vae as vae_mod
from .tokenizer import BYTE_VOCAB_SIZE

SEED = 0
STORE_DTYPE = torch.float16  # as most real checkpoints are stored; the loaders compute in float32


def tiny_unet(arch: str, channels: tuple[int, ...], layers_per_block: int = 1, **config) -> UNet2DConditionModel:
    """A diffusers UNet at the tiny widths `channels`, with the GroupNorm groups and attention heads the loaders infer
    for `arch` (nodes/models/unet.py): 8x8 samples, 4 latent channels in and out; `config` gives the rest."""
    return UNet2DConditionModel(
        sample_size=8,
        in_channels=4,
        out_channels=4,
        block_out_channels=channels,
        layers_per_block=layers_per_block,
        norm_num_groups=unet_mod.norm_groups(channels),
        attention_head_dim=tuple(unet_mod.attention_heads(arch, c) for c in channels),
        **config,
    )


def tiny_sdxl_unet(context: int, pooled: int, sizes: int = 6) -> UNet2DConditionModel:
    """sdxl-tiny's UNet for `context`-wide text states and a `pooled`-wide pooled output beside `sizes` size values."""
    return tiny_unet(
        "sdxl",
        (32, 64),
        down_block_types=("DownBlock2D", "CrossAttnDownBlock2D"),
        up_block_types=("CrossAttnUpBlock2D", "UpBlock2D"),
        cross_attention_dim=context,
        use_linear_projection=True,
        transformer_layers_per_block=(1, 2),
        addition_embed_type="text_time",
        addition_time_embed_dim=unet_mod.SDXL_TIME_EMBED_DIM,
        projection_class_embeddings_input_dim=sizes * unet_mod.SDXL_TIME_EMBED_DIM + pooled,
    )


def _unet(kind: str):
    if kind == "sd1":
        return tiny_unet(
            "sd1",
            (32, 64),
            down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
            up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"),
            cross_attention_dim=32,
        )
    # SDXL: CLIP-L (32) + CLIP-G (48) states, G's 32-wide projected pooled output and six sizes; the refiner
    # (kind "sdxl_refiner"): CLIP-G's states alone, its pooled output as wide (as the published 1280 / 1280), five
    # sizes (height, width, crops, aesthetic score)
    context, pooled, sizes = (48, 48, unet_mod.REFINER_TIME_IDS) if kind == "sdxl_refiner" else (32 + 48, 32, 6)
    return tiny_sdxl_unet(context, pooled, sizes)


def _vae():
    channels = (8, 16, 32, 32)  # four levels: 8x downscale with 4 latent channels, like the real VAE
    return AutoencoderKL(
        in_channels=3,
        out_channels=3,
        latent_channels=4,
        block_out_channels=channels,
        down_block_types=("DownEncoderBlock2D",) * 4,
        up_block_types=("UpDecoderBlock2D",) * 4,
        layers_per_block=1,
        norm_num_groups=unet_mod.norm_groups(channels),
        sample_size=64,
    )


def _clip(hidden: int, projection: bool, act: str, projection_dim: int = 32):
    cfg = CLIPTextConfig(
        vocab_size=BYTE_VOCAB_SIZE,
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=2,
        num_attention_heads=clip_mod.clip_heads(hidden),
        max_position_embeddings=77,
        projection_dim=projection_dim,
        hidden_act=act,
        bos_token_id=BYTE_VOCAB_SIZE - 2,
        eos_token_id=BYTE_VOCAB_SIZE - 1,
        pad_token_id=BYTE_VOCAB_SIZE - 1,
    )
    return (CLIPTextModelWithProjection if projection else CLIPTextModel)(cfg)


def _layout(unet_module) -> unet_mod.UNetLayout:
    """The block structure of a diffusers UNet, as far as key names depend on it."""
    cfg = unet_module.config
    n = len(cfg.block_out_channels)
    per_level = _as_tuple(cfg.layers_per_block, n)
    up_attn = ["CrossAttn" in t for t in reversed(cfg.up_block_types)]  # in level order
    return unet_mod.UNetLayout(
        cfg.in_channels,
        cfg.out_channels,
        0,
        list(cfg.block_out_channels),
        [[1] * k for k in per_level],
        [[int(a)] * (k + 1) for a, k in zip(up_attn, per_level)],
        1,
        cfg.cross_attention_dim,
        cfg.use_linear_projection,
        None,
    )


def _as_tuple(v, n):
    return tuple(v) if isinstance(v, (list, tuple)) else (v,) * n


def _unet_ldm(module) -> dict[str, torch.Tensor]:
    return unet_mod.diffusers_to_ldm(module.state_dict(), _layout(module))


def _te_hf(module) -> dict[str, torch.Tensor]:
    return {
        ("text_model." + k if not k.startswith(("text_model.", "text_projection")) else k): v
        for k, v in module.state_dict().items()
        if not k.endswith("position_ids")
    }


def save_tiny(tensors: dict[str, torch.Tensor], path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    out = {k: (v.to(STORE_DTYPE) if v.is_floating_point() else v).contiguous() for k, v in sorted(tensors.items())}
    tmp = path.with_suffix(".tmp")
    # One metadata entry only: safetensors writes its metadata map in hash order, which varies per run.
    save_file(out, str(tmp), metadata={"format": "pt"})
    tmp.replace(path)
    return path


def _prefixed(sd: dict[str, torch.Tensor], prefix: str) -> dict[str, torch.Tensor]:
    return {prefix + k: v for k, v in sd.items()}


def _randomize(tensors, gen: torch.Generator, scale: float) -> None:
    with torch.no_grad():
        for t in tensors:
            t.copy_(torch.randn(t.shape, generator=gen) * scale)


def _kohya_lora(targets: dict[str, tuple[int, int]], gen: torch.Generator, rank: int = 4) -> dict[str, torch.Tensor]:
    out = {}
    for name, (fan_out, fan_in) in sorted(targets.items()):
        out[f"{name}.lora_down.weight"] = torch.randn(rank, fan_in, generator=gen) * 0.3
        out[f"{name}.lora_up.weight"] = torch.randn(fan_out, rank, generator=gen) * 0.3
        out[f"{name}.alpha"] = torch.tensor(float(rank) / 2)
    return out


def build_demo_models(models_dir: Path, include_flux: bool = True) -> list[Path]:
    """Write the demo models under a ComfyUI models/ folder; returns the files written. The Flux, SD3, Z-Image
    and Qwen-Image helpers' demo files are added when their modules are present (`include_flux=False` skips
    them)."""
    models_dir = Path(models_dir)
    written: list[Path] = []
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(SEED)
        gen = torch.Generator().manual_seed(SEED)
        unet, vae, te = _unet("sd1"), _vae(), _clip(32, False, "quick_gelu")
        vae_ldm = vae_mod.diffusers_to_ldm(vae.state_dict())
        te_hf = _te_hf(te)
        written.append(
            save_tiny(
                {
                    **_prefixed(_unet_ldm(unet), unet_mod.LDM_UNET_PREFIX),
                    **_prefixed(vae_ldm, vae_mod.LDM_VAE_PREFIX),
                    **_prefixed(te_hf, "cond_stage_model.transformer."),
                },
                models_dir / "checkpoints" / "sd1-tiny.safetensors",
            )
        )
        written.append(save_tiny(vae_ldm, models_dir / "vae" / "sd1-tiny-vae.safetensors"))
        written.append(save_tiny(te_hf, models_dir / "text_encoders" / "sd1-tiny-clip.safetensors"))

        lora_targets = {}
        for name, mod in unet.named_modules():
            if name.endswith(
                (
                    "attn1.to_q",
                    "attn1.to_k",
                    "attn1.to_v",
                    "attn1.to_out.0",
                    "attn2.to_q",
                    "attn2.to_k",
                    "attn2.to_v",
                    "attn2.to_out.0",
                )
            ):
                lora_targets["lora_unet_" + name.replace(".", "_")] = tuple(mod.weight.shape)
        for name, mod in te.named_modules():
            if name.endswith(("q_proj", "k_proj", "v_proj", "out_proj", "fc1", "fc2")):
                lora_targets["lora_te_text_model_" + name.replace(".", "_")] = tuple(mod.weight.shape)
        written.append(save_tiny(_kohya_lora(lora_targets, gen), models_dir / "loras" / "sd1-tiny-lora.safetensors"))

        written.append(
            save_tiny(_controlnet_ldm(unet, gen), models_dir / "controlnet" / "sd1-tiny-controlnet.safetensors")
        )

        torch.manual_seed(SEED + 1)
        xl_unet, xl_vae = _unet("sdxl"), _vae()
        te1, te2 = _clip(32, False, "quick_gelu"), _clip(48, True, "gelu")  # widths must differ (diffusers trap)
        written.append(
            save_tiny(
                {
                    **_prefixed(_unet_ldm(xl_unet), unet_mod.LDM_UNET_PREFIX),
                    **_prefixed(vae_mod.diffusers_to_ldm(xl_vae.state_dict()), vae_mod.LDM_VAE_PREFIX),
                    **_prefixed(_te_hf(te1), "conditioner.embedders.0.transformer."),
                    **_prefixed(clip_mod.hf_to_open_clip(te2.state_dict()), "conditioner.embedders.1.model."),
                },
                models_dir / "checkpoints" / "sdxl-tiny.safetensors",
            )
        )
        written.append(save_tiny(_esrgan(), models_dir / "upscale_models" / "esrgan-tiny-x4.safetensors"))
        written.append(save_tiny(_clip_vision(), models_dir / "clip_vision" / "clip-vision-tiny.safetensors"))
        written.append(save_tiny(_style_adapter(), models_dir / "style_models" / "sd1-tiny-style.safetensors"))
        written.append(save_tiny(_sdxl_refiner(), models_dir / "checkpoints" / "sdxl-refiner-tiny.safetensors"))
    if include_flux:
        build_flux = next(
            (
                m.build_demo_flux
                for m in map(_optional, ("nodes.models.flux", "nodes.models.flux_demo"))
                if m is not None and hasattr(m, "build_demo_flux")
            ),
            None,
        )
        if build_flux is not None:
            written += list(build_flux(models_dir) or [])
        build_sd3 = getattr(_optional("nodes.models.sd3_demo"), "build_demo_sd3", None)
        if build_sd3 is not None:
            written += build_sd3(models_dir)
        build_zimage = getattr(_optional("nodes.models.zimage_demo"), "build_demo_zimage", None)
        if build_zimage is not None:
            written += build_zimage(models_dir)
        build_lumina2 = getattr(_optional("nodes.models.lumina2_demo"), "build_demo_lumina2", None)
        if build_lumina2 is not None:
            written += build_lumina2(models_dir)
        build_cascade = getattr(_optional("nodes.models.stable_cascade_demo"), "build_demo_stable_cascade", None)
        if build_cascade is not None:
            written += build_cascade(models_dir)
        build_photomaker = getattr(_optional("nodes.models.photomaker_demo"), "build_demo_photomaker", None)
        if build_photomaker is not None:
            written += build_photomaker(models_dir)
        build_flux2 = getattr(_optional("nodes.models.flux2_demo"), "build_demo_flux2", None)
        if build_flux2 is not None:
            written += build_flux2(models_dir)
        build_flux2_dev = getattr(_optional("nodes.models.flux2_dev_demo"), "build_demo_flux2_dev", None)
        if build_flux2_dev is not None:
            written += build_flux2_dev(models_dir)
        build_qwen_image = getattr(_optional("nodes.models.qwen_image_demo"), "build_demo_qwen_image", None)
        if build_qwen_image is not None:
            written += build_qwen_image(models_dir)
        build_qwen_cn = getattr(
            _optional("nodes.models.qwen_image_controlnet_demo"), "build_demo_qwen_image_controlnets", None
        )
        if build_qwen_cn is not None:  # the InstantX Union and Inpainting ControlNets for qwen-image-tiny
            written += build_qwen_cn(models_dir)
        build_qwen_layered = getattr(
            _optional("nodes.models.qwen_image_layered_demo"), "build_demo_qwen_image_layered", None
        )
        if build_qwen_layered is not None:  # Qwen-Image-Layered's transformer and RGBA VAE
            written += build_qwen_layered(models_dir)
        build_wan = getattr(_optional("nodes.models.wan_demo"), "build_demo_wan", None)
        if build_wan is not None:
            written += build_wan(models_dir)
        build_wan_s2v = getattr(_optional("nodes.models.wan_s2v_demo"), "build_demo_wan_s2v", None)
        if build_wan_s2v is not None:  # Wan 2.2 S2V and its wav2vec 2.0 audio encoder
            written += build_wan_s2v(models_dir)
        build_wan_humo = getattr(_optional("nodes.models.wan_humo_demo"), "build_demo_wan_humo", None)
        if build_wan_humo is not None:  # Wan HuMo 17B and 1.7B and their Whisper audio encoder
            written += build_wan_humo(models_dir)
        build_infinitetalk = getattr(
            _optional("nodes.models.wan_infinitetalk_demo"), "build_demo_wan_infinitetalk", None
        )
        if build_infinitetalk is not None:  # InfiniteTalk's audio patch for the tiny Wan 2.1 i2v and wav2vec files
            written += build_infinitetalk(models_dir)
        build_model_patches = getattr(_optional("nodes.models.model_patch_demo"), "build_demo_model_patches", None)
        if build_model_patches is not None:
            written += build_model_patches(models_dir)
        build_redux = getattr(_optional("nodes.models.redux_demo"), "build_demo_redux", None)
        if build_redux is not None:  # the SigLIP tower and Flux Redux for flux-tiny
            written += build_redux(models_dir)
        build_uso = getattr(_optional("nodes.models.uso_demo"), "build_demo_uso", None)
        if build_uso is not None:  # USO's style projector for them
            written += build_uso(models_dir)
        build_qwen_image_edit = getattr(
            _optional("nodes.models.qwen_image_edit_demo"), "build_demo_qwen_image_edit", None
        )
        if build_qwen_image_edit is not None:
            written += build_qwen_image_edit(models_dir)
        build_qwen_image21 = getattr(_optional("nodes.models.qwen_image21_demo"), "build_demo_qwen_image21", None)
        if build_qwen_image21 is not None:
            written += build_qwen_image21(models_dir)
        build_mage_flow = getattr(_optional("nodes.models.mage_flow_demo"), "build_demo_mage_flow", None)
        if build_mage_flow is not None:  # its text encoder is qwen-image-2.1-tiny's Qwen3-VL
            written += build_mage_flow(models_dir)
        build_krea2 = getattr(_optional("nodes.models.krea2_demo"), "build_demo_krea2", None)
        if build_krea2 is not None:
            written += build_krea2(models_dir)
        build_anima = getattr(_optional("nodes.models.anima_demo"), "build_demo_anima", None)
        if build_anima is not None:
            written += build_anima(models_dir)
        build_lllite = getattr(_optional("nodes.models.anima_lllite_demo"), "build_demo_anima_lllite", None)
        if build_lllite is not None:  # Anima LLLite model patches for anima-tiny
            written += build_lllite(models_dir)
        build_cosmos = getattr(_optional("nodes.models.cosmos_predict2_demo"), "build_demo_cosmos_predict2", None)
        if build_cosmos is not None:
            written += build_cosmos(models_dir)
        build_hidream = getattr(_optional("nodes.models.hidream_demo"), "build_demo_hidream", None)
        if build_hidream is not None:
            written += build_hidream(models_dir)
        build_chroma = getattr(_optional("nodes.models.chroma_demo"), "build_demo_chroma", None)
        if build_chroma is not None:
            written += build_chroma(models_dir)
        build_radiance = getattr(_optional("nodes.models.chroma_radiance_demo"), "build_demo_chroma_radiance", None)
        if build_radiance is not None:
            written += build_radiance(models_dir)
        build_pixeldit = getattr(_optional("nodes.models.pixeldit_demo"), "build_demo_pixeldit", None)
        if build_pixeldit is not None:
            written += build_pixeldit(models_dir)
        build_flux3 = getattr(_optional("nodes.models.flux3_demo"), "build_demo_flux3", None)
        if build_flux3 is not None:
            written += build_flux3(models_dir)
        build_moss_image = getattr(_optional("nodes.models.moss_image_demo"), "build_demo_moss_image", None)
        if build_moss_image is not None:
            written += build_moss_image(models_dir)
        build_minimax_h3 = getattr(_optional("nodes.models.minimax_h3_demo"), "build_demo_minimax_h3", None)
        if build_minimax_h3 is not None:
            written += build_minimax_h3(models_dir)
        build_ltx2 = getattr(_optional("nodes.models.ltx2_demo"), "build_demo_ltx2", None)
        if build_ltx2 is not None:
            written += build_ltx2(models_dir)
        build_unclip = getattr(_optional("nodes.models.unclip_demo"), "build_demo_unclip", None)
        if build_unclip is not None:
            written += build_unclip(models_dir)
        build_gligen = getattr(_optional("nodes.models.gligen_demo"), "build_demo_gligen", None)
        if build_gligen is not None:
            written += build_gligen(models_dir)
        build_ltx25 = getattr(_optional("nodes.models.ltx25_demo"), "build_demo_ltx25", None)
        if build_ltx25 is not None:  # LTX-2.5's video VAE and Gemma 4 text encoder
            written += build_ltx25(models_dir)
        build_ltxv = getattr(_optional("nodes.models.ltxv_demo"), "build_demo_ltxv", None)
        if build_ltxv is not None:  # LTX-Video 0.9's checkpoint (transformer and video VAE)
            written += build_ltxv(models_dir)
        build_svd = getattr(_optional("nodes.models.svd_demo"), "build_demo_svd", None)
        if build_svd is not None:  # Stable Video Diffusion's checkpoint (UNet, temporal VAE, CLIP image encoder)
            written += build_svd(models_dir)
        build_lotus = getattr(_optional("nodes.models.lotus_demo"), "build_demo_lotus", None)
        if build_lotus is not None:
            written += build_lotus(models_dir)
        build_marigold = getattr(_optional("nodes.models.marigold_demo"), "build_demo_marigold", None)
        if build_marigold is not None:
            written += build_marigold(models_dir)
        build_moge = getattr(_optional("nodes.models.moge_demo"), "build_demo_moge", None)
        if build_moge is not None:  # MoGe-2 (geometry_estimation)
            written += build_moge(models_dir)
        build_da3 = getattr(_optional("nodes.models.depth_anything3_demo"), "build_demo_depth_anything3", None)
        if build_da3 is not None:  # Depth Anything 3 Mono-Large (geometry_estimation)
            written += build_da3(models_dir)
        build_union = getattr(_optional("nodes.models.controlnet_union_demo"), "build_demo_controlnet_union", None)
        if build_union is not None:  # an SDXL union ControlNet in xinsir's ProMax layout
            written += build_union(models_dir)
        build_pixart = getattr(_optional("nodes.models.pixart_demo"), "build_demo_pixart", None)
        if build_pixart is not None:  # PixArt-α and PixArt-Σ (flux-tiny-t5 and sd1-tiny-vae serve them)
            written += build_pixart(models_dir)
        build_seedvr2 = getattr(_optional("nodes.models.seedvr2_demo"), "build_demo_seedvr2", None)
        if build_seedvr2 is not None:  # SeedVR2's causal video VAE
            written += build_seedvr2(models_dir)
        seedvr2_dits = getattr(_optional("nodes.models.seedvr2_demo"), "build_demo_seedvr2_transformers", None)
        if seedvr2_dits is not None:  # SeedVR2's 3B and 7B transformers
            written += seedvr2_dits(models_dir)
        build_hunyuan_image = getattr(_optional("nodes.models.hunyuan_image_demo"), "build_demo_hunyuan_image", None)
        if build_hunyuan_image is not None:  # Hunyuan Image 2.1's DiT and 32x VAE
            written += build_hunyuan_image(models_dir)
        build_hunyuan_video15 = getattr(
            _optional("nodes.models.hunyuan_video15_demo"), "build_demo_hunyuan_video15", None
        )
        if build_hunyuan_video15 is not None:  # HunyuanVideo 1.5's DiT and causal 16x VAE
            written += build_hunyuan_video15(models_dir)
        build_kandinsky5 = getattr(_optional("nodes.models.kandinsky5_demo"), "build_demo_kandinsky5", None)
        if build_kandinsky5 is not None:  # Kandinsky 5 Lite's video and image DiTs
            written += build_kandinsky5(models_dir)
        build_sam3 = getattr(_optional("nodes.models.sam3_demo"), "build_demo_sam3", None)
        if build_sam3 is not None:  # SAM 3.1 multiplex (detector, tracker and its CLIP in one checkpoint)
            written += build_sam3(models_dir)
        build_hv_vae = getattr(_optional("nodes.models.hunyuan_video_vae_demo"), "build_demo_hunyuan_video_vae", None)
        if build_hv_vae is not None:  # HunyuanVideo 1.0's VAE (Kandinsky 5's video templates')
            written += build_hv_vae(models_dir)
        build_mochi = getattr(_optional("nodes.models.mochi_demo"), "build_demo_mochi", None)
        if build_mochi is not None:  # Genmo Mochi 1 preview's DiT and VAE decoder
            written += build_mochi(models_dir)
        build_cogvideox = getattr(_optional("nodes.models.cogvideox_demo"), "build_demo_cogvideox", None)
        if build_cogvideox is not None:  # CogVideoX: VOID's two transformers (48 input channels) and the VAE
            written += build_cogvideox(models_dir)
        build_hv = getattr(_optional("nodes.models.hunyuan_video_demo"), "build_demo_hunyuan_video", None)
        if build_hv is not None:  # HunyuanVideo 1.0's DiTs (text and image to video) and llava-llama3
            written += build_hv(models_dir)
        build_raft = getattr(_optional("nodes.models.raft_demo"), "build_demo_raft", None)
        if build_raft is not None:  # RAFT-large's full layout, seeded (VOID's warped noise)
            written += build_raft(models_dir)
        build_finterp = getattr(
            _optional("nodes.models.frame_interpolation_demo"), "build_demo_frame_interpolation", None
        )
        if build_finterp is not None:  # FILM at full size (the frame interpolation template's) and a tiny RIFE
            written += build_finterp(models_dir)
        build_hydit = getattr(_optional("nodes.models.hunyuan_dit_demo"), "build_demo_hunyuan_dit", None)
        if build_hydit is not None:  # HunyuanDiT's all-in-one checkpoint (sd1-tiny's VAE in it) and a BERT vocabulary
            written += build_hydit(models_dir)
    return written


def build_real_size_sd1(path: Path) -> Path:
    """A real-size SD1.5 checkpoint with random weights, for benchmarks that must move real amounts of bytes:
    the full UNet (860M parameters), CLIP-L (123M, OpenAI's 49408-token vocabulary, so the shipped tokenizer
    serves it) and the full VAE (84M), in the ldm single-file layout, float16 as users download it (2.1 GB).
    Weights are seeded normal draws scaled by 1/sqrt(fan-in) (norm scales 1), so activations stay finite.
    Built on the meta device: only the file's bytes are ever allocated."""
    with torch.device("meta"):
        unet = UNet2DConditionModel(cross_attention_dim=768)  # the other defaults are SD1.5's
    return _write_seeded(_sd1_layout(unet), Path(path))


def detectable_sd1_layout() -> dict[str, torch.Tensor]:
    """The key names and shapes (meta tensors) of build_detectable_sd1's file."""
    with torch.device("meta"):
        unet = UNet2DConditionModel(
            sample_size=8,
            block_out_channels=(320,),
            layers_per_block=1,
            down_block_types=("CrossAttnDownBlock2D",),
            up_block_types=("CrossAttnUpBlock2D",),
            cross_attention_dim=768,
            attention_head_dim=unet_mod.attention_heads("sd1", 320),
        )
    return _sd1_layout(unet)


def build_detectable_sd1(path: Path) -> Path:
    """The smallest SD1 checkpoint that ComfyUI's own model detection takes for SD1.5, so that a workflow on it runs
    on ComfyUI as well as here (the packs harness runs the same case on both; ComfyUI 0.10.0 cannot detect
    sd1-tiny). ComfyUI keeps no sizes from the file beyond what it matches: the UNet's input width (320) and context
    width (768), and it builds CLIP-L and the VAE at their published sizes. So the UNet is one level as wide as
    SD1.5's first (one resnet and one 8-head transformer per block), CLIP-L and the VAE are full-size; float16,
    465 MB. Seeded like build_real_size_sd1."""
    return _write_seeded(detectable_sd1_layout(), Path(path))


def _sd1_layout(unet: UNet2DConditionModel) -> dict[str, torch.Tensor]:
    """An ldm single-file SD1 checkpoint's tensors (meta) for `unet` (on the meta device), with full-size CLIP-L and
    VAE."""
    with torch.device("meta"):
        vae = AutoencoderKL(
            down_block_types=("DownEncoderBlock2D",) * 4,
            up_block_types=("UpDecoderBlock2D",) * 4,
            block_out_channels=(128, 256, 512, 512),
            layers_per_block=2,
            sample_size=512,
        )
        te = CLIPTextModel(
            CLIPTextConfig(
                vocab_size=49408,
                hidden_size=768,
                intermediate_size=3072,
                num_hidden_layers=12,
                num_attention_heads=12,
                max_position_embeddings=77,
                hidden_act="quick_gelu",
                projection_dim=768,
            )
        )
    return {
        **_prefixed(_unet_ldm(unet), unet_mod.LDM_UNET_PREFIX),
        **_prefixed(vae_mod.diffusers_to_ldm(vae.state_dict()), vae_mod.LDM_VAE_PREFIX),
        **_prefixed(_te_hf(te), "cond_stage_model.transformer."),
    }


def _write_seeded(layout: dict[str, torch.Tensor], path: Path) -> Path:
    gen = torch.Generator().manual_seed(SEED)
    tensors = {}
    for key, meta in sorted(layout.items()):
        if meta.ndim == 1 and "norm" in key and key.endswith(".weight"):
            tensors[key] = torch.ones(meta.shape, dtype=STORE_DTYPE)
        else:
            fan_in = max(1, meta[0].numel()) if meta.ndim > 1 else meta.numel()
            tensors[key] = (torch.randn(meta.shape, generator=gen) * fan_in**-0.5).to(STORE_DTYPE)
    return save_tiny(tensors, path)


def _controlnet_ldm(unet, gen: torch.Generator) -> dict[str, torch.Tensor]:
    cn = ControlNetModel.from_unet(unet, conditioning_embedding_out_channels=(8, 16, 16, 32))
    # from_unet zero-initialises the output convs, which would make the ControlNet a no-op.
    outs = [
        p
        for n, p in cn.named_parameters()
        if n.startswith(("controlnet_down_blocks.", "controlnet_mid_block.", "controlnet_cond_embedding.conv_out."))
    ]
    _randomize(outs, gen, 0.05)
    layout = _layout(unet)
    n_convs = 2 + 2 * (len(cn.config.conditioning_embedding_out_channels) - 1)
    ldm = unet_mod.diffusers_to_ldm(cn.state_dict(), layout, cn_mod.ldm_map(layout, n_convs))
    return _prefixed(ldm, "control_model.")


def _esrgan() -> dict[str, torch.Tensor]:
    """A 4x ESRGAN (RRDBNet) in the original key layout, 8 features and one RRDB (spandrel fixes the growth
    channels at 32); its own generator, so the models above keep their bytes."""
    from .esrgan import ESRGANConfig, RRDBNet

    net = RRDBNet(ESRGANConfig(in_nc=3, out_nc=3, nf=8, blocks=1, scale=4, plus=False, shuffle=None))
    _randomize(net.parameters(), torch.Generator().manual_seed(SEED + 2), 0.05)
    return net.state_dict()


def tiny_clip_vision(projection_dim: int, seed: int):
    """A two-layer CLIP vision tower with a `projection_dim`-wide projection, in transformers' layout (ComfyUI's
    clip_vision files), 224-pixel input and 14-pixel patches like ViT-L, 16 heads like every CLIP vision config
    ComfyUI ships; drawn after seeding torch's global generator with `seed`."""
    from transformers import CLIPVisionConfig, CLIPVisionModelWithProjection

    torch.manual_seed(seed)
    cfg = CLIPVisionConfig(
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=16,
        image_size=224,
        patch_size=14,
        projection_dim=projection_dim,
        hidden_act="quick_gelu",
    )
    return CLIPVisionModelWithProjection(cfg)


def _clip_vision() -> dict[str, torch.Tensor]:
    return tiny_clip_vision(32, SEED + 3).state_dict()


def _style_adapter() -> dict[str, torch.Tensor]:
    """A T2I-Adapter style model for the tiny pair: CLIP vision width 32 in, sd1-tiny's 32-wide text tokens
    out, 3 blocks and 8 style tokens like the released adapter."""
    from .style_model import StyleAdapter

    torch.manual_seed(SEED + 4)
    adapter = StyleAdapter(width=32, context_dim=32, layers=3, tokens=8)
    gen = torch.Generator().manual_seed(SEED + 4)
    _randomize([adapter.style_embedding, adapter.proj], gen, 32**-0.5)  # zeros would make it a no-op
    return adapter.state_dict()


def _sdxl_refiner() -> dict[str, torch.Tensor]:
    """The tiny SDXL refiner checkpoint in the published file's layout: UNet, VAE and CLIP-G alone as
    conditioner.embedders.0.model (OpenCLIP names), on a seed of its own so the other files keep their bytes."""
    torch.manual_seed(SEED + 5)
    unet, vae, te = _unet("sdxl_refiner"), _vae(), _clip(48, True, "gelu", projection_dim=48)
    return {
        **_prefixed(_unet_ldm(unet), unet_mod.LDM_UNET_PREFIX),
        **_prefixed(vae_mod.diffusers_to_ldm(vae.state_dict()), vae_mod.LDM_VAE_PREFIX),
        **_prefixed(clip_mod.hf_to_open_clip(te.state_dict()), "conditioner.embedders.0.model."),
    }


def _optional(name: str):
    try:
        return importlib.import_module(name)
    except ImportError:
        return None
