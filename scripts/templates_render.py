"""The render half of docs/benchmarks/templates.json: does each node-complete local template of the web UI
actually run here? For every template whose classes are all offered (scripts/templates_coverage.py), take the
template's own graph from the installed templates package, unpack its subgraphs, convert it to an API prompt
with our converter (comfy_bridge/formats.py), put our tiny demo files of the same family in place of its model
files (DEMO_FILES below, from the file names the template asks for; the per-family workflow scripts do the same
by hand), the workspace's example.png / example.mp4 / example.wav in place of its input images, videos and
sounds, shrink sizes, steps and frames (SHRINK), and run it in-process on the demo workspace. A template that needs a file we cannot
make (a family without a tiny demo file) is `renders: false` with that reason.

    python scripts/templates_render.py <workspace with demo-models> [--timeout 300] [--only NAME ...]

Each template runs in a worker process under a per-template timeout (a template past it is `false`, "timed out",
and the worker is restarted). The full run takes tens of minutes on a CPU, so CI only checks that the committed
shares follow from the committed flags (tests/nodes/test_templates_coverage.py).
"""

from __future__ import annotations

import argparse
import json
import queue
import re
import subprocess
import sys
import threading
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from scripts import templates_coverage  # noqa: E402

MODEL_FILE = re.compile(r"\.(safetensors|ckpt|pt|pth|bin|gguf|sft)$", re.IGNORECASE)
IMAGE_FILE = re.compile(r"\.(png|jpe?g|webp|bmp)$", re.IGNORECASE)
VIDEO_FILE = re.compile(r"\.(mp4|webm|mov|gif|mkv)$", re.IGNORECASE)
AUDIO_FILE = re.compile(r"\.(mp3|wav|flac|ogg|m4a|opus)$", re.IGNORECASE)
# (a file name the same prompt must also ask for, or None; the template's file; our tiny file of its family).
# The first rule whose patterns match wins; a model file no rule matches cannot be made here.
DEMO_FILES: list[tuple[str | None, str, str]] = [
    # Qwen Image 2.1: the prompt enhancer's Qwen3.5 stands in as the tiny Qwen3-VL (scripts/qwen_image21_workflow.py)
    (None, r"^qwen_image_2\.1.*vae", "qwen_image_2.1_vae_tiny.safetensors"),
    (None, r"^qwen_image_2\.1", "qwen_image_2.1_tiny.safetensors"),
    (r"^qwen_image_2\.1", r"^qwen3\.5_9b_qwen_image_2\.1|^qwen3vl_8b_int8", "qwen3vl_8b_tiny.safetensors"),
    # Mage-Flow: t2i and edit, base and turbo share one layout (nodes/models/mage_flow_demo.py); its Qwen3-VL-4B's
    # stand-in is qwen-image-2.1-tiny's Qwen3-VL, whose vision tower reads the edit templates' pictures
    (None, r"^mage_flow_vae", "mage_flow_vae_tiny.safetensors"),
    (None, r"^mage_flow", "mage_flow_tiny.safetensors"),
    (r"^mage_flow", r"^qwen3vl_4b", "qwen3vl_8b_tiny.safetensors"),
    # Krea 2 (scripts/krea2_workflow.py)
    (None, r"^krea2_turbo", "krea2_turbo_tiny.safetensors"),
    (None, r"^qwen3vl_4b_fp8", "qwen3vl_4b_tiny.safetensors"),  # Krea 2's, and the LLM templates' Qwen3-VL 4B
    # the style-reference template's LoRA (LoraLoaderModelOnly on the turbo model): krea2-tiny's LoRA
    (r"^krea2_turbo", r"^krea2_style_reference", "krea2_style_reference_tiny.safetensors"),
    # Cosmos Predict2 (no template yet): the 2B/14B text-to-image and Video2World DiTs, the old T5-XXL, the Wan 2.1 VAE
    # (nodes/models/cosmos_predict2_demo.py, scripts/cosmos_predict2_workflow.py)
    (None, r"^cosmos_predict2_.*t2i", "cosmos_predict2_2B_t2i_tiny.safetensors"),
    (None, r"^cosmos_predict2_.*video2world", "cosmos_predict2_2B_video2world_tiny.safetensors"),
    (r"^cosmos_predict2_", r"^oldt5_xxl", "oldt5_xxl_tiny.safetensors"),
    (r"^cosmos_predict2_", r"^wan_2\.1_vae", "wan_2.1_vae_tiny.safetensors"),
    # Anima (base v1.0 and the previews): its transformer with the LLM adapter, Qwen3 0.6B (nodes/models/anima_demo.py)
    (None, r"^anima-(base|preview)", "anima_tiny.safetensors"),
    (r"^anima-", r"^qwen_3_06b", "qwen_3_06b_base_tiny.safetensors"),
    # its LLLite model patches (nodes/models/anima_lllite_demo.py): the inpainting one (RGB and mask in), any other
    # control (canny, depth, ...: an RGB control image) in the "any" file's layout
    (None, r"^anima-lllite-inpainting", "anima_lllite_inpainting_tiny.safetensors"),
    (None, r"^anima-lllite-", "anima_lllite_any_tiny.safetensors"),
    # its LoRAs (the turbo LoRA): anima-tiny's LoRA (nodes/models/anima_demo.py)
    (r"^anima-", r"^anima-turbo-lora", "anima_turbo_lora_tiny.safetensors"),
    # FLUX 3 Image Klein (scripts/flux3_workflow.py): base and step-distilled
    (None, r"^flux3-image-klein-base", "flux3_klein_tiny.safetensors"),
    (None, r"^flux3-image-klein", "flux3_klein_distilled_tiny.safetensors"),
    (r"^flux3-image", r"^qwen3vl_4b", "qwen3vl_4b_flux3_tiny.safetensors"),
    # its edit templates' prompt upsampler (Generate Text): Qwen3.5, W4A8 as published (nodes/models/qwen35_demo.py)
    (r"^flux3-image", r"^qwen3\.5_9b_flux3", "qwen3.5_9b_flux3_prompt_upsampler_w4a8_tiny.safetensors"),
    (r"^flux3-image", r"^flux2-vae", "flux2-klein-tiny-vae.safetensors"),
    # MOSS-Image SFT and Base (nodes/models/moss_image_demo.py): the tiny Qwen3.5 is both the text encoder and
    # the prompt enhancer; the VAE is FLUX.2's (the published one has a smaller decoder)
    (None, r"^moss_image_", "moss_image_tiny.safetensors"),
    (r"^moss_image_", r"^qwen3\.5_9b", "qwen3.5_9b_flux3_prompt_upsampler_w4a8_tiny.safetensors"),
    (r"^moss_image_", r"^flux2-vae", "flux2-klein-tiny-vae.safetensors"),
    # FLUX.2 Klein 4B/9B, base and distilled
    (None, r"^flux-2-klein", "flux2-klein-tiny.safetensors"),
    (r"^flux-2-klein", r"^qwen_3_[48]b", "flux2-klein-tiny-qwen3.safetensors"),
    (r"^flux-2-klein", r"^flux2-vae|^full_encoder_small_decoder", "flux2-klein-tiny-vae.safetensors"),
    # FLUX.2 dev: its transformer, Mistral 3 text encoder and FLUX.2's VAE (nodes/models/flux2_dev_demo.py)
    (None, r"^flux2_dev", "flux2-dev-tiny.safetensors"),
    (r"^flux2_dev", r"^mistral_3_small_flux2", "flux2-dev-tiny-mistral3.safetensors"),
    (r"^flux2_dev", r"^flux2-vae|^full_encoder_small_decoder", "flux2-klein-tiny-vae.safetensors"),
    # Z-Image (turbo and base)
    (None, r"^z_image", "z-image-turbo-tiny.safetensors"),
    (None, r"^qwen_3_4b", "qwen_3_4b-tiny.safetensors"),  # Z-Image's and the LLM templates' Qwen3 4B
    (r"^z_image", r"^ae\.safetensors$", "z-image-turbo-tiny-ae.safetensors"),
    # its LoRAs: the switch template's pixel-art LoRA is ai-toolkit's layout, as the tiny one (nodes/models/zimage_demo.py)
    (r"^z_image", r"^pixel_art_style_z_image_turbo", "z_image_turbo_lora_tiny.safetensors"),
    # NetaYume Lumina (Lumina 2): the all-in-one checkpoint, NextDiT + Gemma 2 + Flux VAE (nodes/models/lumina2_demo.py)
    (None, r"^NetaYume", "netayume-lumina-tiny.safetensors"),
    # Qwen-Image-Layered and its Control fine-tune (same layout: nodes/models/qwen_image_layered_demo.py), its
    # RGBA VAE; the text encoder is Qwen-Image's
    (None, r"^qwen_image_layered_vae", "qwen_image_layered_vae_tiny.safetensors"),
    (None, r"^qwen_image_layered_(control_)?(bf16|fp8)", "qwen_image_layered_tiny.safetensors"),
    (r"^qwen_image_layered", r"^qwen_2\.5_vl_7b", "qwen_2.5_vl_7b_tiny.safetensors"),
    # Qwen-Image and Qwen-Image-Edit (scripts/qwen_image_edit_workflow.py): 2511 has its own tiny transformer
    (None, r"^qwen_image_edit_2511", "qwen_image_edit_2511_tiny.safetensors"),
    # Marigold V2's base model, ComfyUI's int8 ConvRot file (nodes/models/marigold_demo.py)
    (None, r"^qwen_image_edit_2509_int8_convrot", "qwen_image_edit_2509_int8_convrot_tiny.safetensors"),
    (None, r"^qwen_image_(edit_2509|edit_fp8|2512|fp8|bf16)", "qwen_image_tiny.safetensors"),
    (r"^qwen_image_edit", r"^qwen_2\.5_vl_7b", "qwen_2.5_vl_7b_edit_tiny.safetensors"),
    (r"^qwen_image_(2512|fp8|bf16)", r"^qwen_2\.5_vl_7b", "qwen_2.5_vl_7b_tiny.safetensors"),
    (r"^qwen_image_(edit|2512|fp8|bf16)|^krea2_turbo|^anima-", r"^qwen_image_vae", "qwen_image_vae_tiny.safetensors"),
    # FireRed Image Edit 1.0 / 1.1: Qwen-Image-Edit 2509 retrained (FireRedTeam's inference.py runs it on diffusers'
    # QwenImageEditPlusPipeline; fal.ai's model card), the same transformer layout, so a real file is detected as
    # Qwen-Image by its keys as in the newest ComfyUI (txt_norm, no marker of its own); 2509's tiny files stand in
    (None, r"^FireRed-Image-Edit-[\d.]+-transformer", "qwen_image_tiny.safetensors"),
    (r"^FireRed-Image-Edit", r"^qwen_2\.5_vl_7b", "qwen_2.5_vl_7b_edit_tiny.safetensors"),
    (r"^FireRed-Image-Edit", r"^qwen_image_vae", "qwen_image_vae_tiny.safetensors"),
    # DiffSynth's Qwen-Image ControlNets (model_patches; nodes/models/model_patch_demo.py): the inpaint layout, the others
    (None, r"^qwen_image_inpaint_diffsynth", "qwen_image_inpaint_diffsynth_tiny.safetensors"),
    (None, r"^qwen_image_\w+_diffsynth_controlnet", "qwen_image_diffsynth_tiny.safetensors"),
    # Z-Image-Turbo Fun ControlNet Union, first release (model_patches; nodes/models/model_patch_demo.py)
    (None, r"^Z-Image-Turbo-Fun-Controlnet-Union\.safetensors$", "z_image_turbo_fun_controlnet_union_tiny.safetensors"),
    # Qwen-Image InstantX ControlNets (nodes/models/qwen_image_controlnet_demo.py): Union and Inpainting
    (None, r"^Qwen-Image-InstantX-ControlNet-Inpainting", "qwen_image_instantx_inpainting_tiny.safetensors"),
    (None, r"^Qwen-Image-InstantX-ControlNet-Union", "qwen_image_instantx_union_tiny.safetensors"),
    # alibaba-pai's Qwen-Image-2512 Fun ControlNet Union (same file): five control blocks reading the main model
    (None, r"^Qwen-Image-2512-Fun-Controlnet-Union", "qwen_image_2512_fun_controlnet_union_tiny.safetensors"),
    # Marigold V2 (nodes/models/marigold_demo.py): Qwen-Image-Edit 2509 as ComfyUI's int8 ConvRot file, the task's
    # conditioning, VAE (Qwen-Image's layout: its tiny one) and LoRA (a Qwen-Image LoRA: the family's tiny one)
    (None, r"^marigold_v2_.*_conditioning", "marigold_v2_conditioning_tiny.safetensors"),
    (None, r"^marigold_v2_.*_vae", "qwen_image_vae_tiny.safetensors"),
    (None, r"^marigold_v2_", "qwen_image_edit_tiny_lightning.safetensors"),
    # MoGe-2 (geometry_estimation; nodes/models/moge_demo.py): the ViT-L normal model; MoGe-3 has no tiny file yet
    (None, r"^moge_2_vitl", "moge_2_vitl_normal_tiny.safetensors"),
    # Depth Anything 3 (geometry_estimation; nodes/models/depth_anything3_demo.py): Mono-Large; Metric-Large has the
    # same layout (the Small/Base multi-view files have no tiny file: they are not supported yet)
    (None, r"^depth_anything_3_(mono|metric)_large", "depth_anything_3_mono_large_tiny.safetensors"),
    # any LoRA of a Qwen-Image template (Lightning, style, angles, control): the family's tiny LoRA; never a
    # ControlNet file (the Fun Union's has no tiny file yet), which a LoRA cannot stand for
    (r"^qwen_image_(edit|2512|fp8|bf16)", r"(?i)^(?!.*controlnet).*qwen", "qwen_image_edit_tiny_lightning.safetensors"),
    # Wan 2.1 / 2.2 (scripts/wan_*_workflow.py): each variant's tiny model, the 14B and 1.3B sizes alike
    (None, r"^wan2\.2_i2v_high_noise_14B", "wan2.2_i2v_high_noise_14B_tiny.safetensors"),
    (None, r"^wan2\.2_i2v_low_noise_14B", "wan2.2_i2v_low_noise_14B_tiny.safetensors"),
    # Wan 2.2 14B text-to-video: ComfyUI's fp8-scaled experts, as the tiny ones are stored
    (None, r"^wan2\.2_t2v_high_noise_14B", "wan2.2_t2v_high_noise_14B_fp8_scaled_tiny.safetensors"),
    (None, r"^wan2\.2_t2v_low_noise_14B", "wan2.2_t2v_low_noise_14B_fp8_scaled_tiny.safetensors"),
    (None, r"^wan2\.2_ti2v_5B", "wan2.2_ti2v_5B_tiny.safetensors"),
    # Wan 2.2 Fun 5B Control and InP (nodes/models/wan_demo.py: 148 and 100 input channels on the 48-channel latent)
    (None, r"^wan2\.2_fun_control_5B", "wan2.2_fun_control_5B_tiny.safetensors"),
    (None, r"^wan2\.2_fun_inpaint_5B", "wan2.2_fun_inpaint_5B_tiny.safetensors"),
    (None, r"^wan2\.2_fun_control_(high|low)_noise_14B", "wan2.2_fun_control_low_noise_14B_tiny.safetensors"),
    (None, r"^wan2\.1_t2v_1\.3B", "wan2.1_t2v_1.3B_tiny.safetensors"),
    # Wan 2.1 T2V 14B (the Wan Alpha template's): the same layout at other widths, so the tiny text-to-video file
    (None, r"^wan2\.1_t2v_14B", "wan2.1_t2v_1.3B_tiny.safetensors"),
    # Wan Alpha's two VAEs (RGB and alpha decoders): each a whole Wan 2.1 VAE (the same 254 MB bf16 file as
    # wan_2.1_vae.safetensors, read by ComfyUI's Wan VAE detection); its RGBA LoRA is on the Wan 2.1 T2V 14B blocks
    (None, r"^wan_alpha_2\.1_vae_(rgb|alpha)_channel", "wan_2.1_vae_tiny.safetensors"),
    (None, r"^wan_alpha_2\.1_rgba_lora", "wan_t2v_14B_lora_tiny.safetensors"),
    (None, r"^wan2\.1_i2v_480p_14B", "wan2.1_i2v_480p_14B_tiny.safetensors"),
    (None, r"^wan2\.1_flf2v_720p_14B", "wan2.1_flf2v_720p_14B_tiny.safetensors"),
    (None, r"^wan2\.1_vace_", "wan2.1_vace_1.3B_tiny.safetensors"),
    (None, r"^wan2\.1_fun_camera_v1\.1_", "wan2.1_fun_camera_v1.1_1.3B_tiny.safetensors"),
    # Wan 2.2 14B Fun Camera's two experts (ComfyUI's WAN22_Camera: 36 input channels, no CLIP image states)
    (None, r"^wan2\.2_fun_camera_(high|low)_noise_14B", "wan2.2_fun_camera_14B_tiny.safetensors"),
    (None, r"^wan2\.1_fun_control_1\.3B", "wan2.1_fun_control_1.3B_tiny.safetensors"),
    # Wan 2.2 14B Fun InP's two experts: Wan 2.1 Fun InP's layout (36 input channels: noise, mask, image latent; no
    # CLIP image states), ComfyUI's same i2v detection; workflows_json/wan22_fun_inpaint.json runs that template on it
    (None, r"^wan2\.1_fun_inp_1\.3B|^wan2\.2_fun_inpaint_(high|low)_noise_14B", "wan2.1_fun_inp_1.3B_tiny.safetensors"),
    # Wan 2.1 ATI (video_wan_ati, WanTrackToVideo): Kijai's file of ByteDance's ATI, a fine-tune of Wan 2.1
    # image-to-video 14B in its layout (36 input channels, CLIP image states): that family's tiny files stand in
    (None, r"^Wan2_1-I2V-ATI-14B", "wan2.1_i2v_480p_14B_tiny.safetensors"),
    (r"^Wan2_1-I2V-ATI-14B", r"^umt5_xxl", "umt5_xxl_tiny.safetensors"),
    (r"^Wan2_1-I2V-ATI-14B", r"^wan_2\.1_vae", "wan_2.1_vae_tiny.safetensors"),
    (r"^Wan2_1-I2V-ATI-14B", r"^clip_vision_h", "clip-vision-tiny.safetensors"),
    # Wan-Move (Kijai's Wan21-WanMove 14B: Wan 2.1 image-to-video's layout, the tracks live in its conditioning), its
    # lightx2v I2V 14B distill LoRA on those blocks: the tiny i2v file and its LoRA
    (None, r"^Wan21-WanMove", "wan2.1_i2v_480p_14B_tiny.safetensors"),
    (r"^Wan21-WanMove", r"^umt5_xxl", "umt5_xxl_tiny.safetensors"),
    (r"^Wan21-WanMove", r"^wan_2\.1_vae", "wan_2.1_vae_tiny.safetensors"),
    (r"^Wan21-WanMove", r"^clip_vision_h", "clip-vision-tiny.safetensors"),
    (r"^Wan21-WanMove", r"^lightx2v_I2V_14B_480p", "wan2.2_i2v_lightx2v_4steps_lora_tiny_high_noise.safetensors"),
    (r"^wan2\.[12]_", r"^umt5_xxl", "umt5_xxl_tiny.safetensors"),
    (r"^wan2\.[12]_", r"^wan_2\.1_vae", "wan_2.1_vae_tiny.safetensors"),
    (r"^wan2\.2_(ti2v|fun_control|fun_inpaint)_5B", r"^wan2\.2_vae", "wan2.2_vae_tiny.safetensors"),
    (r"^wan2\.[12]_", r"^clip_vision_h", "clip-vision-tiny.safetensors"),
    (
        r"^wan2\.2_i2v",
        r"^wan2\.2_i2v_lightx2v_4steps_lora_v1_high",
        "wan2.2_i2v_lightx2v_4steps_lora_tiny_high_noise.safetensors",
    ),
    (
        r"^wan2\.2_i2v",
        r"^wan2\.2_i2v_lightx2v_4steps_lora_v1_low",
        "wan2.2_i2v_lightx2v_4steps_lora_tiny_low_noise.safetensors",
    ),
    (r"^wan2\.1_vace", r"^Wan21_CausVid", "wan2.1_causvid_t2v_lora_rank32_tiny.safetensors"),
    # Wan Animate 2 (nodes/models/wan_demo.py: Wan 2.1 image-to-video's layout with Animate 2's metadata); its LoRA
    # (lightx2v's I2V 14B distill LoRA) is a Wan 2.1 i2v LoRA: the tiny i2v LoRA has its layout and shapes
    (None, r"^wan_animate_2_", "wan_animate_2_14B_tiny.safetensors"),
    (r"^wan_animate_2_", r"^umt5_xxl", "umt5_xxl_tiny.safetensors"),
    (r"^wan_animate_2_", r"^Wan2_1_VAE", "wan_2.1_vae_tiny.safetensors"),
    (r"^wan_animate_2_", r"^clip_vision_h", "clip-vision-tiny.safetensors"),
    (r"^wan_animate_2_", r"^lightx2v_I2V_14B_480p", "wan2.2_i2v_lightx2v_4steps_lora_tiny_high_noise.safetensors"),
    # Wan SCAIL-2 (nodes/models/wan_demo.py: Wan 2.1 image-to-video's layout at 20 input channels with the pose and
    # identity-mask patch embeddings; its int8 ConvRot twin); its two LoRAs (lightx2v's I2V 14B distill LoRA and
    # the SCAIL-2 DPO LoRA, both on the Wan 2.1 14B blocks) take the tiny i2v LoRA, of those blocks' shapes
    (None, r"^wan2\.1_14B_SCAIL_2_int8_convrot", "wan2.1_14B_SCAIL_2_int8_convrot_tiny.safetensors"),
    (None, r"^wan2\.1_14B_SCAIL_2", "wan2.1_14B_SCAIL_2_tiny.safetensors"),
    (r"^wan2\.1_14B_SCAIL_2", r"^umt5_xxl", "umt5_xxl_tiny.safetensors"),
    (r"^wan2\.1_14B_SCAIL_2", r"^Wan2_1_VAE", "wan_2.1_vae_tiny.safetensors"),
    (r"^wan2\.1_14B_SCAIL_2", r"^clip_vision_h", "clip-vision-tiny.safetensors"),
    (
        r"^wan2\.1_14B_SCAIL_2",
        r"^(lightx2v_I2V_14B_480p|wan2\.1_SCAIL_2_DPO_lora)",
        "wan2.2_i2v_lightx2v_4steps_lora_tiny_high_noise.safetensors",
    ),
    # InfiniteTalk (nodes/models/wan_infinitetalk_demo.py): Kijai's fp8-scaled Wan 2.1 I2V 14B (a two-head tiny file
    # in Wan's plain layout: two speakers' maps average two halves of the heads), the single / multi audio patch, the
    # wav2vec2 Chinese base encoder (the tiny large-layout one: the patch reads every layer's features, whatever the
    # count) and lightx2v's I2V 14B distill LoRA (a rank-4 LoRA of the two-head file's blocks)
    (None, r"^Wan2_1-I2V-14B-480p", "wan2.1_i2v_480p_14B_2heads_tiny.safetensors"),
    (r"^Wan2_1-I2V-14B-480p", r"^wan2\.1_infiniteTalk_(single|multi)", "wan2.1_infiniteTalk_tiny.safetensors"),
    (r"^Wan2_1-I2V-14B-480p", r"^wav2vec2-chinese-base", "wav2vec2_large_english_tiny.safetensors"),
    (r"^Wan2_1-I2V-14B-480p", r"^umt5_xxl", "umt5_xxl_tiny.safetensors"),
    (r"^Wan2_1-I2V-14B-480p", r"^Wan2_1_VAE", "wan_2.1_vae_tiny.safetensors"),
    (r"^Wan2_1-I2V-14B-480p", r"^lightx2v_I2V_14B_480p", "wan2.1_i2v_14B_2heads_lightx2v_lora_tiny.safetensors"),
    # Wan HuMo (nodes/models/wan_humo_demo.py): the 17B and 1.7B models, the Whisper encoder and the lightx2v I2V 14B
    # distill LoRA the template loads onto the model (a LoRA of the tiny 17B file's blocks)
    (None, r"^humo_17B", "humo_17B_tiny.safetensors"),
    (None, r"^humo_1\.7B", "humo_1.7B_tiny.safetensors"),
    (r"^humo_", r"^whisper_large_v3", "whisper_large_v3_tiny.safetensors"),
    (r"^humo_", r"^lightx2v_I2V_14B_480p", "humo_lightx2v_lora_tiny.safetensors"),
    (r"^humo_", r"^umt5_xxl", "umt5_xxl_tiny.safetensors"),
    (r"^humo_", r"^wan_2\.1_vae", "wan_2.1_vae_tiny.safetensors"),
    # Wan 2.2 S2V (nodes/models/wan_s2v_demo.py): the S2V model, its wav2vec 2.0 encoder and the lightx2v Wan 2.2
    # text-to-video LoRA the template loads onto it
    (None, r"^wan2\.2_s2v_14B", "wan2.2_s2v_14B_tiny.safetensors"),
    (r"^wan2\.2_s2v", r"^wav2vec2_large_english", "wav2vec2_large_english_tiny.safetensors"),
    (
        r"^wan2\.2_s2v",
        r"^wan2\.2_t2v_lightx2v_4steps_lora",
        "wan2.2_t2v_lightx2v_4steps_lora_tiny_high_noise.safetensors",
    ),
    (r"^wan2\.2_s2v", r"^umt5_xxl", "umt5_xxl_tiny.safetensors"),
    (r"^wan2\.2_s2v", r"^wan_2\.1_vae", "wan_2.1_vae_tiny.safetensors"),
    # Bernini-R (nodes/models/wan_demo.py): its two experts in Wan 2.2 14B text-to-video's scaled fp8 layout, umT5,
    # the Wan 2.1 VAE (Kijai's file) and lightx2v's T2V 14B distill LoRA (a LoRA of the text-to-video blocks' shapes)
    (None, r"^wan2\.2_bernini_r_high_noise", "wan2.2_bernini_r_high_noise_fp8_scaled_tiny.safetensors"),
    (None, r"^wan2\.2_bernini_r_low_noise", "wan2.2_bernini_r_low_noise_fp8_scaled_tiny.safetensors"),
    (r"^wan2\.2_bernini_r", r"^umt5_xxl", "umt5_xxl_tiny.safetensors"),
    (r"^wan2\.2_bernini_r", r"^Wan2_1_VAE", "wan_2.1_vae_tiny.safetensors"),
    (r"^wan2\.2_bernini_r", r"^lightx2v_T2V_14B", "wan_t2v_14B_lora_tiny.safetensors"),
    # MiniMax H3 (scripts/minimax_h3_workflow.py)
    (None, r"^minimax_h3_fl2va", "minimax_h3_fl2va_pruned_tiny.safetensors"),
    # the ref2va weights are the same network in the same published layout (its own training, not its own shapes)
    (None, r"^minimax_h3_ref2va", "minimax_h3_fl2va_pruned_tiny.safetensors"),
    (None, r"^fastvideo_fasth3", "fastvideo_fasth3_tiny.safetensors"),  # FastVideo's distilled H3, its VSA gates
    (r"^minimax_h3", r"^minimax_h3_video_vae", "minimax_h3_video_vae_tiny.safetensors"),
    (r"^minimax_h3", r"^minimax_h3_audio_vae", "minimax_h3_audio_vae_tiny.safetensors"),
    (r"^minimax_h3", r"^qwen3vl_32b_minimax_h3", "qwen3vl_32b_minimax_h3_tiny.safetensors"),
    # the turbo LoRAs' comfyui files: ComfyUI's key layout on the published names, as the tiny LoRA's
    (r"^minimax_h3", r"^minimax_h3_(fl2v|ref2v)_turbo_.*_comfyui", "minimax_h3_lora_tiny.safetensors"),
    # LTX-2 / 2.3 (ltx2-tiny, nodes/models/ltx2_demo.py): the LoRAs first (their names also start with the
    # checkpoint's), then the checkpoint, its Gemma 3 text encoder and the latent upsampler
    (r"^ltx-2", r"^ltx-2\.3-id-lora", "ltx-2.3-id-lora-talkvid-3k_tiny.safetensors"),  # ID-LoRA's own layout
    (r"^ltx-2", r"^ltx[-_]2.*lora", "ltx-2-19b-lora_tiny.safetensors"),
    (r"^ltx-2", r"^ltx2\.3-transition", "ltx-2-19b-lora_tiny.safetensors"),  # the style-transition template's LoRA
    (r"^ltx-2", r"^ltx2-squish", "ltx-2-19b-lora_tiny.safetensors"),  # the i2v LoRA template's effect LoRA
    # LTX-2.5's transformer (nodes/models/ltx25_transformer_demo.py), before LTX-2's rule that its name also fits
    (None, r"^ltx-2\.5-22b", "ltx-2.5-22b-distilled-transformer_tiny.safetensors"),
    (None, r"^ltx-2(\.\d)?-(19b|22b)", "ltx-2-19b-dev_tiny.safetensors"),
    (r"^ltx-2", r"^gemma_3_12B_it", "gemma_3_12B_it_tiny.safetensors"),
    (r"^ltx-2", r"^ltx-2(\.\d)?-spatial-upscaler", "ltx-2-spatial-upscaler-x2-1.0_tiny.safetensors"),
    # LTX-2.5 (nodes/models/ltx25_demo.py): the diffusion-decoder video VAE, the Gemma 4 text encoder with its
    # dual projection and the Gemma 4 E2B prompt enhancer
    (r"^ltx-2\.5", r"^ltx-2\.5-video-vae", "ltx-2.5-video-vae_tiny.safetensors"),
    (r"^ltx-2\.5", r"^gemma4-12b-with-proj", "gemma4-12b-with-proj-ltx-2.5_tiny.safetensors"),
    (r"^ltx-2\.5", r"^gemma4_e2b_it", "gemma4_e2b_it_tiny.safetensors"),  # the prompt enhancer
    (r"^ltx-2\.5", r"^ltx-2\.5-audio-vae", "ltx-2.5-audio-vae_tiny.safetensors"),  # VAELoader's (ltx25_audio_demo)
    # its latent upscaler: LTX-2's layout, read by the same branch of ComfyUI's LatentUpscaleModelLoader
    (r"^ltx-2\.5", r"^ltx-2\.5-latent-spatial-upscaler", "ltx-2-spatial-upscaler-x2-1.0_tiny.safetensors"),
    # LTX-Video 0.9 (nodes/models/ltxv_demo.py): 0.9's and 0.9.5's checkpoints (the same transformer layout; the
    # tiny VAE has 0.9.5's kind of block list, without its decoder's timestep conditioning), T5-XXL (type ltxv)
    (None, r"^ltx-video-2b-v0\.9", "ltx-video-2b-v0.9_tiny.safetensors"),
    (r"^ltx-video-2b-v0\.9", r"^t5xxl", "flux-tiny-t5.safetensors"),
    (None, r"^svd(_xt)?[._]", "svd_xt-tiny.safetensors"),  # Stable Video Diffusion (nodes/models/svd_demo.py)
    # SeedVR2's causal video VAE and its 3B / 7B transformers (nodes/models/seedvr2_demo.py; the int8 ConvRot
    # files' tiny stand-ins are float: the 3B / 7B layouts are what they share)
    (None, r"^seedvr2_ema_vae", "seedvr2_ema_vae_fp16_tiny.safetensors"),
    (None, r"^seedvr2_3b", "seedvr2_3b_tiny.safetensors"),
    (None, r"^seedvr2_7b", "seedvr2_7b_tiny.safetensors"),
    # Hunyuan Image 2.1 (nodes/models/hunyuan_image_demo.py): the DiT, its 32x VAE and a 4-layer Qwen2.5-VL (layer -3)
    (None, r"^hunyuan_?image_?2\.1.*vae", "hunyuan_image_2.1_vae_tiny.safetensors"),
    (None, r"^hunyuanimage2\.1(?!.*(refiner|distilled))", "hunyuanimage2.1_tiny.safetensors"),
    (None, r"^hunyuanimage2\.1.*distilled", "hunyuanimage2.1_distilled_tiny.safetensors"),
    (r"^hunyuanimage2\.1", r"^qwen_2\.5_vl_7b", "qwen_2.5_vl_7b_hunyuan_image_tiny.safetensors"),
    (r"^hunyuanimage2\.1", r"^byt5_small_glyphxl", "byt5_small_glyphxl_tiny.safetensors"),
    # HunyuanVideo 1.5 (nodes/models/hunyuan_video15_demo.py): the 480p/720p t2v/i2v DiTs and Capybara v0.1 (a
    # HunyuanVideo 1.5 fine-tune in the same layout), the causal VAE, its Qwen2.5-VL; its ByT5 glyph encoder is
    # hunyuan-image-2.1-tiny's (the same ByT5-small glyph file)
    (None, r"^hunyuanvideo1\.5_(480p|720p)_(i2v|t2v)(?!.*distilled)", "hunyuanvideo1.5_tiny.safetensors"),
    (None, r"^capybara_v0\.1", "hunyuanvideo1.5_tiny.safetensors"),
    (None, r"^hunyuanvideo15_vae", "hunyuanvideo15_vae_tiny.safetensors"),
    (None, r"^hunyuanvideo15_latent_upsampler_1080p", "hunyuanvideo15_latent_upsampler_1080p_tiny.safetensors"),
    (r"^hunyuanvideo1\.5|^capybara_v0", r"^qwen_2\.5_vl_7b", "qwen_2.5_vl_7b_hunyuan_video15_tiny.safetensors"),
    (r"^hunyuanvideo1\.5|^capybara_v0", r"^byt5_small_glyphxl", "byt5_small_glyphxl_tiny.safetensors"),
    # Kandinsky 5 Lite video (nodes/models/kandinsky5_demo.py): the t2v and i2v DiTs share one layout; HunyuanVideo
    # 1.0's VAE (nodes/models/hunyuan_video_vae_demo.py); its Qwen2.5-VL and CLIP-L (the tiny long CLIP-L with OpenAI's
    # vocabulary). The image model (kandinsky5lite_t2i) has its own tiny file at the 2560 width ComfyUI tells it by,
    # the same text encoders and Flux's VAE (ae.safetensors: flux-tiny's, 16 channels as the image DiT reads).
    (None, r"^kandinsky5lite_(t2v|i2v)", "kandinsky5lite_t2v_tiny.safetensors"),
    (None, r"^kandinsky5lite_t2i", "kandinsky5lite_t2i_tiny.safetensors"),
    # SAM 3 / 3.1 (nodes/models/sam3_demo.py): one checkpoint with the detector, the tracker and its CLIP
    (None, r"^sam3(\.1)?[._]", "sam3.1_multiplex_fp16_tiny.safetensors"),
    # RAFT-large (OpticalFlowLoader; VOID's warped noise): a seeded stand-in at full size (nodes/models/raft_demo.py)
    (None, r"^raft_large", "raft_large_C_T_SKHT_V2-ff5fadd5.safetensors"),
    # VOID's CogVideoX-Fun V1.5 passes, CogVideoX's VAE and T5-XXL (CLIPLoader type cogvideox; flux-tiny-t5, the
    # 32-wide states the tiny transformers read): nodes/models/cogvideox_demo.py
    (None, r"^void_pass1", "void_pass1_tiny.safetensors"),
    (None, r"^void_pass2", "void_pass2_tiny.safetensors"),
    (None, r"^cogvideox_vae", "cogvideox_vae_tiny.safetensors"),
    (r"^void_pass", r"^t5xxl", "flux-tiny-t5.safetensors"),
    # FILM (FrameInterpolationModelLoader): a seeded stand-in at full size (nodes/models/frame_interpolation_demo.py);
    # RIFE 4.2x files get the tiny RIFE, whose widths the loader reads from its shapes
    (None, r"^film_net", "film_net_fp16.safetensors"),
    (None, r"^rife", "rife_v4.26_tiny.safetensors"),
    (None, r"^hunyuan_video_vae", "hunyuan_video_vae_tiny.safetensors"),
    (r"^kandinsky5lite_(t2v|i2v|t2i)", r"^qwen_2\.5_vl_7b", "qwen_2.5_vl_7b_tiny.safetensors"),
    (r"^kandinsky5lite_(t2v|i2v|t2i)", r"^clip_l\.", "hidream_tiny_clip_l.safetensors"),
    (r"^kandinsky5lite_t2i", r"^ae\.safetensors$", "flux-tiny-ae.safetensors"),
    # HunyuanVideo 1.0 (nodes/models/hunyuan_video_demo.py): the text-to-video DiT (and the v2 replace image-to-video
    # file, read the same way), the v1 concat image-to-video DiT, llava-llama3, its vision file and the tiny long
    # CLIP-L with OpenAI's vocabulary; its VAE is the rule above
    (None, r"^hunyuan_video_(t2v|v2_replace_image_to_video)", "hunyuan_video_t2v_tiny.safetensors"),
    (None, r"^hunyuan_video_image_to_video", "hunyuan_video_i2v_tiny.safetensors"),
    (r"^hunyuan_video_(t2v|v2_replace|image_to_video)", r"^llava_llama3", "llava_llama3_tiny.safetensors"),
    (r"^hunyuan_video_(t2v|v2_replace|image_to_video)", r"^clip_l\.", "hidream_tiny_clip_l.safetensors"),
    (None, r"^llava_llama3_vision", "llava_llama3_vision_tiny.safetensors"),
    # HiDream-I1 (full, dev, fast) and E1 / E1.1: one tiny transformer (the same layout), its four text encoders
    # and Flux's VAE (nodes/models/hidream_demo.py)
    (None, r"^hidream_(i1|e1)", "hidream_i1_tiny.safetensors"),
    (r"^hidream_", r"^clip_l_hidream", "hidream_tiny_clip_l.safetensors"),
    (r"^hidream_", r"^clip_g_hidream", "hidream_tiny_clip_g.safetensors"),
    (r"^hidream_", r"^t5xxl", "hidream_tiny_t5xxl.safetensors"),
    (r"^hidream_", r"^llama_3\.1_8b_instruct", "llama_3.1_8b_instruct_tiny.safetensors"),
    (r"^hidream_", r"^ae\.safetensors$", "flux-tiny-ae.safetensors"),
    # Chroma1-HD (nodes/models/chroma_demo.py): its transformer, Flux.1's T5 and autoencoder (the template's files)
    (None, r"^Chroma1-HD", "chroma_tiny.safetensors"),
    (r"^Chroma1-HD", r"^t5xxl", "flux-tiny-t5.safetensors"),
    (r"^Chroma1-HD", r"^ae\.safetensors$", "flux-tiny-ae.safetensors"),
    # Chroma1 Radiance (nodes/models/chroma_radiance_demo.py): pixel space (the pixel_space VAE), Flux.1's T5
    (None, r"^chroma-radiance", "chroma_radiance_tiny.safetensors"),
    (r"^chroma-radiance", r"^t5xxl", "flux-tiny-t5.safetensors"),
    # PixelDiT (nodes/models/pixeldit_demo.py): pixel space (the pixel_space VAE), its Gemma 2 2B-it
    (None, r"^pixeldit_", "pixeldit_tiny.safetensors"),
    (r"^pixeldit_", r"^gemma_2_2b_it_elm", "gemma_2_2b_it_elm_tiny.safetensors"),
    # USO (flux1_dev_uso_reference_image_gen): its DiT LoRA in the released layout, which ComfyUI recognises by the
    # released depth's keys, so the checkpoint is flux-tiny at that depth (nodes/models/uso_demo.py)
    (r"^uso-flux1", r"^flux1-dev", "flux1-dev-uso-tiny.safetensors"),
    (r"^flux1-dev", r"^uso-flux1-dit-lora", "uso-flux1-dit-lora-v1-tiny.safetensors"),
    # Flux.1 dev / schnell / Krea / Kontext (same transformer layout; Fill and Canny have other input widths)
    (None, r"^flux1-(dev|schnell|krea-dev|dev-kontext)", "flux-tiny.safetensors"),
    # FLUX.1 Fill dev OneReward (bytedance-research/OneReward: FLUX.1-Fill-dev fine-tuned, run there as diffusers'
    # FluxTransformer2DModel): a Flux file by its keys and Fill by its input width, as ComfyUI's detection has it
    (None, r"^flux1-fill-dev|^flux\.1-fill-dev-OneReward", "flux-fill-tiny.safetensors"),
    # FLUX.1 Canny / Depth dev: the control image's latent joins the input (128 wide), told apart by that width
    (None, r"^flux1-(canny|depth)-dev(?!-lora)", "flux-canny-tiny.safetensors"),  # the transformers, not their LoRAs
    # Flux Redux and its SigLIP image tower, sized for flux-tiny (nodes/models/redux_demo.py)
    (None, r"^flux1-redux-dev", "flux1-redux-dev-tiny.safetensors"),
    (None, r"^sigclip_vision_patch14_384", "sigclip-vision-tiny.safetensors"),
    # USO's style projector for them (nodes/models/uso_demo.py)
    (None, r"^uso-flux1-projector", "uso-flux1-projector-v1-tiny.safetensors"),
    (r"^flux1-|^flux\.1-fill-dev", r"^clip_l\.", "flux-tiny-clip_l.safetensors"),
    (r"^flux1-|^flux\.1-fill-dev", r"^t5xxl", "flux-tiny-t5.safetensors"),
    (r"^flux1-|^flux\.1-fill-dev", r"^ae\.safetensors$", "flux-tiny-ae.safetensors"),
    # SDXL base / turbo, SD3.5 and its ControlNets
    # SDXL revision (sdxl_revision_text_prompts): CLIP-G's 1280-wide image embedding fills SDXL's pooled slot, which
    # sdxl-tiny has narrower; sdxl-revision-tiny keeps the real width (nodes/models/unclip_demo.py)
    (r"^clip_vision_g", r"^sd_xl_base", "sdxl-revision-tiny.safetensors"),
    (None, r"^clip_vision_g", "clip-vision-g-tiny.safetensors"),
    (None, r"^sd_xl_(base|turbo)", "sdxl-tiny.safetensors"),
    (None, r"^sd_xl_refiner", "sdxl-refiner-tiny.safetensors"),
    (None, r"^sd3\.5_large_fp8", "sd3-tiny.safetensors"),
    (r"^sd3\.5", r"^sd3\.5_large_controlnet", "sd3-tiny-controlnet.safetensors"),
    # Lotus-D depth (nodes/models/lotus_demo.py), with SD's VAE beside it (vae-ft-mse-840000: sd1-tiny's)
    (None, r"^lotus-depth-d", "lotus-depth-d-v1-1_tiny.safetensors"),
    (r"^lotus-depth-d", r"^vae-ft-mse-840000", "sd1-tiny-vae.safetensors"),
    # Any family: the 4x ESRGAN upscaler
    (None, r"^RealESRGAN_x4", "esrgan-tiny-x4.safetensors"),
]
# Input name -> how to shrink an int (or float) value so a render takes seconds on a CPU.
SHRINK = {
    "width": lambda v: min(v, 64),
    "height": lambda v: min(v, 64),
    "steps": lambda v: min(v, 2),
    "batch_size": lambda v: 1,
    "length": lambda v: min(v, 9 if v % 8 == 1 else 5),
    "video_frames": lambda v: min(v, 5),  # SVD_img2vid_Conditioning's
    "megapixels": lambda v: min(v, 0.01),
    "max_length": lambda v: min(v, 16),
    "max_new_tokens": lambda v: min(v, 16),
}
# A primitive's value by the node's title, where templates feed sizes or steps through primitives and math (LTX-2.3's
# Width / Height are halved for the first pass and upsampled x2; Duration is seconds at the frame rate).
SHRINK_TITLES = {
    "steps": SHRINK["steps"],  # Qwen-Image-Edit 2511's "Steps" primitives (40, or 4 with Lightning) feed KSampler
    "width": lambda v: min(v, 128),
    "height": lambda v: min(v, 128),
    "duration": lambda v: min(v, 1),
    "int (duration)": lambda v: min(v, 1),  # the LTX-2.3 IC-LoRA ingredients template's seconds (x fps = frames)
    "length": SHRINK["length"],
}
TRIPWIRE_KEY = "templates_render.tripwire"  # a name no LoRA layout has: loading it is refused by name
# A Painter's painting (the file the web UI uploads when one paints; templates ship only its name): the workspace's
# example painting (comfy_bridge/cli/demo_models.py: a white disc on a transparent canvas), so the painted mask covers
# part of the picture.
PAINTING = "example_painting.png"
# The example clip with the example sound as its audio track, for templates that take a video's sound
# (GetVideoComponents' audio: VOID's inpainting template trims it onto its outputs); demo-models writes it
SOUND_VIDEO = "example_with_sound.mp4"


def leaf(key: str) -> str:
    """An input's own name: a dynamic combo's sub-input `resize_type.width` is a `width`."""
    return key.rsplit(".", 1)[-1]


def demo_file(name: str, asked: list[str]) -> str | None:
    """Our tiny file for the template's file `name`, given every file name the prompt asks for; None: none."""
    for needs, pattern, demo in DEMO_FILES:
        if re.search(pattern, name) and (needs is None or any(re.search(needs, a) for a in asked)):
            return demo
    return None


SUBGRAPH_IN, SUBGRAPH_OUT = -10, -20  # the node ids a subgraph's links use for its input and output ends
BYPASSED = 4  # a node's mode when bypassed (Ctrl+B)
# PreviewAny's text output taken as its input's source when that is a string already (the same value); a number or
# anything else is turned into its text by the node itself, as today's ComfyUI does
PASS_THROUGH = {"PreviewAny"}


class _Graph:
    """One graph of a workflow: the top level, or one instance of a subgraph inside its parent."""

    def __init__(self, nodes: list[dict], links: list, parent: tuple[_Graph, dict, dict] | None = None) -> None:
        self.nodes = {n["id"]: n for n in nodes}
        self.links = {}
        self.link_types: dict[int, str | None] = {}
        for link in links:
            if isinstance(link, dict):
                link = [
                    link["id"],
                    link["origin_id"],
                    link["origin_slot"],
                    link["target_id"],
                    link["target_slot"],
                    link.get("type"),
                ]
            self.links[link[0]] = (link[1], link[2], link[3], link[4])
            self.link_types[link[0]] = link[5] if len(link) > 5 else None
        self.parent = parent  # (outer graph, instance node, subgraph definition)
        self.new_ids: dict[int, int] = {}
        self.inner: dict[int, _Graph] = {}


def flat_workflow(workflow: dict, registry=None) -> dict:
    """The template's UI graph with every subgraph instance (nested ones too) replaced by its inner nodes, under
    fresh node ids: an inner input fed by the subgraph's input takes the outer source, or the instance's promoted
    widget value (as a PrimitiveNode); a PreviewAny's outgoing links start at what it shows. With the `registry`,
    a promoted widget shown from an inner node is read in its class's widget order."""
    defs = {sg["id"]: sg for sg in workflow.get("definitions", {}).get("subgraphs", [])}
    out_nodes: list[dict] = []
    out_links: list[list] = []
    next_id = iter(range(1, 1 << 30))

    def new_id(graph: _Graph, node_id: int) -> int:
        if node_id not in graph.new_ids:
            graph.new_ids[node_id] = next(next_id)
        return graph.new_ids[node_id]

    def inner(graph: _Graph, node: dict) -> _Graph:
        if node["id"] not in graph.inner:
            sg = defs[node["type"]]
            graph.inner[node["id"]] = _Graph(sg["nodes"], sg.get("links", []), (graph, node, sg))
        return graph.inner[node["id"]]

    def output(graph: _Graph, node_id: int, slot: int, seen: frozenset = frozenset()) -> tuple[int, int] | None:
        node = graph.nodes.get(node_id)
        if node is None or (id(graph), node_id) in seen:
            return None
        seen = seen | {(id(graph), node_id)}
        if node["type"] in defs and node.get("mode", 0) == BYPASSED:
            # the frontend passes a bypassed instance's input of the output's type through (the same slot first)
            outputs, inputs = node.get("outputs") or [], node.get("inputs") or []
            want = outputs[slot].get("type") if slot < len(outputs) else None
            for inp in ([inputs[slot]] if slot < len(inputs) else []) + inputs:
                if inp.get("link") is not None and (want is None or inp.get("type") in (want, "*")):
                    return origin(graph, inp["link"], seen)
            return None
        if node["type"] in defs:
            sub = inner(graph, node)
            for link_id, (_, _, target, target_slot) in sub.links.items():
                if target == SUBGRAPH_OUT and target_slot == slot:
                    return origin(sub, link_id, seen)
            return None
        if node["type"] in PASS_THROUGH and node.get("inputs"):
            link = node["inputs"][0].get("link")
            if graph.link_types.get(link) in (None, "STRING", "*"):
                return origin(graph, link, seen)
        return new_id(graph, node_id), slot

    def origin(graph: _Graph, link_id: int | None, seen: frozenset = frozenset()) -> tuple[int, int] | None:
        if link_id not in graph.links:
            return None
        source, slot, _, _ = graph.links[link_id]
        if source != SUBGRAPH_IN:
            return output(graph, source, slot, seen)
        outer, instance, sg = graph.parent
        name = sg["inputs"][slot]["name"]
        fed = next((i for i in instance.get("inputs", []) if i.get("name") == name), None)
        if fed is not None and fed.get("link") is not None:
            return origin(outer, fed["link"], seen)
        value = promoted_value(instance, name, sg)
        if value is None:
            value = proxied_value(instance, name, sg, registry)
        if value is None:
            return None  # the inner widget keeps its own value
        primitive = next(next_id)
        out_nodes.append({"id": primitive, "type": "PrimitiveNode", "mode": 0, "inputs": [], "widgets_values": [value]})
        return primitive, 0

    def emit(graph: _Graph) -> None:
        for node in graph.nodes.values():
            if node["type"] in defs:
                if node.get("mode", 0) == 0:
                    emit(inner(graph, node))
                continue
            copy = {**node, "id": new_id(graph, node["id"]), "inputs": [], "outputs": []}
            for index, inp in enumerate(node.get("inputs") or []):
                source = origin(graph, inp.get("link"))
                link = None
                if source is not None:
                    link = len(out_links) + 1
                    out_links.append([link, source[0], source[1], copy["id"], index, inp.get("type")])
                copy["inputs"].append({**inp, "link": link})
            out_nodes.append(copy)

    emit(_Graph(workflow["nodes"], workflow.get("links", [])))
    return {"nodes": out_nodes, "links": out_links}


WIDGET_TYPES = {"INT", "FLOAT", "STRING", "BOOLEAN", "COMBO"}


def promoted_value(instance: dict, name: str, subgraph: dict | None = None):
    """The value an instance shows for its promoted widget `name`: its widget inputs and widgets_values are in
    the same order; where they are not as many (templates saved by newer frontends list only some), the values
    follow the subgraph's widget-typed inputs in order. None when the instance holds none."""
    values = instance.get("widgets_values")
    if not isinstance(values, list):
        return None
    widgets = [i.get("name") for i in instance.get("inputs", []) if i.get("widget")]
    if len(values) != len(widgets) and subgraph is not None:
        widgets = [i.get("name") for i in subgraph.get("inputs", []) if i.get("type") in WIDGET_TYPES]
    if len(values) != len(widgets) or name not in widgets:
        return None
    return values[widgets.index(name)]


def proxied_value(instance: dict, name: str, subgraph: dict, registry=None):
    """The value of promoted widget `name` when the instance stores none (templates saved with empty widgets_values):
    the inner widget it shows (the instance's proxyWidgets, [node id, widget] pairs), read from that node's
    widgets_values at the widget's place among its widget inputs (a seed's control value after it counted). The
    proxy is the one whose inner widget the subgraph input `name` feeds; a template whose proxy list has an entry
    per instance widget input and no such link is read by position. The frontend gives every inner input fed by
    that subgraph input this value, not only the shown one. Without the registry (the per-template workflow
    scripts, whose shipped graphs were written so) only the positional reading is done."""
    proxies = (instance.get("properties") or {}).get("proxyWidgets") or []
    nodes = {str(n.get("id")): n for n in subgraph.get("nodes", [])}
    fed = next((set(i.get("linkIds") or []) for i in subgraph.get("inputs", []) if i.get("name") == name), set())
    for node_id, widget in proxies if registry is not None else ():
        node = nodes.get(str(node_id))
        if node and any(i.get("name") == widget and i.get("link") in fed for i in node.get("inputs", [])):
            return _widget_value(node, widget, registry)
    widgets = [i.get("name") for i in instance.get("inputs", []) if i.get("widget")]
    if len(proxies) != len(widgets) or name not in widgets:
        return None
    node_id, widget = proxies[widgets.index(name)]
    node = nodes.get(str(node_id))
    return _widget_value(node, widget) if node else None


def _widget_value(node: dict, widget: str, registry=None):
    """Inner widget `widget`'s saved value: in its class's widget order where the registry has the class (a node
    lists only some of its widgets among its inputs), else by its place among the node's widget inputs."""
    if registry is not None and registry.get(node.get("type")) is not None:
        from comfy_bridge.formats import _saved_widget_values

        value = _saved_widget_values(node, registry.node_info(node["type"])).get(widget)
        return value["__value__"] if isinstance(value, dict) and "__value__" in value else value
    values = node.get("widgets_values")
    if not isinstance(values, list):
        return None
    index = 0
    for inp in node.get("inputs", []):
        if not inp.get("widget"):
            continue
        if inp.get("name") == widget:
            return values[index] if index < len(values) else None
        index += 2 if "seed" in inp.get("name", "") else 1
    return None


def tiny_prompt(workflow: dict, registry, loras: Path | None = None) -> tuple[dict, list[str]]:
    """The API prompt of `workflow` with tiny files, example inputs and shrunk sizes, and the LoRAs given a
    tripwire file; ValueError names a model file we have no tiny file for.

    A LoRA without a tiny file of its family gets, in `loras`, an unloadable file of its own name: templates
    often ship a style LoRA behind a switch that is off (the lazy branch never loads it), and a render that
    does load it fails on that file instead of passing with some other LoRA."""
    import torch
    from safetensors.torch import save_file

    from comfy_bridge.formats import ui_to_api

    prompt = ui_to_api(flat_workflow(workflow, registry), registry)
    fill_widget_defaults(prompt, registry)
    tripwires: list[str] = []
    asked = [v for n in prompt.values() for v in n["inputs"].values() if isinstance(v, str) and MODEL_FILE.search(v)]
    unmade: list[str] = []
    video = SOUND_VIDEO if takes_video_sound(prompt) else "example.mp4"
    for node in prompt.values():
        inputs = node["inputs"]
        title = str(node.get("_meta", {}).get("title", "")).strip().lower()
        for key, value in list(inputs.items()):
            if node["class_type"] == "Painter" and key == "mask" and isinstance(value, str) and value.strip():
                inputs[key] = PAINTING
            elif isinstance(value, str) and MODEL_FILE.search(value):
                demo = demo_file(value, asked)
                if demo is None and loras is not None and key == "lora_name":
                    save_file({TRIPWIRE_KEY: torch.zeros(1)}, str(loras / value))
                    tripwires.append(value)
                elif demo is None:
                    unmade.append(f"{value} ({node['class_type']})")
                else:
                    inputs[key] = demo
            elif isinstance(value, str) and IMAGE_FILE.search(value):
                inputs[key] = "example.png"
            elif isinstance(value, str) and VIDEO_FILE.search(value):
                inputs[key] = video
            elif isinstance(value, str) and AUDIO_FILE.search(value):
                inputs[key] = "example.wav"
            elif key == "value" and isinstance(value, int) and not isinstance(value, bool) and title in SHRINK_TITLES:
                inputs[key] = type(value)(SHRINK_TITLES[title](value))
            elif leaf(key) in SHRINK and isinstance(value, (int, float)) and not isinstance(value, bool):
                small = SHRINK[leaf(key)](value)  # an int megapixels (1) shrinks to a float
                inputs[key] = max(small, input_min(registry, node["class_type"], key, small))
                if not isinstance(small, float):
                    inputs[key] = type(value)(inputs[key])
    if unmade:
        raise ValueError(f"no tiny file of this family for {', '.join(unmade)}")
    return prompt, tripwires


def first_error(text: str) -> str:
    """The first line of run_prompt's error, or for a prompt that failed validation its first node error (the
    first line only says that validation failed; the node errors follow as JSON)."""
    head, _, rest = text.partition("\n")
    if not head.startswith("invalid prompt:") or not rest.strip().startswith("{"):
        return head
    for node_id, entry in json.loads(rest).items():
        for err in entry.get("errors", []):
            return f"node {node_id} ({entry.get('class_type')}): {err.get('message')}: {err.get('details')}"
    return head


def fill_widget_defaults(prompt: dict, registry) -> None:
    """A required widget the saved template predates gets its default, as the web UI gives it when it loads
    the template (our converter sends only the values the file holds)."""
    from comfy_bridge.formats import _is_widget

    for node in prompt.values():
        if registry.get(node["class_type"]) is None:
            continue
        for name, spec in registry.node_info(node["class_type"]).get("input", {}).get("required", {}).items():
            options = spec[1] if len(spec) > 1 and isinstance(spec[1], dict) else {}
            if name not in node["inputs"] and _is_widget(spec) and "default" in options:
                node["inputs"][name] = options["default"]


def input_min(registry, class_type: str, name: str, default: float) -> float:
    """The `min` the node declares for input `name` (ResolutionSelector wants 0.1 megapixels at least)."""
    info = registry.node_info(class_type) if registry.get(class_type) is not None else {}
    for category in ("required", "optional"):
        spec = info.get("input", {}).get(category, {}).get(name)
        if isinstance(spec, (list, tuple)) and len(spec) > 1 and isinstance(spec[1], dict):
            return spec[1].get("min", default)
    return default


def takes_video_sound(prompt: dict) -> bool:
    """Whether a node reads GetVideoComponents' audio output (its second)."""
    return any(
        isinstance(v, list)
        and len(v) == 2
        and v[1] == 1
        and prompt.get(str(v[0]), {}).get("class_type") == "GetVideoComponents"
        for node in prompt.values()
        for v in node["inputs"].values()
    )


def render_one(name: str, registry, loras: Path | None = None) -> dict:
    """{renders, render_error} for one template: the first line of the error when it does not run."""
    import asyncio

    from comfy_bridge.cli.run import run_prompt

    workflow = json.loads((templates_coverage.templates_dir() / f"{name}.json").read_text())
    tripwires: list[str] = []
    try:
        prompt, tripwires = tiny_prompt(workflow, registry, loras)
        # every output: a template whose ControlNetLoader failed validation must not pass on its other outputs
        asyncio.run(run_prompt(prompt, None, registry, show_progress=False, all_outputs=True))
    except BaseException as exc:  # SystemExit carries run_prompt's validation and node errors
        if isinstance(exc, KeyboardInterrupt):
            raise
        error = f"{type(exc).__name__}: {first_error(str(exc).strip() or type(exc).__name__)[:300]}"
        if tripwires:
            error += f" [LoRAs without a tiny file of their family: {', '.join(tripwires)}]"
        return {"renders": False, "render_error": error}
    return {"renders": True, "render_error": None}


def worker(workspace: Path) -> None:
    """Render the template names read from stdin, one JSON result line each on stdout."""
    from comfy_bridge.registry import build_registry
    from nodes.workspace import Workspace, activate

    ws = activate(Workspace(workspace))
    if not (ws.input_dir / PAINTING).exists():  # a workspace from before demo-models wrote it
        from comfy_bridge.cli.demo_models import write_example_painting

        write_example_painting(ws.input_dir / PAINTING)
    if not (ws.input_dir / SOUND_VIDEO).exists():  # a workspace from before demo-models wrote it
        from comfy_bridge.cli.demo_models import write_example_sound_video

        write_example_sound_video(
            ws.input_dir / SOUND_VIDEO, ws.input_dir / "example.mp4", ws.input_dir / "example.wav"
        )
    registry = build_registry(ws)
    out = sys.stdout
    sys.stdout = sys.stderr  # node prints must not mix with the results
    print("ready", file=out, flush=True)
    for line in sys.stdin:
        name = line.strip()
        print(
            json.dumps({"name": name, **render_one(name, registry, ws.root / "models" / "loras")}), file=out, flush=True
        )


class Worker:
    def __init__(self, workspace: Path, log) -> None:
        cmd = [sys.executable, __file__, str(workspace), "--worker"]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, text=True)
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=lambda: [self.lines.put(x) for x in self.proc.stdout], daemon=True).start()
        self.lines.get(timeout=600)  # "ready"

    def render(self, name: str, timeout: float) -> dict:
        self.proc.stdin.write(name + "\n")
        self.proc.stdin.flush()
        return json.loads(self.lines.get(timeout=timeout))

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait()


def render_all(names: list[str], workspace: Path, timeout: float, log) -> dict[str, dict]:
    results, worker_ = {}, None
    for i, name in enumerate(names, 1):
        worker_ = worker_ or Worker(workspace, log)
        try:
            result = worker_.render(name, timeout)
            results[name] = {k: result[k] for k in templates_coverage.RENDER_KEYS}
        except queue.Empty:
            results[name] = {"renders": False, "render_error": f"timed out after {timeout:.0f} s"}
            worker_.stop()
            worker_ = None
        print(
            f"[{i}/{len(names)}] {name}: {results[name]['renders']} {results[name]['render_error'] or ''}", flush=True
        )
    if worker_:
        worker_.stop()
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("workspace", type=Path, help="a workspace with the demo models (comfy-cluster demo-models)")
    parser.add_argument("--timeout", type=float, default=300, help="seconds per template")
    parser.add_argument("--only", nargs="*", help="render these templates, keep the committed flags of the rest")
    parser.add_argument("--log", default="/tmp/templates_render.log", help="the workers' own output")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker(args.workspace)
        return 0
    fresh = templates_coverage.compute()
    complete = [r["name"] for r in fresh["templates"] if r["missing"] == []]
    names = [n for n in complete if not args.only or n in args.only]
    with open(args.log, "w") as log:
        rendered = render_all(names, args.workspace, args.timeout, log)
    # Read the other rows only now: others may have re-rendered their rows while ours ran.
    renders = templates_coverage.committed_renders() if args.only else {}
    renders.update(rendered)
    result = templates_coverage.with_renders(fresh, renders)
    templates_coverage.RESULT.write_text(json.dumps(result, indent=1) + "\n")
    print("render-weighted usage share:", result["render_usage_share"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
