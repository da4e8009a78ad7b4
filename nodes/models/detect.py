"""Which model a file holds, from its key names and shapes alone (the safetensors header is enough)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from .errors import ModelLoadError
from .safetensors_io import shapes_of

UNET_PREFIXES = ("model.diffusion_model.", "")
Shapes = dict[str, tuple[int, ...]]
_LORA_SUFFIXES = (
    ".lora_down.weight",
    ".lora_up.weight",
    ".lora_A.weight",
    ".lora_B.weight",
    ".lora.down.weight",
    ".lora.up.weight",
    ".lora_linear_layer.down.weight",
)
QWEN_IMAGE_MARKER = "txt_norm.weight"
# Qwen-Image-Layered (Comfy-Org/Qwen-Image-Layered_ComfyUI's qwen_image_layered_*.safetensors): ComfyUI 0.10.0's
# model_detection (upstream commit 79cdbc81) reads this key as use_additional_t_cond, default_ref_method
# "negative_index"; the rest of the file is Qwen-Image's layout.
QWEN_IMAGE_LAYERED_MARKER = "time_text_embed.addition_t_embedding.weight"
# Mage-Flow (Comfy-Org/Mage-Flow's mage_flow*_int8_convrot.safetensors): Qwen-Image's names and block layout with
# patch size 1, so img_in reads the Mage-VAE latent's 128 channels unpacked where Qwen-Image's reads 2x2 patches of
# 16 (64); read from the published files' headers.
MAGE_FLOW_CHANNELS = 128
# Mage-VAE (Comfy-Org/Mage-Flow's vae/mage_flow_vae_bf16.safetensors): the newest ComfyUI source's comfy/sd.py key
MAGE_VAE_MARKER = "student.dconv_encoder.proj_out.weight"
# Qwen-Image 2.1: the newest ComfyUI source's model_detection needs all of these and one of the MLP names below
# (img_mlp.gate_up in ComfyUI's own files, img_mlp.proj in split ones).
QWEN_IMAGE21_KEYS = (
    "txt_in.text_norm.weight",
    "modulation.1.weight",
    "transformer_blocks.0.attn.norm_q.weight",
    "img_in.weight",
    "proj_out.weight",
)
# Krea 2: Krea's own names (Comfy-Org/Krea-2's files); the key diffusers 0.42's single-file loader detects it by.
KREA2_MARKER = "txtfusion.projector.weight"
# Anima: Cosmos Predict2's MLP with the LLM adapter's cross-attention (ComfyUI's model_detection: image_model "anima"),
# under ComfyUI's prefixes for it (its files have `net.`).
ANIMA_MARKERS = ("blocks.0.mlp.layer1.weight", "llm_adapter.blocks.0.cross_attn.q_proj.weight")
ANIMA_PREFIXES = ("model.diffusion_model.", "net.", "")
# Cosmos Predict2 (nvidia/Cosmos-Predict2-*'s model.pt / Comfy-Org's cosmos_predict2_*.safetensors, keys under `net.`):
# ComfyUI 0.3.64's model_detection reads `blocks.0.mlp.layer1.weight` as image_model "cosmos_predict2" and the patch
# embedding `x_embedder.proj.1.weight` for its channels; an Anima file has the same and the LLM adapter besides.
COSMOS_PREDICT2_MARKERS = ("blocks.0.mlp.layer1.weight", "x_embedder.proj.1.weight")
# The old T5-XXL (t5-11b's encoder, Cosmos' text encoder): T5 1.0's ungated ReLU feed-forward; ComfyUI 0.3.64's
# detect_te_model tells it by `encoder.block.23.layer.1.DenseReluDense.wi.weight` (T5 1.1's are wi_0 / wi_1).
T5_OLD_MARKER = "encoder.block.0.layer.1.DenseReluDense.wi.weight"
# Kandinsky 5 (kandinsky5lite_*.safetensors / kandinsky5pro_*): ComfyUI 0.10.0's model_detection reads the visual
# blocks' cross-attention key norm as image_model "kandinsky5" (the image model, 2560 wide on 64 inputs, as well).
KANDINSKY5_MARKER = "visual_transformer_blocks.0.cross_attention.key_norm.weight"
KANDINSKY5_IMAGE_EMBED = (2560, 64)  # the image model's visual_embeddings.in_layer.weight (model_dim, 16 x 1x2x2)
# HiDream-I1 / E1: the Llama states' first caption projection (ComfyUI's model_detection: image_model "hidream").
HIDREAM_MARKER = "caption_projection.0.linear.weight"
# ComfyUI tells Qwen3 text encoders apart by width (comfy/sd.py detect_te_model): 1024 is the 0.6B, Anima's.
QWEN3_06B_WIDTH = 1024
# A narrowed file (the demo's) cannot say by its width which Qwen3 it stands in for; it says so in its metadata.
QWEN3_SIZE_METADATA = "comfy_cluster.qwen3_size"
# FLUX 3: BFL's names (black-forest-labs/flux-3-image-klein-comfy's files); the key diffusers 0.42's single-file
# loader detects it by (CHECKPOINT_KEY_NAMES["flux3"]), the image stream's input projection beside it.
FLUX3_MARKERS = ("early_stream_modulations.image.lin.weight", "emb_in.image.weight")
# MOSS-Image: the shared block modulation and the image head's (kohakumoss 0.1.0's model/io: the official and
# ComfyUI's names, bare or under `model.diffusion_model.`; nodes/models/moss_image.py).
MOSS_IMAGE_MARKERS = ("shared_block_modulation.weight", "video_head_modulation.weight")
QWEN3VL_MARKER = "model.visual.deepstack_merger_list.0.norm.weight"
QWEN35_MARKER = "model.language_model.layers.0.linear_attn.A_log"  # ComfyUI's detect_te_model key
QWEN_IMAGE21_MLP = ("transformer_blocks.0.img_mlp.gate_up.weight", "transformer_blocks.0.img_mlp.proj.weight")
# HunyuanVideo-family DiTs (ComfyUI 0.3.64's model_detection: image_model "hunyuan_video"), Hunyuan Image 2.1's among
# them; its 32x VAE is told by its decoder's input convolution (nodes/models/hunyuan_image*.py).
HUNYUAN_IMAGE_MARKER = "txt_in.individual_token_refiner.blocks.0.norm1.weight"
HUNYUAN_IMAGE_VAE_MARKER = "decoder.conv_in.weight"
# SAM 3 / SAM 3.1 (Comfy-Org/sam3.1's files): today's ComfyUI's model_detection keys; the propagation neck is 3.1's
SAM3_MARKERS = (
    "detector.backbone.vision_backbone.trunk.blocks.0.attn.qkv.weight",
    "detector.transformer.decoder.query_embed.weight",
)
SAM31_MARKER = "detector.backbone.vision_backbone.propagation_convs.0.conv_1x1.weight"
WAN_VAE_MARKER = "decoder.middle.0.residual.0.gamma"
WAN22_VAE_MARKER = "decoder.upsamples.0.upsamples.0.residual.2.weight"
QWEN_IMAGE21_VAE_HEAD = "decoder.head.2.weight"
WAN_MARKER = "head.modulation"
# MiniMax H3: the reference model's names (Comfy-Org/MiniMax-H3's files); diffusers 0.42's single-file detector
# key for the transformer, the decoder's register tokens beside its patch embedder for the video VAE.
MINIMAX_H3_MARKER = "token_refiner.blocks.0.attn.qkv_proj.weight"
LTX2_MARKER = "audio_adaln_single.linear.weight"
LTX2_TIME_MARKER = "adaln_single.emb.timestep_embedder.linear_1.bias"
LTX25_VAE_MARKER = "decoder.conv_in_x_t.weight"  # LTX-2.5's diffusion-decoder VAE (ComfyUI's comfy/sd.py test)
# An LTX audio VAE file (LTX-2.5's vae/ltx-2.5-audio-vae): comfy/sd.py's VAE tells it by its vocoder, HiFi-GAN's or
# the bandwidth-extended one's (Comfy-Org/ComfyUI, the "LTX Audio" branch)
LTX_AUDIO_VAE_MARKERS = ("vocoder.resblocks.0.convs1.0.weight", "vocoder.vocoder.resblocks.0.convs1.0.weight")
MINIMAX_H3_VAE_MARKERS = ("decoder.register_tokens", "decoder.x_embedder.weight")
MINIMAX_H3_AUDIO_VAE_MARKERS = ("pre_block.attn.q_bias", "dec_in_proj.weight", "decoder.conv_pre.weight")
# A UNet2DConditionModel state dict (nodes/models/unet_diffusers.py reads its layout).
DIFFUSERS_UNET_MARKERS = ("conv_in.weight", "time_embedding.linear_1.weight", "down_blocks.0.resnets.0.conv1.weight")
LOTUS_ADM_WIDTH = 4  # Lotus-D's task vector [sin, sin, cos, cos] (ComfyUI's model_base.Lotus)
UMT5_MARKER = "encoder.block.1.layer.0.SelfAttention.relative_attention_bias.weight"
# Chroma: Flux's block layout with the approximator's norms (ComfyUI's model_detection, image_model "chroma").
CHROMA_MARKER = "distilled_guidance_layer.norms.0.scale"
# Stable Cascade's stage C coder (comfy/sd.py's keys): the EfficientNet encoder, the previewer, both together.
STABLE_CASCADE_CODER_MARKERS = (
    "backbone.1.0.block.0.1.num_batches_tracked",
    "blocks.11.num_batches_tracked",
    "encoder.backbone.1.0.block.0.1.num_batches_tracked",
)
_PIPELINES = {
    "StableDiffusionPipeline": "sd1",
    "StableDiffusionXLPipeline": "sdxl",
    "FluxPipeline": "flux",
    "StableDiffusion3Pipeline": "sd3",
    "StableDiffusionControlNetPipeline": "sd1",
}


@dataclass(frozen=True)
class CheckpointInfo:
    """What `probe` found. arch: sd1 | sd2 | sdxl | flux | flux2 | sd3 | zimage | qwen_image | wan21 | wan22_5b
    (qwen_image21: Qwen-Image 2.1, mage_flow: Mage-Flow, krea2: Krea 2, anima: Anima, cosmos_predict2: Cosmos Predict2, kandinsky5: Kandinsky 5 video, kandinsky5_image: Kandinsky 5 image, hunyuan_dit / hunyuan_dit1: HunyuanDiT v1.1-1.2 / v1.0, flux3: FLUX 3, minimax_h3: MiniMax H3, ltx2: LTX-2 audio-video) for models (and Qwen-Image's Wan VAE), clip | t5 | umt5 | qwen3 | t5_old (Cosmos' T5 1.0) | qwen3_06b (Anima's Qwen3) | qwen3vl | qwen35 (Qwen3.5) | qwen25 (a Qwen2.5 language model) | gemma3 | mistral3 (FLUX.2 dev's) for bare
    text encoders.
    kind: checkpoint | diffusion_model | vae | text_encoder | controlnet | lora | diffusers.
    components: which of diffusion_model, vae, text_encoder, controlnet the file can provide.
    layout: ldm | diffusers | bfl | comfy | hf | open_clip | kohya. prefix: the key prefix of the main network."""

    path: str
    arch: str
    kind: str
    components: frozenset[str]
    layout: str
    prefix: str = ""
    metadata: dict[str, str] = field(default_factory=dict, compare=False)


def _prefix_with(shapes: Shapes, marker: str, prefixes=UNET_PREFIXES) -> str | None:
    return next((p for p in prefixes if p + marker in shapes), None)


# SeedVR2's files as the newest ComfyUI tells them apart (Comfy-Org/ComfyUI comfy/model_detection.py at 0b61ce5b: the
# 7B transformer with separate video/text MLPs, 3072 wide, or shared ones, and the 3B; comfy/sd.py: the VAE's
# third upsampler)
SEEDVR2_TRANSFORMER_MARKERS = (
    ("blocks.35.mlp.vid.proj_out.weight", 3072, "7B transformer"),
    ("blocks.35.mlp.all.proj_in_gate.weight", None, "7B transformer"),
    ("blocks.31.mlp.all.proj_in_gate.weight", None, "3B transformer"),
)
SEEDVR2_VAE_MARKER = "decoder.up_blocks.2.upsamplers.0.upscale_conv.weight"


# HunyuanVideo 1.5 (Comfy-Org/HunyuanVideo_1.5_repackaged): HunyuanVideo's layout with a SigLIP image projection
# (ComfyUI 0.10.0's model_detection reads vision_in_dim from it), and its causal 3-D VAE (nodes/models/hunyuan_video15*).
HUNYUAN_VIDEO15_MARKER = "vision_in.proj.0.weight"
# ComfyUI 0.3.64's comfy/sd.py markers of Genmo Mochi's VAE: its decoder's (bare or under decoder.), its encoder's
MOCHI_VAE_MARKERS = (
    "blocks.2.blocks.3.stack.5.weight",
    "decoder.blocks.2.blocks.3.stack.5.weight",
    "layers.4.layers.1.attn_block.attn.qkv.weight",
    "encoder.layers.4.layers.1.attn_block.attn.qkv.weight",
)
HUNYUAN_VIDEO15_VAE_MARKER = "decoder.conv_in.conv.weight"


def is_hunyuan_image_dit(shapes: Shapes, prefix: str) -> bool:
    """A Hunyuan Image 2.1 DiT: ComfyUI's HunyuanVideo rule with a 2-D patch embedder and no vector_in
    (supported_models.HunyuanImage21: vec_in_dim None); the refiner's and HunyuanVideo's embedders are 3-D."""
    patch = shapes.get(prefix + "img_in.proj.weight")
    return patch is not None and len(patch) == 4 and not any(k.startswith(prefix + "vector_in.") for k in shapes)


def is_hunyuan_video_dit(shapes: Shapes, prefix: str) -> bool:
    """A HunyuanVideo 1.0 DiT (text or image to video): ComfyUI's HunyuanVideo rule with a 3-D patch embedder and a
    vector_in (CLIP-L's pooled vector); 1.5 (vision_in) is told apart before, the Image 2.1 refiner has no
    vector_in."""
    patch = shapes.get(prefix + "img_in.proj.weight")
    return (
        patch is not None
        and len(patch) == 5
        and any(k.startswith(prefix + "vector_in.") for k in shapes)
        and prefix + HUNYUAN_VIDEO15_MARKER not in shapes
    )


def is_hunyuan_image_vae(shapes: Shapes, prefix: str = "") -> bool:
    """The Hunyuan Image 2.1 VAE (ComfyUI 0.3.64's comfy/sd.py): a 2-D decoder.conv_in taking 64 latent channels."""
    shape = shapes.get(prefix + HUNYUAN_IMAGE_VAE_MARKER)
    return shape is not None and len(shape) == 4 and shape[1] == 64


# Stable Video Diffusion (Stability's svd / svd_xt.safetensors): ComfyUI 0.3.64's model_detection tells its VideoUNet by
# a temporal transformer block in an input block; the checkpoint keeps its CLIP image encoder under this prefix
# (supported_models.SVD_img2vid.clip_vision_prefix, less `visual.`).
SVD_TEMPORAL_MARKER = ".1.time_stack.0.attn1.to_q.weight"
SVD_CLIP_VISION_PREFIX = "conditioner.embedders.0.open_clip.model."


def is_svd_unet(shapes: Shapes, prefix: str) -> bool:
    """An SVD VideoUNet under `prefix` (nodes/models/svd.py)."""
    return any(k.startswith(prefix + "input_blocks.") and k.endswith(SVD_TEMPORAL_MARKER) for k in shapes)


def seedvr2_part(shapes: Shapes) -> str | None:
    """Which SeedVR2 file this is ("7B transformer", "3B transformer", "VAE"), or None."""
    for marker, width, part in SEEDVR2_TRANSFORMER_MARKERS:
        prefix = _prefix_with(shapes, marker)
        if prefix is not None and (width is None or shapes[prefix + marker][0] == width):
            return part
    return "VAE" if SEEDVR2_VAE_MARKER in shapes else None


def is_qwen_image21_vae(shapes: Shapes, prefix: str = "") -> bool:
    """The newest ComfyUI's rule (comfy/sd.py) for Qwen-Image 2.1's VAE: the Wan 2.2 VAE's layout with a
    decoder head one frame deep (Wan 2.2's own kernels are three frames deep)."""
    head = shapes.get(prefix + QWEN_IMAGE21_VAE_HEAD)
    return prefix + WAN22_VAE_MARKER in shapes and head is not None and len(head) == 5 and head[2] == 1


def is_qwen3_06b(shapes: Shapes, metadata: dict[str, str]) -> bool:
    """Whether a Qwen3 text encoder is the 0.6B (Anima's): ComfyUI's width rule, or a narrowed file's own word."""
    norm = next((v for k, v in shapes.items() if k.endswith("model.layers.0.post_attention_layernorm.weight")), None)
    return (norm is not None and norm[0] == QWEN3_06B_WIDTH) or metadata.get(QWEN3_SIZE_METADATA) == "0.6b"


def is_llama3(shapes: Shapes) -> bool:
    """A bare Llama language model as ComfyUI tells it (what is left of its decoder-only checks): a norm after
    attention, none after the MLP (Gemma's), no q/k norms (Qwen3's) nor biased projections (Qwen2.5's)."""
    return (
        "model.layers.0.post_attention_layernorm.weight" in shapes
        and "model.embed_tokens.weight" in shapes
        and "model.layers.0.post_feedforward_layernorm.weight" not in shapes
        and "model.layers.0.self_attn.q_norm.weight" not in shapes
        and "model.layers.0.self_attn.k_proj.bias" not in shapes
    )


def unet_arch(shapes: Shapes, prefix: str) -> str:
    """SDXL has an adm (label) embedding; SD2 projects into attention with linear layers, SD1 with convs. Lotus-D is
    an SD2 UNet with a 4-wide label embedding (ComfyUI's supported_models.LotusD: adm_in_channels 4)."""
    label = shapes.get(f"{prefix}label_emb.0.0.weight")
    proj = next((k for k in shapes if k.startswith(prefix) and k.endswith(".1.proj_in.weight")), None)
    linear = proj is not None and len(shapes[proj]) == 2
    if label is not None:
        from .unclip import is_sd21_unclip  # SD2.1 unCLIP: an SD2 UNet whose ADM input is an image embedding

        if is_sd21_unclip(shapes, prefix):
            return "sd2"
        return "lotus" if label[1] == LOTUS_ADM_WIDTH and linear else "sdxl"
    return "sd2" if linear else "sd1"


def diffusers_unet_arch(shapes: Shapes) -> str:
    """unet_arch for a UNet file in diffusers' names, read on the same keys renamed."""
    label = shapes.get("class_embedding.linear_1.weight") or shapes.get("add_embedding.linear_1.weight")
    proj = next((k for k in shapes if k.endswith(".proj_in.weight")), None)
    linear = proj is not None and len(shapes[proj]) == 2
    if label is not None:
        return "lotus" if label[1] == LOTUS_ADM_WIDTH and linear else "sdxl"
    return "sd2" if linear else "sd1"


def classify(shapes: Shapes, path: str, metadata: dict[str, str] | None = None) -> CheckpointInfo:
    """The CheckpointInfo of a weights file given its key shapes; unknown files raise ModelLoadError."""
    meta = metadata or {}
    keys = shapes.keys()

    def info(arch, kind, components, layout, prefix=""):
        return CheckpointInfo(path, arch, kind, frozenset(components), layout, prefix, meta)

    if any(k.endswith(_LORA_SUFFIXES) for k in keys):
        sdxl = any(k.startswith(("lora_te2_", "text_encoder_2.")) for k in keys)
        flux = any("double_blocks" in k or "single_transformer_blocks" in k for k in keys)
        qwen = any(part in k for k in keys for part in ("img_mlp", "txt_mlp", "img_mod", "txt_mod"))
        return info("flux" if flux else "qwen_image" if qwen else "sdxl" if sdxl else "sd1", "lora", (), "kohya")
    for prefix in ("control_model.", ""):
        if prefix + "input_hint_block.0.weight" in shapes:
            return info(unet_arch(shapes, prefix), "controlnet", {"controlnet"}, "ldm", prefix)
    if all(k in shapes for k in ("controlnet_blocks.0.weight", "transformer_blocks.0.img_mlp.net.0.proj.weight")):
        # Qwen-Image InstantX ControlNets (diffusers' QwenImageControlNetModel layout): ComfyUI's rule in
        # comfy/controlnet.py; before Qwen-Image's own rule, which their txt_norm and img_in would also meet
        return info("qwen_image", "controlnet", {"controlnet"}, "diffusers")
    if all(k in shapes for k in ("control_blocks.0.after_proj.weight", "control_img_in.weight")):
        # alibaba-pai's Qwen-Image(-2512) Fun ControlNet Union (ComfyUI's load_controlnet_qwen_fun rule, comfy/controlnet.py
        # at Comfy-Org/ComfyUI 03b1ca67): nodes.models.qwen_image_fun_controlnet runs it
        return info("qwen_image", "controlnet", {"controlnet"}, "fun")
    if all(marker in shapes for marker in ("controlnet_blocks.0.weight", "pos_embed_input.proj.weight")):
        return info("sd3", "controlnet", {"controlnet"}, "diffusers")  # SD3 (diffusers-layout) ControlNets
    if "controlnet_cond_embedding.conv_in.weight" in shapes:
        # diffusers ControlNets, union ones too (xinsir's controlnet-union-sdxl-1.0 and ProMax files: their
        # task_embedding / control_add_embedding.* beside the diffusers names, as diffusers' ControlNetUnionModel
        # and ComfyUI 0.3.64's comfy/controlnet.py read them; nodes.models.controlnet_union loads them)
        arch = "sdxl" if "add_embedding.linear_1.weight" in shapes else "sd1"
        return info(arch, "controlnet", {"controlnet"}, "diffusers")

    if all(k in shapes for k in SAM3_MARKERS):  # SAM 3 / 3.1 (nodes/models/sam3.py): detector, tracker and its CLIP
        arch = "sam31" if SAM31_MARKER in shapes else "sam3"
        return info(arch, "checkpoint", {"diffusion_model", "text_encoder"}, "comfy")
    if all(k in shapes for k in ("decoder.conv_in.conv.weight", "decoder.mid_block.resnets.0.norm1.norm_layer.weight")):
        return info("cogvideox", "vae", {"vae"}, "diffusers")  # the newest ComfyUI's comfy/sd.py rule: CogVideoX's VAE
    if any(k in shapes for k in MOCHI_VAE_MARKERS):  # ComfyUI 0.3.64's comfy/sd.py rule for Genmo Mochi's VAE
        return info("mochi", "vae", {"vae"}, "genmo")
    seedvr2 = seedvr2_part(shapes)  # before the VAE rules, which its VAE's encoder.conv_in would meet
    if seedvr2 == "VAE":  # the causal video VAE (nodes/models/seedvr2_vae.py)
        return info("seedvr2", "vae", {"vae"}, "comfy")
    if seedvr2 is not None:  # the 3B / 7B transformers (nodes/models/seedvr2_model.py)
        prefix = next(p for p in UNET_PREFIXES if p + "vid_in.proj.weight" in shapes)
        return info("seedvr2", "diffusion_model", {"diffusion_model"}, "comfy", prefix)
    has_vae = (
        any(k.endswith("encoder.conv_in.weight") and not k.startswith("model.") for k in keys)
        or f"vae.{WAN_VAE_MARKER}" in shapes
    )
    has_te = any(k.startswith(("cond_stage_model.", "conditioner.embedders.", "text_encoders.")) for k in keys)
    extra = ({"vae"} if has_vae else set()) | ({"text_encoder"} if has_te else set())
    if any(k.startswith("embedder.model.visual.") for k in keys):  # SD2.1 unCLIP's image encoder
        extra.add("clip_vision")
    cascade = _prefix_with(shapes, "clf.1.weight")  # Stable Cascade (ComfyUI's model_detection keys)
    if cascade is not None and any(cascade + m in shapes for m in ("clip_txt_mapper.weight", "clip_mapper.weight")):
        arch = "stable_cascade_c" if cascade + "clip_txt_mapper.weight" in shapes else "stable_cascade_b"
        parts = {"diffusion_model"}  # ComfyUI's supported_models.Stable_Cascade_C/_B prefixes: vae., text_encoder.
        parts |= {
            c for c, p in (("vae", "vae."), ("text_encoder", "text_encoder.")) if any(k.startswith(p) for k in keys)
        }
        return info(arch, "checkpoint" if len(parts) > 1 else "diffusion_model", parts, "stability", cascade)
    if "projections.0.0.weight" in shapes and any(k in shapes for k in ("backbone.0.0.weight", "backbone.0.weight")):
        # Stable Cascade's ControlNets (ComfyUI's load_t2i_adapter keys): named, not run
        raise ModelLoadError(
            path, "is a Stable Cascade ControlNet (canny / inpainting / super-resolution), which is not supported yet"
        )
    if "vquantizer.codebook.weight" in shapes:  # Stable Cascade's stage A (comfy/sd.py's VQGAN key)
        return info("stable_cascade_b", "vae", {"vae"}, "stability")
    if any(m in shapes for m in STABLE_CASCADE_CODER_MARKERS):  # its stage C coder: effnet and/or previewer
        return info("stable_cascade_c", "vae", {"vae"}, "stability")
    prefix = _prefix_with(shapes, "mlp_t5.0.weight")  # HunyuanDiT (ComfyUI 0.3.64's model_detection rule)
    if prefix is not None:  # v1.0's 3968-wide extra input (pooled + image size + style) is ComfyUI's HunyuanDiT1
        v10 = shapes.get(prefix + "extra_embedder.0.weight", (0, 0))[1] == 3968
        arch = "hunyuan_dit1" if v10 else "hunyuan_dit"
        return info(arch, "checkpoint" if extra else "diffusion_model", {"diffusion_model"} | extra, "comfy", prefix)
    pixart = _prefix_with(shapes, "t_block.1.weight")  # PixArt (ComfyUI 0.3.64's model_detection rule)
    if pixart is not None and pixart + "y_embedder.y_proj.fc1.weight" in shapes:
        # the authors' single files (PixArt-alpha/PixArt-sigma): only α has the aspect-ratio embedder
        arch = "pixart_alpha" if pixart + "ar_embedder.mlp.0.weight" in shapes else "pixart_sigma"
        return info(arch, "diffusion_model", {"diffusion_model"}, "comfy", pixart)
    if all(m in shapes for m in ("adaln_single.emb.timestep_embedder.linear_1.bias", "pos_embed.proj.bias")):
        # diffusers' PixArtTransformer2DModel (ComfyUI's model_detection rule for it); α's has the size embedders
        arch = "pixart_alpha" if "adaln_single.emb.resolution_embedder.linear_1.weight" in shapes else "pixart_sigma"
        return info(arch, "diffusion_model", {"diffusion_model"}, "diffusers")
    # PixelDiT: the newest ComfyUI's model_detection (`core.pixel_embedder.proj.weight`; PixDiT_T2I's names)
    pixeldit = _prefix_with(
        shapes, "pixel_embedder.proj.weight", [q + c for q in UNET_PREFIXES for c in ("core.", "net.", "")]
    )
    if pixeldit is not None and pixeldit + "y_pos_embedding" in shapes:
        return info("pixeldit", "diffusion_model", {"diffusion_model"}, "comfy", pixeldit)
    prefix = _prefix_with(shapes, CHROMA_MARKER)
    if prefix is not None and prefix + "nerf_blocks.0.norm.scale" in shapes:  # Chroma Radiance (pixel space)
        return info("chroma_radiance", "diffusion_model", {"diffusion_model"}, "bfl", prefix)
    if prefix is not None and prefix + "double_blocks.0.img_attn.qkv.weight" in shapes:  # before Flux.1's
        return info("chroma", "checkpoint" if extra else "diffusion_model", {"diffusion_model"} | extra, "bfl", prefix)
    for arch, marker, layout in (
        ("flux2", "double_stream_modulation_img.lin.weight", "bfl"),  # before Flux.1's
        ("flux2", "double_stream_modulation_img.linear.weight", "diffusers"),
        ("flux", "double_blocks.0.img_attn.qkv.weight", "bfl"),
        ("sd3", "joint_blocks.0.context_block.attn.qkv.weight", "ldm"),
    ):
        prefix = _prefix_with(shapes, marker)
        if prefix is not None:
            return info(arch, "checkpoint" if extra else "diffusion_model", {"diffusion_model"} | extra, layout, prefix)
    prefix = _prefix_with(shapes, "layers.0.adaLN_modulation.1.weight")  # Lumina 2: SiLU-first modulation
    if prefix is not None and prefix + "cap_embedder.1.weight" in shapes:  # (ComfyUI's model_detection key)
        return info(
            "lumina2", "checkpoint" if extra else "diffusion_model", {"diffusion_model"} | extra, "comfy", prefix
        )
    prefix = _prefix_with(shapes, "layers.0.adaLN_modulation.0.weight")  # Z-Image (ComfyUI's NextDiT names)
    if prefix is not None and prefix + "cap_embedder.1.weight" in shapes:
        return info(
            "zimage", "checkpoint" if extra else "diffusion_model", {"diffusion_model"} | extra, "comfy", prefix
        )
    prefix = _prefix_with(shapes, HIDREAM_MARKER)
    if prefix is not None and prefix + "double_stream_blocks.0.block.attn1.to_q.weight" in shapes:
        return info(
            "hidream", "checkpoint" if extra else "diffusion_model", {"diffusion_model"} | extra, "comfy", prefix
        )
    prefix = _prefix_with(shapes, ANIMA_MARKERS[1], ANIMA_PREFIXES)
    if prefix is not None and prefix + ANIMA_MARKERS[0] in shapes:
        return info("anima", "checkpoint" if extra else "diffusion_model", {"diffusion_model"} | extra, "comfy", prefix)
    prefix = _prefix_with(shapes, COSMOS_PREDICT2_MARKERS[0], ANIMA_PREFIXES)
    if prefix is not None and prefix + COSMOS_PREDICT2_MARKERS[1] in shapes:
        parts = {"diffusion_model"} | extra
        return info("cosmos_predict2", "checkpoint" if extra else "diffusion_model", parts, "comfy", prefix)
    prefix = _prefix_with(shapes, KANDINSKY5_MARKER)
    if prefix is not None:  # supported_models.Kandinsky5Image: 2560 wide on 64 inputs per patch (16 Flux channels)
        image = shapes.get(prefix + "visual_embeddings.in_layer.weight") == KANDINSKY5_IMAGE_EMBED
        return info(
            "kandinsky5_image" if image else "kandinsky5", "diffusion_model", {"diffusion_model"}, "comfy", prefix
        )
    prefix = _prefix_with(shapes, KREA2_MARKER)
    if prefix is not None and prefix + "first.weight" in shapes:
        return info("krea2", "checkpoint" if extra else "diffusion_model", {"diffusion_model"} | extra, "krea", prefix)
    prefix = _prefix_with(shapes, FLUX3_MARKERS[0])
    if prefix is not None and prefix + FLUX3_MARKERS[1] in shapes:
        return info("flux3", "checkpoint" if extra else "diffusion_model", {"diffusion_model"} | extra, "bfl", prefix)
    prefix = _prefix_with(shapes, MOSS_IMAGE_MARKERS[0])
    if prefix is not None and prefix + MOSS_IMAGE_MARKERS[1] in shapes:
        return info("moss_image", "diffusion_model", {"diffusion_model"}, "comfy", prefix)
    prefix = _prefix_with(shapes, QWEN_IMAGE21_KEYS[0])
    if (
        prefix is not None
        and all(prefix + k in shapes for k in QWEN_IMAGE21_KEYS)
        and any(prefix + k in shapes for k in QWEN_IMAGE21_MLP)
    ):
        layout = "comfy" if prefix + QWEN_IMAGE21_MLP[0] in shapes else "diffusers"
        return info(
            "qwen_image21", "checkpoint" if extra else "diffusion_model", {"diffusion_model"} | extra, layout, prefix
        )
    prefix = _prefix_with(shapes, HUNYUAN_IMAGE_MARKER)
    if prefix is not None and prefix + HUNYUAN_VIDEO15_MARKER in shapes:  # ComfyUI 0.10.0: vision_in -> 1.5
        return info("hunyuan_video15", "diffusion_model", {"diffusion_model"}, "hunyuan", prefix)
    if prefix is not None and is_hunyuan_image_dit(shapes, prefix):  # ComfyUI 0.3.64's HunyuanVideo-family rule
        return info("hunyuan_image", "diffusion_model", {"diffusion_model"}, "hunyuan", prefix)
    cogvideox = _prefix_with(shapes, "blocks.0.norm1.linear.weight")  # the newest ComfyUI's CogVideoX rule
    if cogvideox is not None and cogvideox + "patch_embed.text_proj.weight" in shapes:
        return info("cogvideox", "diffusion_model", {"diffusion_model"}, "comfy", cogvideox)
    mochi = _prefix_with(shapes, "t5_yproj.weight")  # ComfyUI 0.3.64's model_detection: Genmo Mochi preview
    if mochi is not None and mochi + "x_embedder.proj.weight" in shapes:
        return info("mochi", "diffusion_model", {"diffusion_model"}, "genmo", mochi)
    if prefix is not None and is_hunyuan_video_dit(shapes, prefix):  # supported_models.HunyuanVideo (and I2V)
        return info("hunyuan_video", "diffusion_model", {"diffusion_model"}, "hunyuan", prefix)
    if prefix is not None:
        raise ModelLoadError(
            path, "is a HunyuanVideo-family model (the Hunyuan Image 2.1 refiner), which is not supported yet"
        )
    prefix = _prefix_with(shapes, QWEN_IMAGE_MARKER)
    if prefix is not None and shapes.get(prefix + "img_in.weight", (0, 0))[1:] == (MAGE_FLOW_CHANNELS,):
        return info("mage_flow", "diffusion_model", {"diffusion_model"}, "diffusers", prefix)
    if prefix is not None and prefix + "img_in.weight" in shapes:  # Qwen-Image (ComfyUI detects txt_norm)
        return info(
            "qwen_image", "checkpoint" if extra else "diffusion_model", {"diffusion_model"} | extra, "diffusers", prefix
        )
    prefix = _prefix_with(shapes, LTX2_MARKER)
    if prefix is not None and prefix + LTX2_TIME_MARKER in shapes:  # LTX-2 audio-video (ComfyUI's "ltxav")
        parts = {"diffusion_model"} | ({"vae"} if any(k.startswith("vae.") for k in keys) else set())
        return info("ltx2", "checkpoint" if len(parts) > 1 else "diffusion_model", parts, "ltx", prefix)
    prefix = _prefix_with(shapes, LTX2_TIME_MARKER)
    if prefix is not None and prefix + "patchify_proj.weight" in shapes:  # LTX-Video 0.9 (ComfyUI 0.3.64's "ltxv")
        parts = {"diffusion_model"} | ({"vae"} if any(k.startswith("vae.") for k in keys) else set())
        return info("ltxv", "checkpoint" if len(parts) > 1 else "diffusion_model", parts, "ltx", prefix)
    if any(k in shapes for k in LTX_AUDIO_VAE_MARKERS) and any(k.startswith("audio_vae.") for k in keys):
        return info("ltx2_audio", "vae", {"vae"}, "ltx")  # the audio VAE alone (a checkpoint's was found above)
    prefix = _prefix_with(shapes, MINIMAX_H3_MARKER)
    if prefix is not None:
        return info("minimax_h3", "diffusion_model", {"diffusion_model"}, "minimax", prefix)
    if all(k in shapes for k in MINIMAX_H3_AUDIO_VAE_MARKERS):  # MiniMax H3's audio VAE (ComfyUI's layout)
        return info("minimax_h3_audio", "vae", {"vae"}, "minimax")
    prefix = _prefix_with(shapes, MINIMAX_H3_VAE_MARKERS[0], ("vae.", ""))
    if prefix is not None and prefix + MINIMAX_H3_VAE_MARKERS[1] in shapes:
        return info("minimax_h3", "vae", {"vae"}, "minimax", prefix)
    prefix = _prefix_with(shapes, WAN_MARKER)
    if prefix is not None and prefix + "patch_embedding.weight" in shapes:  # Wan 2.1/2.2 (ComfyUI's rule)
        out = shapes[prefix + "head.head.weight"][0] // 4  # 1x2x2 patches
        return info("wan22_5b" if out == 48 else "wan21", "diffusion_model", {"diffusion_model"}, "wan", prefix)
    if "single_transformer_blocks.0.attn.to_q.weight" in shapes:
        return info("flux", "diffusion_model", {"diffusion_model"}, "diffusers")
    if all(k in shapes for k in DIFFUSERS_UNET_MARKERS):  # a bare UNet in diffusers' names (Lotus-D's published file)
        return info(diffusers_unet_arch(shapes), "diffusion_model", {"diffusion_model"}, "diffusers")
    prefix = _prefix_with(shapes, "input_blocks.0.0.weight")
    if prefix is not None and is_svd_unet(shapes, prefix):
        # Stable Video Diffusion (ComfyUI 0.3.64's model_detection: a temporal transformer in an input block):
        # Stability's svd(_xt).safetensors keep the temporal VAE and the CLIP image encoder beside the UNet
        parts = {"diffusion_model"} | ({"vae"} if any(k.startswith("first_stage_model.") for k in keys) else set())
        if any(k.startswith(SVD_CLIP_VISION_PREFIX) for k in keys):
            parts.add("clip_vision")
        return info("svd", "checkpoint" if len(parts) > 1 else "diffusion_model", parts, "ldm", prefix)
    if prefix is not None:
        return info(
            unet_arch(shapes, prefix),
            "checkpoint" if extra else "diffusion_model",
            {"diffusion_model"} | extra,
            "ldm",
            prefix,
        )

    if MAGE_VAE_MARKER in shapes:  # Mage-VAE: its encoder under `student.`, its decoder under `pipeline.`
        return info("mage_flow", "vae", {"vae"}, "mage")
    prefix = _prefix_with(shapes, LTX25_VAE_MARKER, ("vae.", ""))
    if prefix is not None:  # LTX-2.5's video VAE: LTX-2's encoder and a diffusion decoder (nodes/models/ltx25_vae.py)
        return info("ltx2", "vae", {"vae"}, "ltx", prefix)
    prefix = _prefix_with(shapes, WAN_VAE_MARKER, ("vae.", ""))
    if prefix is not None:  # the Wan 2.1 VAE (Wan 2.1/2.2 14B's and Qwen-Image's), Wan 2.2 5B's or Qwen-Image 2.1's
        arch = (
            "qwen_image21"
            if is_qwen_image21_vae(shapes, prefix)
            else "wan22_5b"
            if prefix + WAN22_VAE_MARKER in shapes
            else "qwen_image"
        )
        return info(arch, "vae", {"vae"}, "wan", prefix)
    for prefix in ("first_stage_model.", "vae.", ""):
        shape = shapes.get(prefix + HUNYUAN_VIDEO15_VAE_MARKER, ())
        if len(shape) == 5 and shape[1] == 32:  # ComfyUI 0.10.0's comfy/sd.py: a causal conv_in taking 32 channels
            return info("hunyuan_video15", "vae", {"vae"}, "hunyuan", prefix)
        if len(shape) == 5:  # ComfyUI 0.10.0's comfy/sd.py: any other causal conv_in, HunyuanVideo 1.0's VAE
            return info("hunyuan_video", "vae", {"vae"}, "comfy", prefix)
        if is_hunyuan_image_vae(shapes, prefix):  # before the KL rule: ComfyUI tells it by 64 latent channels
            return info("hunyuan_image", "vae", {"vae"}, "hunyuan", prefix)
        if prefix + "encoder.conv_in.weight" in shapes and prefix + "decoder.conv_in.weight" in shapes:
            latent = shapes[prefix + "decoder.conv_in.weight"][1]
            layout = "diffusers" if any(k.startswith(prefix + "encoder.down_blocks.") for k in keys) else "ldm"
            arch = "flux2" if prefix + "bn.running_mean" in shapes else "sd1" if latent == 4 else "flux"
            return info(arch, "vae", {"vae"}, layout, prefix)
    if any(k.endswith(UMT5_MARKER) for k in keys):  # umT5 (Wan's): a relative attention bias in every block
        return info("umt5", "text_encoder", {"text_encoder"}, "hf")
    if any(k.endswith(T5_OLD_MARKER) for k in keys):  # ComfyUI's TEModel.T5_XXL_OLD: Cosmos' encoder
        return info("t5_old", "text_encoder", {"text_encoder"}, "hf")
    if any(k.endswith("encoder.block.0.layer.0.SelfAttention.q.weight") for k in keys):
        return info("t5", "text_encoder", {"text_encoder"}, "hf")
    if any(k.endswith(QWEN35_MARKER) for k in keys):  # Qwen3.5 (FLUX 3's prompt upsampler): a DeltaNet first layer
        return info("qwen35", "text_encoder", {"text_encoder"}, "hf")
    if any(k.endswith(QWEN3VL_MARKER) for k in keys):  # Qwen3-VL (Qwen-Image 2.1): ComfyUI's detect_te_model key
        return info("qwen3vl", "text_encoder", {"text_encoder"}, "hf")
    if any(k.endswith("model.layers.0.layer_scalar") for k in keys):  # Gemma 4 (LTX-2.5's): a scalar per layer
        return info("gemma4", "text_encoder", {"text_encoder"}, "hf")
    if any(k.endswith("model.layers.0.pre_feedforward_layernorm.weight") for k in keys) and any(
        k.endswith("model.layers.0.self_attn.q_norm.weight") for k in keys
    ):  # Gemma 3 (LTX-2's text encoder): Gemma's four norms per layer, and q/k norms as Qwen3 has
        return info("gemma3", "text_encoder", {"text_encoder"}, "hf")
    if any(k.endswith("model.layers.0.pre_feedforward_layernorm.weight") for k in keys):
        # Gemma 2 (Lumina 2's gemma_2_2b): Gemma's four norms per layer without q/k norms (ComfyUI's detect_te_model)
        return info("gemma2", "text_encoder", {"text_encoder"}, "hf")
    if "tekken_model" in shapes and "model.layers.0.self_attn.k_proj.weight" in shapes:
        # Mistral 3 (FLUX.2 dev's encoder): ComfyUI's sd.py reads the file's tokenizer from its tekken_model tensor
        return info("mistral3", "text_encoder", {"text_encoder"}, "hf")
    if any(k.endswith("model.layers.0.self_attn.q_norm.weight") for k in keys):  # Qwen3 (Z-Image, Flux2-Klein)
        return info("qwen3_06b" if is_qwen3_06b(shapes, meta) else "qwen3", "text_encoder", {"text_encoder"}, "hf")
    if "model.layers.0.self_attn.k_proj.bias" in shapes and "model.embed_tokens.weight" in shapes:
        return info("qwen25", "text_encoder", {"text_encoder"}, "hf")  # Qwen2.5(-VL): biased q/k/v projections
    if is_llama3(shapes):  # ComfyUI's detect_te_model: LLAMA3_8, HiDream's Llama 3.1 8B
        return info("llama3", "text_encoder", {"text_encoder"}, "hf")
    if any(k.endswith("encoder.layers.0.self_attn.q_proj.weight") for k in keys):
        return info("clip", "text_encoder", {"text_encoder"}, "hf")
    if any(k.endswith("transformer.resblocks.0.attn.in_proj_weight") for k in keys):
        return info("clip", "text_encoder", {"text_encoder"}, "open_clip")
    sample = ", ".join(sorted(keys)[:4]) or "no tensors"
    raise ModelLoadError(
        path,
        f"unknown model architecture (keys like {sample}); supported: SD1.x, SD2.x, "
        "SDXL, Flux, FLUX.2, SD3, Z-Image, Qwen-Image, Qwen-Image 2.1, Krea 2, Anima, Cosmos Predict2, Kandinsky 5, Wan and MiniMax H3 checkpoints, their UNets, VAEs, "
        "CLIP/T5/Qwen text encoders, ControlNets and LoRAs",
    )


def probe(path: str | os.PathLike) -> CheckpointInfo:
    """Detect a weights file (reading only its header) or a diffusers folder (its model_index.json)."""
    path = os.fspath(path)
    if os.path.isdir(path):
        return probe_diffusers_folder(Path(path))
    shapes, metadata = shapes_of(path)
    return classify(shapes, path, metadata)


def probe_diffusers_folder(folder: Path) -> CheckpointInfo:
    index = folder / "model_index.json"
    if not index.is_file():
        raise ModelLoadError(folder, "a folder without model_index.json is not a diffusers model")
    try:
        cls = json.loads(index.read_text())["_class_name"]
    except (json.JSONDecodeError, KeyError):
        raise ModelLoadError(index, "model_index.json has no _class_name") from None
    arch = _PIPELINES.get(cls)
    if arch is None:
        raise ModelLoadError(folder, f"unsupported diffusers pipeline {cls}")
    unet_cfg = folder / "unet" / "config.json"
    if arch == "sd1" and unet_cfg.is_file() and json.loads(unet_cfg.read_text()).get("use_linear_projection"):
        arch = "sd2"
    parts = {
        "unet": "diffusion_model",
        "transformer": "diffusion_model",
        "vae": "vae",
        "text_encoder": "text_encoder",
        "controlnet": "controlnet",
    }
    components = {c for sub, c in parts.items() if (folder / sub).is_dir()}
    return CheckpointInfo(str(folder), arch, "diffusers", frozenset(components), "diffusers")
