"""wan-tiny: deterministic tiny Wan 2.1 / 2.2 files in the layouts of ComfyUI's repackaged downloads:
- diffusion_models/wan2.2_i2v_{high,low}_noise_14B_tiny.safetensors: Wan 2.2 14B image-to-video's two experts
  (36 input channels), Wan's key names, one 128-wide head (ComfyUI's head width), 2 blocks;
- diffusion_models/wan2.1_t2v_1.3B_tiny.safetensors: a text-to-video model (16 input channels);
- diffusion_models/wan2.1_i2v_480p_14B_tiny.safetensors: Wan 2.1 image-to-video, whose image embedding
  (`img_emb`) takes the CLIP vision states of the demo's clip-vision-tiny (32 wide);
- diffusion_models/wan2.2_ti2v_5B_tiny.safetensors: Wan 2.2 5B's shape (48 latent channels in and out);
- text_encoders/umt5_xxl_tiny.safetensors: a umT5 encoder (32 wide, 2 blocks) with its SentencePiece model as
  the byte tensor `spiece_model`, as ComfyUI's umt5_xxl files carry it;
- vae/wan_2.1_vae_tiny.safetensors: the Wan 2.1 VAE in Wan's layout at base width 8;
- vae/wan2.2_vae_tiny.safetensors: the Wan 2.2 VAE (48 channels, 1/16) in Wan's layout, widths 8 and 16;
- loras/wan2.2_i2v_lightx2v_4steps_lora_tiny_{high,low}_noise.safetensors: rank-4 LoRAs for the two experts in
  the names lightx2v's Wan LoRAs use (`diffusion_model.blocks.N.self_attn.q.lora_down.weight`, `.alpha`);
- diffusion_models/wan2.1_fun_control_1.3B_tiny, wan2.1_fun_inp_1.3B_tiny and
  wan2.2_fun_control_low_noise_14B_tiny: the Fun models (48, 36 and 52 input channels; see _fun_models);
- diffusion_models/wan2.1_fun_camera_v1.1_1.3B_tiny: Wan Fun Camera with its control adapter (_camera_model), and
  wan2.2_fun_camera_14B_tiny: Wan 2.2 Fun Camera's (36 input channels, no CLIP image states);
- diffusion_models/wan2.1_flf2v_720p_14B_tiny: Wan 2.1 first-last-frame-to-video, image-to-video's layout with the
  position embedding of the two frames' CLIP vision tokens (`img_emb.emb_pos`, _flf2v_model);
- diffusion_models/wan2.1_vace_1.3B_tiny: Wan 2.1 VACE, its vace_blocks and vace_patch_embedding (_vace_model),
  and loras/wan2.1_causvid_t2v_lora_rank32_tiny: a LoRA on its blocks, for the VACE templates' CausVid LoRA;
- diffusion_models/wan2.2_t2v_{high,low}_noise_14B_fp8_scaled_tiny: Wan 2.2 14B text-to-video's two experts
  (16 input channels) in ComfyUI's scaled fp8 layout, as its wan2.2_t2v_*_fp8_scaled files are (_scaled_fp8);
- diffusion_models/wan_animate_2_14B_tiny: Wan Animate 2, Wan 2.1 image-to-video's layout with the metadata
  ComfyUI tells it by (METADATA, animate2_model);
- diffusion_models/wan2.1_14B_SCAIL_2_tiny: Wan SCAIL-2, Wan 2.1 image-to-video's layout with 20 input channels
  and its pose and identity-mask patch embeddings (scail2_model), and wan2.1_14B_SCAIL_2_int8_convrot_tiny: the
  same weights with the blocks' linear layers in ComfyUI's int8 ConvRot layout (written where comfy-kitchen is);
- diffusion_models/wan2.2_bernini_r_high_noise_fp8_scaled_tiny / _low_noise_: Bernini-R's two experts, Wan 2.2 14B
  text-to-video's scaled fp8 layout (ComfyUI reads them as plain Wan models; BerniniConditioning feeds them);
- loras/wan_t2v_14B_lora_tiny: a rank-4 LoRA of the text-to-video blocks' shapes in Wan's names, for the templates'
  Wan 2.x text-to-video 14B LoRAs (lightx2v's T2V distill LoRA on Bernini-R, Wan Alpha's);
- diffusion_models/wan2.2_fun_control_5B_tiny and wan2.2_fun_inpaint_5B_tiny: Wan 2.2 Fun 5B Control and InP (148
  and 100 input channels, 48 out; see _fun22_5b_models).
bfloat16 like the released files. Same seed -> byte-identical files (the SentencePiece model is trained on a
fixed text with one thread)."""

from __future__ import annotations

import importlib.util
import io
import json
from pathlib import Path

import torch
from diffusers import AutoencoderKLWan, WanTransformer3DModel, WanVACETransformer3DModel
from diffusers.loaders.single_file_utils import convert_wan_transformer_to_diffusers
from safetensors.torch import save_file
from transformers import UMT5Config, UMT5EncoderModel

from nodes.models.flux_demo import randomize_constants
from nodes.models.marigold_demo import int8_convrot
from nodes.models.qwen_image_vae import diffusers_to_wan
from nodes.models.wan import HEAD_DIM
from nodes.models.wan22_vae import RES_BLOCKS, diffusers_name
from nodes.models.wan_text import SPIECE_KEY
from nodes.output_claims import write_atomic

SEED = 11
TEXT_WIDTH = 32
FILES = {
    "i2v_high": "diffusion_models/wan2.2_i2v_high_noise_14B_tiny.safetensors",
    "i2v_low": "diffusion_models/wan2.2_i2v_low_noise_14B_tiny.safetensors",
    "t2v": "diffusion_models/wan2.1_t2v_1.3B_tiny.safetensors",
    "i2v_21": "diffusion_models/wan2.1_i2v_480p_14B_tiny.safetensors",
    "ti2v_5b": "diffusion_models/wan2.2_ti2v_5B_tiny.safetensors",
    "text_encoder": "text_encoders/umt5_xxl_tiny.safetensors",
    "vae": "vae/wan_2.1_vae_tiny.safetensors",
    "vae22": "vae/wan2.2_vae_tiny.safetensors",
    "lora_high": "loras/wan2.2_i2v_lightx2v_4steps_lora_tiny_high_noise.safetensors",
    "lora_low": "loras/wan2.2_i2v_lightx2v_4steps_lora_tiny_low_noise.safetensors",
    "fun_control": "diffusion_models/wan2.1_fun_control_1.3B_tiny.safetensors",
    "fun_inp": "diffusion_models/wan2.1_fun_inp_1.3B_tiny.safetensors",
    "fun22_control": "diffusion_models/wan2.2_fun_control_low_noise_14B_tiny.safetensors",
    "fun_camera": "diffusion_models/wan2.1_fun_camera_v1.1_1.3B_tiny.safetensors",
    "fun22_camera": "diffusion_models/wan2.2_fun_camera_14B_tiny.safetensors",
    "flf2v": "diffusion_models/wan2.1_flf2v_720p_14B_tiny.safetensors",
    "vace": "diffusion_models/wan2.1_vace_1.3B_tiny.safetensors",
    "vace_lora": "loras/wan2.1_causvid_t2v_lora_rank32_tiny.safetensors",
    "t2v_high": "diffusion_models/wan2.2_t2v_high_noise_14B_fp8_scaled_tiny.safetensors",
    "t2v_low": "diffusion_models/wan2.2_t2v_low_noise_14B_fp8_scaled_tiny.safetensors",
    "animate2": "diffusion_models/wan_animate_2_14B_tiny.safetensors",
    "fun22_5b_control": "diffusion_models/wan2.2_fun_control_5B_tiny.safetensors",
    "fun22_5b_inpaint": "diffusion_models/wan2.2_fun_inpaint_5B_tiny.safetensors",
    "scail2": "diffusion_models/wan2.1_14B_SCAIL_2_tiny.safetensors",
    "scail2_int8": "diffusion_models/wan2.1_14B_SCAIL_2_int8_convrot_tiny.safetensors",
    "bernini_high": "diffusion_models/wan2.2_bernini_r_high_noise_fp8_scaled_tiny.safetensors",
    "bernini_low": "diffusion_models/wan2.2_bernini_r_low_noise_fp8_scaled_tiny.safetensors",
    "t2v_14b_lora": "loras/wan_t2v_14B_lora_tiny.safetensors",
}
# Wan Animate 2's files are Wan 2.1 image-to-video's layout told apart by this metadata (nodes.models.wan_animate2)
METADATA = {"animate2": {"config": json.dumps({"transformer": {"model_type": "animate2"}})}}
# (input channels, output channels) of each diffusion model
_SHAPES = {"i2v_high": (36, 16), "i2v_low": (36, 16), "t2v": (16, 16), "ti2v_5b": (48, 48)}
# The text the tiny SentencePiece model is trained on: prompts of the Wan templates and the tests.
_CORPUS = [
    "The white dragon warrior stands still, eyes full of determination and strength.",
    (
        "The camera slowly moves closer or circles around the warrior, highlighting the powerful presence "
        "and heroic spirit of the character."
    ),
    "a red cube on a wooden table, a cat walking on the grass",
    "low quality, blurry, static, worst quality, JPEG artifacts, ugly, deformed",
    "a fox at dusk, sunset",
]

# Our names (diffusers') -> Wan's, the inverse of diffusers' convert_wan_transformer_to_diffusers, in order.
_TO_WAN = [
    ("condition_embedder.image_embedder.norm1", "img_emb.proj.0"),
    ("condition_embedder.image_embedder.ff.net.0.proj", "img_emb.proj.1"),
    ("condition_embedder.image_embedder.ff.net.2", "img_emb.proj.3"),
    ("condition_embedder.image_embedder.norm2", "img_emb.proj.4"),
    (".add_k_proj.", ".k_img."),
    (".add_v_proj.", ".v_img."),
    (".norm_added_k.", ".norm_k_img."),
    ("condition_embedder.time_embedder.linear_1", "time_embedding.0"),
    ("condition_embedder.time_embedder.linear_2", "time_embedding.2"),
    ("condition_embedder.text_embedder.linear_1", "text_embedding.0"),
    ("condition_embedder.text_embedder.linear_2", "text_embedding.2"),
    ("condition_embedder.time_proj", "time_projection.1"),
    ("attn1.", "self_attn."),
    ("attn2.", "cross_attn."),
    (".to_out.0.", ".o."),
    (".to_q.", ".q."),
    (".to_k.", ".k."),
    (".to_v.", ".v."),
    ("ffn.net.0.proj", "ffn.0"),
    ("ffn.net.2", "ffn.2"),
    (".norm2.", ".norm3."),
    (".scale_shift_table", ".modulation"),
    (".proj_in.", ".before_proj."),  # VACE blocks
    (".proj_out.", ".after_proj."),
]


def transformer_to_wan(sd: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    out = {}
    for key, value in sd.items():
        name = {"scale_shift_table": "head.modulation"}.get(key, key)
        name = "head.head." + name[len("proj_out.") :] if name.startswith("proj_out.") else name
        for ours, theirs in _TO_WAN:
            name = name.replace(ours, theirs)
        out[name] = value
    back = convert_wan_transformer_to_diffusers({k: i for i, k in enumerate(out)})
    leftover = [k for k in out if any(part in k for part in ("condition_embedder", "attn1", "attn2", "add_", "to_"))]
    if sorted(back) != sorted(sd) or leftover:  # diffusers' own converter must give our names back
        raise AssertionError(f"Wan layout does not convert back: {sorted(set(back) ^ set(sd))[:4]}")
    return out


_TO_WAN22 = [
    ("quant_conv.", "conv1."),
    ("post_quant_conv.", "conv2."),
    ("encoder.conv_in.", "encoder.conv1."),
    ("decoder.conv_in.", "decoder.conv1."),
    ("encoder.norm_out.", "encoder.head.0."),
    ("encoder.conv_out.", "encoder.head.2."),
    ("decoder.norm_out.", "decoder.head.0."),
    ("decoder.conv_out.", "decoder.head.2."),
]
_RESIDUAL_TO_WAN = [
    ("norm1.gamma", "residual.0.gamma"),
    ("conv1.", "residual.2."),
    ("norm2.gamma", "residual.3.gamma"),
    ("conv2.", "residual.6."),
    ("conv_shortcut.", "shortcut."),
]


def _wan22_name(key: str) -> str:
    for ours, theirs in _TO_WAN22:
        if key.startswith(ours):
            return theirs + key[len(ours) :]
    side, block, *rest = key.split(".")
    if block == "mid_block":
        kind, index, *rest = rest
        where = {"resnets.0": "middle.0", "attentions.0": "middle.1", "resnets.1": "middle.2"}[f"{kind}.{index}"]
    else:  # down_blocks.L.resnets.J / .downsampler, up_blocks.L.resnets.J / .upsampler
        level, kind, *rest = rest
        inner = "downsamples" if block == "down_blocks" else "upsamples"
        if kind in ("downsampler", "upsampler"):
            index = RES_BLOCKS if kind == "downsampler" else RES_BLOCKS + 1
        else:
            index, *rest = rest
        where = f"{inner}.{level}.{inner}.{index}"
    tail = ".".join(rest)
    for ours, theirs in _RESIDUAL_TO_WAN:
        if tail.startswith(ours):
            tail = theirs + tail[len(ours) :]
    return f"{side}.{where}.{tail}"


def wan22_vae_to_wan(sd: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """AutoencoderKLWan (Wan 2.2) names -> Wan's; nodes.models.wan22_vae must map them back."""
    out = {_wan22_name(k): v for k, v in sd.items()}
    if any(diffusers_name(k) != d for k, d in zip(out, sd)):
        raise AssertionError("the Wan 2.2 VAE layout does not convert back")
    return out


def spiece_model() -> bytes:
    import sentencepiece

    out = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(_CORPUS * 20),
        model_writer=out,
        vocab_size=400,
        hard_vocab_limit=False,
        model_type="unigram",
        pad_id=0,
        eos_id=1,
        unk_id=2,
        bos_id=-1,
        byte_fallback=True,
        character_coverage=1.0,
        num_threads=1,
        minloglevel=2,
    )
    return out.getvalue()


CLIP_VISION_WIDTH = 32  # the demo CLIP vision model's (nodes.models.demo)


def tiny_wan_transformer(
    in_channels: int, out_channels: int, gen: torch.Generator, image_dim: int | None = None
) -> dict[str, torch.Tensor]:
    """A seeded two-layer Wan transformer (one head) in Wan's key layout, with these channels and image width."""
    model = WanTransformer3DModel(
        patch_size=(1, 2, 2),
        num_attention_heads=1,
        attention_head_dim=HEAD_DIM,
        in_channels=in_channels,
        out_channels=out_channels,
        text_dim=TEXT_WIDTH,
        freq_dim=256,
        ffn_dim=256,
        num_layers=2,
        image_dim=image_dim,
        added_kv_proj_dim=None if image_dim is None else HEAD_DIM,
    )
    randomize_constants(model, gen)
    return transformer_to_wan(model.state_dict())


def tiny_wan_state_dicts(seed: int = SEED) -> dict[str, dict[str, torch.Tensor]]:
    """The tiny files' tensors, in ComfyUI's layouts and bfloat16 (the tokenizer bytes as uint8)."""
    proto = spiece_model()
    vocab = len(__import__("sentencepiece").SentencePieceProcessor(model_proto=proto))
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        gen = torch.Generator().manual_seed(seed)
        sds = {name: tiny_wan_transformer(*shape, gen) for name, shape in _SHAPES.items()}
        text = UMT5EncoderModel(
            UMT5Config(
                vocab_size=vocab,
                d_model=TEXT_WIDTH,
                d_kv=8,
                d_ff=64,
                num_layers=2,
                num_heads=4,
                relative_attention_num_buckets=32,
                feed_forward_proj="gated-gelu",
                dense_act_fn="gelu_pytorch_tanh",
                is_encoder_decoder=False,
            )
        )
        vae = AutoencoderKLWan(base_dim=8, z_dim=16)
        vae22 = AutoencoderKLWan(
            base_dim=8,
            decoder_base_dim=16,
            z_dim=48,
            is_residual=True,
            in_channels=12,
            out_channels=12,
            patch_size=2,
            scale_factor_spatial=16,
        )
        for m in (text, vae, vae22):
            randomize_constants(m, gen)
        sds["i2v_21"] = tiny_wan_transformer(
            36, 16, gen, image_dim=CLIP_VISION_WIDTH
        )  # last: the others keep their bytes
    text_sd = {k: v for k, v in text.state_dict().items() if k != "encoder.embed_tokens.weight"}
    sds["text_encoder"] = text_sd
    sds["vae"] = diffusers_to_wan(vae.state_dict())
    sds["vae22"] = wan22_vae_to_wan(vae22.state_dict())
    out = {name: {k: v.to(torch.bfloat16).contiguous() for k, v in sd.items()} for name, sd in sds.items()}
    out["text_encoder"][SPIECE_KEY] = torch.frombuffer(bytearray(proto), dtype=torch.uint8)
    lora_gen = torch.Generator().manual_seed(seed + 1)
    out["lora_high"], out["lora_low"] = (_lora(sds[name], lora_gen) for name in ("i2v_high", "i2v_low"))
    out.update(_fun_models(seed))
    out["fun_camera"] = _camera_model(seed)
    out["fun22_camera"] = _camera_model(seed, 36, None, stream=7)
    out["flf2v"] = _flf2v_model(seed)
    out["vace"] = _vace_model(seed)
    out["vace_lora"] = _lora(out["vace"], torch.Generator().manual_seed(seed + 5))
    out.update(_t2v22_models(seed))
    out["animate2"] = animate2_model(seed)
    out.update(_fun22_5b_models(seed))
    out["scail2"] = scail2_model(seed)
    if importlib.util.find_spec("comfy_kitchen") is not None:  # it quantizes; absent on the GPU machine
        out["scail2_int8"] = int8_convrot(out["scail2"], "blocks.")
    out.update(bernini_models(seed))
    # a LoRA of the text-to-video blocks' shapes (Bernini-R's and Wan Alpha's lightx2v / Wan 2.1 T2V 14B LoRAs)
    out["t2v_14b_lora"] = _lora(sds["t2v"], torch.Generator().manual_seed(seed + 44))
    return out


def bernini_models(seed: int = SEED) -> dict[str, dict[str, torch.Tensor]]:
    """Bernini-R's high- and low-noise experts: Wan 2.2 14B text-to-video's layout (16 input channels, no image
    embedding) in ComfyUI's scaled fp8 files, with weights of their own (a generator of their own)."""
    gen = torch.Generator().manual_seed(seed + 43)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed + 43)
        sds = {name: tiny_wan_transformer(16, 16, gen) for name in ("bernini_high", "bernini_low")}
    return {name: _scaled_fp8(sd) for name, sd in sds.items()}


def _fun22_5b_models(seed: int) -> dict[str, dict[str, torch.Tensor]]:
    """Wan 2.2 Fun 5B Control and InP, from a generator of their own: Wan 2.2 5B's shape (48 latent channels out, no
    image embedding: ComfyUI 0.3.64's WAN22_T2V, whose concat_cond takes the extra input channels) with the inputs
    ComfyUI's nodes give them on the 48-channel Wan 2.2 VAE. Control 148 = noise 48, Wan22FunControlToVideo's control
    latent 48, its 4 mask channels (concat_mask_index 48), its start latent 48; and, as the 14B Fun Control's from
    16 channels, a ref_conv from the 48-channel reference latent (ComfyUI's in_dim_ref_conv). InP 100 = noise 48,
    WanFunInpaintToVideo's 4 mask channels, its start/end latent 48."""
    gen = torch.Generator().manual_seed(seed + 40)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed + 40)
        sds = {
            name: tiny_wan_transformer(cin, 48, gen)
            for name, cin in (("fun22_5b_control", 148), ("fun22_5b_inpaint", 100))
        }
    sds["fun22_5b_control"]["ref_conv.weight"] = torch.randn(HEAD_DIM, 48, 2, 2, generator=gen) * 0.05
    sds["fun22_5b_control"]["ref_conv.bias"] = torch.randn(HEAD_DIM, generator=gen) * 0.05
    return {name: {k: v.to(torch.bfloat16).contiguous() for k, v in sd.items()} for name, sd in sds.items()}


def animate2_model(seed: int = SEED) -> dict[str, torch.Tensor]:
    """Wan Animate 2's tiny file: Wan 2.1 image-to-video's shape with its own weights (METADATA names it)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed + 39)
        sd = tiny_wan_transformer(36, 16, torch.Generator().manual_seed(seed + 39), image_dim=CLIP_VISION_WIDTH)
    return {k: v.to(torch.bfloat16).contiguous() for k, v in sd.items()}


def scail2_model(seed: int = SEED) -> dict[str, torch.Tensor]:
    """Wan SCAIL-2's tiny file: Wan 2.1 image-to-video's layout at 20 input channels (noise, 4 history channels),
    `patch_embedding_pose` from 20 channels (pose latent, 4 of ones) and `patch_embedding_mask` from 28 (7 colours x
    4 frames), from a generator of its own."""
    gen = torch.Generator().manual_seed(seed + 41)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed + 41)
        sd = tiny_wan_transformer(20, 16, gen, image_dim=CLIP_VISION_WIDTH)
    for name, channels in (("patch_embedding_pose", 20), ("patch_embedding_mask", 28)):
        sd[f"{name}.weight"] = torch.randn(HEAD_DIM, channels, 1, 2, 2, generator=gen) * 0.05
        sd[f"{name}.bias"] = torch.randn(HEAD_DIM, generator=gen) * 0.05
    return {k: v.to(torch.bfloat16).contiguous() for k, v in sd.items()}


def _t2v22_models(seed: int) -> dict[str, dict[str, torch.Tensor]]:
    """Wan 2.2 14B text-to-video's high- and low-noise experts (16 input channels, no image embedding), from a
    generator of their own, stored as ComfyUI's scaled fp8 files."""
    gen = torch.Generator().manual_seed(seed + 6)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed + 6)
        sds = {name: tiny_wan_transformer(16, 16, gen) for name in ("t2v_high", "t2v_low")}
    return {name: _scaled_fp8(sd) for name, sd in sds.items()}


def _scaled_fp8(sd: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """ComfyUI's scaled fp8 layout (nodes.models.fp8) as in its repackaged wan2.2_*_fp8_scaled files: each
    block's linear weight as float8_e4m3fn divided by a float32 `scale_weight` (its absolute maximum over the
    format's 448) beside an unused `scale_input` of 1, the other tensors bfloat16, and the `scaled_fp8` marker."""
    out: dict[str, torch.Tensor] = {"scaled_fp8": torch.empty(0, dtype=torch.float8_e4m3fn)}
    for key, value in sd.items():
        layer, _, name = key.rpartition(".")
        if key.startswith("blocks.") and name == "weight" and value.dim() == 2:
            scale = value.abs().max().to(torch.float32) / torch.finfo(torch.float8_e4m3fn).max
            out[key] = (value.to(torch.float32) / scale).to(torch.float8_e4m3fn)
            out[f"{layer}.scale_weight"] = scale
            out[f"{layer}.scale_input"] = torch.tensor(1.0)
        else:
            out[key] = value.to(torch.bfloat16).contiguous()
    return out


def _vace_model(seed: int) -> dict[str, torch.Tensor]:
    """Wan 2.1 VACE (text-to-video, 16 input channels) in the layout of ComfyUI's repackaged VACE files: 4 blocks
    and 2 VACE blocks, applied after blocks 0 and 2 (ComfyUI: every layers // vace layers), whose patch embedding
    takes 96 channels (inactive and reactive latents, the 64-channel mask); from a generator of its own."""
    gen = torch.Generator().manual_seed(seed + 4)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed + 4)
        model = WanVACETransformer3DModel(
            patch_size=(1, 2, 2),
            num_attention_heads=1,
            attention_head_dim=HEAD_DIM,
            in_channels=16,
            out_channels=16,
            text_dim=TEXT_WIDTH,
            freq_dim=256,
            ffn_dim=256,
            num_layers=4,
            vace_layers=[0, 2],
            vace_in_channels=96,
        )
        randomize_constants(model, gen)
    sd = transformer_to_wan(model.state_dict())
    return {k: v.to(torch.bfloat16).contiguous() for k, v in sd.items()}


def _camera_model(
    seed: int, in_channels: int = 32, image_dim: int | None = CLIP_VISION_WIDTH, stream: int = 3
) -> dict[str, torch.Tensor]:
    """Wan Fun Camera with its control adapter as ComfyUI's model_detection finds it (`control_adapter.conv.weight`
    from 24 x 8 x 8 camera channels, one residual block), from a generator of its own (seed + stream). Wan 2.1's
    v1.1 (the defaults): image-to-video with 32 input channels (noise and start latent) and CLIP vision states in
    img_emb; Wan 2.2's (ComfyUI's WAN22_Camera, camera_2.2: no img_emb): 36 (noise, mask and start latent)."""
    gen = torch.Generator().manual_seed(seed + stream)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed + stream)
        sd = tiny_wan_transformer(in_channels, 16, gen, image_dim=image_dim)
    sd["control_adapter.conv.weight"] = torch.randn(HEAD_DIM, 24 * 64, 2, 2, generator=gen) * 0.02
    sd["control_adapter.conv.bias"] = torch.randn(HEAD_DIM, generator=gen) * 0.02
    for conv in ("conv1", "conv2"):
        sd[f"control_adapter.residual_blocks.0.{conv}.weight"] = (
            torch.randn(HEAD_DIM, HEAD_DIM, 3, 3, generator=gen) * 0.02
        )
        sd[f"control_adapter.residual_blocks.0.{conv}.bias"] = torch.randn(HEAD_DIM, generator=gen) * 0.02
    return {k: v.to(torch.bfloat16).contiguous() for k, v in sd.items()}


CLIP_VISION_TOKENS = 257  # the demo CLIP vision model's: 16 x 16 patches and the class token


def _flf2v_model(seed: int) -> dict[str, torch.Tensor]:
    """Wan 2.1 FLF2V 14B's layout (ComfyUI's flf_pos_embed_token_number from img_emb.emb_pos: 514, two frames'
    257 CLIP tokens) at the tiny widths, from a generator of its own."""
    gen = torch.Generator().manual_seed(seed + 8)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed + 8)
        sd = tiny_wan_transformer(36, 16, gen, image_dim=CLIP_VISION_WIDTH)
    sd["img_emb.emb_pos"] = torch.randn(1, 2 * CLIP_VISION_TOKENS, CLIP_VISION_WIDTH, generator=gen) * 0.5
    return {k: v.to(torch.bfloat16).contiguous() for k, v in sd.items()}


def _fun_models(seed: int) -> dict[str, dict[str, torch.Tensor]]:
    """The Fun models, from a generator of their own so the files above keep their bytes. Their layout is Wan's
    with more input channels, as ComfyUI's model_detection reads them (in_dim from patch_embedding.weight,
    WAN21_FunControl2V's 48): Wan 2.1 Fun Control 48 (noise, control latent, start latent), Fun InP 36 (noise,
    mask, image latent), Wan 2.2 Fun Control 52 (noise, control latent, mask, start latent) and its
    reference-image patch embedding ref_conv (a 2x2 conv from 16 latent channels: ComfyUI's in_dim_ref_conv)."""
    gen = torch.Generator().manual_seed(seed + 2)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed + 2)
        sds = {
            name: tiny_wan_transformer(cin, 16, gen)
            for name, cin in (("fun_control", 48), ("fun_inp", 36), ("fun22_control", 52))
        }
    sds["fun22_control"]["ref_conv.weight"] = torch.randn(HEAD_DIM, 16, 2, 2, generator=gen) * 0.05
    sds["fun22_control"]["ref_conv.bias"] = torch.randn(HEAD_DIM, generator=gen) * 0.05
    return {name: {k: v.to(torch.bfloat16).contiguous() for k, v in sd.items()} for name, sd in sds.items()}


def _lora(model: dict[str, torch.Tensor], gen: torch.Generator, rank: int = 4) -> dict[str, torch.Tensor]:
    """A rank-`rank` LoRA on every attention and feed-forward matrix of a Wan-layout model, bfloat16."""
    out = {}
    for key, weight in sorted(model.items()):
        if (
            key.startswith("blocks.")
            and key.endswith(".weight")
            and weight.dim() == 2
            and any(part in key for part in (".q.", ".k.", ".v.", ".o.", ".ffn."))
        ):
            name = "diffusion_model." + key[: -len(".weight")]
            out[f"{name}.lora_down.weight"] = torch.randn(rank, weight.shape[1], generator=gen) * 0.1
            out[f"{name}.lora_up.weight"] = torch.randn(weight.shape[0], rank, generator=gen) * 0.1
            out[f"{name}.alpha"] = torch.tensor(float(rank))
    return {k: v.to(torch.bfloat16).contiguous() for k, v in out.items()}


def build_demo_wan(models_dir: Path, seed: int = SEED) -> list[Path]:
    """Write wan-tiny under a ComfyUI models folder; returns the paths written."""
    written = []
    for name, sd in tiny_wan_state_dicts(seed).items():
        path = Path(models_dir) / FILES[name]
        path.parent.mkdir(parents=True, exist_ok=True)
        metadata = METADATA.get(name, {"format": "pt"})  # one entry: safetensors orders several at random
        write_atomic(path, lambda tmp, sd=sd, metadata=metadata: save_file(sd, tmp, metadata=metadata))
        written.append(path)
    return written
