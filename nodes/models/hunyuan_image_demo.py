"""hunyuan-image-2.1-tiny: a deterministic tiny Hunyuan Image 2.1 in the layouts its published files have, five files:
- diffusion_models/hunyuanimage2.1_tiny.safetensors: the DiT in the authors' names (`double_blocks.N.img_attn_qkv`,
  `single_blocks.N.linear1`, `txt_in.individual_token_refiner.blocks.N`, `final_layer.adaLN_modulation.1` as
  (shift, scale)), 2 heads of ComfyUI's fixed 128, one dual- and one single-stream block, two token-refiner blocks,
  taking 32-wide Qwen2.5-VL states, with the ByT5 glyph mapper (`byt5_in`) from the tiny ByT5's 32 through 64 (the
  published 1472 through 2048);
- vae/hunyuan_image_2.1_vae_tiny.safetensors: the 32x VAE in the authors' names (`encoder.down.N.block.M`,
  `.downsample.conv`, `decoder.up.N.upsample.conv`, `mid.attn_1.q`), six stages 32..128 wide, one resnet each;
- text_encoders/qwen_2.5_vl_7b_hunyuan_image_tiny.safetensors: the tiny Qwen-Image Qwen2.5-VL's shape (`model.*`,
  the real vocabulary, 32 wide, ComfyUI's 128-wide heads) four layers deep, so that Hunyuan Image's third block
  from the end (ComfyUI's layer -3) exists; CLIPLoader type hunyuan_image reads it;
- diffusion_models/hunyuanimage2.1_distilled_tiny.safetensors: the guidance-distilled DiT's layout (the above with
  `guidance_in` and the meanflow `time_r_in`), its own weights;
- text_encoders/byt5_small_glyphxl_tiny.safetensors: the glyph ByT5 encoder (T5's names, the 1510-token table),
  32 wide, 2 layers of 4 heads; DualCLIPLoader type hunyuan_image reads it beside the Qwen2.5-VL.
bfloat16 like the published files. Same seed -> byte-identical files."""

from __future__ import annotations

from pathlib import Path

import torch
from diffusers import AutoencoderKLHunyuanImage, HunyuanImageTransformer2DModel
from diffusers.models.transformers.transformer_hunyuanimage import HunyuanImageByT5TextProjection
from safetensors.torch import save_file
from transformers import Qwen2Config, Qwen2Model, T5Config, T5EncoderModel

from nodes.models.flux_demo import randomize_constants
from nodes.models.hunyuan_image import to_diffusers_layout
from nodes.models.hunyuan_image_vae import to_diffusers_layout as vae_to_diffusers
from nodes.models.qwen_image_demo import TEXT_WIDTH, VOCAB
from nodes.models.qwen_image_text import HEAD_DIM, RMS_EPS, ROPE_THETA
from nodes.output_claims import write_atomic

SEED = 2121
FILES = {
    "transformer": "diffusion_models/hunyuanimage2.1_tiny.safetensors",
    "vae": "vae/hunyuan_image_2.1_vae_tiny.safetensors",
    "text_encoder": "text_encoders/qwen_2.5_vl_7b_hunyuan_image_tiny.safetensors",
    "distilled": "diffusion_models/hunyuanimage2.1_distilled_tiny.safetensors",
    "byt5": "text_encoders/byt5_small_glyphxl_tiny.safetensors",
}
BYT5_WIDTH, BYT5_MAPPER_WIDTH = 32, 64
# the glyph ByT5's config (ComfyUI's byt5_config_small_glyph.json: 1510 tokens, gated GELU, 32 buckets) narrowed
BYT5_CONFIG = T5Config(
    vocab_size=1510,
    d_model=BYT5_WIDTH,
    d_kv=8,
    num_heads=4,
    d_ff=64,
    num_layers=2,
    relative_attention_num_buckets=32,
    feed_forward_proj="gated-gelu",
    dense_act_fn="gelu_pytorch_tanh",
    is_encoder_decoder=False,
    use_cache=False,
    tie_word_embeddings=False,
)
TEXT_LAYERS = 4
VAE_CONFIG = {
    "in_channels": 3,
    "out_channels": 3,
    "latent_channels": 64,
    "block_out_channels": (32, 32, 32, 32, 128, 128),
    "layers_per_block": 1,
    "spatial_compression_ratio": 32,
    "sample_size": 512,
}
DIT_CONFIG = {
    "in_channels": 64,
    "out_channels": 64,
    "num_attention_heads": 2,
    "attention_head_dim": 128,
    "num_layers": 1,
    "num_single_layers": 1,
    "num_refiner_layers": 2,
    "mlp_ratio": 4.0,
    "patch_size": (1, 1),
    "text_embed_dim": TEXT_WIDTH,
    "rope_axes_dim": (64, 64),
}
_REFINER_BACK = {
    "norm1.": "norm1.",
    "norm2.": "norm2.",
    "attn.to_out.0.": "self_attn_proj.",
    "ff.net.0.proj.": "mlp.fc1.",
    "ff.net.2.": "mlp.fc2.",
    "norm_out.linear.": "adaLN_modulation.1.",
}
_DOUBLE_BACK = {
    "norm1.linear.": "img_mod.linear.",
    "norm1_context.linear.": "txt_mod.linear.",
    "attn.norm_q.": "img_attn_q_norm.",
    "attn.norm_k.": "img_attn_k_norm.",
    "attn.to_out.0.": "img_attn_proj.",
    "ff.net.0.proj.": "img_mlp.fc1.",
    "ff.net.2.": "img_mlp.fc2.",
    "attn.norm_added_q.": "txt_attn_q_norm.",
    "attn.norm_added_k.": "txt_attn_k_norm.",
    "attn.to_add_out.": "txt_attn_proj.",
    "ff_context.net.0.proj.": "txt_mlp.fc1.",
    "ff_context.net.2.": "txt_mlp.fc2.",
}
_SINGLE_BACK = {
    "norm.linear.": "modulation.linear.",
    "attn.norm_q.": "q_norm.",
    "attn.norm_k.": "k_norm.",
    "proj_out.": "linear2.",
}
_TOP_BACK = {
    "x_embedder.proj.": "img_in.proj.",
    "context_embedder.proj_in.": "txt_in.input_embedder.",
    "context_embedder.time_text_embed.timestep_embedder.linear_1.": "txt_in.t_embedder.mlp.0.",
    "context_embedder.time_text_embed.timestep_embedder.linear_2.": "txt_in.t_embedder.mlp.2.",
    "context_embedder.time_text_embed.text_embedder.linear_1.": "txt_in.c_embedder.linear_1.",
    "context_embedder.time_text_embed.text_embedder.linear_2.": "txt_in.c_embedder.linear_2.",
    "time_guidance_embed.timestep_embedder.linear_1.": "time_in.mlp.0.",
    "time_guidance_embed.timestep_embedder.linear_2.": "time_in.mlp.2.",
    "context_embedder_2.norm.": "byt5_in.layernorm.",
    "context_embedder_2.linear_1.": "byt5_in.fc1.",
    "context_embedder_2.linear_2.": "byt5_in.fc2.",
    "context_embedder_2.linear_3.": "byt5_in.fc3.",
    "time_guidance_embed.timestep_embedder_r.linear_1.": "time_r_in.mlp.0.",
    "time_guidance_embed.timestep_embedder_r.linear_2.": "time_r_in.mlp.2.",
    "time_guidance_embed.guidance_embedder.linear_1.": "guidance_in.mlp.0.",
    "time_guidance_embed.guidance_embedder.linear_2.": "guidance_in.mlp.2.",
    "proj_out.": "final_layer.linear.",
}


def _back(rest: str, table: dict[str, str]) -> str:
    for new, old in table.items():
        if rest.startswith(new):
            return old + rest[len(new) :]
    raise KeyError(rest)


def dit_to_authors(sd: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """diffusers' HunyuanImageTransformer2DModel tensors -> the authors' names (q/k/v fused, the single blocks'
    q/k/v/MLP input fused, the final modulation as (shift, scale)); nodes.models.hunyuan_image must map them back."""
    out: dict[str, torch.Tensor] = {}
    for key, value in sd.items():
        parts = key.split(".")
        if key.startswith("context_embedder.token_refiner.refiner_blocks."):
            base, rest = f"txt_in.individual_token_refiner.blocks.{parts[3]}.", ".".join(parts[4:])
            if rest.startswith("attn.to_q."):
                qkv = [sd[key.replace("to_q", n)] for n in ("to_q", "to_k", "to_v")]
                out[base + "self_attn_qkv." + parts[-1]] = torch.cat(qkv)
            elif not rest.startswith(("attn.to_k.", "attn.to_v.")):
                out[base + _back(rest, _REFINER_BACK)] = value
        elif key.startswith("transformer_blocks."):
            base, rest = f"double_blocks.{parts[1]}.", ".".join(parts[2:])
            for first, names, fused in (
                ("attn.to_q.", ("to_q", "to_k", "to_v"), "img_attn_qkv."),
                ("attn.add_q_proj.", ("add_q_proj", "add_k_proj", "add_v_proj"), "txt_attn_qkv."),
            ):
                if rest.startswith(first):
                    out[base + fused + parts[-1]] = torch.cat([sd[key.replace(names[0], n)] for n in names])
                    break
            else:
                if not rest.startswith(("attn.to_k.", "attn.to_v.", "attn.add_k_proj.", "attn.add_v_proj.")):
                    out[base + _back(rest, _DOUBLE_BACK)] = value
        elif key.startswith("single_transformer_blocks."):
            base, rest = f"single_blocks.{parts[1]}.", ".".join(parts[2:])
            if rest.startswith("attn.to_q."):
                prefix = f"single_transformer_blocks.{parts[1]}."
                pieces = [sd[f"{prefix}{n}.{parts[-1]}"] for n in ("attn.to_q", "attn.to_k", "attn.to_v", "proj_mlp")]
                out[base + "linear1." + parts[-1]] = torch.cat(pieces)
            elif not rest.startswith(("attn.to_k.", "attn.to_v.", "proj_mlp.")):
                out[base + _back(rest, _SINGLE_BACK)] = value
        elif key.startswith("norm_out.linear."):
            scale, shift = value.chunk(2)
            out["final_layer.adaLN_modulation.1." + parts[-1]] = torch.cat([shift, scale])
        else:
            out[_back(key, _TOP_BACK)] = value
    back = to_diffusers_layout(out)
    if back.keys() != sd.keys() or any(not torch.equal(back[k], sd[k]) for k in sd):
        raise AssertionError("the Hunyuan Image 2.1 transformer layout does not convert back")
    return out


def vae_to_authors(sd: dict[str, torch.Tensor], config: dict = VAE_CONFIG) -> dict[str, torch.Tensor]:
    """AutoencoderKLHunyuanImage tensors -> the authors' names; nodes.models.hunyuan_image_vae must map them back."""
    levels, blocks = len(config["block_out_channels"]), config["layers_per_block"]
    resamplers = config["spatial_compression_ratio"].bit_length() - 1
    names: dict[str, str] = {}
    for part, stage, per_stage, sampler in (
        ("encoder", "down", blocks, "downsample"),
        ("decoder", "up", blocks + 1, "upsample"),
    ):
        index = 0
        for i in range(levels):
            for j in range(per_stage):
                names[f"{part}.{stage}_blocks.{index}."] = f"{part}.{stage}.{i}.block.{j}."
                index += 1
            if i < resamplers:
                names[f"{part}.{stage}_blocks.{index}."] = f"{part}.{stage}.{i}.{sampler}."
                index += 1
    mid = {"resnets.0.": "block_1.", "attentions.0.": "attn_1.", "resnets.1.": "block_2."}
    attn = {"to_q.": "q.", "to_k.": "k.", "to_v.": "v.", "proj.": "proj_out."}
    out = {}
    for key, value in sd.items():
        part = key.split(".")[0]
        if ".mid_block." in key:
            rest = key[len(part) + len(".mid_block.") :]
            head = next(m for m in mid if rest.startswith(m))
            tail = rest[len(head) :]
            tail = next((a + tail[len(d) :] for d, a in attn.items() if tail.startswith(d)), tail)
            new = f"{part}.mid.{mid[head]}{tail}"
        else:
            prefix = next((p for p in names if key.startswith(p)), None)
            new = (
                key if prefix is None else names[prefix] + key[len(prefix) :].replace("conv_shortcut.", "nin_shortcut.")
            )
        out[new] = value
    back = vae_to_diffusers(out)
    if back.keys() != sd.keys() or any(not torch.equal(back[k], sd[k]) for k in sd):
        raise AssertionError("the Hunyuan Image 2.1 VAE layout does not convert back")
    return out


def tiny_dit(**config) -> HunyuanImageTransformer2DModel:
    """The tiny DiT with the ByT5 glyph mapper at tiny widths (diffusers builds it 2048 wide; the loader reads the
    file's width)."""
    dit = HunyuanImageTransformer2DModel(**DIT_CONFIG, **config)
    dit.context_embedder_2 = HunyuanImageByT5TextProjection(
        BYT5_WIDTH, BYT5_MAPPER_WIDTH, dit.config.num_attention_heads * 128
    )
    return dit


def tiny_hunyuan_image_state_dicts(seed: int = SEED) -> dict[str, dict[str, torch.Tensor]]:
    """The five files' tensors, in the published layouts and bfloat16."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        gen = torch.Generator().manual_seed(seed)
        transformer = tiny_dit()
        vae = AutoencoderKLHunyuanImage(**VAE_CONFIG)
        text = Qwen2Model(
            Qwen2Config(
                vocab_size=VOCAB,
                hidden_size=TEXT_WIDTH,
                intermediate_size=64,
                num_hidden_layers=TEXT_LAYERS,
                num_attention_heads=2,
                num_key_value_heads=1,
                head_dim=HEAD_DIM,
                rope_theta=ROPE_THETA,
                rms_norm_eps=RMS_EPS,
            )
        )
        distilled = tiny_dit(guidance_embeds=True, use_meanflow=True)
        byt5 = T5EncoderModel(BYT5_CONFIG)
        for module in (transformer, vae, text, distilled, byt5):
            randomize_constants(module, gen)  # norm scales start at one: a skipped or swapped norm would not show
    sds = {
        "transformer": dit_to_authors(transformer.state_dict()),
        "vae": vae_to_authors(vae.state_dict()),
        "text_encoder": {f"model.{k}": v for k, v in text.state_dict().items()},
        "distilled": dit_to_authors(distilled.state_dict()),
        # T5's names as the published file has them; the token table once (T5EncoderModel ties a second name to it)
        "byt5": {k: v for k, v in byt5.state_dict().items() if k != "encoder.embed_tokens.weight"},
    }
    return {name: {k: v.to(torch.bfloat16).contiguous() for k, v in sd.items()} for name, sd in sds.items()}


def build_demo_hunyuan_image(models_dir: Path, seed: int = SEED) -> list[Path]:
    """Write hunyuan-image-2.1-tiny under a ComfyUI models folder; returns the paths written."""
    written = []
    for name, sd in tiny_hunyuan_image_state_dicts(seed).items():
        path = Path(models_dir) / FILES[name]
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, lambda tmp, sd=sd: save_file(sd, tmp, metadata={"format": "pt"}))
        written.append(path)
    return written
