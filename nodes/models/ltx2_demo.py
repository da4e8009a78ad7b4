"""ltx2-tiny: a deterministic tiny LTX-2 (19B's audio-video layout) checkpoint as ComfyUI's users download it
(checkpoints/ltx-2-19b-dev.safetensors): the audio-video transformer under `model.diffusion_model.` and the video
VAE under `vae.` in the original (Lightricks) key names, and the sizes in the file's metadata `config` JSON, whose
"transformer" section ComfyUI reads for everything the tensors do not say (heads, head widths, caption width, RoPE
kind and precision, the cross-modal timestep multiplier) and whose "vae" section gives the VAE's block lists. The
networks are diffusers' LTX2VideoTransformer3DModel and AutoencoderKLLTX2Video at tiny sizes (the VAE keeps
ComfyUI's fixed 128 base channels and 128 latent channels, one res block per stage, no channel growth), renamed
to the original layout by the inverse of diffusers' own converters (checked by converting back).
text_encoders/gemma_3_12B_it_tiny.safetensors is the Gemma 3 text encoder as ComfyUI's repackaged gemma_3_12B_it
file holds it (transformers' names under `model.`, its SentencePiece model as the byte tensor `spiece_model`):
6 layers (five sliding-window, one global, as Gemma 3 alternates them), 32 wide. The checkpoint carries the text
side LTXAVTextEncoderLoader reads from it: `text_embedding_projection.aggregate_embed.weight` (all hidden states
of every layer -> the caption width) and the video and audio embeddings connectors under
`model.diffusion_model.{video,audio}_embeddings_connector.` (diffusers' LTX2ConnectorTransformer1d, renamed), and
the audio VAE and vocoder LTXVAudioVAELoader reads from it (`audio_vae.*`, `vocoder.*`, their configs in the same
metadata JSON). latent_upscale_models/ltx-2-spatial-upscaler-x2-1.0_tiny.safetensors is the latent upsampler;
loras/ltx-2-19b-lora_tiny.safetensors a LoRA in ComfyUI's layout and loras/ltx-2.3-id-lora-talkvid-3k_tiny.safetensors
one in ID-LoRA's (the LTX-2.3 ID-LoRA template's).
bfloat16 like the released files. Same seed -> byte-identical files."""

from __future__ import annotations

import io
import json
from pathlib import Path

import torch
from diffusers import AutoencoderKLLTX2Video, LTX2VideoTransformer3DModel
from diffusers.loaders.single_file_utils import convert_ltx2_transformer_to_diffusers, convert_ltx2_vae_to_diffusers
from diffusers.pipelines.ltx2.connectors import LTX2ConnectorTransformer1d
from safetensors.torch import save_file

from nodes.models.flux_demo import randomize_constants
from nodes.models.ltx2_text import GEMMA_PREFIX, SPIECE_KEY, connector_to_original, gemma_config
from nodes.models.ltx2_vae import diffusers_config as vae_diffusers_config
from nodes.output_claims import write_atomic

SEED = 23
PREFIX = "model.diffusion_model."
FILES = {
    "checkpoint": "checkpoints/ltx-2-19b-dev_tiny.safetensors",
    "text_encoder": "text_encoders/gemma_3_12B_it_tiny.safetensors",
}
UPSAMPLER_FILE = "latent_upscale_models/ltx-2-spatial-upscaler-x2-1.0_tiny.safetensors"
LORA_FILE = "loras/ltx-2-19b-lora_tiny.safetensors"
# The LTX-2.3 ID-LoRA template's LoRA (ltx-2.3-id-lora-talkvid-3k): ID-LoRA's trainer saves PEFT's lora_A / lora_B
# (no alpha) under `diffusion_model.` for the audio attentions, the audio feed-forward and both cross-modal attentions
# of every block (its training config's target_modules); the tiny file has that layout on both tiny blocks.
ID_LORA_FILE = "loras/ltx-2.3-id-lora-talkvid-3k_tiny.safetensors"
ID_LORA_MODULES = [
    f"{attn}.{proj}"
    for attn in ("audio_attn1", "audio_attn2", "audio_to_video_attn", "video_to_audio_attn")
    for proj in ("to_k", "to_q", "to_v", "to_out.0")
] + ["audio_ff.net.0.proj", "audio_ff.net.2"]
# The layers the tiny LoRA changes (the checkpoint's names, ComfyUI's LoRA key layout under `diffusion_model.`):
# video and audio self-attention, cross-attention, a feed-forward and the audio-to-video attention of both blocks.
LORA_LAYERS = [
    f"transformer_blocks.{i}.{name}"
    for i in range(2)
    for name in (
        "attn1.to_q",
        "attn1.to_v",
        "attn2.to_k",
        "audio_attn1.to_q",
        "ff.net.0.proj",
        "audio_to_video_attn.to_out.0",
    )
]
# The published x2 upsampler's config (nodes/models/ltx2_upsampler.py) at tiny width: 32 channels (GroupNorm's 32
# groups), one block per stage; the latent keeps the VAE's 128 channels.
UPSAMPLER_CONFIG = {
    "_class_name": "LatentUpsampler",
    "in_channels": 128,
    "mid_channels": 32,
    "num_blocks_per_stage": 1,
    "dims": 3,
    "spatial_upsample": True,
    "temporal_upsample": False,
    "spatial_scale": 2.0,
    "rational_resampler": False,
}
# The released file's transformer settings in ComfyUI's (LTXAVModel's) names, at tiny widths: 2 heads of 8 for
# video and audio (equal head counts: ComfyUI builds both cross-modal RoPE tables with the audio heads, diffusers
# the video one with the video heads), a 32-wide caption, 2 blocks.
TRANSFORMER_CONFIG = {
    "num_attention_heads": 2,
    "attention_head_dim": 8,
    "cross_attention_dim": 16,
    "audio_num_attention_heads": 2,
    "audio_attention_head_dim": 8,
    "audio_cross_attention_dim": 16,
    "caption_channels": 32,
    "positional_embedding_theta": 10000.0,
    "positional_embedding_max_pos": [20, 2048, 2048],
    "audio_positional_embedding_max_pos": [20],
    "rope_type": "split",
    "frequencies_precision": "float64",
    "causal_temporal_positioning": True,
    "use_middle_indices_grid": True,
    "timestep_scale_multiplier": 1000,
    "av_ca_timestep_scale_multiplier": 1000,
    "connector_attention_head_dim": 16,
    "connector_num_attention_heads": 2,
}
NUM_LAYERS = 2
# The tiny Gemma 3's sizes and the connectors' (their width is the caption width: heads x head width = 32).
GEMMA = {"hidden": 32, "intermediate": 64, "layers": 6, "heads": 2, "kv_heads": 1, "head_dim": 16}
CONNECTOR = {"heads": 2, "head_dim": 16, "layers": 2, "registers": 128}
# Prompts of the LTX-2 templates and the tests: the tiny SentencePiece model is trained on them.
_CORPUS = [
    "A cinematic shot of a red fox running through fresh snow at dawn, its breath visible in the cold air.",
    "The camera slowly pans across a quiet harbour as waves lap against the wooden boats.",
    "worst quality, inconsistent motion, blurry, jittery, distorted",
    "a cat playing piano, soft jazz music",
]
# The video VAE in ComfyUI's config names: LTX-2's block sequence (space, time, then two space-time compressions
# in the encoder; three residual space-time expansions in the decoder) with one layer per stage and multiplier 1.
VAE_CONFIG = {
    "dims": 3,
    "in_channels": 3,
    "out_channels": 3,
    "latent_channels": 128,
    "encoder_blocks": [
        ["res_x", {"num_layers": 1}],
        ["compress_space_res", {"multiplier": 1}],
        ["res_x", {"num_layers": 1}],
        ["compress_time_res", {"multiplier": 1}],
        ["res_x", {"num_layers": 1}],
        ["compress_all_res", {"multiplier": 1}],
        ["res_x", {"num_layers": 1}],
        ["compress_all_res", {"multiplier": 1}],
        ["res_x", {"num_layers": 1}],
    ],
    "decoder_blocks": [
        ["res_x", {"num_layers": 1, "inject_noise": False}],
        ["compress_all", {"residual": True, "multiplier": 1}],
        ["res_x", {"num_layers": 1, "inject_noise": False}],
        ["compress_all", {"residual": True, "multiplier": 1}],
        ["res_x", {"num_layers": 1, "inject_noise": False}],
        ["compress_all", {"residual": True, "multiplier": 1}],
        ["res_x", {"num_layers": 1, "inject_noise": False}],
    ],
    "scaling_factor": 1.0,
    "norm_layer": "pixel_norm",
    "patch_size": 4,
    "latent_log_var": "uniform",
    "use_quant_conv": False,
    "causal_decoder": False,
    "timestep_conditioning": False,
}

# The audio VAE and vocoder in the published config format (nodes/models/ltx2_audio.py reads it as ComfyUI does):
# LTX-2.0's causal mel autoencoder at 8 base channels (8 latent channels x 16 frequency bins, 16 kHz, hop 160) and
# a four-stage stereo HiFi-GAN vocoder (x160 upsampling: 16 kHz out, a rate AAC can store in the templates' MP4).
_AUDIO_ENCODER = {
    "ch": 8,
    "out_ch": 8,
    "ch_mult": [1, 2, 2],
    "num_res_blocks": 1,
    "attn_resolutions": [],
    "dropout": 0.0,
    "resamp_with_conv": True,
    "in_channels": 2,
    "resolution": 256,
    "z_channels": 8,
    "double_z": True,
    "attn_type": "vanilla",
    "mid_block_add_attention": False,
    "norm_type": "pixel",
    "causality_axis": "height",
    "mel_bins": 64,
}
AUDIO_CONFIG = {
    "audio_vae": {
        "sampling_rate": 16000,
        "model": {
            "params": {
                "encoder": _AUDIO_ENCODER,
                "decoder": {**_AUDIO_ENCODER, "out_ch": 2, "give_pre_end": False, "tanh_out": False},
                "preprocessing": {"stft": {"hop_length": 160, "filter_length": 1024}},
            }
        },
    },
    "vocoder": {
        "resblock_kernel_sizes": [3, 7],
        "upsample_rates": [5, 4, 4, 2],
        "upsample_kernel_sizes": [10, 8, 8, 4],
        "resblock_dilation_sizes": [[1, 3, 5], [1, 3, 5]],
        "upsample_initial_channel": 32,
        "stereo": True,
        "resblock": "1",
    },
}

# diffusers' names -> the original ones: diffusers' converter's renames undone, longest first so that a name
# containing another (audio_proj_in, proj_in) is taken whole.
_TO_ORIGINAL = [
    ("audio_proj_in.", "audio_patchify_proj."),
    ("proj_in.", "patchify_proj."),
    ("av_cross_attn_video_scale_shift.", "av_ca_video_scale_shift_adaln_single."),
    ("av_cross_attn_video_a2v_gate.", "av_ca_a2v_gate_adaln_single."),
    ("av_cross_attn_audio_scale_shift.", "av_ca_audio_scale_shift_adaln_single."),
    ("av_cross_attn_audio_v2a_gate.", "av_ca_v2a_gate_adaln_single."),
    ("video_a2v_cross_attn_scale_shift_table", "scale_shift_table_a2v_ca_video"),
    ("audio_a2v_cross_attn_scale_shift_table", "scale_shift_table_a2v_ca_audio"),
    (".norm_q.", ".q_norm."),
    (".norm_k.", ".k_norm."),
]


def diffusers_config(transformer: dict, num_layers: int) -> dict:
    """LTX2VideoTransformer3DModel's arguments for a file's transformer config (ComfyUI's names)."""
    return {
        "in_channels": 128,
        "out_channels": 128,
        "audio_in_channels": 128,
        "audio_out_channels": 128,
        "num_attention_heads": transformer["num_attention_heads"],
        "attention_head_dim": transformer["attention_head_dim"],
        "cross_attention_dim": transformer["cross_attention_dim"],
        "audio_num_attention_heads": transformer["audio_num_attention_heads"],
        "audio_attention_head_dim": transformer["audio_attention_head_dim"],
        "audio_cross_attention_dim": transformer["audio_cross_attention_dim"],
        "caption_channels": transformer["caption_channels"],
        "num_layers": num_layers,
        "rope_theta": transformer["positional_embedding_theta"],
        "rope_type": transformer["rope_type"],
        "rope_double_precision": transformer["frequencies_precision"] == "float64",
        "pos_embed_max_pos": transformer["positional_embedding_max_pos"][0],
        "base_height": transformer["positional_embedding_max_pos"][1],
        "base_width": transformer["positional_embedding_max_pos"][2],
        "audio_pos_embed_max_pos": transformer["audio_positional_embedding_max_pos"][0],
        "timestep_scale_multiplier": transformer["timestep_scale_multiplier"],
        "cross_attn_timestep_scale_multiplier": transformer["av_ca_timestep_scale_multiplier"],
    }


def transformer_to_original(sd: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    out = {}
    for key, value in sd.items():
        name = key
        if name.startswith("time_embed."):
            name = "adaln_single." + name[len("time_embed.") :]
        elif name.startswith("audio_time_embed."):
            name = "audio_adaln_single." + name[len("audio_time_embed.") :]
        for ours, theirs in _TO_ORIGINAL:
            name = name.replace(ours, theirs)
        out[PREFIX + name] = value
    back = convert_ltx2_transformer_to_diffusers({k: i for i, k in enumerate(out)})
    if sorted(back) != sorted(sd):  # diffusers' own converter must give our names back
        raise AssertionError(f"LTX-2 layout does not convert back: {sorted(set(back) ^ set(sd))[:4]}")
    return out


def vae_key_name(key: str) -> str:
    """diffusers' VAE name -> the original one (ComfyUI's CausalVideoAutoencoder's under `vae.`)."""
    part, rest = key.split(".", 1) if "." in key else (key, "")
    if key == "latents_mean":
        return "vae.per_channel_statistics.mean-of-means"
    if key == "latents_std":
        return "vae.per_channel_statistics.std-of-means"
    pieces = rest.split(".")
    if pieces[0] == "mid_block":  # the encoder's last stage, the decoder's first
        index = len(VAE_CONFIG["encoder_blocks"]) - 1 if part == "encoder" else 0
        tail = pieces[2:]
        return f"vae.{part}.{'down' if part == 'encoder' else 'up'}_blocks.{index}.res_blocks.{'.'.join(tail)}"
    if pieces[0] in ("down_blocks", "up_blocks"):
        i = int(pieces[1])
        if pieces[2] in ("downsamplers", "upsamplers"):  # the compression after (encoder) / before (decoder) stage i
            return f"vae.{part}.{pieces[0]}.{2 * i + 1}.{'.'.join(pieces[4:])}"
        index = 2 * i if part == "encoder" else 2 * i + 2
        return f"vae.{part}.{pieces[0]}.{index}.res_blocks.{'.'.join(pieces[3:])}"
    return f"vae.{key}"


def vae_to_original(sd: dict[str, torch.Tensor], gen: torch.Generator) -> dict[str, torch.Tensor]:
    out = {vae_key_name(k): v for k, v in sd.items()}
    # The released file's other statistics, which nothing reads (diffusers' converter drops them).
    for name in ("mean-of-stds", "mean-of-stds_over_std-of-means", "channel"):
        out[f"vae.per_channel_statistics.{name}"] = torch.rand(128, generator=gen) + 0.5
    back = convert_ltx2_vae_to_diffusers(dict(out))
    if sorted(back) != sorted(sd):  # diffusers' own converter must give our names back
        raise AssertionError(f"LTX-2 VAE layout does not convert back: {sorted(set(back) ^ set(sd))[:4]}")
    return out


def _tiny_vae(gen: torch.Generator) -> dict[str, torch.Tensor]:
    vae = AutoencoderKLLTX2Video(**vae_diffusers_config(VAE_CONFIG))
    with torch.no_grad():
        for p in vae.parameters():  # small weights: 20 stacked convolutions stay in range
            p.copy_(0.05 * torch.randn(p.shape, generator=gen))
        vae.latents_mean.copy_(0.1 * torch.randn(128, generator=gen))
        vae.latents_std.copy_(torch.rand(128, generator=gen) + 0.5)
    return vae_to_original(vae.state_dict(), gen)


def spiece_model() -> bytes:
    """A tiny SentencePiece model with Gemma's special ids (pad 0, eos 1, bos 2, unk 3)."""
    import sentencepiece

    out = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(_CORPUS * 20),
        model_writer=out,
        vocab_size=300,
        hard_vocab_limit=False,
        model_type="unigram",
        pad_id=0,
        eos_id=1,
        bos_id=2,
        unk_id=3,
        byte_fallback=True,
        character_coverage=1.0,
        num_threads=1,
        minloglevel=2,
    )
    return out.getvalue()


def _tiny_gemma(gen: torch.Generator, proto: bytes) -> dict[str, torch.Tensor]:
    import sentencepiece
    from transformers import Gemma3TextModel

    vocab = len(sentencepiece.SentencePieceProcessor(model_proto=proto))
    model = Gemma3TextModel(gemma_config(vocab, GEMMA))
    randomize_constants(model, gen)
    sd = {GEMMA_PREFIX + k: v for k, v in model.state_dict().items()}
    sd[SPIECE_KEY] = torch.frombuffer(bytearray(proto), dtype=torch.uint8)
    return sd


def _text_side(gen: torch.Generator) -> dict[str, torch.Tensor]:
    """The checkpoint's projection of Gemma's stacked hidden states and its two embeddings connectors."""
    width = GEMMA["hidden"]
    sd = {
        "text_embedding_projection.aggregate_embed.weight": torch.randn(
            width, width * (GEMMA["layers"] + 1), generator=gen
        )
        / (width * (GEMMA["layers"] + 1)) ** 0.5
    }
    for name in ("video", "audio"):
        connector = LTX2ConnectorTransformer1d(
            num_attention_heads=CONNECTOR["heads"],
            attention_head_dim=CONNECTOR["head_dim"],
            num_layers=CONNECTOR["layers"],
            num_learnable_registers=CONNECTOR["registers"],
            rope_type="split",
        )
        randomize_constants(connector, gen)
        sd.update(connector_to_original(connector.state_dict(), f"{PREFIX}{name}_embeddings_connector."))
    return sd


def tiny_audio_state_dict(seed: int = SEED, config: dict = AUDIO_CONFIG) -> dict[str, torch.Tensor]:
    """The checkpoint's audio VAE (`audio_vae.*`, its statistics) and vocoder (`vocoder.*`) in the published
    names: diffusers' AutoencoderKLLTX2Audio keeps them, LTX2Vocoder's are renamed back (ltx2_audio's table)."""
    from diffusers import AutoencoderKLLTX2Audio
    from diffusers.pipelines.ltx2.vocoder import LTX2Vocoder

    from nodes.models.ltx2_audio import STATS, VOCODER_NAMES, autoencoder_kwargs, vocoder_kwargs

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed + 3)
        gen = torch.Generator().manual_seed(seed + 3)
        kwargs = autoencoder_kwargs(config["audio_vae"], None)[0]
        autoencoder = AutoencoderKLLTX2Audio(**kwargs)
        vocoder = LTX2Vocoder(**vocoder_kwargs(config["vocoder"], kwargs["mel_bins"], None))
        randomize_constants(autoencoder, gen)
        randomize_constants(vocoder, gen)
        features = kwargs["latent_channels"] * kwargs["mel_bins"] // 4
        sd = {
            f"audio_vae.{k}": v for k, v in autoencoder.state_dict().items() if k not in ("latents_mean", "latents_std")
        }
        for key, value in vocoder.state_dict().items():
            for theirs, ours in VOCODER_NAMES:
                if key.startswith(ours):
                    key = theirs + key[len(ours) :]
                    break
            sd[f"vocoder.{key}"] = value
        sd[STATS[0]] = 0.1 * torch.randn(features, generator=gen)
        sd[STATS[1]] = torch.rand(features, generator=gen) + 0.5
    return sd


def tiny_ltx2_state_dicts(seed: int = SEED) -> dict[str, dict[str, torch.Tensor]]:
    """Both files' tensors: {"checkpoint": ..., "text_encoder": ...}."""
    proto = spiece_model()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed + 1)
        gen = torch.Generator().manual_seed(seed + 1)
        gemma = _tiny_gemma(gen, proto)
        text_side = _text_side(gen)
    checkpoint = tiny_ltx2_state_dict(seed)
    checkpoint.update({k: v.to(torch.bfloat16).contiguous() for k, v in text_side.items()})
    checkpoint.update({k: v.to(torch.bfloat16).contiguous() for k, v in tiny_audio_state_dict(seed).items()})
    gemma = {k: v if k == SPIECE_KEY else v.to(torch.bfloat16).contiguous() for k, v in gemma.items()}
    return {"checkpoint": checkpoint, "text_encoder": gemma}


def tiny_ltx2_state_dict(seed: int = SEED) -> dict[str, torch.Tensor]:
    """The tiny checkpoint's tensors in the released layout, bfloat16."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        gen = torch.Generator().manual_seed(seed)
        model = LTX2VideoTransformer3DModel(**diffusers_config(TRANSFORMER_CONFIG, NUM_LAYERS))
        randomize_constants(model, gen)
        sd = transformer_to_original(model.state_dict())
        sd.update(_tiny_vae(gen))
    return {k: v.to(torch.bfloat16).contiguous() for k, v in sd.items()}


def metadata() -> dict[str, str]:
    """The one metadata entry: safetensors writes several in a per-process random order (the file's bytes and
    hash would change from run to run)."""
    return {"config": json.dumps({"transformer": TRANSFORMER_CONFIG, "vae": VAE_CONFIG, **AUDIO_CONFIG})}


def tiny_upsampler_state_dict(config: dict, seed: int = SEED) -> dict[str, torch.Tensor]:
    """A latent upsampler's tensors in the published (diffusers' LTX2LatentUpsamplerModel's) names, bfloat16."""
    from diffusers.pipelines.ltx2.latent_upsampler import LTX2LatentUpsamplerModel

    from nodes.models.ltx2_upsampler import diffusers_config as upsampler_config

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed + 2)
        gen = torch.Generator().manual_seed(seed + 2)
        model = LTX2LatentUpsamplerModel(**upsampler_config(config))
        randomize_constants(model, gen)
    return {k: v.to(torch.bfloat16).contiguous() for k, v in model.state_dict().items()}


def build_upsampler(path: Path, config: dict = UPSAMPLER_CONFIG, seed: int = SEED) -> Path:
    """Write a tiny latent upsampler file with `config` in its metadata, as the published files carry it."""
    sd = tiny_upsampler_state_dict(config, seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    meta = {"config": json.dumps(config)}
    write_atomic(path, lambda tmp: save_file(sd, tmp, metadata=meta))
    return path


def tiny_lora_state_dict(seed: int = SEED, rank: int = 4) -> dict[str, torch.Tensor]:
    """A rank-4 LoRA on LORA_LAYERS of the tiny transformer (lora_A / lora_B / alpha), bfloat16."""
    shapes = {k: v.shape for k, v in tiny_ltx2_state_dict(seed).items()}
    gen = torch.Generator().manual_seed(seed + 4)
    sd = {}
    for layer in LORA_LAYERS:
        out_features, in_features = shapes[f"{PREFIX}{layer}.weight"]
        sd[f"diffusion_model.{layer}.lora_A.weight"] = torch.randn(rank, in_features, generator=gen) / in_features**0.5
        sd[f"diffusion_model.{layer}.lora_B.weight"] = torch.randn(out_features, rank, generator=gen) / rank**0.5
        sd[f"diffusion_model.{layer}.alpha"] = torch.tensor(float(rank))
    return {k: v.to(torch.bfloat16).contiguous() for k, v in sd.items()}


def tiny_id_lora_state_dict(seed: int = SEED, rank: int = 4) -> dict[str, torch.Tensor]:
    """A rank-4 LoRA in ID-LoRA's layout (ID_LORA_MODULES of both blocks, lora_A / lora_B, no alpha), bfloat16."""
    shapes = {k: v.shape for k, v in tiny_ltx2_state_dict(seed).items()}
    gen = torch.Generator().manual_seed(seed + 5)
    sd = {}
    for layer in (f"transformer_blocks.{i}.{m}" for i in range(NUM_LAYERS) for m in ID_LORA_MODULES):
        out_features, in_features = shapes[f"{PREFIX}{layer}.weight"]
        sd[f"diffusion_model.{layer}.lora_A.weight"] = torch.randn(rank, in_features, generator=gen) / in_features**0.5
        sd[f"diffusion_model.{layer}.lora_B.weight"] = torch.randn(out_features, rank, generator=gen) / rank
    return {k: v.to(torch.bfloat16).contiguous() for k, v in sd.items()}


def build_demo_ltx2(models_dir: Path, seed: int = SEED) -> list[Path]:
    """Write ltx2-tiny under a ComfyUI models folder; returns the paths written."""
    written = []
    for name, sd in tiny_ltx2_state_dicts(seed).items():
        path = Path(models_dir) / FILES[name]
        path.parent.mkdir(parents=True, exist_ok=True)
        meta = metadata() if name == "checkpoint" else None
        write_atomic(path, lambda tmp, sd=sd, meta=meta: save_file(sd, tmp, metadata=meta))
        written.append(path)
    written.append(build_upsampler(Path(models_dir) / UPSAMPLER_FILE, seed=seed))
    lora = Path(models_dir) / LORA_FILE
    lora.parent.mkdir(parents=True, exist_ok=True)
    sd = tiny_lora_state_dict(seed)
    write_atomic(lora, lambda tmp: save_file(sd, tmp))
    written.append(lora)
    id_lora = Path(models_dir) / ID_LORA_FILE
    id_sd = tiny_id_lora_state_dict(seed)
    write_atomic(id_lora, lambda tmp: save_file(id_sd, tmp))
    written.append(id_lora)
    return written
